// cuBLAS SGEMM on managed buffers: the host fills A and B, cuBLAS multiplies,
// the host checks C against its own product.
// BUILD: -lcublas
#include <cublas_v2.h>
#include "common.h"

int main(void) {
  test_init();
  const int n = 256;
  float *a, *b, *c;
  CK(cudaMallocManaged(&a, n * n * sizeof(float)));
  CK(cudaMallocManaged(&b, n * n * sizeof(float)));
  CK(cudaMallocManaged(&c, n * n * sizeof(float)));
  for (int i = 0; i < n * n; i++) {
    a[i] = (float)((i * 37) % 11) - 5.0f;
    b[i] = (float)((i * 13) % 7) - 3.0f;
    c[i] = 0.0f;
  }
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    printf("FAIL: cublasCreate\n");
    return 1;
  }
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n);
  EXPECT(st == CUBLAS_STATUS_SUCCESS, "cublasSgemm: %d", (int)st);
  CK(cudaDeviceSynchronize());
  int bad = 0;
  for (int col = 0; col < n; col++)
    for (int row = 0; row < n; row++) {
      float want = 0.0f;
      for (int k = 0; k < n; k++) want += a[k * n + row] * b[col * n + k];
      if (c[col * n + row] != want) bad++;
    }
  printf("gemm %dx%d: %d wrong\n", n, n, bad);
  EXPECT(!bad, "%d elements wrong", bad);
  cublasDestroy(h);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  return test_finish();
}
