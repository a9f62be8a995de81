// The smallest driver-API client: reports what cuInit returned. run.sh uses it
// to check that an unreachable server gives CUDA_ERROR_NO_DEVICE (100).
// BUILD: -lcuda
#include <cuda.h>
#include <stdio.h>

int main(void) {
  CUresult r = cuInit(0);
  const char *name = "?";
  cuGetErrorName(r, &name);
  printf("cuInit = %d (%s)\n", (int)r, name);
  int n = -1;
  CUresult rc = cuDeviceGetCount(&n);
  printf("cuDeviceGetCount = %d, count %d\n", (int)rc, rc == CUDA_SUCCESS ? n : -1);
  if (r != CUDA_SUCCESS) return 2;
  printf("PASS\n");
  return 0;
}
