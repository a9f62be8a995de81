// Four host threads, one stream each. Thread 0 launches a ~1 s spin kernel and
// blocks in cudaStreamSynchronize. Thread 1 meanwhile completes 1000 small
// H2D+D2H round trips on its own non-blocking stream, and must finish BEFORE
// the spin kernel does: a blocked thread must not stall the others (a shim
// that serializes calls fails here). Threads 2 and 3 run small kernels.
//
// Setup happens in main, outside the timed window: allocations, frees, stream
// creation, and one warm-up launch of every kernel. The warm-up matters: with
// lazy loading (CUDA's default since 12.2) the first launch of a kernel loads
// it, which may synchronize the context, i.e. wait for the spin kernel, and
// natively on H200 that stalled every thread's copies until the spin ended.
// Allocations and frees can synchronize the device too.
// BUILD: -lpthread
#include <pthread.h>
#include "common.h"

#define SPIN_NS 1000000000ull
#define N 4096

static pthread_barrier_t started;  // threads 1-3 start once the spin kernel is launched
static double t_launch, t_spin_done, t_copies_done;
static int copies_ok, workers_ok[4];
static cudaStream_t streams[4];
static int *dcopy, *hin, *hout;   // thread 1
static int *dwork[4], *hwork[4];  // threads 2, 3

__global__ void inc(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

static void *spinner(void *arg) {
  (void)arg;
  t_launch = now_s();
  spin_kernel<<<1, 1, 0, streams[0]>>>(SPIN_NS, NULL);
  CK(cudaGetLastError());
  pthread_barrier_wait(&started);
  CK(cudaStreamSynchronize(streams[0]));  // blocks ~1 s
  t_spin_done = now_s();
  return NULL;
}

static void *copier(void *arg) {
  (void)arg;
  cudaStream_t s = streams[1];
  pthread_barrier_wait(&started);
  int bad = 0;
  for (int i = 0; i < 1000; i++) {
    for (int k = 0; k < 64; k++) hin[k] = i * 64 + k;
    CK(cudaMemcpyAsync(dcopy, hin, 256, cudaMemcpyHostToDevice, s));
    CK(cudaMemcpyAsync(hout, dcopy, 256, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    bad += memcmp(hin, hout, 256) != 0;
  }
  t_copies_done = now_s();
  copies_ok = bad == 0;
  return NULL;
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  cudaStream_t s = streams[id];
  pthread_barrier_wait(&started);
  CK(cudaMemsetAsync(dwork[id], 0, N * sizeof(int), s));
  for (int k = 0; k < 50; k++) inc<<<N / 256, 256, 0, s>>>(dwork[id], N);
  CK(cudaMemcpyAsync(hwork[id], dwork[id], N * sizeof(int), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hwork[id][i] != 50;
  workers_ok[id] = bad == 0;
  return NULL;
}

int main(void) {
  test_init();
  for (int i = 0; i < 4; i++) CK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  CK(cudaMalloc(&dcopy, 256));
  CK(cudaMallocHost(&hin, 256));
  CK(cudaMallocHost(&hout, 256));
  for (int i = 2; i < 4; i++) {
    CK(cudaMalloc(&dwork[i], N * sizeof(int)));
    CK(cudaMallocHost(&hwork[i], N * sizeof(int)));
  }
  // Warm-up: load every kernel and exercise every call the threads will make.
  spin_kernel<<<1, 1, 0, streams[0]>>>(0, NULL);
  for (int i = 2; i < 4; i++) {
    CK(cudaMemsetAsync(dwork[i], 0, N * sizeof(int), streams[i]));
    inc<<<N / 256, 256, 0, streams[i]>>>(dwork[i], N);
    CK(cudaMemcpyAsync(hwork[i], dwork[i], N * sizeof(int), cudaMemcpyDeviceToHost, streams[i]));
  }
  CK(cudaMemcpyAsync(dcopy, hin, 256, cudaMemcpyHostToDevice, streams[1]));
  CK(cudaMemcpyAsync(hout, dcopy, 256, cudaMemcpyDeviceToHost, streams[1]));
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  pthread_barrier_init(&started, NULL, 4);
  pthread_t th[4];
  pthread_create(&th[0], NULL, spinner, NULL);
  pthread_create(&th[1], NULL, copier, NULL);
  pthread_create(&th[2], NULL, worker, (void *)2);
  pthread_create(&th[3], NULL, worker, (void *)3);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  printf("# spin kernel: %.3f s after launch; copies done %.3f s after launch\n", t_spin_done - t_launch,
         t_copies_done - t_launch);
  printf("spin kernel lasted >= 0.9 s: %s\n", t_spin_done - t_launch >= 0.9 ? "yes" : "no");
  printf("1000 round trips correct: %s\n", copies_ok ? "yes" : "no");
  printf("workers correct: %s\n", workers_ok[2] && workers_ok[3] ? "yes" : "no");
  int conc = t_copies_done < t_spin_done;
  printf("%s\n", conc ? "concurrency ok" : "concurrency FAILED: copies waited for the blocked thread");
  EXPECT(t_spin_done - t_launch >= 0.9, "spin too short");
  EXPECT(copies_ok && workers_ok[2] && workers_ok[3], "wrong data");
  EXPECT(conc, "no concurrency");
  for (int i = 0; i < 4; i++) CK(cudaStreamDestroy(streams[i]));
  CK(cudaFree(dcopy)); CK(cudaFreeHost(hin)); CK(cudaFreeHost(hout));
  for (int i = 2; i < 4; i++) { CK(cudaFree(dwork[i])); CK(cudaFreeHost(hwork[i])); }
  return test_finish();
}
