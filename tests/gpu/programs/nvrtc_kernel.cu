// NVRTC: compile CUDA C++ source at run time to PTX and to a cubin, load both
// with cuModuleLoadData, look up a lowered (name-expression) kernel, launch.
// NVRTC runs on the client; only the compiled image goes to the GPU.
// BUILD: -lnvrtc -lcuda -Xlinker -rpath=@CUDA_LIB@
#include <cuda.h>
#include <nvrtc.h>
#include "common.h"

#define NV(call)                                                               \
  do {                                                                         \
    nvrtcResult r_ = (call);                                                   \
    if (r_ != NVRTC_SUCCESS) {                                                 \
      printf("FAIL: %s -> %s\n", #call, nvrtcGetErrorString(r_));              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static const char *src =
    "template <typename T> __global__ void saxpy(T a, const T *x, T *y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static void run(CUmodule m, const char *lowered, const char *label) {
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, lowered));
  const int n = 4096;
  float hx[n], hy[n];
  for (int i = 0; i < n; i++) { hx[i] = (float)i; hy[i] = 1.0f; }
  CUdeviceptr x, y;
  CU(cuMemAlloc(&x, sizeof hx));
  CU(cuMemAlloc(&y, sizeof hy));
  CU(cuMemcpyHtoD(x, hx, sizeof hx));
  CU(cuMemcpyHtoD(y, hy, sizeof hy));
  float a = 2.0f;
  int nn = n;
  void *args[] = {&a, &x, &y, &nn};
  CU(cuLaunchKernel(f, n / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  CU(cuMemcpyDtoH(hy, y, sizeof hy));
  int bad = 0;
  for (int i = 0; i < n; i++) bad += hy[i] != 2.0f * i + 1.0f;
  printf("%s: saxpy %s fnv=%016llx\n", label, bad ? "MISMATCH" : "ok", (unsigned long long)fnv1a(hy, sizeof hy));
  EXPECT(!bad, "%s: %d wrong", label, bad);
  CU(cuMemFree(x)); CU(cuMemFree(y));
}

int main(void) {
  test_init();
  int major = 0, minor = 0;
  NV(nvrtcVersion(&major, &minor));
  printf("# nvrtc %d.%d\n", major, minor);
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));

  for (int cubin = 0; cubin < 2; cubin++) {
    nvrtcProgram prog;
    NV(nvrtcCreateProgram(&prog, src, "saxpy.cu", 0, NULL, NULL));
    NV(nvrtcAddNameExpression(prog, "saxpy<float>"));
    const char *opts[] = {cubin ? "-arch=sm_90" : "-arch=compute_90", "-std=c++17"};
    nvrtcResult rc = nvrtcCompileProgram(prog, 2, opts);
    size_t logn = 0;
    nvrtcGetProgramLogSize(prog, &logn);
    if (rc != NVRTC_SUCCESS) {
      char *log = (char *)malloc(logn + 1);
      nvrtcGetProgramLog(prog, log);
      printf("FAIL: compile: %s\n%s\n", nvrtcGetErrorString(rc), log);
      return 1;
    }
    const char *lowered = NULL;
    NV(nvrtcGetLoweredName(prog, "saxpy<float>", &lowered));
    printf("lowered name: %s\n", lowered);
    size_t n = 0;
    char *img;
    if (cubin) {
      NV(nvrtcGetCUBINSize(prog, &n));
      img = (char *)malloc(n);
      NV(nvrtcGetCUBIN(prog, img));
    } else {
      NV(nvrtcGetPTXSize(prog, &n));
      img = (char *)malloc(n);
      NV(nvrtcGetPTX(prog, img));
    }
    CUmodule m;
    CU(cuModuleLoadData(&m, img));
    run(m, lowered, cubin ? "nvrtc cubin" : "nvrtc ptx");
    CU(cuModuleUnload(m));
    free(img);
    NV(nvrtcDestroyProgram(&prog));
  }
  return test_finish();
}
