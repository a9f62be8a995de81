// Green contexts (driver API): split the device's SMs, make a resource
// descriptor and a green context of one group, its context and a stream
// on it; a kernel there computes the right values and runs on no more SMs
// than the group holds. Output: SM counts, checks and error names,
// compared with a native run.
// BUILD: -lcuda
#include <cuda.h>
#include "common.h"

static const int N = 1 << 20;

__global__ void triple_and_mark(int *out, int n, unsigned *sm_seen) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
  if (threadIdx.x == 0) {
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    atomicOr(&sm_seen[smid / 32], 1u << (smid % 32));
  }
}

int main() {
  test_init();
  CK(cudaFree(0));
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  CUdevResource sm = {};
  CU(cuDeviceGetDevResource(dev, &sm, CU_DEV_RESOURCE_TYPE_SM));
  printf("device SMs: %u\n", sm.sm.smCount);

  unsigned groups = 0;
  CU(cuDevSmResourceSplitByCount(NULL, &groups, &sm, NULL, 0, 16));
  printf("groups of at least 16 SMs: %u\n", groups);
  EXPECT(groups >= 1, "no group of 16 SMs");
  CUdevResource part = {}, rest = {};
  unsigned one = 1;
  CU(cuDevSmResourceSplitByCount(&part, &one, &sm, &rest, 0, 16));
  printf("split: %u group, %u SMs, %u remaining\n", one, part.sm.smCount, rest.sm.smCount);
  EXPECT(one == 1 && part.sm.smCount >= 16 && part.sm.smCount + rest.sm.smCount <= sm.sm.smCount, "bad split");

  CUdevResourceDesc desc;
  CU(cuDevResourceGenerateDesc(&desc, &part, 1));
  CUgreenCtx green;
  CU(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUdevResource got = {};
  CU(cuGreenCtxGetDevResource(green, &got, CU_DEV_RESOURCE_TYPE_SM));
  printf("green context SMs: %u (%s)\n", got.sm.smCount, got.sm.smCount == part.sm.smCount ? "as split" : "MISMATCH");
  EXPECT(got.sm.smCount == part.sm.smCount, "green context SM count");

  CUcontext ctx, again;
  CU(cuCtxFromGreenCtx(&ctx, green));
  CU(cuCtxFromGreenCtx(&again, green));
  printf("one context per green context: %s\n", ctx == again ? "yes" : "NO");
  EXPECT(ctx == again, "two contexts");
  CU(cuCtxPushCurrent(ctx));
  CUdevice cur;
  CU(cuCtxGetDevice(&cur));
  printf("its device: %s\n", cur == dev ? "the same" : "OTHER");
  CUdevResource ctx_res = {};
  CU(cuCtxGetDevResource(ctx, &ctx_res, CU_DEV_RESOURCE_TYPE_SM));
  printf("current context SMs: %u\n", ctx_res.sm.smCount);

  CUstream st;
  CU(cuGreenCtxStreamCreate(&st, green, CU_STREAM_NON_BLOCKING, 0));
  CUgreenCtx owner = NULL;
  CU(cuStreamGetGreenCtx(st, &owner));
  printf("stream's green context: %s\n", owner == green ? "the same" : "OTHER");
  EXPECT(owner == green, "stream's green context");

  int *out;
  unsigned *seen;
  CK(cudaMalloc(&out, N * sizeof(int)));
  CK(cudaMalloc(&seen, 64 * sizeof(unsigned)));
  CK(cudaMemsetAsync(seen, 0, 64 * sizeof(unsigned), (cudaStream_t)st));
  triple_and_mark<<<4096, 256, 0, (cudaStream_t)st>>>(out, N, seen);
  CK(cudaGetLastError());
  CU(cuStreamSynchronize(st));
  int *h = (int *)malloc(N * sizeof(int));
  unsigned hs[64];
  CK(cudaMemcpy(h, out, N * sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hs, seen, sizeof hs, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += h[i] != 3 * i + 1;
  unsigned used = 0;
  for (int i = 0; i < 64; i++) used += __builtin_popcount(hs[i]);
  printf("kernel on the green stream: %s, SMs used within the group: %s\n", bad ? "WRONG" : "ok",
         used >= 1 && used <= part.sm.smCount ? "yes" : "NO");
  EXPECT(!bad && used >= 1 && used <= part.sm.smCount, "kernel: %d wrong, %u SMs used of %u", bad, used,
         part.sm.smCount);

  CK(cudaFree(out));
  CK(cudaFree(seen));
  CU(cuStreamDestroy(st));
  CU(cuCtxPopCurrent(NULL));
  CU(cuGreenCtxDestroy(green));
  CUresult r = cuGreenCtxCreate(&green, desc, 1 << 20, 0);
  const char *name = "?";
  cuGetErrorName(r, &name);
  printf("green context on no device: %s\n", name);
  free(h);
  return test_finish();
}
