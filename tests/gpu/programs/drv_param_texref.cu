// cuParamSetTexRef, the pre-CUDA-4 binding of a texture reference to a
// function: what the driver answers for the default unit, another unit
// and a null reference, then an old-API launch (cuParamSet*, cuLaunchGrid)
// of a kernel that reads the reference, bound to an array. Output: the
// answers' names and a checksum of what the kernel read, compared with
// native.
// BUILD: -lcuda
#define CUDA_ENABLE_DEPRECATED  // the old launch API and texture references are what this tests
#include <cuda.h>
#include "common.h"

static const char *ptx =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".global .texref tr;\n"
    ".visible .entry look(.param .u64 out, .param .u64 coords, .param .u32 n)\n{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<4>; .reg .f32 %f<9>; .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [coords]; ld.param.u32 %r1, [n];\n"
    "  mov.u32 %r2, %tid.x; setp.ge.u32 %p1, %r2, %r1; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd3, %rd2; mul.wide.u32 %rd4, %r2, 16; add.s64 %rd5, %rd3, %rd4;\n"
    "  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5];\n"
    "  tex.2d.v4.f32.f32 {%f5, %f6, %f7, %f8}, [tr, {%f1, %f2}];\n"
    "  cvta.to.global.u64 %rd6, %rd1; add.s64 %rd7, %rd6, %rd4; st.global.v4.f32 [%rd7], {%f5, %f6, %f7, %f8};\n"
    "DONE:\n  ret;\n}\n";

#define N 32

int main(void) {
  test_init();
  drv_primary_context(NULL);
  CUmodule mod;
  CU(cuModuleLoadData(&mod, ptx));
  CUfunction look;
  CU(cuModuleGetFunction(&look, mod, "look"));
  CUtexref tr;
  CU(cuModuleGetTexRef(&tr, mod, "tr"));

  // a 2D float array, 8 x 8, texel (x, y) = 10 * y + x
  float img[8][8];
  for (int y = 0; y < 8; y++)
    for (int x = 0; x < 8; x++) img[y][x] = (float)(10 * y + x);
  CUDA_ARRAY_DESCRIPTOR ad = {8, 8, CU_AD_FORMAT_FLOAT, 1};
  CUarray arr;
  CU(cuArrayCreate(&arr, &ad));
  CUDA_MEMCPY2D cp = {0};  // cuMemcpyHtoA takes 1D arrays only
  cp.srcMemoryType = CU_MEMORYTYPE_HOST, cp.srcHost = img, cp.srcPitch = sizeof img[0];
  cp.dstMemoryType = CU_MEMORYTYPE_ARRAY, cp.dstArray = arr;
  cp.WidthInBytes = sizeof img[0], cp.Height = 8;
  CU(cuMemcpy2D(&cp));
  CU(cuTexRefSetArray(tr, arr, CU_TRSA_OVERRIDE_FORMAT));
  CU(cuTexRefSetFilterMode(tr, CU_TR_FILTER_MODE_POINT));

  printf("default unit: %s\n", cu_name(cuParamSetTexRef(look, CU_PARAM_TR_DEFAULT, tr)));
  printf("unit 0: %s\n", cu_name(cuParamSetTexRef(look, 0, tr)));
  printf("null reference: %s\n", cu_name(cuParamSetTexRef(look, CU_PARAM_TR_DEFAULT, NULL)));
  CU(cuParamSetTexRef(look, CU_PARAM_TR_DEFAULT, tr));

  float c[N][4], out[N][4];
  for (int i = 0; i < N; i++) c[i][0] = (float)(i % 8) + 0.5f, c[i][1] = (float)(i / 4) + 0.5f, c[i][2] = c[i][3] = 0;
  CUdeviceptr d_out, d_coords;
  CU(cuMemAlloc(&d_out, sizeof out));
  CU(cuMemAlloc(&d_coords, sizeof c));
  CU(cuMemcpyHtoD(d_coords, c, sizeof c));
  unsigned n = N;
  CU(cuFuncSetBlockShape(look, N, 1, 1));
  CU(cuParamSetSize(look, 20));
  CU(cuParamSetv(look, 0, &d_out, 8));
  CU(cuParamSetv(look, 8, &d_coords, 8));
  CU(cuParamSeti(look, 16, n));
  CU(cuLaunchGrid(look, 1, 1));
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(out, d_out, sizeof out));
  printf("old launch through the reference: fnv=%016llx texel(3,2)=%.1f\n", (unsigned long long)fnv1a(out, sizeof out),
         out[11][0]);
  EXPECT(out[11][0] == 23.0f, "texel (3, 2) read %g", out[11][0]);
  CU(cuMemFree(d_out));
  CU(cuMemFree(d_coords));
  CU(cuArrayDestroy(arr));
  CU(cuModuleUnload(mod));
  return test_finish();
}
