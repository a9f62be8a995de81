// Driver API: load PTX by file (cuModuleLoad), from bytes (cuModuleLoadData)
// and with JIT options (cuModuleLoadDataEx, which writes a log buffer).
// BUILD: -lcuda
#include "drv_module_common.h"

int main(void) {
  test_init();
  drv_setup();
  const char *path = beside_exe("module_kernels.ptx");
  CUmodule m1, m2, m3;
  CU(cuModuleLoad(&m1, path));
  exercise_module("ptx file", m1);
  size_t len;
  char *ptx = (char *)read_file(path, &len);
  CU(cuModuleLoadData(&m2, ptx));
  exercise_module("ptx data", m2);

  char info[4096] = {0}, err[4096] = {0};
  CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_LOG_VERBOSE};
  void *vals[] = {info, (void *)(uintptr_t)sizeof info, err, (void *)(uintptr_t)sizeof err, (void *)(uintptr_t)4,
                  (void *)(uintptr_t)1};
  CU(cuModuleLoadDataEx(&m3, ptx, 6, opts, vals));
  // The info log is empty when the driver's JIT cache already holds this PTX,
  // so only the error log is deterministic.
  printf("jit error log empty: %d\n", err[0] == 0);
  printf("# jit info log non-empty: %d\n", info[0] != 0);
  for (char *c = info; *c; c++) if (*c == '\n') *c = ' ';  // keep it on one "# " line
  printf("# jit info log: %.200s\n", info);
  exercise_module("ptx dataEx", m3);

  // Broken PTX must fail with an error and an error log.
  const char *bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k( { bogus; }\n";
  CUmodule mb;
  memset(err, 0, sizeof err);
  // The size options are in/out: the driver wrote the used sizes back. Reset them.
  vals[1] = (void *)(uintptr_t)sizeof info;
  vals[3] = (void *)(uintptr_t)sizeof err;
  CUresult r = cuModuleLoadDataEx(&mb, bad, 4, opts, vals);
  printf("broken ptx -> %d, error log non-empty: %d\n", (int)r, err[0] != 0);
  EXPECT(r != CUDA_SUCCESS, "broken PTX loaded");

  CU(cuModuleUnload(m1)); CU(cuModuleUnload(m2)); CU(cuModuleUnload(m3));
  free(ptx);
  return test_finish();
}
