// cuMemBatchDecompressAsync: what the driver answers for a Snappy batch
// in cuMemAlloc memory (GPUs without a decompression engine refuse it),
// for a malformed operation (*errorIndex names it) and for bad flags
// (*errorIndex SIZE_MAX), and what an accepted batch wrote. Output
// compared with native.
// BUILD: -lcuda
#include <cuda.h>
#include <stdint.h>
#include "common.h"

// Snappy for "abcabcabcabcX": length 13, literal "abc", a copy of 9 bytes from 3 back, literal "X"
static const unsigned char snappy_abc[] = {0x0d, 0x08, 'a', 'b', 'c', 0x15, 0x03, 0x00, 'X'};

static const char *index_of(size_t i, char *buf) {
  if (i == SIZE_MAX) return "SIZE_MAX";
  snprintf(buf, 24, "%zu", i);
  return buf;
}

int main(void) {
  test_init();
  CUdevice dev;
  drv_primary_context(&dev);
  int mask = 0;
  CU(cuDeviceGetAttribute(&mask, CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK, dev));
  printf("decompression algorithms: %#x\n", mask);
  CUdeviceptr src, dst, act;
  CU(cuMemAlloc(&src, 64));
  CU(cuMemAlloc(&dst, 64));
  CU(cuMemAlloc(&act, 8));
  CU(cuMemcpyHtoD(src, snappy_abc, sizeof snappy_abc));
  CU(cuMemsetD8(dst, 0, 64));
  CU(cuMemsetD8(act, 0, 8));
  CUmemDecompressParams p[2];
  memset(p, 0, sizeof p);
  p[0].srcNumBytes = sizeof snappy_abc, p[0].dstNumBytes = 13;
  p[0].src = (const void *)(uintptr_t)src, p[0].dst = (void *)(uintptr_t)dst;
  p[0].dstActBytes = (cuuint32_t *)(uintptr_t)act;
  p[0].algo = CU_MEM_DECOMPRESS_ALGORITHM_SNAPPY;
  p[1] = p[0];
  p[1].padding[3] = 1;
  char b[24];
  size_t idx = 7;
  CUresult r = cuMemBatchDecompressAsync(p, 2, 0, &idx, NULL);
  printf("non-zero padding in operation 1: %s, errorIndex %s\n", cu_name(r), r ? index_of(idx, b) : "-");
  idx = 7;
  r = cuMemBatchDecompressAsync(p, 1, 1, &idx, NULL);
  printf("flags 1: %s, errorIndex %s\n", cu_name(r), r ? index_of(idx, b) : "-");
  CUstream s;
  CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  idx = 7;
  r = cuMemBatchDecompressAsync(p, 1, 0, &idx, s);
  printf("one Snappy operation: %s, errorIndex %s\n", cu_name(r), r ? index_of(idx, b) : "-");
  printf("synchronize: %s\n", cu_name(cuStreamSynchronize(s)));
  char out[14] = {0};
  cuuint32_t n = 0;
  CU(cuMemcpyDtoH(out, dst, 13));
  CU(cuMemcpyDtoH(&n, act, 4));
  printf("wrote %u bytes: %s\n", n, n == 13 ? out : "(none)");
  CU(cuStreamDestroy(s));
  CU(cuMemFree(src));
  CU(cuMemFree(dst));
  CU(cuMemFree(act));
  return test_finish();
}
