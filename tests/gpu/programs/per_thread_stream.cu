// Built with --default-stream per-thread: stream 0 means each host thread's
// own stream (cudaStreamPerThread), which does not wait for other threads'
// work. Thread A keeps its per-thread stream busy with a 500 ms spin; thread B
// does a kernel + copy on its own default stream and must finish first.
// Allocations and a warm-up launch of both kernels happen in main, and both
// per-thread streams exist before the spin starts: with lazy loading (CUDA's
// default) a kernel's first launch may synchronize the context, which natively
// on H200 made thread B wait for A's spin. Allocations can synchronize too.
// BUILD: --default-stream per-thread -lpthread
#include <pthread.h>
#include "common.h"

#define N 1024

__global__ void fill(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

static pthread_barrier_t ready, spinning;
static double t_a_done, t_b_done;
static int b_ok;
static int *dbuf, *hbuf;

static void *thread_a(void *arg) {
  (void)arg;
  CK(cudaStreamQuery(0));  // creates this thread's default stream
  pthread_barrier_wait(&ready);
  spin_kernel<<<1, 1>>>(500 * 1000 * 1000ull, NULL);  // on A's per-thread stream
  CK(cudaGetLastError());
  pthread_barrier_wait(&spinning);
  CK(cudaStreamSynchronize(0));
  t_a_done = now_s();
  return NULL;
}

static void *thread_b(void *arg) {
  (void)arg;
  CK(cudaStreamQuery(0));
  pthread_barrier_wait(&ready);
  pthread_barrier_wait(&spinning);
  fill<<<N / 256, 256>>>(dbuf, 7, N);  // B's per-thread stream
  CK(cudaMemcpyAsync(hbuf, dbuf, N * sizeof(int), cudaMemcpyDeviceToHost, 0));
  CK(cudaStreamSynchronize(0));
  t_b_done = now_s();
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hbuf[i] != 7;
  b_ok = !bad;
  return NULL;
}

int main(void) {
  test_init();
  CK(cudaMalloc(&dbuf, N * sizeof(int)));
  CK(cudaMallocHost(&hbuf, N * sizeof(int)));
  spin_kernel<<<1, 1>>>(0, NULL);  // warm-up: load both kernels now
  fill<<<N / 256, 256>>>(dbuf, 0, N);
  CK(cudaMemcpyAsync(hbuf, dbuf, N * sizeof(int), cudaMemcpyDeviceToHost, 0));
  CK(cudaDeviceSynchronize());
  // In this build, stream 0 and cudaStreamPerThread are the same stream.
  printf("query stream 0: %s\n", cudaGetErrorName(cudaStreamQuery(0)));
  printf("query cudaStreamPerThread: %s\n", cudaGetErrorName(cudaStreamQuery(cudaStreamPerThread)));
  pthread_barrier_init(&ready, NULL, 2);
  pthread_barrier_init(&spinning, NULL, 2);
  pthread_t a, b;
  pthread_create(&a, NULL, thread_a, NULL);
  pthread_create(&b, NULL, thread_b, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  printf("# A done %.3f s after B\n", t_a_done - t_b_done);
  printf("thread B result: %s\n", b_ok ? "ok" : "MISMATCH");
  printf("per-thread streams independent: %s\n", t_b_done < t_a_done ? "yes" : "no");
  EXPECT(b_ok, "thread B data");
  EXPECT(t_b_done < t_a_done, "thread B waited for thread A's stream");
  CK(cudaFree(dbuf)); CK(cudaFreeHost(hbuf));
  return test_finish();
}
