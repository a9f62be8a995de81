// cudaMemset / cudaMemset2D / cudaMemset3D (sync and async) with byte-exact
// checks: set bytes change, bytes outside the region (pitch padding) don't.
#include "common.h"

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  // 1D, with odd offsets and lengths.
  const size_t n = 100003;
  unsigned char *d, *h = (unsigned char *)malloc(n);
  CK(cudaMalloc(&d, n));
  CK(cudaMemset(d, 0x11, n));
  CK(cudaMemset(d + 5, 0x22, 1001));
  CK(cudaMemsetAsync(d + 2000, 0x33, 3, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
  int ok = 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char want = 0x11;
    if (i >= 5 && i < 1006) want = 0x22;
    if (i >= 2000 && i < 2003) want = 0x33;
    if (h[i] != want) ok = 0;
  }
  printf("memset 1D: %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(h, n));
  EXPECT(ok, "memset 1D");

  // 2D: fill whole pitched buffer (pitch*H) with 0xEE, then set a W2 x H2 region.
  const size_t W = 333, H = 21, W2 = 100, H2 = 7;
  size_t pitch;
  unsigned char *p;
  CK(cudaMallocPitch((void **)&p, &pitch, W, H));
  CK(cudaMemset(p, 0xEE, pitch * H));
  CK(cudaMemset2D(p + pitch * 3 + 10, pitch, 0x44, W2, H2));
  CK(cudaMemset2DAsync(p + pitch * 15, pitch, 0x55, W, 2, s));
  CK(cudaStreamSynchronize(s));
  unsigned char *h2 = (unsigned char *)malloc(pitch * H);
  CK(cudaMemcpy(h2, p, pitch * H, cudaMemcpyDeviceToHost));
  ok = 1;
  for (size_t y = 0; y < H; y++)
    for (size_t x = 0; x < pitch; x++) {
      unsigned char want = 0xEE;
      if (y >= 3 && y < 3 + H2 && x >= 10 && x < 10 + W2) want = 0x44;
      if (y >= 15 && y < 17 && x < W) want = 0x55;
      if (h2[y * pitch + x] != want) ok = 0;
    }
  printf("memset 2D (+async): %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "memset 2D");

  // 3D: set a sub-extent of a pitched 3D allocation.
  cudaExtent ext = make_cudaExtent(64, 8, 5);
  cudaPitchedPtr q;
  CK(cudaMalloc3D(&q, ext));
  size_t total = q.pitch * ext.height * ext.depth;
  CK(cudaMemset(q.ptr, 0x01, total));
  CK(cudaMemset3D(q, 0x77, make_cudaExtent(30, 4, 3)));
  CK(cudaMemset3DAsync(make_cudaPitchedPtr((char *)q.ptr + q.pitch * ext.height * 4, q.pitch, 64, 8), 0x88,
                       make_cudaExtent(64, 8, 1), s));
  CK(cudaStreamSynchronize(s));
  unsigned char *h3 = (unsigned char *)malloc(total);
  CK(cudaMemcpy(h3, q.ptr, total, cudaMemcpyDeviceToHost));
  ok = 1;
  for (size_t z = 0; z < ext.depth; z++)
    for (size_t y = 0; y < ext.height; y++)
      for (size_t x = 0; x < q.pitch; x++) {
        unsigned char want = 0x01;
        if (x < 30 && y < 4 && z < 3) want = 0x77;
        if (z == 4 && x < 64) want = 0x88;
        if (h3[(z * ext.height + y) * q.pitch + x] != want) ok = 0;
      }
  printf("memset 3D (+async): %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "memset 3D");

  CK(cudaFree(d)); CK(cudaFree(p)); CK(cudaFree(q.ptr));
  CK(cudaStreamDestroy(s));
  free(h); free(h2); free(h3);
  return test_finish();
}
