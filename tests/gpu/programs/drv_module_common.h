// Shared by drv_module_{ptx,cubin,fatbin} and drv_library: exercise the
// kernels of kernels/module_kernels.cu through the driver API.
#pragma once
#include <cuda.h>
#include "common.h"

static CUcontext drv_setup(void) { return drv_primary_context(NULL); }

// Set g_table/g_bias (found by name), run table_sum and scale_bias.
// getglobal: cuModuleGetGlobal or cuLibraryGetGlobal, bound by the caller.
static void exercise(const char *label, CUfunction table_sum, CUfunction scale_bias, CUdeviceptr g_table,
                     size_t table_size, CUdeviceptr g_bias, size_t bias_size) {
  printf("%s: g_table size %zu, g_bias size %zu\n", label, table_size, bias_size);
  EXPECT(table_size == 64 && bias_size == 4, "%s: global sizes", label);
  int table[16];
  for (int i = 0; i < 16; i++) table[i] = i;
  CU(cuMemcpyHtoD(g_table, table, sizeof table));
  float bias = 0.5f;
  CU(cuMemcpyHtoD(g_bias, &bias, sizeof bias));

  CUdeviceptr out;
  CU(cuMemAlloc(&out, sizeof(int)));
  void *args1[] = {&out};
  CU(cuLaunchKernel(table_sum, 1, 1, 1, 1, 1, 1, 0, NULL, args1, NULL));
  int sum = 0;
  CU(cuMemcpyDtoH(&sum, out, sizeof sum));
  printf("%s: table_sum = %d\n", label, sum);
  EXPECT(sum == 1360, "%s: table_sum %d", label, sum);

  const int n = 1000;
  float h[n];
  for (int i = 0; i < n; i++) h[i] = (float)i;
  CUdeviceptr x;
  CU(cuMemAlloc(&x, sizeof h));
  CU(cuMemcpyHtoD(x, h, sizeof h));
  float a = 2.0f;
  int nn = n;
  void *args2[] = {&x, &a, &nn};
  CU(cuLaunchKernel(scale_bias, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args2, NULL));
  CU(cuMemcpyDtoH(h, x, sizeof h));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != i * 2.0f + 0.5f;
  printf("%s: scale_bias %s\n", label, bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "%s: scale_bias %d wrong", label, bad);

  int regs = -1, maxt = -1;
  CU(cuFuncGetAttribute(&maxt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, scale_bias));
  CU(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, scale_bias));
  printf("%s: scale_bias maxThreads=%d regs>0=%d\n", label, maxt, regs > 0);
  CU(cuMemFree(out));
  CU(cuMemFree(x));
}

// Everything that only needs a CUmodule.
static void exercise_module(const char *label, CUmodule m) {
  CUfunction ts, sb;
  CU(cuModuleGetFunction(&ts, m, "table_sum"));
  CU(cuModuleGetFunction(&sb, m, "scale_bias"));
  CUdeviceptr gt, gb;
  size_t st, sbz;
  CU(cuModuleGetGlobal(&gt, &st, m, "g_table"));
  CU(cuModuleGetGlobal(&gb, &sbz, m, "g_bias"));
  exercise(label, ts, sb, gt, st, gb, sbz);
  CUfunction none;
  CUresult r = cuModuleGetFunction(&none, m, "no_such_kernel");
  printf("%s: missing function -> %d\n", label, (int)r);
  EXPECT(r == CUDA_ERROR_NOT_FOUND, "%s: expected CUDA_ERROR_NOT_FOUND", label);
  CUdeviceptr gx;
  size_t sx;
  r = cuModuleGetGlobal(&gx, &sx, m, "no_such_global");
  printf("%s: missing global -> %d\n", label, (int)r);
  EXPECT(r == CUDA_ERROR_NOT_FOUND, "%s: expected CUDA_ERROR_NOT_FOUND", label);
}
