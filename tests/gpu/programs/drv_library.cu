// Context-independent loading: cuLibraryLoadData (fatbin bytes),
// cuLibraryLoadFromFile (PTX), cuLibraryGetKernel, cuKernelGetFunction,
// cuLibraryGetGlobal, cuLibraryGetModule, launching a CUkernel directly.
// BUILD: -lcuda
#include "drv_module_common.h"

static void run_library(const char *label, CUlibrary lib) {
  CUkernel kts, ksb;
  CU(cuLibraryGetKernel(&kts, lib, "table_sum"));
  CU(cuLibraryGetKernel(&ksb, lib, "scale_bias"));
  CUfunction fts, fsb;
  CU(cuKernelGetFunction(&fts, kts));
  CU(cuKernelGetFunction(&fsb, ksb));
  CUdeviceptr gt, gb;
  size_t st, sb;
  CU(cuLibraryGetGlobal(&gt, &st, lib, "g_table"));
  CU(cuLibraryGetGlobal(&gb, &sb, lib, "g_bias"));
  exercise(label, fts, fsb, gt, st, gb, sb);

  // A CUkernel may be passed where a CUfunction is expected.
  CUdeviceptr out;
  CU(cuMemAlloc(&out, sizeof(int)));
  void *args[] = {&out};
  CU(cuLaunchKernel((CUfunction)kts, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  int sum = 0;
  CU(cuMemcpyDtoH(&sum, out, sizeof sum));
  printf("%s: CUkernel launched as CUfunction: table_sum = %d\n", label, sum);
  EXPECT(sum == 1360, "%s: kernel-handle launch %d", label, sum);
  CU(cuMemFree(out));

  CUdevice dev;
  CU(cuCtxGetDevice(&dev));
  int maxt = 0;
  CU(cuKernelGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, ksb, dev));
  printf("%s: cuKernelGetAttribute maxThreads=%d\n", label, maxt);
  const char *name = NULL;
  CU(cuKernelGetName(&name, ksb));
  printf("%s: cuKernelGetName: %s\n", label, name);

  CUmodule mod;
  CU(cuLibraryGetModule(&mod, lib));
  CUfunction viaMod;
  CU(cuModuleGetFunction(&viaMod, mod, "table_sum"));
  printf("%s: cuLibraryGetModule ok\n", label);
  unsigned count = 0;
  CU(cuLibraryGetKernelCount(&count, lib));
  printf("%s: kernel count %u\n", label, count);
  CUkernel none;
  CUresult r = cuLibraryGetKernel(&none, lib, "no_such_kernel");
  printf("%s: missing kernel -> %d\n", label, (int)r);
  EXPECT(r == CUDA_ERROR_NOT_FOUND, "%s: expected CUDA_ERROR_NOT_FOUND", label);
}

int main(void) {
  test_init();
  drv_setup();
  size_t len;
  void *fat = read_file(beside_exe("module_kernels.fatbin"), &len);
  CUlibrary l1, l2;
  CU(cuLibraryLoadData(&l1, fat, NULL, NULL, 0, NULL, NULL, 0));
  run_library("library fatbin data", l1);
  CU(cuLibraryLoadFromFile(&l2, beside_exe("module_kernels.ptx"), NULL, NULL, 0, NULL, NULL, 0));
  run_library("library ptx file", l2);
  CU(cuLibraryUnload(l1));
  CU(cuLibraryUnload(l2));
  free(fat);
  return test_finish();
}
