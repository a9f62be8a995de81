// cudaMallocAsync / cudaFreeAsync in a loop of 10 000 iterations, each
// allocation written by a kernel and checked once in a while.
#include "common.h"

__global__ void put(int *x, int n, int v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v + i;
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int bad = 0;
  int host[256];
  for (int it = 0; it < 10000; it++) {
    int n = 64 + (it % 7) * 1000;
    int *d;
    CK(cudaMallocAsync(&d, n * sizeof(int), s));
    put<<<(n + 255) / 256, 256, 0, s>>>(d, n, it);
    if (it % 1000 == 0) {
      CK(cudaMemcpyAsync(host, d, (n < 256 ? n : 256) * sizeof(int), cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      for (int i = 0; i < (n < 256 ? n : 256); i++) bad += host[i] != it + i;
    }
    CK(cudaFreeAsync(d, s));
  }
  CK(cudaStreamSynchronize(s));
  printf("10000 iterations: %d wrong\n", bad);
  EXPECT(!bad, "%d wrong", bad);
  CK(cudaStreamDestroy(s));
  return test_finish();
}
