// BUILD: -lcuda
// Graph features that name client-side objects: batch memory-operation
// nodes (driver API: add, query, set, executable graph's set), user objects
// whose destructor runs in this process when the last reference goes, and
// cudaGraphDebugDotPrint writing this process's path. Deterministic;
// compared with the native run.
#include <cuda.h>
#include <unistd.h>

#include "common.h"

__global__ void fill(unsigned *x, unsigned v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

static const int N = 256;

static cudaGraphNode_t fill_node(cudaGraph_t g, unsigned *d, unsigned *v) {
  static int n = N;
  void *args[] = {&d, v, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)fill;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(N);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, NULL, 0, &kp));
  return node;
}

static void read4(const unsigned *d, unsigned *h) { CK(cudaMemcpy(h, d, 4 * sizeof *h, cudaMemcpyDeviceToHost)); }

static void mem_op_nodes(cudaStream_t s, unsigned *d) {
  CUcontext ctx;
  CU(cuCtxGetCurrent(&ctx));
  CUstreamBatchMemOpParams ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = (CUdeviceptr)d;
  ops[0].writeValue.value = 0xabcd0001u;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[1].writeValue.address = (CUdeviceptr)(d + 2);
  ops[1].writeValue.value64 = 0x1122334455667788ull;
  CUDA_BATCH_MEM_OP_NODE_PARAMS p = {ctx, 2, ops, 0};
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  unsigned zero = 0;
  cudaGraphNode_t k = fill_node(g, d, &zero);
  CUgraphNode n;
  CU(cuGraphAddBatchMemOpNode(&n, (CUgraph)g, (CUgraphNode *)&k, 1, &p));
  CUDA_BATCH_MEM_OP_NODE_PARAMS q;
  memset(&q, 0, sizeof q);
  CU(cuGraphBatchMemOpNodeGetParams(n, &q));
  printf("mem op node: %u operations, second writes %llx\n", q.count,
         (unsigned long long)(q.count == 2 ? q.paramArray[1].writeValue.value64 : 0));
  EXPECT(q.count == 2 && q.ctx == ctx, "the node's parameters came back changed");
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  unsigned h[4];
  read4(d, h);
  printf("mem op node wrote %08x %08x %08x %08x\n", h[0], h[1], h[2], h[3]);
  EXPECT(h[0] == 0xabcd0001u && h[2] == 0x55667788u && h[3] == 0x11223344u, "the writes are wrong");
  ops[0].writeValue.value = 3;
  // the same number of operations: an executable graph's set may not change it (the driver refuses)
  CU(cuGraphExecBatchMemOpNodeSetParams((CUgraphExec)e, n, &p));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  read4(d, h);
  printf("after the executable graph's set: %08x\n", h[0]);
  EXPECT(h[0] == 3, "the exec set wrote %08x", h[0]);
  ops[0].writeValue.value = 4;
  CU(cuGraphBatchMemOpNodeSetParams(n, &p));
  cudaGraphExec_t e2;
  CK(cudaGraphInstantiate(&e2, g, 0));
  CK(cudaGraphLaunch(e2, s));
  CK(cudaStreamSynchronize(s));
  read4(d, h);
  printf("after the graph's set, a new executable graph wrote: %08x\n", h[0]);
  EXPECT(h[0] == 4, "the set wrote %08x", h[0]);
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphExecDestroy(e2));
  CK(cudaGraphDestroy(g));
}

static volatile int destroyed = 0;
static void CUDART_CB destroy(void *p) { __sync_fetch_and_add((int *)p, 1); }

// The destructor runs on a driver thread natively, and in this process
// when the session's host work arrives through SCUDA: wait up to 10 s,
// synchronizing (a call that waits for the session) between looks.
static int wait_destroyed(int want) {
  for (int i = 0; i < 10000 && destroyed < want; i++) {
    CK(cudaDeviceSynchronize());
    usleep(1000);
  }
  return destroyed;
}

static void user_objects(cudaStream_t s, unsigned *d) {
  cudaUserObject_t obj;
  CK(cudaUserObjectCreate(&obj, (void *)&destroyed, destroy, 1, cudaUserObjectNoDestructorSync));
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  unsigned v = 9;
  fill_node(g, d, &v);
  CK(cudaGraphRetainUserObject(g, obj, 1, cudaGraphUserObjectMove));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaGraphDestroy(g));
  CK(cudaDeviceSynchronize());
  printf("user object: destroyed while an executable graph holds it: %d\n", destroyed);
  EXPECT(destroyed == 0, "the destructor ran early");
  CK(cudaGraphExecDestroy(e));
  int got = wait_destroyed(1);
  printf("user object: destructor ran %d time(s) after the last reference went\n", got);
  EXPECT(got == 1, "destructor ran %d times", got);
}

static void dot_print(unsigned *d) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  unsigned v = 1;
  fill_node(g, d, &v);
  char path[] = "/tmp/graph_objects_XXXXXX";
  int fd = mkstemp(path);
  EXPECT(fd >= 0, "mkstemp");
  close(fd);
  CK(cudaGraphDebugDotPrint(g, path, cudaGraphDebugDotFlagsVerbose));
  FILE *f = fopen(path, "r");
  char text[65536];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  unlink(path);
  int ok = strstr(text, "digraph") != NULL && strstr(text, "fill") != NULL;
  printf("dot print: the file is the graph's, naming its kernel: %s\n", ok ? "yes" : "no");
  printf("# dot print: %zu bytes\n", n);
  EXPECT(ok, "the dot file is not the graph's");
  CK(cudaGraphDestroy(g));
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned *d;
  CK(cudaMalloc(&d, N * sizeof(unsigned)));
  mem_op_nodes(s, d);
  user_objects(s, d);
  dot_print(d);
  CK(cudaFree(d));
  CK(cudaStreamDestroy(s));
  return test_finish();
}
