// Driver-API memsets: cuMemsetD8/D16/D32, cuMemsetD2D8/16/32 and async forms,
// checked byte for byte (pitch padding must stay untouched).
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

int main(void) {
  test_init();
  CUdevice dev;
  drv_primary_context(&dev);
  CUstream s;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  const size_t N = 4096 + 6;  // bytes
  CUdeviceptr d;
  CU(cuMemAlloc(&d, N));
  unsigned char *h = (unsigned char *)malloc(N);
  CU(cuMemsetD8(d, 0xA5, N));
  CU(cuMemsetD16(d + 2, 0xBEEF, 100));          // bytes [2,202)
  CU(cuMemsetD32(d + 400, 0x01020304u, 50));    // bytes [400,600)
  CU(cuMemsetD8Async(d + 1000, 0x7F, 9, s));    // bytes [1000,1009)
  CU(cuMemsetD16Async(d + 2000, 0x1234, 3, s)); // bytes [2000,2006)
  CU(cuMemsetD32Async(d + 3000, 0xCAFEF00Du, 5, s)); // bytes [3000,3020)
  CU(cuStreamSynchronize(s));
  CU(cuMemcpyDtoH(h, d, N));
  int ok = 1;
  for (size_t i = 0; i < N; i++) {
    unsigned want = 0xA5;
    if (i >= 2 && i < 202) want = ((i - 2) & 1) ? 0xBE : 0xEF;
    if (i >= 400 && i < 600) want = (0x01020304u >> (8 * ((i - 400) & 3))) & 0xFF;
    if (i >= 1000 && i < 1009) want = 0x7F;
    if (i >= 2000 && i < 2006) want = ((i - 2000) & 1) ? 0x12 : 0x34;
    if (i >= 3000 && i < 3020) want = (0xCAFEF00Du >> (8 * ((i - 3000) & 3))) & 0xFF;
    if (h[i] != want) { ok = 0; }
  }
  printf("cuMemsetD8/D16/D32 (+async): %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(h, N));
  EXPECT(ok, "1D driver memsets");

  // 2D: width counted in elements, pitch in bytes.
  const size_t Wb = 300, H = 11;
  size_t pitch;
  CUdeviceptr p;
  CU(cuMemAllocPitch(&p, &pitch, Wb, H, 4));
  unsigned char *h2 = (unsigned char *)malloc(pitch * H);
  CU(cuMemsetD8(p, 0x00, pitch * H));
  CU(cuMemsetD2D8(p, pitch, 0x11, 17, 3));                     // rows 0-2, bytes [0,17)
  CU(cuMemsetD2D16(p + 3 * pitch + 4, pitch, 0x2233, 10, 2));  // rows 3-4, bytes [4,24)
  CU(cuMemsetD2D32(p + 5 * pitch + 8, pitch, 0x44556677u, 7, 3)); // rows 5-7, bytes [8,36)
  CU(cuMemsetD2D8Async(p + 8 * pitch + 1, pitch, 0x99, 5, 1, s));  // row 8, bytes [1,6)
  CU(cuMemsetD2D16Async(p + 9 * pitch, pitch, 0xAABB, 2, 1, s));   // row 9, bytes [0,4)
  CU(cuMemsetD2D32Async(p + 10 * pitch, pitch, 0xDEADBEEFu, 1, 1, s)); // row 10, bytes [0,4)
  CU(cuStreamSynchronize(s));
  CU(cuMemcpyDtoH(h2, p, pitch * H));
  ok = 1;
  for (size_t y = 0; y < H; y++)
    for (size_t x = 0; x < pitch; x++) {
      unsigned want = 0;
      if (y < 3 && x < 17) want = 0x11;
      if (y >= 3 && y < 5 && x >= 4 && x < 24) want = ((x - 4) & 1) ? 0x22 : 0x33;
      if (y >= 5 && y < 8 && x >= 8 && x < 36) want = (0x44556677u >> (8 * ((x - 8) & 3))) & 0xFF;
      if (y == 8 && x >= 1 && x < 6) want = 0x99;
      if (y == 9 && x < 4) want = (x & 1) ? 0xAA : 0xBB;
      if (y == 10 && x < 4) want = (0xDEADBEEFu >> (8 * x)) & 0xFF;
      if (h2[y * pitch + x] != want) ok = 0;
    }
  printf("cuMemsetD2D8/16/32 (+async): %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "2D driver memsets");

  CU(cuMemFree(d)); CU(cuMemFree(p));
  CU(cuStreamDestroy(s));
  CU(cuDevicePrimaryCtxRelease(dev));
  free(h); free(h2);
  return test_finish();
}
