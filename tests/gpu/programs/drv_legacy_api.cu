// Driver API, the old and rarely used surface: the pre-3.2 (32-bit) entry
// points in a legacy context, the pre-CUDA-4 launch API, stream
// attributes, run-time linking of two PTX inputs, SYNC_MEMOPS and
// cuMemRangeGetAttributes. The 32-bit forms are reached by their exported
// names (dlsym), as a binary built against CUDA 2.x headers reaches them.
// BUILD: -lcuda -ldl -Xcompiler -Wno-deprecated-declarations
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>
#include "common.h"

static void *libcuda;
template <typename F> static F sym(const char *name) {
  void *p = dlsym(libcuda, name);
  if (!p) { printf("FAIL: no export %s\n", name); exit(1); }
  return (F)p;
}

typedef unsigned int dptr32;
// cuda.h declares the pre-3.2 layouts only for the driver's own build
// (__CUDA_API_VERSION_INTERNAL): the same fields, 32 bits wide.
struct CUDA_MEMCPY2D_v1 {
  unsigned srcXInBytes, srcY;
  CUmemorytype srcMemoryType;
  const void *srcHost;
  dptr32 srcDevice;
  CUarray srcArray;
  unsigned srcPitch;
  unsigned dstXInBytes, dstY;
  CUmemorytype dstMemoryType;
  void *dstHost;
  dptr32 dstDevice;
  CUarray dstArray;
  unsigned dstPitch;
  unsigned WidthInBytes, Height;
};
struct CUDA_MEMCPY3D_v1 {
  unsigned srcXInBytes, srcY, srcZ, srcLOD;
  CUmemorytype srcMemoryType;
  const void *srcHost;
  dptr32 srcDevice;
  CUarray srcArray;
  void *reserved0;
  unsigned srcPitch, srcHeight;
  unsigned dstXInBytes, dstY, dstZ, dstLOD;
  CUmemorytype dstMemoryType;
  void *dstHost;
  dptr32 dstDevice;
  CUarray dstArray;
  void *reserved1;
  unsigned dstPitch, dstHeight;
  unsigned WidthInBytes, Height, Depth;
};
static const char *module_ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .global .align 4 .u32 g_word = 1234;\n"
    // k(out, a, b, v[16]): out <- a, b, v[0], v[3], ntid.x, ntid.y, nctaid.x, nctaid.y, dynamic smem
    ".visible .entry k(.param .u64 out, .param .u32 a, .param .f32 b, .param .align 8 .b8 v[16]){\n"
    ".reg .b32 %r<9>; .reg .b64 %rd<2>; .reg .f32 %f<2>;\n"
    "ld.param.u64 %rd1,[out]; cvta.to.global.u64 %rd1,%rd1; ld.param.u32 %r1,[a]; ld.param.f32 %f1,[b];\n"
    "ld.param.u32 %r2,[v]; ld.param.u32 %r3,[v+12];\n"
    "mov.u32 %r4, %ntid.x; mov.u32 %r5, %ntid.y; mov.u32 %r6, %nctaid.x; mov.u32 %r7, %nctaid.y;\n"
    "mov.u32 %r8, %dynamic_smem_size;\n"
    "st.global.u32 [%rd1], %r1; st.global.f32 [%rd1+4], %f1; st.global.u32 [%rd1+8], %r2;\n"
    "st.global.u32 [%rd1+12], %r3; st.global.u32 [%rd1+16], %r4; st.global.u32 [%rd1+20], %r5;\n"
    "st.global.u32 [%rd1+24], %r6; st.global.u32 [%rd1+28], %r7; st.global.u32 [%rd1+32], %r8; ret;}\n";

// Two inputs for cuLink*: k2 calls twice(), defined in the second.
static const char *link_a =
    ".version 7.0\n.target sm_50\n.address_size 64\n.extern .func (.param .b32 r) twice(.param .b32 x);\n"
    ".visible .entry k2(.param .u64 p){.reg .b32 %r<3>; .reg .b64 %rd<2>; ld.param.u64 %rd1,[p]; mov.b32 %r1, 21;\n"
    "{ .param .b32 a0; st.param.b32 [a0], %r1; .param .b32 r0; call.uni (r0), twice, (a0); ld.param.b32 %r2, [r0]; }\n"
    "cvta.to.global.u64 %rd1, %rd1; st.global.u32 [%rd1], %r2; ret;}\n";
static const char *link_b =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .func (.param .b32 r) twice(.param .b32 x){.reg .b32 %r<3>; ld.param.b32 %r1,[x];"
    " add.s32 %r2,%r1,%r1; st.param.b32 [r],%r2; ret;}\n";

static void legacy_abi(void) {
  auto ctx_create1 = sym<CUresult (*)(CUcontext *, unsigned, CUdevice)>("cuCtxCreate");
  auto alloc1 = sym<CUresult (*)(dptr32 *, unsigned)>("cuMemAlloc");
  auto free1 = sym<CUresult (*)(dptr32)>("cuMemFree");
  auto htod1 = sym<CUresult (*)(dptr32, const void *, unsigned)>("cuMemcpyHtoD");
  auto dtoh1 = sym<CUresult (*)(void *, dptr32, unsigned)>("cuMemcpyDtoH");
  auto dtod1 = sym<CUresult (*)(dptr32, dptr32, unsigned)>("cuMemcpyDtoD");
  auto htod1a = sym<CUresult (*)(dptr32, const void *, unsigned, CUstream)>("cuMemcpyHtoDAsync");
  auto dtoh1a = sym<CUresult (*)(void *, dptr32, unsigned, CUstream)>("cuMemcpyDtoHAsync");
  auto copy2d1 = sym<CUresult (*)(const CUDA_MEMCPY2D_v1 *)>("cuMemcpy2D");
  auto copy3d1 = sym<CUresult (*)(const CUDA_MEMCPY3D_v1 *)>("cuMemcpy3D");
  auto getglobal1 = sym<CUresult (*)(dptr32 *, unsigned *, CUmodule, const char *)>("cuModuleGetGlobal");
  auto allochost1 = sym<CUresult (*)(void **, unsigned)>("cuMemAllocHost");
  auto hostdev1 = sym<CUresult (*)(dptr32 *, void *, unsigned)>("cuMemHostGetDevicePointer");

  char buf[64];
  dptr32 d32 = 0;
  printf("no context: cuMemcpyHtoD -> %d, cuMemAlloc -> %d\n", (int)htod1(0x1000, buf, 16),
         (int)alloc1(&d32, 64));
  // Driver 580 makes a legacy context only while the device has no other
  // context (the primary one included): first, then.
  CUcontext legacy;
  CU(ctx_create1(&legacy, 0, 0));
  dptr32 a = 0, b = 0;
  CU(alloc1(&a, 4096));
  CU(alloc1(&b, 4096));
  printf("legacy allocations nonzero: %d\n", a != 0 && b != 0);
  unsigned char src[4096], dst[4096];
  for (int i = 0; i < 4096; i++) src[i] = (unsigned char)(i * 7 + 3);
  CU(htod1(a, src, sizeof src));
  CU(dtod1(b, a, sizeof src));
  memset(dst, 0, sizeof dst);
  CU(dtoh1(dst, b, sizeof dst));
  printf("v1 round trip equal: %d\n", memcmp(src, dst, sizeof src) == 0);
  CUstream st;
  CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CU(htod1a(a + 8, src + 100, 500, st));
  memset(dst, 0, sizeof dst);
  CU(dtoh1a(dst, a + 8, 500, st));
  CU(cuStreamSynchronize(st));
  printf("v1 async round trip equal: %d\n", memcmp(src + 100, dst, 500) == 0);
  CU(cuStreamDestroy(st));

  unsigned char host2d[40 * 5], back2d[24 * 5];
  for (int i = 0; i < (int)sizeof host2d; i++) host2d[i] = (unsigned char)(i ^ 0x5a);
  CUDA_MEMCPY2D_v1 up = {};
  up.srcMemoryType = CU_MEMORYTYPE_HOST; up.srcHost = host2d; up.srcPitch = 40;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE; up.dstDevice = a; up.dstPitch = 32; up.dstXInBytes = 4; up.dstY = 1;
  up.WidthInBytes = 24; up.Height = 5;
  CU(copy2d1(&up));
  CUDA_MEMCPY2D_v1 down = {};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE; down.srcDevice = a; down.srcPitch = 32; down.srcXInBytes = 4;
  down.srcY = 1; down.dstMemoryType = CU_MEMORYTYPE_HOST; down.dstHost = back2d; down.dstPitch = 24;
  down.WidthInBytes = 24; down.Height = 5;
  CU(copy2d1(&down));
  int ok2d = 1;
  for (int y = 0; y < 5; y++) ok2d &= memcmp(back2d + 24 * y, host2d + 40 * y, 24) == 0;
  printf("v1 2D copy equal: %d\n", ok2d);

  unsigned char host3d[8 * 3 * 2], back3d[8 * 3 * 2];
  for (int i = 0; i < (int)sizeof host3d; i++) host3d[i] = (unsigned char)(200 - i);
  CUDA_MEMCPY3D_v1 up3 = {};
  up3.srcMemoryType = CU_MEMORYTYPE_HOST; up3.srcHost = host3d; up3.srcPitch = 8; up3.srcHeight = 3;
  up3.dstMemoryType = CU_MEMORYTYPE_DEVICE; up3.dstDevice = b; up3.dstPitch = 16; up3.dstHeight = 4; up3.dstZ = 1;
  up3.WidthInBytes = 8; up3.Height = 3; up3.Depth = 2;
  CU(copy3d1(&up3));
  CUDA_MEMCPY3D_v1 down3 = up3;
  down3.srcMemoryType = CU_MEMORYTYPE_DEVICE; down3.srcDevice = b; down3.srcPitch = 16; down3.srcHeight = 4;
  down3.srcZ = 1; down3.srcHost = NULL;
  down3.dstMemoryType = CU_MEMORYTYPE_HOST; down3.dstHost = back3d; down3.dstPitch = 8; down3.dstHeight = 3;
  down3.dstZ = 0; down3.dstDevice = 0;
  CU(copy3d1(&down3));
  printf("v1 3D copy equal: %d\n", memcmp(host3d, back3d, sizeof host3d) == 0);

  CUmodule m;
  CU(cuModuleLoadData(&m, module_ptx));
  dptr32 g = 0;
  unsigned gsize = 0;
  CU(getglobal1(&g, &gsize, m, "g_word"));
  unsigned word = 0;
  CU(dtoh1(&word, g, 4));
  printf("v1 cuModuleGetGlobal: size %u value %u\n", gsize, word);
  printf("v1 cuModuleGetGlobal missing -> %d\n", (int)getglobal1(&g, &gsize, m, "nope"));
  void *hp = NULL;
  CU(allochost1(&hp, 4096));
  dptr32 hd = 0;
  // A real legacy context maps pinned memory below 4 GiB; SCUDA mirrors it
  // at the client's own address and refuses (OUT_OF_MEMORY) when that is
  // above: not compared.
  printf("# v1 cuMemHostGetDevicePointer -> %d\n", (int)hostdev1(&hd, hp, 0));
  CU(cuMemFreeHost(hp));
  CUdeviceptr g64 = 0;
  size_t g64size = 0;
  printf("v2 forms in a legacy context: cuMemcpyHtoD_v2 -> %d, cuModuleGetGlobal_v2 -> %d\n",
         (int)cuMemcpyHtoD(a, buf, 16), (int)cuModuleGetGlobal(&g64, &g64size, m, "g_word"));
  CU(cuModuleUnload(m));
  CU(free1(a));
  CU(free1(b));
  CU(cuCtxDestroy(legacy));
  // The primary context now, which the 32-bit forms refuse.
  CUcontext primary;
  CU(cuDevicePrimaryCtxRetain(&primary, 0));
  CU(cuCtxSetCurrent(primary));
  printf("primary context: cuMemcpyHtoD -> %d, cuMemAlloc -> %d\n", (int)htod1(0x1000, buf, 16),
         (int)alloc1(&d32, 64));
}

static void old_launch(void) {
  CUmodule m;
  CU(cuModuleLoadData(&m, module_ptx));
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, "k"));
  CUdeviceptr out;
  CU(cuMemAlloc(&out, 64));
  unsigned v[4] = {11, 22, 33, 44};
  CU(cuParamSetSize(f, 32));
  CU(cuParamSetv(f, 0, &out, 8));
  CU(cuParamSeti(f, 8, 7));
  CU(cuParamSetf(f, 12, 2.5f));
  CU(cuParamSetv(f, 16, v, 16));
  unsigned res[9];
  CU(cuLaunch(f));
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(res, out, sizeof res));
  printf("cuLaunch: a %u b %.2f v0 %u v3 %u block %u,%u grid %u,%u shared %u\n", res[0], *(float *)&res[1], res[2],
         res[3], res[4], res[5], res[6], res[7], res[8]);
  CU(cuFuncSetBlockShape(f, 4, 2, 1));
  CU(cuFuncSetSharedSize(f, 128));
  CU(cuLaunchGrid(f, 3, 5));
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(res, out, sizeof res));
  printf("cuLaunchGrid: a %u b %.2f v0 %u v3 %u block %u,%u grid %u,%u shared %u\n", res[0], *(float *)&res[1],
         res[2], res[3], res[4], res[5], res[6], res[7], res[8]);
  CUstream st;
  CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CU(cuParamSeti(f, 8, 9));
  CU(cuLaunchGridAsync(f, 2, 1, st));
  CU(cuStreamSynchronize(st));
  CU(cuMemcpyDtoH(res, out, sizeof res));
  printf("cuLaunchGridAsync: a %u grid %u,%u\n", res[0], res[6], res[7]);
  CU(cuStreamDestroy(st));
  CU(cuParamSetSize(f, 8));  // fewer bytes than the kernel reads: zeros past them
  CU(cuLaunch(f));
  CU(cuCtxSynchronize());
  CU(cuMemcpyDtoH(res, out, sizeof res));
  printf("short parameters: a %u v0 %u\n", res[0], res[2]);
  CU(cuParamSetSize(f, 40));
  printf("too many parameter bytes -> %d\n", (int)cuLaunch(f));
  printf("block shape 0 -> %d, 2048 -> %d; shared 1<<30 -> %d; grid 0 -> %d; no function -> %d\n",
         (int)cuFuncSetBlockShape(f, 0, 1, 1), (int)cuFuncSetBlockShape(f, 2048, 1, 1),
         (int)cuFuncSetSharedSize(f, 1u << 30), (int)cuLaunchGrid(f, 0, 1), (int)cuLaunch(NULL));
  CU(cuMemFree(out));
  CU(cuModuleUnload(m));
}

static void stream_attributes(void) {
  CUstream st;
  CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  CUdeviceptr mem;
  CU(cuMemAlloc(&mem, 1 << 20));
  CUstreamAttrValue v, got;
  memset(&v, 0, sizeof v);
  v.accessPolicyWindow.base_ptr = (void *)(uintptr_t)mem;
  v.accessPolicyWindow.num_bytes = 4096;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
  memset(&got, 0, sizeof got);
  CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
  printf("access policy window: same base %d bytes %zu hit %.3f props %d %d\n",
         got.accessPolicyWindow.base_ptr == (void *)(uintptr_t)mem, got.accessPolicyWindow.num_bytes,
         got.accessPolicyWindow.hitRatio, (int)got.accessPolicyWindow.hitProp, (int)got.accessPolicyWindow.missProp);
  memset(&v, 0, sizeof v);
  v.syncPolicy = CU_SYNC_POLICY_YIELD;
  CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
  CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
  printf("sync policy %d\n", (int)got.syncPolicy);
  memset(&v, 0, sizeof v);
  v.priority = -1;
  CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
  CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got));
  printf("priority %d\n", got.priority);
  memset(&v, 0, sizeof v);
  v.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE;
  CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &v));
  CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, &got));
  printf("mem sync domain %d\n", (int)got.memSyncDomain);
  memset(&v, 0, sizeof v);
  v.memSyncDomainMap.default_ = 1;
  v.memSyncDomainMap.remote = 0;
  CU(cuStreamSetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &v));
  CU(cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &got));
  printf("mem sync domain map %d %d\n", got.memSyncDomainMap.default_, got.memSyncDomainMap.remote);
  printf("cooperative on a stream -> %d, id 999 -> %d\n",
         (int)cuStreamGetAttribute(st, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &got),
         (int)cuStreamSetAttribute(st, (CUstreamAttrID)999, &v));
  CU(cuMemFree(mem));
  CU(cuStreamDestroy(st));
}

static void run_time_linking(void) {
  char info[2048] = {0}, err[2048] = {0};
  CUjit_option o[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                      CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[] = {info, (void *)(uintptr_t)sizeof info, err, (void *)(uintptr_t)sizeof err};
  CUlinkState ls;
  CU(cuLinkCreate(4, o, vals, &ls));
  CU(cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)link_a, strlen(link_a) + 1, "a.ptx", 0, NULL, NULL));
  char path[64];  // a name of this process's: runs may overlap
  snprintf(path, sizeof path, "/tmp/scuda_gpu_link_b.%d.ptx", (int)getpid());
  FILE *f = fopen(path, "w");
  if (!f || fputs(link_b, f) < 0 || fclose(f) != 0) { printf("FAIL: writing %s\n", path); exit(1); }
  CU(cuLinkAddFile(ls, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
  remove(path);
  printf("bad input -> %d, error log non-empty %d\n",
         (int)cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)"junk", 5, "junk.ptx", 0, NULL, NULL), err[0] != 0);
  printf("missing file -> %d\n", (int)cuLinkAddFile(ls, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, NULL, NULL));
  void *cubin = NULL;
  size_t size = 0;
  CU(cuLinkComplete(ls, &cubin, &size));
  printf("# linked image %zu bytes\n", size);
  CUmodule m;
  CU(cuModuleLoadData(&m, cubin));
  CUfunction k;
  CU(cuModuleGetFunction(&k, m, "k2"));
  CUdeviceptr out;
  CU(cuMemAlloc(&out, 4));
  void *args[] = {&out};
  CU(cuLaunchKernel(k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  int r = 0;
  CU(cuMemcpyDtoH(&r, out, 4));
  printf("linked kernel result %d\n", r);
  printf("second complete -> %d\n", (int)cuLinkComplete(ls, &cubin, &size));
  CU(cuMemFree(out));
  CU(cuModuleUnload(m));
  CU(cuLinkDestroy(ls));
  CUlinkState ls2;
  CU(cuLinkCreate(0, NULL, NULL, &ls2));
  CU(cuLinkAddData(ls2, CU_JIT_INPUT_PTX, (void *)link_a, strlen(link_a) + 1, "a.ptx", 0, NULL, NULL));
  printf("unresolved -> %d\n", (int)cuLinkComplete(ls2, &cubin, &size));
  CU(cuLinkDestroy(ls2));
}

static void single_calls(void) {
  CUdeviceptr p;
  CU(cuMemAlloc(&p, 4096));
  unsigned one = 1, got = 0;
  CU(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  CU(cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  printf("sync memops %u; context attribute -> %d\n", got & 0xff,
         (int)cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  CU(cuMemFree(p));
  CUdeviceptr m;
  size_t n = 2 << 20;
  CU(cuMemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL));
  CUmemLocation dev0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0}, host = {CU_MEM_LOCATION_TYPE_HOST, 0};
  CU(cuMemAdvise(m, n, CU_MEM_ADVISE_SET_READ_MOSTLY, dev0));
  CU(cuMemAdvise(m, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host));
  CU(cuMemPrefetchAsync(m, n, dev0, 0, NULL));
  CU(cuCtxSynchronize());
  int read_mostly = 9, preferred = 9, last = 9;
  void *data[] = {&read_mostly, &preferred, &last};
  size_t sizes[] = {4, 4, 4};
  CUmem_range_attribute attrs[] = {CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                   CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION};
  CU(cuMemRangeGetAttributes(data, sizes, attrs, 3, m, n));
  printf("range attributes: read mostly %d preferred %d last prefetch %d\n", read_mostly, preferred, last);
  CU(cuMemFree(m));
}

int main(void) {
  test_init();
  libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!libcuda) { printf("FAIL: libcuda.so.1 is not loaded\n"); return 1; }
  CU(cuInit(0));
  legacy_abi();
  old_launch();
  stream_attributes();
  run_time_linking();
  single_calls();
  return test_finish();
}
