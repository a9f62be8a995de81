// Device printf: output appears at synchronization, after the host lines
// printed before the launch and before the host lines printed after.
// Several threads print, serialized with __syncthreads so the order is fixed.
// stdout is left with its default buffering (full when piped), like a real
// program: the host flushes before launching, which real programs must do too.
#include <stdio.h>
#include <cuda_runtime.h>

__global__ void one_thread(int n) {
  for (int i = 0; i < n; i++) printf("device line %d of %d\n", i + 1, n);
}

__global__ void serialized(float f) {
  for (int t = 0; t < blockDim.x; t++) {
    if (threadIdx.x == t)
      printf("thread %d: int=%d uint=%u hex=%x ll=%lld float=%.3f str=%s char=%c\n", t, -t, t * 1000u,
             0xabc0 + t, -(1LL << 40) - t, f * t, t % 2 ? "odd" : "even", 'A' + t);
    __syncthreads();
  }
}

int main(void) {
  printf("host: before launch\n");
  fflush(stdout);
  one_thread<<<1, 1>>>(5);
  serialized<<<1, 8>>>(1.25f);  // queued behind the first; its output follows
  cudaError_t e = cudaDeviceSynchronize();
  printf("host: after synchronize (%s)\n", cudaGetErrorName(e));
  // A second round: output of a kernel in a stream, at stream synchronize.
  cudaStream_t s;
  cudaStreamCreate(&s);
  fflush(stdout);
  one_thread<<<1, 1, 0, s>>>(2);
  e = cudaStreamSynchronize(s);
  printf("host: after stream synchronize (%s)\n", cudaGetErrorName(e));
  cudaStreamDestroy(s);
  if (e != cudaSuccess) { printf("FAIL\n"); return 1; }
  printf("PASS\n");
  return 0;
}
