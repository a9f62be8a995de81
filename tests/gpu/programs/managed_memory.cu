// Managed memory (small: 4 MiB): host writes, kernel reads and writes, host
// reads after synchronize; a second round to check coherence both ways.
#include "common.h"

__global__ void twice_plus(int *x, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 2 * x[i] + k;
}

int main(void) {
  test_init();
  int att = 0;
  CK(cudaDeviceGetAttribute(&att, cudaDevAttrManagedMemory, 0));
  printf("managed memory supported: %d\n", att);
  const int n = 1 << 20;
  int *m;
  CK(cudaMallocManaged(&m, n * sizeof(int)));
  for (int i = 0; i < n; i++) m[i] = i;
  twice_plus<<<n / 256, 256>>>(m, n, 1);
  CK(cudaDeviceSynchronize());
  int bad = 0;
  for (int i = 0; i < n; i++) bad += m[i] != 2 * i + 1;
  printf("round 1: %s\n", bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "round 1: %d wrong", bad);
  for (int i = 0; i < n; i += 2) m[i] = -i;  // host writes half the pages
  twice_plus<<<n / 256, 256>>>(m, n, 3);
  CK(cudaDeviceSynchronize());
  bad = 0;
  for (int i = 0; i < n; i++) bad += m[i] != (i % 2 ? 2 * (2 * i + 1) + 3 : -2 * i + 3);
  printf("round 2: %s fnv=%016llx\n", bad ? "MISMATCH" : "ok", (unsigned long long)fnv1a(m, n * sizeof(int)));
  EXPECT(!bad, "round 2: %d wrong", bad);
  cudaPointerAttributes pa;
  CK(cudaPointerGetAttributes(&pa, m));
  printf("pointer type: %d\n", (int)pa.type);
  CK(cudaFree(m));
  return test_finish();
}
