// 8 concurrent streams, each doing copy (H2D) -> kernel -> copy (D2H) on its
// own buffers, several rounds, all in flight together.
#include "common.h"

__global__ void transform(const unsigned *in, unsigned *out, int n, unsigned k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 3u + k;
}

int main(void) {
  test_init();
  const int S = 8, n = 1 << 18, rounds = 4;
  cudaStream_t st[S];
  unsigned *hin[S], *hout[S], *din[S], *dout[S];
  for (int s = 0; s < S; s++) {
    CK(cudaStreamCreate(&st[s]));
    CK(cudaMallocHost(&hin[s], n * sizeof(unsigned)));
    CK(cudaMallocHost(&hout[s], n * sizeof(unsigned) * rounds));
    CK(cudaMalloc(&din[s], n * sizeof(unsigned)));
    CK(cudaMalloc(&dout[s], n * sizeof(unsigned)));
    for (int i = 0; i < n; i++) hin[s][i] = (unsigned)(i * 7 + s);
  }
  for (int r = 0; r < rounds; r++)
    for (int s = 0; s < S; s++) {
      CK(cudaMemcpyAsync(din[s], hin[s], n * sizeof(unsigned), cudaMemcpyHostToDevice, st[s]));
      transform<<<(n + 255) / 256, 256, 0, st[s]>>>(din[s], dout[s], n, (unsigned)(s * 100 + r));
      CK(cudaMemcpyAsync(hout[s] + (size_t)r * n, dout[s], n * sizeof(unsigned), cudaMemcpyDeviceToHost, st[s]));
    }
  for (int s = 0; s < S; s++) CK(cudaStreamSynchronize(st[s]));
  for (int s = 0; s < S; s++) {
    int bad = 0;
    for (int r = 0; r < rounds; r++)
      for (int i = 0; i < n; i++)
        if (hout[s][(size_t)r * n + i] != hin[s][i] * 3u + (unsigned)(s * 100 + r)) bad++;
    printf("stream %d: %s fnv=%016llx\n", s, bad ? "MISMATCH" : "ok",
           (unsigned long long)fnv1a(hout[s], n * sizeof(unsigned) * rounds));
    EXPECT(bad == 0, "stream %d: %d wrong", s, bad);
  }
  for (int s = 0; s < S; s++) {
    CK(cudaStreamDestroy(st[s]));
    CK(cudaFreeHost(hin[s])); CK(cudaFreeHost(hout[s]));
    CK(cudaFree(din[s])); CK(cudaFree(dout[s]));
  }
  return test_finish();
}
