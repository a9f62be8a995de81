// Zero-copy mapped host memory: kernels read and write cudaHostAllocMapped
// memory through cudaHostGetDevicePointer, in both directions, 3 rounds.
#include "common.h"

__global__ void axpy(const float *x, float *y, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main(void) {
  test_init();
  const int n = 1 << 16;
  float *hx, *hy, *dx, *dy;
  CK(cudaHostAlloc(&hx, n * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostAlloc(&hy, n * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&dx, hx, 0));
  CK(cudaHostGetDevicePointer(&dy, hy, 0));
  unsigned int flags = 0;
  CK(cudaHostGetFlags(&flags, hx));
  printf("mapped flag: %d\n", (flags & cudaHostAllocMapped) != 0);
  for (int i = 0; i < n; i++) hx[i] = (float)(i % 100), hy[i] = 1.0f;
  int bad = 0;
  for (int r = 1; r <= 3; r++) {
    axpy<<<n / 256, 256>>>(dx, dy, n, 2.0f);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) bad += hy[i] != 1.0f + 2.0f * r * (float)(i % 100);
    hx[0] = 0.0f;  // a host write between rounds reaches the next kernel
  }
  printf("zero-copy: %d wrong\n", bad);
  EXPECT(!bad, "%d wrong", bad);
  CK(cudaFreeHost(hx));
  CK(cudaFreeHost(hy));
  return test_finish();
}
