// Event query/synchronize semantics: NotReady while a kernel runs, Success
// after; blocking-sync events; stream query; cudaDeviceSynchronize.
#include "common.h"

int main(void) {
  test_init();
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t ev, evb;
  CK(cudaEventCreate(&ev));
  CK(cudaEventCreateWithFlags(&evb, cudaEventBlockingSync | cudaEventDisableTiming));
  // A never-recorded event counts as complete.
  printf("query unrecorded event: %s\n", cudaGetErrorName(cudaEventQuery(ev)));
  int *done;
  CK(cudaMalloc(&done, sizeof(int)));
  CK(cudaMemset(done, 0, sizeof(int)));
  spin_kernel<<<1, 1, 0, s>>>(300 * 1000 * 1000ull, done);  // ~300 ms
  CK(cudaEventRecord(ev, s));
  CK(cudaEventRecord(evb, s));
  cudaError_t q = cudaEventQuery(ev);
  printf("query while running: %s\n", cudaGetErrorName(q));
  EXPECT(q == cudaErrorNotReady, "expected cudaErrorNotReady");
  q = cudaStreamQuery(s);
  printf("stream query while running: %s\n", cudaGetErrorName(q));
  EXPECT(q == cudaErrorNotReady, "expected cudaErrorNotReady");
  // A NotReady query is not an error: cudaGetLastError stays clean.
  printf("last error after NotReady: %s\n", cudaGetErrorName(cudaGetLastError()));
  CK(cudaEventSynchronize(evb));
  printf("query after blocking-sync event: %s\n", cudaGetErrorName(cudaEventQuery(ev)));
  CK(cudaEventSynchronize(ev));
  q = cudaEventQuery(ev);
  printf("query after synchronize: %s\n", cudaGetErrorName(q));
  EXPECT(q == cudaSuccess, "expected cudaSuccess");
  int h = 0;
  CK(cudaMemcpy(&h, done, sizeof(int), cudaMemcpyDeviceToHost));
  printf("kernel finished: %d\n", h);
  EXPECT(h == 1, "kernel flag not set");
  // cudaDeviceSynchronize after a second spin.
  spin_kernel<<<1, 1>>>(50 * 1000 * 1000ull, done);
  CK(cudaDeviceSynchronize());
  printf("device synchronize: ok\n");
  CK(cudaEventDestroy(ev)); CK(cudaEventDestroy(evb));
  CK(cudaStreamDestroy(s)); CK(cudaFree(done));
  return test_finish();
}
