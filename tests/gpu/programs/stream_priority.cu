// Stream priorities: range, create with priority, read back priority and
// flags, and run work on each.
#include "common.h"

__global__ void fill(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

int main(void) {
  test_init();
  int least = 0, greatest = 0;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  printf("priority range: least=%d greatest=%d\n", least, greatest);
  const int n = 1 << 16;
  int prios[3] = {least, (least + greatest) / 2, greatest};
  for (int k = 0; k < 3; k++) {
    cudaStream_t s;
    CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, prios[k]));
    int p = 12345;
    unsigned flags = 99;
    CK(cudaStreamGetPriority(s, &p));
    CK(cudaStreamGetFlags(s, &flags));
    int *d, *h;
    CK(cudaMalloc(&d, n * sizeof(int)));
    CK(cudaMallocHost(&h, n * sizeof(int)));
    fill<<<n / 256, 256, 0, s>>>(d, 100 + k, n);
    CK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != 100 + k;
    printf("stream prio requested %d: got %d flags %u work %s\n", prios[k], p, flags, bad ? "MISMATCH" : "ok");
    EXPECT(p == prios[k] && !bad, "stream %d", k);
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d)); CK(cudaFreeHost(h));
  }
  // Out-of-range priorities are clamped, not rejected.
  cudaStream_t s;
  CK(cudaStreamCreateWithPriority(&s, cudaStreamDefault, greatest - 100));
  int p = 0;
  CK(cudaStreamGetPriority(s, &p));
  printf("priority %d clamps to %d\n", greatest - 100, p);
  CK(cudaStreamDestroy(s));
  // The legacy default stream's priority.
  CK(cudaStreamGetPriority(0, &p));
  printf("default stream priority: %d\n", p);
  return test_finish();
}
