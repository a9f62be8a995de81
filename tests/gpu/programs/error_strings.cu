// Error names and strings, runtime and driver: the shim answers these
// locally and must produce exactly the driver's text.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

int main(void) {
  test_init();
  const int rt[] = {0, 1, 2, 3, 35, 98, 100, 101, 200, 209, 400, 500, 600, 700, 710, 719, 999, 12345};
  for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++)
    printf("cuda %d: %s | %s\n", rt[i], cudaGetErrorName((cudaError_t)rt[i]), cudaGetErrorString((cudaError_t)rt[i]));
  const int drv[] = {0, 1, 2, 3, 4, 100, 101, 200, 201, 209, 300, 400, 500, 600, 700, 710, 719, 720, 801, 999, 12345};
  for (size_t i = 0; i < sizeof drv / sizeof drv[0]; i++) {
    const char *name = NULL, *str = NULL;
    CUresult rn = cuGetErrorName((CUresult)drv[i], &name);
    CUresult rs = cuGetErrorString((CUresult)drv[i], &str);
    printf("CU %d: [%d] %s | [%d] %s\n", drv[i], (int)rn, name ? name : "(null)", (int)rs, str ? str : "(null)");
  }
  // These work before cuInit / without any context.
  cudaError_t e = cudaGetLastError();
  printf("initial last error: %s\n", cudaGetErrorName(e));
  return test_finish();
}
