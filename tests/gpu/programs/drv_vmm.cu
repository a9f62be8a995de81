// Virtual memory management: granularity, cuMemCreate, cuMemAddressReserve,
// cuMemMap (two physical chunks into one contiguous range), cuMemSetAccess,
// use from copies and a kernel, then unmap/release.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

__global__ void add(unsigned *x, size_t n, unsigned v) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] += v;
}

int main(void) {
  test_init();
  CUdevice dev;
  drv_primary_context(&dev);
  int vmm = 0;
  CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  printf("VMM supported: %d\n", vmm);

  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0, rec = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CU(cuMemGetAllocationGranularity(&rec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  printf("granularity: minimum %zu recommended %zu\n", gran, rec);

  const size_t chunk = gran * 2, total = chunk * 2;
  CUmemGenericAllocationHandle h1, h2;
  CU(cuMemCreate(&h1, chunk, &prop, 0));
  CU(cuMemCreate(&h2, chunk, &prop, 0));
  CUdeviceptr va;
  CU(cuMemAddressReserve(&va, total, 0, 0, 0));
  CU(cuMemMap(va, chunk, 0, h1, 0));
  CU(cuMemMap(va + chunk, chunk, 0, h2, 0));
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof acc);
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(cuMemSetAccess(va, total, &acc, 1));
  unsigned long long flags = 0;
  CU(cuMemGetAccess(&flags, &prop.location, va));
  printf("access flags: %llu\n", flags);

  size_t n = total / sizeof(unsigned);
  unsigned *hbuf = (unsigned *)malloc(total);
  for (size_t i = 0; i < n; i++) hbuf[i] = (unsigned)i;
  CU(cuMemcpyHtoD(va, hbuf, total));  // one copy spanning both physical chunks
  add<<<(unsigned)((n + 255) / 256), 256>>>((unsigned *)va, n, 5);
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(hbuf, va, total));
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) bad += hbuf[i] != (unsigned)i + 5;
  printf("mapped range (2 chunks, %zu bytes): %s\n", total, bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "%zu wrong", bad);

  CUmemGenericAllocationHandle back;
  CU(cuMemRetainAllocationHandle(&back, (void *)(va + chunk)));
  CUmemAllocationProp got;
  CU(cuMemGetAllocationPropertiesFromHandle(&got, back));
  printf("retained handle: type %d location %d\n", (int)got.type, got.location.id);
  CU(cuMemRelease(back));

  CU(cuMemUnmap(va, total));
  CU(cuMemRelease(h1));
  CU(cuMemRelease(h2));
  CU(cuMemAddressFree(va, total));
  free(hbuf);
  return test_finish();
}
