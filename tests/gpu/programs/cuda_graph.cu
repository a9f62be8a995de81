// CUDA graphs: capture a stream (memset, kernels, copy, host node), instantiate,
// launch several times; build a graph by hand with a kernel node; update an
// executable graph's kernel parameters.
#include "common.h"

__global__ void axpb(float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + b;
}

static int host_calls = 0;
static void CUDART_CB count_fn(void *arg) { (void)arg; host_calls++; }

int main(void) {
  test_init();
  const int n = 1 << 16;
  float *d, *h;
  CK(cudaMalloc(&d, n * sizeof(float)));
  CK(cudaMallocHost(&h, n * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));

  // Captured: x = 0; x = 2x+1; x = 3x+2; copy out; host node.
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaStreamCaptureStatus cs;
  CK(cudaStreamIsCapturing(s, &cs));
  printf("capturing: %d\n", (int)cs);
  CK(cudaMemsetAsync(d, 0, n * sizeof(float), s));
  axpb<<<n / 256, 256, 0, s>>>(d, 2.0f, 1.0f, n);
  axpb<<<n / 256, 256, 0, s>>>(d, 3.0f, 2.0f, n);
  CK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaLaunchHostFunc(s, count_fn, NULL));
  CK(cudaStreamEndCapture(s, &g));
  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, NULL, &nodes));
  printf("captured nodes: %zu\n", nodes);
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int k = 0; k < 5; k++) {
    memset(h, 0, n * sizeof(float));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 5.0f;
    EXPECT(!bad, "launch %d: %d wrong", k, bad);
  }
  printf("5 graph launches: h[0]=%g host node calls=%d\n", h[0], host_calls);
  EXPECT(host_calls == 5, "host node calls %d", host_calls);

  // Hand-built graph with one kernel node, then update its parameters.
  cudaGraph_t g2;
  CK(cudaGraphCreate(&g2, 0));
  float a = 1.0f, b = 4.0f;
  int nn = n;
  void *args[] = {&d, &a, &b, &nn};
  cudaKernelNodeParams kp = {0};
  kp.func = (void *)axpb;
  kp.gridDim = dim3(n / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = args;
  cudaGraphNode_t kn;
  CK(cudaGraphAddKernelNode(&kn, g2, NULL, 0, &kp));
  cudaGraphExec_t ge2;
  CK(cudaGraphInstantiate(&ge2, g2, 0));
  CK(cudaMemset(d, 0, n * sizeof(float)));
  CK(cudaGraphLaunch(ge2, s));       // x = 0 + 4
  b = 10.0f;                          // new parameter values
  CK(cudaGraphExecKernelNodeSetParams(ge2, kn, &kp));
  CK(cudaGraphLaunch(ge2, s));       // x = 4 + 10
  CK(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 14.0f;
  printf("kernel node + param update: h[0]=%g %s\n", h[0], bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "kernel node graph");

  CK(cudaGraphExecDestroy(ge)); CK(cudaGraphExecDestroy(ge2));
  CK(cudaGraphDestroy(g)); CK(cudaGraphDestroy(g2));
  CK(cudaStreamDestroy(s));
  CK(cudaFree(d)); CK(cudaFreeHost(h));
  return test_finish();
}
