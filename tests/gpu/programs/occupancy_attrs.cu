// Occupancy API and function attributes: cudaOccupancy*, cudaFuncGetAttributes,
// cudaFuncSetAttribute (opt-in to > 48 KiB dynamic shared memory, then use it),
// cudaFuncSetCacheConfig. Values are deterministic for a given binary + GPU.
#include "common.h"

__global__ void light(float *x) { x[threadIdx.x] *= 2.0f; }

__global__ void __launch_bounds__(256) heavy(float *x, int n) {
  __shared__ float tile[1024];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  float s = 0;
  for (int k = 0; k < blockDim.x; k++) s += tile[k] * (k % 7);
  if (i < n) x[i] = s;
}

__global__ void big_smem(int *out, int words) {
  extern __shared__ int buf[];
  for (int i = threadIdx.x; i < words; i += blockDim.x) buf[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    long long s = 0;
    for (int i = 0; i < words; i++) s += buf[i];
    *out = (int)(s % 1000003);
  }
}

static void print_attrs(const char *name, const void *f) {
  cudaFuncAttributes a;
  CK(cudaFuncGetAttributes(&a, f));
  printf("%s: maxThreadsPerBlock=%d numRegs=%d sharedSizeBytes=%zu constSizeBytes=%zu localSizeBytes=%zu "
         "ptxVersion=%d binaryVersion=%d maxDynamicSharedSizeBytes=%d\n",
         name, a.maxThreadsPerBlock, a.numRegs, a.sharedSizeBytes, a.constSizeBytes, a.localSizeBytes,
         a.ptxVersion, a.binaryVersion, a.maxDynamicSharedSizeBytes);
}

int main(void) {
  test_init();
  print_attrs("light", (const void *)light);
  print_attrs("heavy", (const void *)heavy);
  int blocks = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, light, 128, 0));
  printf("light: active blocks/SM at 128 threads: %d\n", blocks);
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, heavy, 256, 0));
  printf("heavy: active blocks/SM at 256 threads: %d\n", blocks);
  int minGrid = 0, blockSize = 0;
  CK(cudaOccupancyMaxPotentialBlockSize(&minGrid, &blockSize, heavy, 0, 0));
  printf("heavy: potential block size %d, min grid %d\n", blockSize, minGrid);
  size_t dyn = 0;
  CK(cudaOccupancyAvailableDynamicSMemPerBlock(&dyn, light, 2, 128));
  printf("light: available dynamic smem/block at 2 blocks: %zu\n", dyn);

  // Opt in to 100 KiB of dynamic shared memory; without it the launch must fail.
  const int bytes = 100 * 1024, words = bytes / 4;
  int *d, h = -1;
  CK(cudaMalloc(&d, sizeof(int)));
  big_smem<<<1, 256, bytes>>>(d, words);
  cudaError_t e = cudaGetLastError();
  printf("100 KiB dynamic smem without opt-in: %s\n", cudaGetErrorName(e));
  EXPECT(e != cudaSuccess, "launch without opt-in succeeded");
  CK(cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  print_attrs("big_smem after opt-in", (const void *)big_smem);
  big_smem<<<1, 256, bytes>>>(d, words);
  CK(cudaGetLastError());
  CK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  long long want = (long long)words * (words - 1) / 2 % 1000003;
  printf("big_smem result %d (want %lld)\n", h, want);
  EXPECT(h == want, "big_smem result");
  CK(cudaFuncSetAttribute(heavy, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
  CK(cudaFuncSetCacheConfig(light, cudaFuncCachePreferL1));
  float *x;
  CK(cudaMalloc(&x, 128 * sizeof(float)));
  CK(cudaMemset(x, 0, 128 * sizeof(float)));
  light<<<1, 128>>>(x);
  CK(cudaDeviceSynchronize());
  printf("launch after cache config: ok\n");
  CK(cudaFree(d)); CK(cudaFree(x));
  return test_finish();
}
