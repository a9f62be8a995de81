// Driver-API device query: cuInit, versions, names, every attribute.
// Every printed value (and every error code) must equal the native one.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

int main(void) {
  test_init();
  CU(cuInit(0));
  int ver = 0, n = 0;
  CU(cuDriverGetVersion(&ver));
  CU(cuDeviceGetCount(&n));
  printf("driver version: %d\ndevice count: %d\n", ver, n);
  EXPECT(n >= 1, "no device");
  for (int i = 0; i < n; i++) {
    CUdevice dev;
    CU(cuDeviceGet(&dev, i));
    char name[256];
    CU(cuDeviceGetName(name, sizeof name, dev));
    size_t mem = 0;
    CU(cuDeviceTotalMem(&mem, dev));
    CUuuid uuid;
    CU(cuDeviceGetUuid(&uuid, dev));
    char bus[64];
    CU(cuDeviceGetPCIBusId(bus, sizeof bus, dev));
    printf("[%d] name: %s\n[%d] totalMem: %zu\n[%d] pciBusId: %s\n[%d] uuid:", i, name, i, mem, i, bus, i);
    for (int k = 0; k < 16; k++) printf("%02x", (unsigned char)uuid.bytes[k]);
    printf("\n");
    // Every attribute id up to the header's maximum; errors are printed too,
    // since the shim must answer unknown/deprecated ids exactly as the driver does.
    // The memory-model attributes a remote GPU cannot give its client
    // (concurrent managed access, pageable access, host atomics, host
    // pointers for registered memory) read 0 through SCUDA by design,
    // so programs take their fallback path: printed as '# ' lines, which
    // the suite does not compare.
    int ok = 0;
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
      int v = 0;
      CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
      int remote_differs = a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS ||
                           a == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS ||
                           a == CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES ||
                           a == CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED ||
                           a == CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED ||
                           a == CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST ||
                           a == CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM;
      if (r == CUDA_SUCCESS && remote_differs) { printf("# [%d] attr %d = %d\n", i, a, v); ok++; }
      else if (r == CUDA_SUCCESS) { printf("[%d] attr %d = %d\n", i, a, v); ok++; }
      else printf("[%d] attr %d error %d\n", i, a, (int)r);
    }
    printf("[%d] attributes answered: %d\n", i, ok);
    EXPECT(ok > 100, "only %d attributes answered", ok);
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    printf("[%d] cc %d.%d\n", i, major, minor);
    // An out-of-range attribute id must be rejected.
    int v = 0;
    CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, dev);
    printf("[%d] bad attribute -> %d\n", i, (int)r);
    EXPECT(r != CUDA_SUCCESS, "bad attribute accepted");
  }
  // Invalid ordinal.
  CUdevice bad;
  CUresult r = cuDeviceGet(&bad, n + 5);
  printf("cuDeviceGet(invalid) -> %d\n", (int)r);
  EXPECT(r == CUDA_ERROR_INVALID_DEVICE, "expected CUDA_ERROR_INVALID_DEVICE");

  // Primary context: retain, make current, query, release.
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  unsigned flags = 0; int active = -1;
  CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("primary ctx before retain: active=%d\n", active);
  CUcontext ctx;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUcontext cur = NULL;
  CU(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx, "current context differs");
  CUdevice cdev = -1;
  CU(cuCtxGetDevice(&cdev));
  printf("ctx device: %d\n", (int)cdev);
  unsigned api = 0;
  CU(cuCtxGetApiVersion(ctx, &api));
  printf("ctx api version: %u\n", api);
  CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("primary ctx after retain: active=%d\n", active);
  size_t freeb = 0, total = 0;
  CU(cuMemGetInfo(&freeb, &total));
  printf("cuMemGetInfo total: %zu\n# cuMemGetInfo free: %zu\n", total, freeb);
  size_t lim = 0;
  CU(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
  printf("stack size limit: %zu\n", lim);
  CU(cuCtxSynchronize());
  CU(cuDevicePrimaryCtxRelease(dev));
  return test_finish();
}
