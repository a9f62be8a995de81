// Managed memory touched alternately by host and device, 100 times: each
// round a kernel updates every element, the host checks all of them
// against its own shadow copy, then rewrites every other element.
#include "common.h"

__global__ void bump(unsigned *x, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 3u + k;
}

int main(void) {
  test_init();
  const int n = (1 << 18) + 123;  // not a whole number of pages
  unsigned *m, *shadow = (unsigned *)malloc(n * sizeof(unsigned));
  CK(cudaMallocManaged(&m, n * sizeof(unsigned)));
  for (int i = 0; i < n; i++) m[i] = shadow[i] = i % 1000;
  int bad = 0;
  for (unsigned k = 0; k < 100; k++) {
    bump<<<(n + 255) / 256, 256>>>(m, n, k);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < n; i++) {
      shadow[i] = shadow[i] * 3u + k;
      bad += m[i] != shadow[i];
    }
    for (int i = 0; i < n; i += 2) m[i] = shadow[i] = (unsigned)(i % 7) + k;
  }
  printf("100 rounds: %d mismatches\n", bad);
  EXPECT(!bad, "%d elements wrong", bad);
  printf("fnv=%016llx\n", (unsigned long long)fnv1a(m, n * sizeof(unsigned)));
  CK(cudaFree(m));
  free(shadow);
  return test_finish();
}
