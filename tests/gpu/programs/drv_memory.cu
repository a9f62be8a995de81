// Driver-API memory: cuMemAlloc/Free, pitched alloc + cuMemcpy2D,
// cuMemcpyHtoD/DtoH/DtoD (+Async), cuMemcpy (unified), cuMemAllocHost,
// cuMemHostRegister, cuMemGetAddressRange, cuPointerGetAttribute(s),
// driver streams and events with elapsed time.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

int main(void) {
  test_init();
  CUdevice dev;
  drv_primary_context(&dev);
  CUstream s;
  CU(cuStreamCreate(&s, CU_STREAM_DEFAULT));

  const size_t n = (1 << 20) + 3;
  unsigned char *src = (unsigned char *)malloc(n), *dst = (unsigned char *)malloc(n);
  fill_pattern(src, n, 3);
  CUdeviceptr a, b;
  CU(cuMemAlloc(&a, n));
  CU(cuMemAlloc(&b, n));
  CU(cuMemcpyHtoD(a, src, n));
  CU(cuMemcpyDtoD(b, a, n));
  CU(cuMemcpyDtoH(dst, b, n));
  printf("HtoD/DtoD/DtoH: %s\n", memcmp(src, dst, n) ? "MISMATCH" : "ok");
  EXPECT(!memcmp(src, dst, n), "sync copies");

  void *pin;
  CU(cuMemAllocHost(&pin, n));
  memset(pin, 0, n);
  CU(cuMemsetD8Async(b, 0, n, s));
  CU(cuMemcpyHtoDAsync(b, src, n, s));
  CU(cuMemcpyDtoDAsync(a, b, n, s));
  CU(cuMemcpyDtoHAsync(pin, a, n, s));
  CU(cuStreamSynchronize(s));
  printf("async copies (pinned): %s\n", memcmp(src, pin, n) ? "MISMATCH" : "ok");
  EXPECT(!memcmp(src, pin, n), "async copies");

  // Unified cuMemcpy (direction from the addresses).
  memset(dst, 0, n);
  CU(cuMemcpy((CUdeviceptr)dst, a, n));
  printf("cuMemcpy unified D->H: %s\n", memcmp(src, dst, n) ? "MISMATCH" : "ok");
  EXPECT(!memcmp(src, dst, n), "cuMemcpy");

  // Registered host memory.
  void *reg = aligned_alloc(4096, 1 << 20);
  CU(cuMemHostRegister(reg, 1 << 20, 0));
  CU(cuMemcpyDtoHAsync(reg, a, 1 << 20, s));
  CU(cuStreamSynchronize(s));
  printf("registered memory copy: %s\n", memcmp(src, reg, 1 << 20) ? "MISMATCH" : "ok");
  EXPECT(!memcmp(src, reg, 1 << 20), "registered copy");
  CU(cuMemHostUnregister(reg));
  free(reg);

  // Address range of an interior pointer.
  CUdeviceptr base;
  size_t size;
  CU(cuMemGetAddressRange(&base, &size, a + 12345));
  printf("address range: base==alloc %d size %zu\n", base == a, size);
  EXPECT(base == a && size >= n, "address range");
  unsigned mtype = 0;
  CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a));
  printf("device pointer memory type: %u\n", mtype);
  CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pin));
  printf("pinned pointer memory type: %u\n", mtype);
  int ordinal = -1;
  CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
  printf("device ordinal: %d\n", ordinal);
  CUresult r = cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)dst);
  printf("pageable pointer memory type query -> %d\n", (int)r);

  // 2D copy between a pitched allocation and host.
  size_t pitch;
  CUdeviceptr p;
  const size_t W = 777, H = 13;
  CU(cuMemAllocPitch(&p, &pitch, W, H, 16));
  CUDA_MEMCPY2D c = {0};
  c.srcMemoryType = CU_MEMORYTYPE_HOST; c.srcHost = src; c.srcPitch = 1000;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE; c.dstDevice = p; c.dstPitch = pitch;
  c.WidthInBytes = W; c.Height = H;
  CU(cuMemcpy2D(&c));
  CUDA_MEMCPY2D c2 = {0};
  c2.srcMemoryType = CU_MEMORYTYPE_DEVICE; c2.srcDevice = p; c2.srcPitch = pitch;
  c2.dstMemoryType = CU_MEMORYTYPE_HOST; c2.dstHost = dst; c2.dstPitch = W;
  c2.WidthInBytes = W; c2.Height = H;
  memset(dst, 0, n);
  CU(cuMemcpy2DAsync(&c2, s));
  CU(cuStreamSynchronize(s));
  int ok = 1;
  for (size_t y = 0; y < H; y++) ok = ok && !memcmp(dst + y * W, src + y * 1000, W);
  printf("cuMemcpy2D: %s\n", ok ? "ok" : "MISMATCH");
  EXPECT(ok, "cuMemcpy2D");

  // Driver events.
  CUevent e0, e1;
  CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
  CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
  CU(cuEventRecord(e0, s));
  for (int k = 0; k < 20; k++) CU(cuMemcpyDtoDAsync(b, a, n, s));
  CU(cuEventRecord(e1, s));
  CU(cuEventSynchronize(e1));
  float ms = 0;
  CU(cuEventElapsedTime(&ms, e0, e1));
  printf("driver event timing %s\n", ms > 0 ? "ok" : "BAD");
  printf("# elapsed %.3f ms\n", ms);
  CU(cuEventDestroy(e0)); CU(cuEventDestroy(e1));

  // Freeing garbage is an error, not a crash.
  r = cuMemFree((CUdeviceptr)0x1234);
  printf("free of a bad pointer -> %d\n", (int)r);
  EXPECT(r != CUDA_SUCCESS, "bad free accepted");

  CU(cuMemFree(a)); CU(cuMemFree(b)); CU(cuMemFree(p));
  CU(cuMemFreeHost(pin));
  CU(cuStreamDestroy(s));
  CU(cuDevicePrimaryCtxRelease(dev));
  free(src); free(dst);
  return test_finish();
}
