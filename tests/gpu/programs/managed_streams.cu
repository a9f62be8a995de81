// Managed memory with 4 streams: each host thread owns a buffer attached to
// its own stream (cudaStreamAttachMemAsync, single), runs kernels on it and
// checks the results on the host after synchronizing only its stream,
// while the other threads do the same.
// BUILD: -lpthread
#include <pthread.h>
#include "common.h"

#define NSTREAMS 4
#define N (1 << 16)
#define ROUNDS 25

__global__ void scale_add(int *x, int n, int mul, int add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * mul + add;
}

static int bad[NSTREAMS];

static void *task(void *arg) {
  int t = (int)(intptr_t)arg;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *x;
  CK(cudaMallocManaged(&x, N * sizeof(int), cudaMemAttachHost));
  CK(cudaStreamAttachMemAsync(s, x, 0, cudaMemAttachSingle));
  CK(cudaStreamSynchronize(s));
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < N; i++) x[i] = i + t + r;  // host writes
    scale_add<<<N / 256, 256, 0, s>>>(x, N, 2, t);
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < N; i++) bad[t] += x[i] != 2 * (i + t + r) + t;  // host reads
  }
  CK(cudaFree(x));
  CK(cudaStreamDestroy(s));
  return NULL;
}

int main(void) {
  test_init();
  CK(cudaFree(0));
  pthread_t th[NSTREAMS];
  for (int t = 0; t < NSTREAMS; t++) pthread_create(&th[t], NULL, task, (void *)(intptr_t)t);
  for (int t = 0; t < NSTREAMS; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < NSTREAMS; t++) {
    printf("stream %d: %d wrong\n", t, bad[t]);
    EXPECT(!bad[t], "stream %d: %d wrong", t, bad[t]);
  }
  return test_finish();
}
