// Bad launch configurations are reported by cudaGetLastError/PeekAtLastError
// and are not sticky: a correct launch afterwards works.
// Older runtimes report cudaErrorInvalidConfiguration; cudart 13 with driver
// 580 reports cudaErrorInvalidValue (seen natively on H200). Either is
// accepted here; the runner's native-vs-SCUDA comparison pins the exact name.
#include "common.h"

static int bad_config(cudaError_t e) { return e == cudaErrorInvalidConfiguration || e == cudaErrorInvalidValue; }

__global__ void set(int *x, int v) { x[blockIdx.x * blockDim.x + threadIdx.x] = v; }

int main(void) {
  test_init();
  int *d;
  CK(cudaMalloc(&d, 1024 * sizeof(int)));
  set<<<1, 2048>>>(d, 1);  // more threads per block than the device allows
  cudaError_t peek = cudaPeekAtLastError();
  cudaError_t e = cudaGetLastError();
  cudaError_t after = cudaGetLastError();
  printf("2048 threads/block: peek=%s get=%s then=%s\n", cudaGetErrorName(peek), cudaGetErrorName(e),
         cudaGetErrorName(after));
  EXPECT(bad_config(e) && peek == e, "expected cudaErrorInvalidConfiguration/InvalidValue");
  EXPECT(after == cudaSuccess, "launch error not cleared");

  set<<<dim3(1, 70000), 1>>>(d, 1);  // gridDim.y > 65535
  e = cudaGetLastError();
  printf("gridDim.y=70000: %s\n", cudaGetErrorName(e));
  EXPECT(bad_config(e), "expected cudaErrorInvalidConfiguration/InvalidValue");

  set<<<dim3(1, 1, 0), 1>>>(d, 1);  // zero-sized grid
  e = cudaGetLastError();
  printf("gridDim.z=0: %s\n", cudaGetErrorName(e));

  set<<<1, 32, 1 << 30>>>(d, 1);  // 1 GiB of dynamic shared memory
  e = cudaGetLastError();
  printf("1 GiB dynamic smem: %s\n", cudaGetErrorName(e));
  EXPECT(e != cudaSuccess, "huge smem accepted");

  // Still usable afterwards.
  set<<<4, 256>>>(d, 9);
  CK(cudaGetLastError());
  int h[1024];
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < 1024; i++) bad += h[i] != 9;
  printf("good launch afterwards: %s\n", bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "good launch");
  printf("device synchronize: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  CK(cudaFree(d));
  return test_finish();
}
