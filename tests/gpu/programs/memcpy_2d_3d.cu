// Pitched allocations and 2D/3D copies, checked byte for byte against a host
// model of the same copies (padding bytes included where they are defined).
#include "common.h"

int main(void) {
  test_init();
  // ---- 2D: cudaMallocPitch + cudaMemcpy2D H2D / D2D / D2H, sync and async.
  const size_t W = 1000, H = 77;  // width in bytes, not a multiple of any pitch
  size_t pitch = 0, pitch2 = 0;
  unsigned char *d, *d2;
  CK(cudaMallocPitch((void **)&d, &pitch, W, H));
  CK(cudaMallocPitch((void **)&d2, &pitch2, W, H));
  printf("pitch >= width: %d, pitch aligned to 32: %d\n", pitch >= W, pitch % 32 == 0);
  printf("# pitch=%zu\n", pitch);
  const size_t hp = 1234;  // host pitch, larger than W
  unsigned char *h = (unsigned char *)malloc(hp * H), *out = (unsigned char *)malloc(hp * H);
  fill_pattern(h, hp * H, 7);
  CK(cudaMemcpy2D(d, pitch, h, hp, W, H, cudaMemcpyHostToDevice));
  CK(cudaMemcpy2D(d2, pitch2, d, pitch, W, H, cudaMemcpyDeviceToDevice));
  memset(out, 0x5A, hp * H);
  CK(cudaMemcpy2D(out, hp, d2, pitch2, W, H, cudaMemcpyDeviceToHost));
  int ok = 1;
  for (size_t y = 0; y < H; y++) {
    if (memcmp(out + y * hp, h + y * hp, W)) ok = 0;
    for (size_t x = W; x < hp; x++) if (out[y * hp + x] != 0x5A) ok = 0;  // untouched
  }
  printf("memcpy2D H2D/D2D/D2H: %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "memcpy2D");

  // Sub-rectangle copy: columns [100,300) rows [10,40) into a dense host buffer.
  const size_t sw = 200, sh = 30;
  unsigned char *sub = (unsigned char *)malloc(sw * sh);
  CK(cudaMemcpy2D(sub, sw, d + 10 * pitch + 100, pitch, sw, sh, cudaMemcpyDeviceToHost));
  ok = 1;
  for (size_t y = 0; y < sh; y++) if (memcmp(sub + y * sw, h + (y + 10) * hp + 100, sw)) ok = 0;
  printf("memcpy2D sub-rectangle: %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(sub, sw * sh));
  EXPECT(ok, "memcpy2D sub-rectangle");

  // Async 2D with pinned memory.
  unsigned char *ph;
  CK(cudaMallocHost((void **)&ph, hp * H));
  memset(ph, 0x33, hp * H);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  CK(cudaMemcpy2DAsync(ph, hp, d, pitch, W, H, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  ok = 1;
  for (size_t y = 0; y < H; y++) {
    if (memcmp(ph + y * hp, h + y * hp, W)) ok = 0;
    if (ph[y * hp + W] != 0x33) ok = 0;
  }
  printf("memcpy2DAsync D2H: %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "memcpy2DAsync");

  // ---- 3D: cudaMalloc3D + cudaMemcpy3D H2D, D2D (with offsets), D2H.
  cudaExtent ext = make_cudaExtent(123, 17, 9);  // width in bytes, height, depth
  cudaPitchedPtr p3, q3;
  CK(cudaMalloc3D(&p3, ext));
  CK(cudaMalloc3D(&q3, ext));
  CK(cudaMemset3D(q3, 0, ext));
  size_t n3 = ext.width * ext.height * ext.depth;
  unsigned char *h3 = (unsigned char *)malloc(n3), *o3 = (unsigned char *)malloc(n3);
  fill_pattern(h3, n3, 9);
  cudaMemcpy3DParms prm = {0};
  prm.srcPtr = make_cudaPitchedPtr(h3, ext.width, ext.width, ext.height);
  prm.dstPtr = p3;
  prm.extent = ext;
  prm.kind = cudaMemcpyHostToDevice;
  CK(cudaMemcpy3D(&prm));
  // D2D of an interior box: src offset (3,2,1) -> dst offset (0,0,0), size (50,10,5).
  cudaMemcpy3DParms b = {0};
  b.srcPtr = p3; b.srcPos = make_cudaPos(3, 2, 1);
  b.dstPtr = q3; b.dstPos = make_cudaPos(0, 0, 0);
  b.extent = make_cudaExtent(50, 10, 5);
  b.kind = cudaMemcpyDeviceToDevice;
  CK(cudaMemcpy3D(&b));
  cudaMemcpy3DParms r = {0};
  r.srcPtr = q3;
  r.dstPtr = make_cudaPitchedPtr(o3, ext.width, ext.width, ext.height);
  r.extent = ext;
  r.kind = cudaMemcpyDeviceToHost;
  CK(cudaMemcpy3DAsync(&r, s));
  CK(cudaStreamSynchronize(s));
  ok = 1;
  for (size_t z = 0; z < ext.depth; z++)
    for (size_t y = 0; y < ext.height; y++)
      for (size_t x = 0; x < ext.width; x++) {
        unsigned char want = 0;
        if (x < 50 && y < 10 && z < 5) want = h3[((z + 1) * ext.height + (y + 2)) * ext.width + (x + 3)];
        if (o3[(z * ext.height + y) * ext.width + x] != want) ok = 0;
      }
  printf("memcpy3D H2D, D2D box, D2H async: %s fnv=%016llx\n", ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(o3, n3));
  EXPECT(ok, "memcpy3D");

  CK(cudaFree(p3.ptr)); CK(cudaFree(q3.ptr));
  CK(cudaFree(d)); CK(cudaFree(d2));
  CK(cudaFreeHost(ph));
  CK(cudaStreamDestroy(s));
  free(h); free(out); free(sub); free(h3); free(o3);
  return test_finish();
}
