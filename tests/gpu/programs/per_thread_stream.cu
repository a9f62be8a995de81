// Built with --default-stream per-thread: stream 0 means each host thread's
// own stream (cudaStreamPerThread), which does not wait for other threads'
// work. Thread A keeps its per-thread stream busy with a 500 ms spin; thread B
// does a kernel + copy on its own default stream and must finish first.
// BUILD: --default-stream per-thread -lpthread
#include <pthread.h>
#include "common.h"

__global__ void fill(int *x, int v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

static pthread_barrier_t bar;
static double t_a_done, t_b_done;
static int b_ok;

static void *thread_a(void *arg) {
  (void)arg;
  spin_kernel<<<1, 1>>>(500 * 1000 * 1000ull, NULL);  // on A's per-thread stream
  CK(cudaGetLastError());
  pthread_barrier_wait(&bar);
  CK(cudaStreamSynchronize(0));
  t_a_done = now_s();
  return NULL;
}

static void *thread_b(void *arg) {
  (void)arg;
  const int n = 1024;
  int *d, *h;
  CK(cudaMalloc(&d, n * sizeof(int)));
  CK(cudaMallocHost(&h, n * sizeof(int)));
  pthread_barrier_wait(&bar);
  fill<<<n / 256, 256>>>(d, 7, n);  // B's per-thread stream
  CK(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, 0));
  CK(cudaStreamSynchronize(0));
  t_b_done = now_s();
  int bad = 0;
  for (int i = 0; i < n; i++) bad += h[i] != 7;
  b_ok = !bad;
  CK(cudaFree(d)); CK(cudaFreeHost(h));
  return NULL;
}

int main(void) {
  test_init();
  CK(cudaFree(0));
  // In this build, stream 0 and cudaStreamPerThread are the same stream.
  printf("query stream 0: %s\n", cudaGetErrorName(cudaStreamQuery(0)));
  printf("query cudaStreamPerThread: %s\n", cudaGetErrorName(cudaStreamQuery(cudaStreamPerThread)));
  pthread_barrier_init(&bar, NULL, 2);
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
  return test_finish();
}
