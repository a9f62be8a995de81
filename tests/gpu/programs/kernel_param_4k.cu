// A kernel whose parameter is a struct of 4096 bytes (kernel parameters may be
// up to 32 KiB on sm_70+ with CUDA >= 12.1). Every byte must arrive intact.
#include "common.h"

#define BIG 4096
struct Big { unsigned char b[BIG]; };

__global__ void copy_param(Big big, int tag, unsigned char *out, int *tag_out) {
  for (int i = threadIdx.x; i < BIG; i += blockDim.x) out[i] = big.b[i];
  if (threadIdx.x == 0) *tag_out = tag;
}

int main(void) {
  test_init();
  static Big big;
  fill_pattern(big.b, BIG, BIG);
  unsigned char *dout, *h = (unsigned char *)malloc(BIG);
  int *dtag, tag = 0;
  CK(cudaMalloc(&dout, BIG));
  CK(cudaMalloc(&dtag, sizeof(int)));
  // Two launches with different contents, to catch a stale cached buffer.
  for (int round = 0; round < 2; round++) {
    if (round) for (int i = 0; i < BIG; i++) big.b[i] ^= 0xFF;
    copy_param<<<1, 256>>>(big, 1000 + round, dout, dtag);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, dout, BIG, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&tag, dtag, sizeof tag, cudaMemcpyDeviceToHost));
    int same = memcmp(h, big.b, BIG) == 0;
    printf("round %d: %d-byte param %s fnv=%016llx tag=%d\n", round, BIG, same ? "ok" : "MISMATCH",
           (unsigned long long)fnv1a(h, BIG), tag);
    EXPECT(same && tag == 1000 + round, "round %d", round);
  }
  CK(cudaFree(dout)); CK(cudaFree(dtag));
  free(h);
  return test_finish();
}
