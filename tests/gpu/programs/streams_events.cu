// Streams and events: timing (elapsed > 0 prints "timing ok"), cross-stream
// dependencies through cudaStreamWaitEvent, stream query and synchronize.
#include "common.h"

__global__ void add_one(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

int main(void) {
  test_init();
  const int n = 1 << 20;
  int *d, *h;
  CK(cudaMalloc(&d, n * sizeof(int)));
  CK(cudaMallocHost(&h, n * sizeof(int)));
  cudaStream_t a, b;
  CK(cudaStreamCreate(&a));
  CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  unsigned flags = 99;
  CK(cudaStreamGetFlags(b, &flags));
  printf("non-blocking stream flags: %u\n", flags);
  cudaEvent_t start, stop, mid;
  CK(cudaEventCreate(&start));
  CK(cudaEventCreate(&stop));
  CK(cudaEventCreateWithFlags(&mid, cudaEventDisableTiming));

  CK(cudaMemsetAsync(d, 0, n * sizeof(int), a));
  CK(cudaEventRecord(start, a));
  spin_kernel<<<1, 1, 0, a>>>(20 * 1000 * 1000ull, NULL);  // ~20 ms so timing is > 0
  for (int k = 0; k < 10; k++) add_one<<<(n + 255) / 256, 256, 0, a>>>(d, n);
  CK(cudaEventRecord(mid, a));
  // Stream b must wait for a's work before adding 100 more.
  CK(cudaStreamWaitEvent(b, mid, 0));
  for (int k = 0; k < 100; k++) add_one<<<(n + 255) / 256, 256, 0, b>>>(d, n);
  CK(cudaEventRecord(stop, b));
  CK(cudaEventSynchronize(stop));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, start, stop));
  printf("timing %s\n", ms > 0 ? "ok" : "BAD");
  printf("# elapsed %.3f ms\n", ms);
  EXPECT(ms > 0, "elapsed %f", ms);
  CK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, b));
  CK(cudaStreamSynchronize(b));
  printf("stream query after sync: %s\n", cudaGetErrorName(cudaStreamQuery(b)));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 110;
  printf("ordered across streams: %s (h[0]=%d)\n", bad ? "MISMATCH" : "ok", h[0]);
  EXPECT(bad == 0, "%d wrong", bad);
  // Elapsed time on an event created without timing must fail.
  cudaError_t e = cudaEventElapsedTime(&ms, start, mid);
  printf("elapsed with DisableTiming event: %s\n", cudaGetErrorName(e));
  EXPECT(e != cudaSuccess, "elapsed accepted a non-timing event");
  CK(cudaEventDestroy(start)); CK(cudaEventDestroy(stop)); CK(cudaEventDestroy(mid));
  CK(cudaStreamDestroy(a)); CK(cudaStreamDestroy(b));
  CK(cudaFree(d)); CK(cudaFreeHost(h));
  return test_finish();
}
