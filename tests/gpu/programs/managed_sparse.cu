// 4 GiB of managed memory written sparsely by the host (1 page in 64), read
// by a kernel. Through SCUDA the shim counts the bytes on the wire: the
// push must move at most 2x the dirty bytes. (Natively there is no wire:
// those lines start with "# ".)
// BUILD: -ldl
#include <dlfcn.h>
#include "common.h"

__global__ void sum_pages(const unsigned char *m, size_t size, size_t stride, unsigned long long *out) {
  unsigned long long s = 0;
  for (size_t off = (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * stride; off < size;
       off += (size_t)gridDim.x * blockDim.x * stride)
    s += m[off + 100];
  atomicAdd(out, s);
}

int main(void) {
  test_init();
  const size_t size = 4ull << 30, page = 4096, stride = 64 * page, dirty = size / stride * page;
  size_t free_b = 0, total = 0;
  CK(cudaMemGetInfo(&free_b, &total));
  if (free_b < size + (1ull << 30)) {
    printf("FAIL: needs 5 GiB free on the GPU\n");
    return 1;
  }
  int (*wire)(uint64_t *, uint64_t *) =
      (int (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "scuda_client_wire_bytes");
  unsigned char *m;
  unsigned long long *out;
  CK(cudaMallocManaged(&m, size));
  CK(cudaMallocManaged(&out, sizeof *out));
  *out = 0;
  for (size_t off = 0; off < size; off += stride) m[off + 100] = (unsigned char)(off / stride % 251);
  uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
  if (wire) wire(&s0, &r0);
  double t0 = now_s();
  sum_pages<<<64, 256>>>(m, size, stride, out);
  CK(cudaDeviceSynchronize());
  double t1 = now_s();
  if (wire) wire(&s1, &r1);
  unsigned long long want = 0;
  for (size_t off = 0; off < size; off += stride) want += off / stride % 251;
  printf("sum %llu (want %llu)\n", *out, want);
  EXPECT(*out == want, "sum %llu want %llu", *out, want);
  printf("# dirty %zu bytes; kernel+sync %.1f ms\n", dirty, (t1 - t0) * 1e3);
  if (wire) {
    printf("# wire: sent %llu bytes (%.3f x dirty), received %llu\n", (unsigned long long)(s1 - s0),
           (double)(s1 - s0) / dirty, (unsigned long long)(r1 - r0));
    EXPECT(s1 - s0 <= 2 * dirty, "sent %llu bytes for %zu dirty", (unsigned long long)(s1 - s0), dirty);
  }
  CK(cudaFree(m));
  CK(cudaFree(out));
  return test_finish();
}
