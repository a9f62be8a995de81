// Page-locked host memory: cudaMallocHost, cudaHostAlloc (default, portable,
// write-combined), cudaHostRegister of malloc'd memory; copies both ways,
// sync and async, and cudaHostGetFlags.
#include "common.h"

static void roundtrip(const char *label, unsigned char *src, unsigned char *dst, size_t n, cudaStream_t s) {
  unsigned char *d;
  CK(cudaMalloc(&d, n));
  fill_pattern(src, n, (uint32_t)n);
  memset(dst, 0, n);
  CK(cudaMemcpy(d, src, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dst, d, n, cudaMemcpyDeviceToHost));
  int ok = memcmp(src, dst, n) == 0;
  memset(dst, 0, n);
  CK(cudaMemsetAsync(d, 0, n, s));
  CK(cudaMemcpyAsync(d, src, n, cudaMemcpyHostToDevice, s));
  CK(cudaMemcpyAsync(dst, d, n, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  ok = ok && memcmp(src, dst, n) == 0;
  printf("%-24s %zu bytes: %s fnv=%016llx\n", label, n, ok ? "ok" : "MISMATCH", (unsigned long long)fnv1a(dst, n));
  EXPECT(ok, "%s", label);
  CK(cudaFree(d));
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  const size_t n = (8 << 20) + 100;
  unsigned char *a, *b;
  CK(cudaMallocHost(&a, n));
  CK(cudaMallocHost(&b, n));
  roundtrip("cudaMallocHost", a, b, n, s);
  unsigned flags = 0;
  CK(cudaHostGetFlags(&flags, a));
  printf("cudaMallocHost flags: %u\n", flags);
  CK(cudaFreeHost(a)); CK(cudaFreeHost(b));

  const unsigned kinds[] = {cudaHostAllocDefault, cudaHostAllocPortable, cudaHostAllocWriteCombined};
  const char *names[] = {"cudaHostAlloc default", "cudaHostAlloc portable", "cudaHostAlloc wc"};
  for (int k = 0; k < 3; k++) {
    unsigned char *src, *dst;
    CK(cudaHostAlloc(&src, n, kinds[k]));
    CK(cudaHostAlloc(&dst, n, cudaHostAllocDefault));
    roundtrip(names[k], src, dst, n, s);
    CK(cudaHostGetFlags(&flags, src));
    printf("%s flags: %u\n", names[k], flags);
    CK(cudaFreeHost(src)); CK(cudaFreeHost(dst));
  }

  // Registered (pinned after the fact) pageable memory, page aligned.
  unsigned char *r1 = (unsigned char *)aligned_alloc(4096, 4 << 20), *r2 = (unsigned char *)aligned_alloc(4096, 4 << 20);
  CK(cudaHostRegister(r1, 4 << 20, cudaHostRegisterDefault));
  CK(cudaHostRegister(r2, 4 << 20, cudaHostRegisterDefault));
  roundtrip("cudaHostRegister", r1, r2, 4 << 20, s);
  CK(cudaHostUnregister(r1)); CK(cudaHostUnregister(r2));
  cudaError_t e = cudaHostUnregister(r1);
  printf("unregister twice: %s\n", cudaGetErrorName(e));
  (void)cudaGetLastError();
  free(r1); free(r2);
  CK(cudaStreamDestroy(s));
  return test_finish();
}
