// Allocates 2 GiB of device memory and keeps the GPU busy with short kernels.
//   alloc_hold            : about 1 s of kernels, check, free, PASS
//   alloc_hold --forever  : after "allocated" runs kernels until killed
// run.sh kills the --forever form with SIGKILL and checks that the memory
// (and, through SCUDA, the session process) is released within 2 s.
#include "common.h"

__global__ void touch(unsigned *x, size_t n, unsigned v) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] += v;
}

int main(int argc, char **argv) {
  test_init();
  int forever = argc > 1 && !strcmp(argv[1], "--forever");
  const size_t bytes = (size_t)2 << 30, n = bytes / sizeof(unsigned);
  unsigned *d;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemset(d, 0, bytes));
  CK(cudaDeviceSynchronize());
  printf("allocated %zu MiB\n", bytes >> 20);
  fflush(stdout);
  double t0 = now_s();
  unsigned rounds = 0;
  while (forever || now_s() - t0 < 1.0) {
    touch<<<1024, 256>>>(d, n, 1);
    CK(cudaDeviceSynchronize());
    rounds++;
  }
  // Check a few words: each was incremented once per round.
  unsigned h[4];
  CK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h + 3, d + n - 1, sizeof(unsigned), cudaMemcpyDeviceToHost));
  printf("# rounds %u\n", rounds);
  printf("words match round count: %s\n", h[0] == rounds && h[3] == rounds ? "yes" : "no");
  EXPECT(h[0] == rounds && h[3] == rounds, "counts %u %u vs %u", h[0], h[3], rounds);
  CK(cudaFree(d));
  return test_finish();
}
