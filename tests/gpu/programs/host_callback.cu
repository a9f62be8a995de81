// Host functions in stream order: cudaLaunchHostFunc and cudaStreamAddCallback
// run after the work before them (a D2H copy's data is visible) and before
// the work after them; their order is preserved.
#include "common.h"

__global__ void fill(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

#define N 4096
static int *pinned;
static int seq[16], nseq = 0, seen[16];

static void CUDART_CB host_fn(void *arg) {
  int k = (int)(intptr_t)arg;
  seq[nseq] = k;
  seen[nseq] = pinned[N - 1];  // the copy queued before us must be complete
  nseq++;
}

static void CUDART_CB old_cb(cudaStream_t s, cudaError_t status, void *arg) {
  (void)s;
  int k = (int)(intptr_t)arg;
  seq[nseq] = k;
  seen[nseq] = status == cudaSuccess ? pinned[N - 1] : -1;
  nseq++;
}

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int *d;
  CK(cudaMalloc(&d, N * sizeof(int)));
  CK(cudaMallocHost(&pinned, N * sizeof(int)));
  memset(pinned, 0, N * sizeof(int));
  for (int k = 1; k <= 6; k++) {
    fill<<<N / 256, 256, 0, s>>>(d, k * 10, N);
    CK(cudaMemcpyAsync(pinned, d, N * sizeof(int), cudaMemcpyDeviceToHost, s));
    if (k % 2) CK(cudaLaunchHostFunc(s, host_fn, (void *)(intptr_t)k));
    else CK(cudaStreamAddCallback(s, old_cb, (void *)(intptr_t)k, 0));
  }
  CK(cudaStreamSynchronize(s));
  printf("callbacks run: %d\n", nseq);
  int ok = nseq == 6;
  for (int i = 0; i < nseq; i++) {
    printf("callback %d: id=%d saw=%d\n", i, seq[i], seen[i]);
    ok = ok && seq[i] == i + 1 && seen[i] == (i + 1) * 10;
  }
  EXPECT(ok, "callback order or data");
  CK(cudaFree(d)); CK(cudaFreeHost(pinned));
  CK(cudaStreamDestroy(s));
  return test_finish();
}
