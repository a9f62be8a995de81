// Conditional graph nodes (CUDA 12.4+): an IF node whose body runs when a
// kernel sets the condition, and a WHILE node whose body counts down until
// a kernel in the body clears it (cudaGraphSetConditional in device code).
// Deterministic; compared with the native run.
#include "common.h"

__global__ void set_if(cudaGraphConditionalHandle h, const int *flag) { cudaGraphSetConditional(h, *flag != 0); }
__global__ void bump(int *x) { atomicAdd(x, 1); }
__global__ void loop_body(cudaGraphConditionalHandle h, int *left, int *count) {
  *count += 1;
  *left -= 1;
  cudaGraphSetConditional(h, *left > 0);
}

static cudaGraphNode_t kernel1(cudaGraph_t g, void *fn, void **args, const cudaGraphNode_t *deps, size_t n) {
  cudaKernelNodeParams kp = {};
  kp.func = fn;
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, deps, n, &kp));
  return node;
}

static int read_int(const int *d) {
  int v = 0;
  CK(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

static void if_node(cudaStream_t s, int *flag, int *x) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 0, 0));
  void *a[] = {&h, &flag};
  cudaGraphNode_t setter = kernel1(g, (void *)set_if, a, NULL, 0);
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeIf;
  cp.conditional.size = 1;
  cudaGraphNode_t cond;
  CK(cudaGraphAddNode(&cond, g, &setter, NULL, 1, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  void *b[] = {&x};
  kernel1(body, (void *)bump, b, NULL, 0);
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  int on = 1, off = 0;
  CK(cudaMemcpy(flag, &on, sizeof on, cudaMemcpyHostToDevice));
  CK(cudaGraphLaunch(e, s));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(flag, &off, sizeof off, cudaMemcpyHostToDevice));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  int got = read_int(x);
  printf("if node: body ran %d times (2 true, 1 false)\n", got);
  EXPECT(got == 2, "if body ran %d times", got);
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
}

static void while_node(cudaStream_t s, int *left, int *count) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle h;
  CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = h;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t cond;
  CK(cudaGraphAddNode(&cond, g, NULL, NULL, 0, &cp));
  cudaGraph_t body = cp.conditional.phGraph_out[0];
  void *b[] = {&h, &left, &count};
  kernel1(body, (void *)loop_body, b, NULL, 0);
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  int seven = 7;
  CK(cudaMemcpy(left, &seven, sizeof seven, cudaMemcpyHostToDevice));
  CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  int got = read_int(count);
  printf("while node: body ran %d times (7)\n", got);
  EXPECT(got == 7, "while body ran %d times", got);
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *d;
  CK(cudaMalloc(&d, 4 * sizeof(int)));
  CK(cudaMemset(d, 0, 4 * sizeof(int)));
  if_node(s, d, d + 1);
  while_node(s, d + 2, d + 3);
  CK(cudaFree(d));
  CK(cudaStreamDestroy(s));
  return test_finish();
}
