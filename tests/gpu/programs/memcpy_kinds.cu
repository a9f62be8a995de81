// Every memcpy kind (H2D, D2H, D2D, H2H, Default), sync and async, pageable
// and pinned, plus cudaMemcpyPeer/PeerAsync with the same device.
#include "common.h"

static void check(const char *what, const void *got, const void *want, size_t n) {
  int same = memcmp(got, want, n) == 0;
  printf("%-28s %zu bytes fnv=%016llx %s\n", what, n, (unsigned long long)fnv1a(got, n), same ? "ok" : "MISMATCH");
  EXPECT(same, "%s mismatch", what);
}

int main(void) {
  test_init();
  // Sizes: tiny, odd, and large enough to be chunked by a transport.
  const size_t sizes[] = {1, 4099, (size_t)3 << 20, ((size_t)64 << 20) + 12};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    printf("size %zu\n", n);
    unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n);
    unsigned char *pin_src, *pin_dst;
    CK(cudaMallocHost(&pin_src, n));
    CK(cudaMallocHost(&pin_dst, n));
    fill_pattern(src, n, (uint32_t)si + 1);
    memcpy(pin_src, src, n);
    unsigned char *d1, *d2;
    CK(cudaMalloc(&d1, n));
    CK(cudaMalloc(&d2, n));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));

    CK(cudaMemcpy(d1, src, n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d2, d1, n, cudaMemcpyDeviceToDevice));
    memset(dst, 0, n);
    CK(cudaMemcpy(dst, d2, n, cudaMemcpyDeviceToHost));
    check("H2D,D2D,D2H pageable", dst, src, n);

    memset(dst, 0, n);
    CK(cudaMemcpy(dst, src, n, cudaMemcpyHostToHost));
    check("H2H", dst, src, n);

    memset(dst, 0, n);
    CK(cudaMemset(d1, 0, n));
    CK(cudaMemcpy(d1, src, n, cudaMemcpyDefault));
    CK(cudaMemcpy(d2, d1, n, cudaMemcpyDefault));
    CK(cudaMemcpy(dst, d2, n, cudaMemcpyDefault));
    check("Default H2D,D2D,D2H", dst, src, n);
    memset(dst, 0, n);
    CK(cudaMemcpy(dst, src, n, cudaMemcpyDefault));
    check("Default H2H", dst, src, n);

    // Async, pinned.
    memset(pin_dst, 0, n);
    CK(cudaMemsetAsync(d1, 0, n, s));
    CK(cudaMemcpyAsync(d1, pin_src, n, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(d2, d1, n, cudaMemcpyDeviceToDevice, s));
    CK(cudaMemcpyAsync(pin_dst, d2, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    check("async pinned H2D,D2D,D2H", pin_dst, src, n);

    // Async, pageable (legal; behaves synchronously for the host buffer).
    memset(dst, 0, n);
    CK(cudaMemcpyAsync(d1, src, n, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(dst, d1, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    check("async pageable H2D,D2H", dst, src, n);

    // Async H2H and Default kind.
    memset(pin_dst, 0, n);
    CK(cudaMemcpyAsync(pin_dst, pin_src, n, cudaMemcpyHostToHost, s));
    CK(cudaStreamSynchronize(s));
    check("async H2H", pin_dst, src, n);
    memset(pin_dst, 0, n);
    CK(cudaMemcpyAsync(d2, pin_src, n, cudaMemcpyDefault, s));
    CK(cudaMemcpyAsync(pin_dst, d2, n, cudaMemcpyDefault, s));
    CK(cudaStreamSynchronize(s));
    check("async Default", pin_dst, src, n);

    // Peer copy within the same device.
    memset(dst, 0, n);
    CK(cudaMemset(d2, 0, n));
    CK(cudaMemcpyPeer(d2, 0, d1, 0, n));
    CK(cudaMemcpy(dst, d2, n, cudaMemcpyDeviceToHost));
    check("peer same device", dst, src, n);
    memset(dst, 0, n);
    CK(cudaMemset(d2, 0, n));
    CK(cudaMemcpyPeerAsync(d2, 0, d1, 0, n, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(dst, d2, n, cudaMemcpyDeviceToHost));
    check("peer async same device", dst, src, n);

    // Copy at an offset (interior pointers).
    if (n > 16) {
      memset(dst, 0, n);
      CK(cudaMemset(d2, 0xAB, n));
      CK(cudaMemcpy(d2 + 7, src + 3, n - 16, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dst, d2, n, cudaMemcpyDeviceToHost));
      int ok = dst[0] == 0xAB && dst[6] == 0xAB && memcmp(dst + 7, src + 3, n - 16) == 0 && dst[n - 9] == 0xAB;
      printf("%-28s %s\n", "interior pointer", ok ? "ok" : "MISMATCH");
      EXPECT(ok, "interior pointer copy");
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d1));
    CK(cudaFree(d2));
    CK(cudaFreeHost(pin_src));
    CK(cudaFreeHost(pin_dst));
    free(src); free(dst);
  }
  return test_finish();
}
