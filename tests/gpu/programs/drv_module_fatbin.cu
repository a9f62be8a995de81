// Driver API: load a fatbin by file, with cuModuleLoadFatBinary and with
// cuModuleLoadData; enumerate functions; cooperative launches through
// cuLaunchCooperativeKernel and cuLaunchKernelEx(CU_LAUNCH_ATTRIBUTE_COOPERATIVE).
// BUILD: -lcuda
#include "drv_module_common.h"

int main(void) {
  test_init();
  drv_setup();
  const char *path = beside_exe("module_kernels.fatbin");
  CUmodule m1, m2, m3;
  CU(cuModuleLoad(&m1, path));
  exercise_module("fatbin file", m1);
  size_t len;
  void *img = read_file(path, &len);
  CU(cuModuleLoadFatBinary(&m2, img));
  exercise_module("fatbin LoadFatBinary", m2);
  CU(cuModuleLoadData(&m3, img));
  exercise_module("fatbin LoadData", m3);

  unsigned count = 0;
  CU(cuModuleGetFunctionCount(&count, m3));
  printf("function count: %u\n", count);
  EXPECT(count >= 4, "expected at least 4 functions");

  CUfunction coop;
  CU(cuModuleGetFunction(&coop, m3, "coop_sum"));
  const char *fname = NULL;
  CU(cuFuncGetName(&fname, coop));
  printf("cuFuncGetName: %s\n", fname);
  // Parameter layout as the driver reports it (the shim uses this to pack launches).
  for (int i = 0; i < 3; i++) {
    size_t off = 0, sz = 0;
    CUresult r = cuFuncGetParamInfo(coop, i, &off, &sz);
    if (r == CUDA_SUCCESS) printf("coop_sum param %d: offset %zu size %zu\n", i, off, sz);
    else printf("coop_sum param %d: error %d\n", i, (int)r);
  }

  int coopOk = 0, nblk = 0, nsm = 0;
  CUdevice dev;
  CU(cuCtxGetDevice(&dev));
  CU(cuDeviceGetAttribute(&coopOk, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
  CU(cuDeviceGetAttribute(&nsm, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&nblk, coop, 128, 0));
  printf("cooperative launch supported: %d, blocks/SM>=1: %d\n", coopOk, nblk >= 1);
  int grid = nsm;  // one block per SM: always co-resident
  CUdeviceptr buf, out;
  CU(cuMemAlloc(&buf, grid * sizeof(int)));
  CU(cuMemAlloc(&out, sizeof(int)));
  void *args[] = {&buf, &out};
  int want = grid * (grid + 1) / 2, got = 0;
  CU(cuMemsetD32(out, 0, 1));
  CU(cuLaunchCooperativeKernel(coop, grid, 1, 1, 128, 1, 1, 0, NULL, args));
  CU(cuMemcpyDtoH(&got, out, sizeof got));
  printf("cuLaunchCooperativeKernel grid sync: %s\n", got == want ? "ok" : "MISMATCH");
  EXPECT(got == want, "coop sum %d want %d", got, want);

  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attr.value.cooperative = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = grid; cfg.gridDimY = 1; cfg.gridDimZ = 1;
  cfg.blockDimX = 128; cfg.blockDimY = 1; cfg.blockDimZ = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CU(cuMemsetD32(out, 0, 1));
  CU(cuLaunchKernelEx(&cfg, coop, args, NULL));
  CU(cuMemcpyDtoH(&got, out, sizeof got));
  printf("cuLaunchKernelEx cooperative attribute: %s\n", got == want ? "ok" : "MISMATCH");
  EXPECT(got == want, "coop attr sum %d want %d", got, want);

  // Too many blocks for a cooperative launch must be refused.
  CUresult r = cuLaunchCooperativeKernel(coop, nsm * nblk + 1, 1, 1, 128, 1, 1, 0, NULL, args);
  printf("oversized cooperative grid -> %d\n", (int)r);
  EXPECT(r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "expected CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE");
  CU(cuCtxSynchronize());

  CU(cuMemFree(buf)); CU(cuMemFree(out));
  CU(cuModuleUnload(m1)); CU(cuModuleUnload(m2)); CU(cuModuleUnload(m3));
  free(img);
  return test_finish();
}
