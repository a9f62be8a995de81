// Texture references, the legacy API older samples use: CUDA 12 removed
// them from the runtime, so this is a driver-API program with its own PTX
// (a module-scope .texref). It binds an array, linear and pitched memory
// and a mipmapped array in turn, sets every sampling state, reads each
// back, and prints a checksum of what the kernel read.
// BUILD: -lcuda
#define CUDA_ENABLE_DEPRECATED  // texture references are deprecated, and what this tests
#include <cuda.h>
#include "common.h"

static const char *ptx =
    ".version 7.0\n.target sm_52\n.address_size 64\n"
    ".global .texref tr;\n"
    ".global .surfref sr;\n"
    ".visible .entry look(.param .u64 out, .param .u64 coords, .param .u32 n, .param .u32 fetch)\n{\n"
    "  .reg .pred %p<3>; .reg .b32 %r<8>; .reg .f32 %f<9>; .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [coords]; ld.param.u32 %r1, [n]; ld.param.u32 %r7, [fetch];\n"
    "  mov.u32 %r2, %tid.x; setp.ge.u32 %p1, %r2, %r1; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd3, %rd2; mul.wide.u32 %rd4, %r2, 16; add.s64 %rd5, %rd3, %rd4;\n"
    "  ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd5];\n"
    "  setp.ne.u32 %p2, %r7, 0; @%p2 bra FETCH;\n"
    "  tex.2d.v4.f32.f32 {%f5, %f6, %f7, %f8}, [tr, {%f1, %f2}]; bra.uni STORE;\n"
    "FETCH:\n"
    "  cvt.rzi.s32.f32 %r3, %f1; tex.1d.v4.f32.s32 {%f5, %f6, %f7, %f8}, [tr, {%r3}];\n"
    "STORE:\n"
    "  cvta.to.global.u64 %rd6, %rd1; add.s64 %rd7, %rd6, %rd4; st.global.v4.f32 [%rd7], {%f5, %f6, %f7, %f8};\n"
    "DONE:\n  ret;\n}\n";

#define N 64
static CUfunction look;
static CUdeviceptr d_out, d_coords;

// host rows of w bytes into device memory (dev) or an array (arr)
static void copy_in(const void *src, size_t w, size_t h, CUdeviceptr dev, size_t pitch, CUarray arr) {
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof c);
  c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = src, c.srcPitch = w;
  if (arr) c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = arr;
  else c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dev, c.dstPitch = pitch;
  c.WidthInBytes = w, c.Height = h;
  CU(cuMemcpy2D(&c));
}

static void run(const char *what, int fetch) {
  float c[N][4], out[N][4];
  for (int i = 0; i < N; i++) {
    c[i][0] = fetch ? (float)(i * 3 - 20) : (i - 8) / 40.0f * 1.3f;
    c[i][1] = 0.9f - (i % 9) * 0.11f, c[i][2] = c[i][3] = 0;
  }
  CU(cuMemcpyHtoD(d_coords, c, sizeof c));
  unsigned n = N, f = fetch;
  void *args[] = {&d_out, &d_coords, &n, &f};
  CU(cuLaunchKernel(look, 1, 1, 1, N, 1, 1, 0, NULL, args, NULL));
  CU(cuMemcpyDtoH(out, d_out, sizeof out));
  printf("%-36s fnv=%016llx mid=%.6f\n", what, (unsigned long long)fnv1a(out, sizeof out), out[N / 2][0]);
}

int main(void) {
  test_init();
  drv_primary_context(NULL);
  CUmodule mod;
  CU(cuModuleLoadData(&mod, ptx));
  CU(cuModuleGetFunction(&look, mod, "look"));
  CU(cuMemAlloc(&d_out, N * 16));
  CU(cuMemAlloc(&d_coords, N * 16));
  CUtexref tr, tr2;
  CU(cuModuleGetTexRef(&tr, mod, "tr"));
  CU(cuModuleGetTexRef(&tr2, mod, "tr"));
  EXPECT(tr == tr2, "one reference per name");
  printf("unknown reference: %d\n", (int)cuModuleGetTexRef(&tr2, mod, "nope"));

  // a 2D float4 array, 24 x 12
  const int W = 24, H = 12;
  float img[H][W][4];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) img[y][x][0] = x, img[y][x][1] = y, img[y][x][2] = x * y, img[y][x][3] = 1;
  CUDA_ARRAY_DESCRIPTOR ad = {W, H, CU_AD_FORMAT_FLOAT, 4};
  CUarray arr;
  CU(cuArrayCreate(&arr, &ad));
  copy_in(img, W * 16, H, 0, 0, arr);
  CU(cuTexRefSetArray(tr, arr, CU_TRSA_OVERRIDE_FORMAT));
  CUarray got;
  CU(cuTexRefGetArray(&got, tr));
  EXPECT(got == arr, "cuTexRefGetArray");
  float border[4] = {0.5f, 0.25f, 0.125f, 1};
  CU(cuTexRefSetBorderColor(tr, border));
  const char *am_name[] = {"wrap", "clamp", "mirror", "border"};
  for (int am = 0; am < 4; am++)
    for (int fm = 0; fm < 2; fm++) {
      CU(cuTexRefSetAddressMode(tr, 0, (CUaddress_mode)am));
      CU(cuTexRefSetAddressMode(tr, 1, (CUaddress_mode)am));
      CU(cuTexRefSetFilterMode(tr, (CUfilter_mode)fm));
      CU(cuTexRefSetFlags(tr, CU_TRSF_NORMALIZED_COORDINATES));
      CUaddress_mode ga;
      CUfilter_mode gf;
      unsigned gfl;
      CU(cuTexRefGetAddressMode(&ga, tr, 1));
      CU(cuTexRefGetFilterMode(&gf, tr));
      CU(cuTexRefGetFlags(&gfl, tr));
      EXPECT(ga == am && gf == fm && gfl == CU_TRSF_NORMALIZED_COORDINATES, "texref state");
      char what[64];
      snprintf(what, sizeof what, "texref array %s %s", am_name[am], fm ? "linear" : "point");
      run(what, 0);
    }
  float bc[4];
  CU(cuTexRefGetBorderColor(bc, tr));
  printf("border color: %g %g %g %g\n", bc[0], bc[1], bc[2], bc[3]);
  CU(cuTexRefSetMaxAnisotropy(tr, 4));
  int an;
  CU(cuTexRefGetMaxAnisotropy(&an, tr));
  printf("max anisotropy: %d\n", an);

  // linear memory (tex1Dfetch) and pitched memory
  CUdeviceptr lin;
  CU(cuMemAlloc(&lin, sizeof img));
  CU(cuMemcpyHtoD(lin, img, sizeof img));
  CU(cuTexRefSetFormat(tr, CU_AD_FORMAT_FLOAT, 4));
  CU(cuTexRefSetFlags(tr, 0));
  size_t off = 99;
  CU(cuTexRefSetAddress(&off, tr, lin, sizeof img));
  CUdeviceptr ga;
  CU(cuTexRefGetAddress(&ga, tr));
  EXPECT(ga == lin, "cuTexRefGetAddress");
  printf("byte offset: %zu\n", off);
  run("texref linear fetch", 1);
  CUarray_format fmt;
  int ch;
  CU(cuTexRefGetFormat(&fmt, &ch, tr));
  printf("format %d x%d\n", (int)fmt, ch);
  size_t pitch;
  CUdeviceptr pm;
  CU(cuMemAllocPitch(&pm, &pitch, W * 16, H, 16));
  copy_in(img, W * 16, H, pm, pitch, NULL);
  CU(cuTexRefSetAddress2D(tr, &ad, pm, pitch));
  CU(cuTexRefSetFlags(tr, CU_TRSF_NORMALIZED_COORDINATES));
  CU(cuTexRefSetFilterMode(tr, CU_TR_FILTER_MODE_LINEAR));
  run("texref pitch2D linear", 0);

  // a mipmapped array: level l is filled with l
  CUDA_ARRAY3D_DESCRIPTOR md = {16, 16, 0, CU_AD_FORMAT_FLOAT, 4, 0};
  CUmipmappedArray mm;
  CU(cuMipmappedArrayCreate(&mm, &md, 5));
  for (unsigned l = 0; l < 5; l++) {
    CUarray lv;
    CU(cuMipmappedArrayGetLevel(&lv, mm, l));
    size_t w = 16 >> l;
    static float fill[16 * 16 * 4];
    for (size_t i = 0; i < w * w * 4; i++) fill[i] = (float)l + (float)(i % 7) / 8;
    copy_in(fill, w * 16, w, 0, 0, lv);
  }
  CU(cuTexRefSetMipmappedArray(tr, mm, CU_TRSA_OVERRIDE_FORMAT));
  CUmipmappedArray gm;
  CU(cuTexRefGetMipmappedArray(&gm, tr));
  EXPECT(gm == mm, "cuTexRefGetMipmappedArray");
  CU(cuTexRefSetMipmapFilterMode(tr, CU_TR_FILTER_MODE_LINEAR));
  CU(cuTexRefSetMipmapLevelBias(tr, 1.5f));
  CU(cuTexRefSetMipmapLevelClamp(tr, 0.0f, 3.0f));
  float bias, lo, hi;
  CUfilter_mode mf;
  CU(cuTexRefGetMipmapLevelBias(&bias, tr));
  CU(cuTexRefGetMipmapLevelClamp(&lo, &hi, tr));
  CU(cuTexRefGetMipmapFilterMode(&mf, tr));
  printf("mipmap: bias %g clamp %g..%g filter %d\n", bias, lo, hi, (int)mf);
  run("texref mipmapped (bias 1.5)", 0);

  // surface reference: bind and read back
  CUsurfref sr;
  CU(cuModuleGetSurfRef(&sr, mod, "sr"));
  CUDA_ARRAY3D_DESCRIPTOR sd = {W, H, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SURFACE_LDST};
  CUarray sa;
  CU(cuArray3DCreate(&sa, &sd));
  CU(cuSurfRefSetArray(sr, sa, 0));
  CU(cuSurfRefGetArray(&got, sr));
  EXPECT(got == sa, "cuSurfRefGetArray");

  // a texture reference of its own
  CUtexref own;
  CU(cuTexRefCreate(&own));
  CU(cuTexRefSetFormat(own, CU_AD_FORMAT_UNSIGNED_INT8, 2));
  CU(cuTexRefGetFormat(&fmt, &ch, own));
  printf("created reference: format %d x%d\n", (int)fmt, ch);
  CU(cuTexRefDestroy(own));

  CU(cuArrayDestroy(sa));
  CU(cuMipmappedArrayDestroy(mm));
  CU(cuMemFree(pm));
  CU(cuMemFree(lin));
  CU(cuArrayDestroy(arr));
  CU(cuModuleUnload(mod));
  return test_finish();
}
