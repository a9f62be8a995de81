// Stream-ordered allocation: cudaMallocAsync / cudaFreeAsync, the default
// memory pool and its attributes, an explicit pool.
#include "common.h"

__global__ void iota(int *x, int n, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + i;
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const int n = 1 << 20;
  int *h;
  CK(cudaMallocHost(&h, n * sizeof(int)));
  for (int round = 0; round < 3; round++) {
    int *d;
    CK(cudaMallocAsync(&d, n * sizeof(int), s));
    iota<<<n / 256, 256, 0, s>>>(d, n, round * 1000);
    CK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
    CK(cudaFreeAsync(d, s));
    CK(cudaStreamSynchronize(s));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += h[i] != round * 1000 + i;
    printf("round %d: %s\n", round, bad ? "MISMATCH" : "ok");
    EXPECT(!bad, "round %d", round);
  }
  cudaMemPool_t pool;
  CK(cudaDeviceGetDefaultMemPool(&pool, 0));
  unsigned long long thr = 1ull << 30, got = 0, used = 0;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &got));
  CK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  printf("release threshold: %llu, used after frees: %llu\n", got, used);

  cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t mine;
  CK(cudaMemPoolCreate(&mine, &props));
  int *d;
  CK(cudaMallocFromPoolAsync(&d, 4096 * sizeof(int), mine, s));
  iota<<<16, 256, 0, s>>>(d, 4096, 7);
  CK(cudaMemcpyAsync(h, d, 4096 * sizeof(int), cudaMemcpyDeviceToHost, s));
  CK(cudaMemPoolGetAttribute(mine, cudaMemPoolAttrUsedMemCurrent, &used));
  CK(cudaFreeAsync(d, s));
  CK(cudaStreamSynchronize(s));
  printf("explicit pool: h[4095]=%d\n", h[4095]);
  printf("# explicit pool used while allocated: %llu\n", used);
  EXPECT(h[4095] == 7 + 4095, "pool alloc data");
  CK(cudaMemPoolTrimTo(mine, 0));
  CK(cudaMemPoolDestroy(mine));
  CK(cudaFreeHost(h));
  CK(cudaStreamDestroy(s));
  return test_finish();
}
