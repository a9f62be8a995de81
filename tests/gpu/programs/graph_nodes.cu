// CUDA graph node types that replay client work or name driver objects:
// host nodes built by hand (set on the graph and on the executable graph),
// memory nodes (built with cudaGraphAddMemAllocNode / FreeNode, and captured
// cudaMallocAsync / cudaFreeAsync), child graphs, cudaGraphExecUpdate and
// kernel node attributes. Deterministic; compared with the native run.
#include "common.h"

__global__ void fill(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}
__global__ void add(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}
__global__ void copy(int *dst, const int *src, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

static int calls_a = 0, calls_b = 0, calls_c = 0;
static void CUDART_CB bump(void *p) { ++*(int *)p; }

static const int N = 4096;

static int check_all(const int *d, int want, const char *what) {
  static int h[N];
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != want;
  EXPECT(!bad, "%s: %d of %d wrong (h[0]=%d, want %d)", what, bad, N, h[0], want);
  return h[0];
}

static cudaGraphNode_t kernel_node(cudaGraph_t g, void *fn, void **args, const cudaGraphNode_t *deps, size_t n) {
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(N / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, deps, n, &kp));
  return node;
}

static void host_nodes(cudaStream_t s, int *d) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  int v = 7, n = N;
  void *args[] = {&d, &v, &n};
  cudaGraphNode_t k = kernel_node(g, (void *)fill, args, NULL, 0);
  cudaHostNodeParams hp = {bump, &calls_a};
  cudaGraphNode_t h;
  CK(cudaGraphAddHostNode(&h, g, &k, 1, &hp));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 4; i++) {
    CK(cudaGraphLaunch(e, s));
    CK(cudaStreamSynchronize(s));
  }
  printf("host node: ran %d times after 4 launches\n", calls_a);
  EXPECT(calls_a == 4, "host node calls %d", calls_a);
  cudaHostNodeParams q = {};
  CK(cudaGraphHostNodeGetParams(h, &q));
  EXPECT(q.fn == bump && q.userData == &calls_a, "host node params changed");
  cudaHostNodeParams hb = {bump, &calls_b};
  CK(cudaGraphHostNodeSetParams(h, &hb));
  cudaGraphExec_t e2;
  CK(cudaGraphInstantiate(&e2, g, 0));
  CK(cudaGraphLaunch(e2, s));
  CK(cudaGraphLaunch(e, s));
  cudaHostNodeParams hc = {bump, &calls_c};
  CK(cudaGraphExecHostNodeSetParams(e, h, &hc));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("host node set: a=%d b=%d c=%d\n", calls_a, calls_b, calls_c);
  EXPECT(calls_a == 5 && calls_b == 1 && calls_c == 1, "after the sets");
  check_all(d, 7, "host node graph's kernel");
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphExecDestroy(e2));
  CK(cudaGraphDestroy(g));
}

static void memory_nodes_built(cudaStream_t s, int *out) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaMemAllocNodeParams ap = {};
  ap.poolProps.allocType = cudaMemAllocationTypePinned;
  ap.poolProps.location.type = cudaMemLocationTypeDevice;
  ap.poolProps.location.id = 0;
  ap.bytesize = N * sizeof(int);
  cudaGraphNode_t an;
  CK(cudaGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
  int *tmp = (int *)ap.dptr;
  int v = 11, n = N;
  void *fargs[] = {&tmp, &v, &n};
  cudaGraphNode_t f = kernel_node(g, (void *)fill, fargs, &an, 1);
  void *cargs[] = {&out, &tmp, &n};
  cudaGraphNode_t c = kernel_node(g, (void *)copy, cargs, &f, 1);
  cudaGraphNode_t fr;
  CK(cudaGraphAddMemFreeNode(&fr, g, &c, 1, tmp));
  cudaMemAllocNodeParams q = {};
  CK(cudaGraphMemAllocNodeGetParams(an, &q));
  EXPECT(q.dptr == ap.dptr && q.bytesize == ap.bytesize, "alloc node params changed");
  cudaPointerAttributes pa;
  CK(cudaPointerGetAttributes(&pa, tmp));
  printf("alloc node: memory type %d\n", (int)pa.type);
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 3; i++) CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("built memory nodes: out[0]=%d\n", check_all(out, 11, "built alloc/free nodes"));
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
  CK(cudaDeviceGraphMemTrim(0));
  size_t used = 0;
  CK(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used));
  printf("graph memory in use after the graph is gone: %zu\n", used);
}

static void memory_nodes_captured(cudaStream_t s, int *out) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  int *tmp;
  CK(cudaMallocAsync((void **)&tmp, N * sizeof(int), s));
  fill<<<N / 256, 256, 0, s>>>(tmp, 5, N);
  add<<<N / 256, 256, 0, s>>>(tmp, 8, N);
  copy<<<N / 256, 256, 0, s>>>(out, tmp, N);
  CK(cudaFreeAsync(tmp, s));
  CK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, NULL, &nodes));
  printf("captured memory nodes: %zu nodes\n", nodes);
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("captured cudaMallocAsync/cudaFreeAsync: out[0]=%d\n", check_all(out, 13, "captured alloc/free"));
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
}

static void child_update_attrs(cudaStream_t s, int *d) {
  int n = N, v1 = 1, v2 = 2;
  cudaGraph_t child, parent;
  CK(cudaGraphCreate(&child, 0));
  void *a1[] = {&d, &v1, &n};
  cudaGraphNode_t ck = kernel_node(child, (void *)add, a1, NULL, 0);
  CK(cudaGraphCreate(&parent, 0));
  int zero = 0;
  void *z[] = {&d, &zero, &n};
  cudaGraphNode_t f = kernel_node(parent, (void *)fill, z, NULL, 0);
  cudaGraphNode_t cn;
  CK(cudaGraphAddChildGraphNode(&cn, parent, &f, 1, child));
  cudaGraphNode_t cn2;
  CK(cudaGraphAddChildGraphNode(&cn2, parent, &cn, 1, child));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, parent, 0));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("child graphs: d[0]=%d\n", check_all(d, 2, "two child graphs"));

  // kernel node attributes on the child's kernel node
  cudaKernelNodeAttrValue av = {};
  av.priority = 1;
  CK(cudaGraphKernelNodeSetAttribute(ck, cudaLaunchAttributePriority, &av));
  cudaKernelNodeAttrValue got = {};
  CK(cudaGraphKernelNodeGetAttribute(ck, cudaLaunchAttributePriority, &got));
  printf("kernel node priority: %d\n", got.priority);

  // update: the same topology with other values
  cudaGraph_t child2, parent2;
  CK(cudaGraphCreate(&child2, 0));
  void *a2[] = {&d, &v2, &n};
  kernel_node(child2, (void *)add, a2, NULL, 0);
  CK(cudaGraphCreate(&parent2, 0));
  cudaGraphNode_t f2 = kernel_node(parent2, (void *)fill, z, NULL, 0);
  cudaGraphNode_t c2, c3;
  CK(cudaGraphAddChildGraphNode(&c2, parent2, &f2, 1, child2));
  CK(cudaGraphAddChildGraphNode(&c3, parent2, &c2, 1, child2));
  cudaGraphExecUpdateResultInfo info;
  CK(cudaGraphExecUpdate(e, parent2, &info));
  printf("update: result %d\n", (int)info.result);
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("after update: d[0]=%d\n", check_all(d, 4, "updated graph"));

  // a graph of another shape: refused, naming the node
  cudaGraph_t other;
  CK(cudaGraphCreate(&other, 0));
  cudaGraphNode_t empty;
  CK(cudaGraphAddEmptyNode(&empty, other, NULL, 0));
  cudaError_t r = cudaGraphExecUpdate(e, other, &info);
  printf("mismatched update: %s, result %d, names a node of the new graph: %d\n", cudaGetErrorName(r),
         (int)info.result, info.errorNode == empty);
  (void)cudaGetLastError();
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(other));
  CK(cudaGraphDestroy(parent2));
  CK(cudaGraphDestroy(child2));
  CK(cudaGraphDestroy(parent));
  CK(cudaGraphDestroy(child));
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *d, *out;
  CK(cudaMalloc(&d, N * sizeof(int)));
  CK(cudaMalloc(&out, N * sizeof(int)));
  host_nodes(s, d);
  memory_nodes_built(s, out);
  memory_nodes_captured(s, out);
  child_update_attrs(s, d);
  CK(cudaFree(d));
  CK(cudaFree(out));
  CK(cudaStreamDestroy(s));
  return test_finish();
}
