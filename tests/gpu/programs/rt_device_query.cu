// Runtime-API device query: every printed value must equal the native one.
#include "common.h"

int main(void) {
  test_init();
  int n = 0, rt = 0, drv = 0;
  CK(cudaGetDeviceCount(&n));
  CK(cudaRuntimeGetVersion(&rt));
  CK(cudaDriverGetVersion(&drv));
  printf("device count: %d\nruntime version: %d\ndriver version: %d\n", n, rt, drv);
  EXPECT(n >= 1, "no device");
  for (int d = 0; d < n; d++) {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, d));
    printf("[%d] name: %s\n", d, p.name);
    printf("[%d] cc: %d.%d\n", d, p.major, p.minor);
    printf("[%d] totalGlobalMem: %zu\n", d, p.totalGlobalMem);
    printf("[%d] multiProcessorCount: %d\n", d, p.multiProcessorCount);
    printf("[%d] warpSize: %d\n", d, p.warpSize);
    printf("[%d] maxThreadsPerBlock: %d\n", d, p.maxThreadsPerBlock);
    printf("[%d] maxThreadsDim: %d %d %d\n", d, p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]);
    printf("[%d] maxGridSize: %d %d %d\n", d, p.maxGridSize[0], p.maxGridSize[1], p.maxGridSize[2]);
    printf("[%d] sharedMemPerBlock: %zu\n", d, p.sharedMemPerBlock);
    printf("[%d] sharedMemPerBlockOptin: %zu\n", d, p.sharedMemPerBlockOptin);
    printf("[%d] sharedMemPerMultiprocessor: %zu\n", d, p.sharedMemPerMultiprocessor);
    printf("[%d] regsPerBlock: %d\n", d, p.regsPerBlock);
    printf("[%d] totalConstMem: %zu\n", d, p.totalConstMem);
    printf("[%d] l2CacheSize: %d\n", d, p.l2CacheSize);
    printf("[%d] memoryBusWidth: %d\n", d, p.memoryBusWidth);
    printf("[%d] maxThreadsPerMultiProcessor: %d\n", d, p.maxThreadsPerMultiProcessor);
    printf("[%d] concurrentKernels: %d\n", d, p.concurrentKernels);
    printf("[%d] asyncEngineCount: %d\n", d, p.asyncEngineCount);
    printf("[%d] unifiedAddressing: %d\n", d, p.unifiedAddressing);
    printf("[%d] managedMemory: %d\n", d, p.managedMemory);
    printf("[%d] cooperativeLaunch: %d\n", d, p.cooperativeLaunch);
    printf("[%d] ECCEnabled: %d\n", d, p.ECCEnabled);
    printf("[%d] pci: %04x:%02x:%02x\n", d, p.pciDomainID, p.pciBusID, p.pciDeviceID);
    printf("[%d] uuid:", d);
    for (int i = 0; i < 16; i++) printf("%02x", (unsigned char)p.uuid.bytes[i]);
    printf("\n");
    char bus[64];
    CK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    printf("[%d] pciBusId: %s\n", d, bus);
    // A few attributes through the attribute path as well.
    int v;
    const cudaDeviceAttr attrs[] = {cudaDevAttrClockRate, cudaDevAttrMemoryClockRate,
                                    cudaDevAttrComputeCapabilityMajor, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                    cudaDevAttrMemoryPoolsSupported, cudaDevAttrClusterLaunch};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
      CK(cudaDeviceGetAttribute(&v, attrs[i], d));
      printf("[%d] attr %d: %d\n", d, (int)attrs[i], v);
    }
    EXPECT(p.major >= 7, "unexpected cc %d.%d", p.major, p.minor);
    EXPECT(p.totalGlobalMem > (1ull << 30), "tiny memory");
  }
  CK(cudaSetDevice(0));
  size_t freeb = 0, total = 0;
  CK(cudaMemGetInfo(&freeb, &total));
  printf("memGetInfo total: %zu\n", total);
  printf("# memGetInfo free: %zu\n", freeb);
  EXPECT(freeb > 0 && freeb <= total, "bad free %zu total %zu", freeb, total);
  int cur = -1;
  CK(cudaGetDevice(&cur));
  printf("current device: %d\n", cur);
  return test_finish();
}
