// Classic vector add, checked element by element.
#include "common.h"

__global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main(void) {
  test_init();
  const int n = 1 << 20;
  size_t bytes = n * sizeof(float);
  float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
  for (int i = 0; i < n; i++) { a[i] = (float)i; b[i] = (float)(2 * (n - i)); }
  float *da, *db, *dc;
  CK(cudaMalloc(&da, bytes));
  CK(cudaMalloc(&db, bytes));
  CK(cudaMalloc(&dc, bytes));
  CK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
  vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  CK(cudaGetLastError());
  CK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    if (c[i] != a[i] + b[i]) bad++;
    sum += c[i];
  }
  printf("n=%d mismatches=%d sum=%.1f\n", n, bad, sum);
  EXPECT(bad == 0, "%d mismatches", bad);
  CK(cudaFree(da));
  CK(cudaFree(db));
  CK(cudaFree(dc));
  free(a); free(b); free(c);
  return test_finish();
}
