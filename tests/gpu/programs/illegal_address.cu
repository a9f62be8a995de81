// A kernel that writes through a wild pointer: cudaErrorIllegalAddress must be
// reported at synchronization and stay sticky (later calls fail too).
// Usage: illegal_address [--hold SECONDS]
//   --hold keeps the poisoned process (and its SCUDA session) alive after the
//   fault, so run.sh can show that a second client on the same server works.
#include "common.h"

__global__ void wild_write(int *p) { p[threadIdx.x * 1024] = 42; }

int main(int argc, char **argv) {
  test_init();
  int hold = argc > 2 && !strcmp(argv[1], "--hold") ? atoi(argv[2]) : 0;
  int *good;
  CK(cudaMalloc(&good, 4096));
  // An address far outside any allocation.
  wild_write<<<1, 32>>>((int *)0x10);
  cudaError_t launch = cudaGetLastError();
  cudaError_t e = cudaDeviceSynchronize();
  printf("launch: %s\nsynchronize: %s\n", cudaGetErrorName(launch), cudaGetErrorName(e));
  cudaError_t e2 = cudaMemset(good, 0, 4096);
  cudaError_t e3 = cudaDeviceSynchronize();
  printf("memset after fault: %s\nsynchronize again: %s\n", cudaGetErrorName(e2), cudaGetErrorName(e3));
  cudaError_t last = cudaGetLastError();
  printf("last error: %s\n", cudaGetErrorName(last));
  EXPECT(e == cudaErrorIllegalAddress, "expected cudaErrorIllegalAddress");
  EXPECT(e2 == cudaErrorIllegalAddress && e3 == cudaErrorIllegalAddress, "error was not sticky");
  if (e == cudaErrorIllegalAddress) printf("illegal address reported\n");
  fflush(stdout);
  if (hold > 0) {
    printf("# holding %d s\n", hold);
    sleep(hold);
    // Still poisoned after the hold.
    e = cudaDeviceSynchronize();
    printf("after hold: %s\n", cudaGetErrorName(e));
  }
  return test_finish();
}
