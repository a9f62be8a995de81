// A failing device assert() must surface as cudaErrorAssert at the next
// synchronization, and stay sticky. Exits 0 when that is what happened.
#include <assert.h>
#include "common.h"

__global__ void check_positive(const int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(x[i] > 0);
}

int main(void) {
  test_init();
  const int n = 256;
  int h[n];
  for (int i = 0; i < n; i++) h[i] = i == 77 ? -1 : 1;  // one bad element
  int *d;
  CK(cudaMalloc(&d, sizeof h));
  CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
  check_positive<<<1, n>>>(d, n);
  printf("launch: %s\n", cudaGetErrorName(cudaGetLastError()));
  cudaError_t e = cudaDeviceSynchronize();
  printf("synchronize: %s\n", cudaGetErrorName(e));
  printf("string: %s\n", cudaGetErrorString(e));
  // Sticky: later calls keep failing with the same error.
  int *d2 = NULL;
  cudaError_t e2 = cudaMalloc(&d2, 16);
  printf("malloc after assert: %s\n", cudaGetErrorName(e2));
  EXPECT(e == cudaErrorAssert, "expected cudaErrorAssert");
  EXPECT(e2 != cudaSuccess, "error was not sticky");
  return test_finish();
}
