// A graph Jacobi solver whose graph copies from and into host memory: each
// launch uploads the right-hand side from host memory (a memcpy node with
// a host source), runs sweeps, and copies the solution and residual back
// (memcpy nodes into host memory). Built by hand and by stream capture,
// from pageable and pinned memory; the host buffer changes between
// launches, and each launch must see it as it is then.
#include "common.h"

#define N 1024
#define SWEEPS 8

// x_new[i] = (b[i] + x[i-1] + x[i+1]) / 4 (a diagonally dominant system)
__global__ void sweep(const float *b, const float *x, float *xn, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = i > 0 ? x[i - 1] : 0.0f, r = i < n - 1 ? x[i + 1] : 0.0f;
  xn[i] = (b[i] + l + r) / 4.0f;
}

__global__ void residual(const float *b, const float *x, float *res, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = i > 0 ? x[i - 1] : 0.0f, r = i < n - 1 ? x[i + 1] : 0.0f;
  res[i] = b[i] - (4.0f * x[i] - l - r);
}

struct dev { float *b, *x, *y, *res; };

static double sum(const float *v) {
  double s = 0;
  for (int i = 0; i < N; i++) s += v[i];
  return s;
}

static cudaMemcpy3DParms copy1d(void *dst, const void *src, cudaMemcpyKind kind) {
  cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  p.srcPtr = make_cudaPitchedPtr((void *)src, N * sizeof(float), N, 1);
  p.dstPtr = make_cudaPitchedPtr(dst, N * sizeof(float), N, 1);
  p.extent = make_cudaExtent(N * sizeof(float), 1, 1);
  p.kind = kind;
  return p;
}

static cudaGraph_t build(const dev &d, float *hb, float *hx, float *hres) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t up, prev, node;
  cudaMemcpy3DParms p = copy1d(d.b, hb, cudaMemcpyHostToDevice);
  CK(cudaGraphAddMemcpyNode(&up, g, NULL, 0, &p));
  prev = up;
  for (int k = 0; k < SWEEPS; k++) {
    const float *x = k % 2 ? d.y : d.x;
    float *xn = k % 2 ? d.x : d.y;
    int n = N;
    void *args[] = {(void *)&d.b, (void *)&x, (void *)&xn, &n};
    cudaKernelNodeParams kp;
    memset(&kp, 0, sizeof kp);
    kp.func = (void *)sweep;
    kp.gridDim = dim3(N / 256);
    kp.blockDim = dim3(256);
    kp.kernelParams = args;
    CK(cudaGraphAddKernelNode(&node, g, &prev, 1, &kp));
    prev = node;
  }
  int n = N;
  void *rargs[] = {(void *)&d.b, (void *)&d.x, (void *)&d.res, &n};
  cudaKernelNodeParams kp;
  memset(&kp, 0, sizeof kp);
  kp.func = (void *)residual;
  kp.gridDim = dim3(N / 256);
  kp.blockDim = dim3(256);
  kp.kernelParams = rargs;
  CK(cudaGraphAddKernelNode(&node, g, &prev, 1, &kp));
  prev = node;
  p = copy1d(hx, d.x, cudaMemcpyDeviceToHost);
  CK(cudaGraphAddMemcpyNode(&node, g, &prev, 1, &p));
  p = copy1d(hres, d.res, cudaMemcpyDeviceToHost);
  CK(cudaGraphAddMemcpyNode(&node, g, &prev, 1, &p));
  return g;
}

static cudaGraph_t capture(const dev &d, cudaStream_t s, float *hb, float *hx, float *hres) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemcpyAsync(d.b, hb, N * sizeof(float), cudaMemcpyHostToDevice, s));
  for (int k = 0; k < SWEEPS; k++) {
    const float *x = k % 2 ? d.y : d.x;
    float *xn = k % 2 ? d.x : d.y;
    sweep<<<N / 256, 256, 0, s>>>(d.b, x, xn, N);
  }
  residual<<<N / 256, 256, 0, s>>>(d.b, d.x, d.res, N);
  CK(cudaMemcpyAsync(hx, d.x, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaMemcpyAsync(hres, d.res, N * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamEndCapture(s, &g));
  return g;
}

static void solve(const char *what, cudaGraph_t g, const dev &d, cudaStream_t s, float *hb, float *hx,
                  float *hres) {
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaMemset(d.x, 0, N * sizeof(float)));
  for (int launch = 0; launch < 4; launch++) {
    for (int i = 0; i < N; i++) hb[i] = (float)((i * 7 + launch * 13) % 17) + launch;
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    printf("%s launch %d: sum b %.1f sum x %.4f sum residual %.4f\n", what, launch, sum(hb), sum(hx), sum(hres));
  }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
}

int main(void) {
  test_init();
  dev d;
  CK(cudaMalloc(&d.b, N * sizeof(float)));
  CK(cudaMalloc(&d.x, N * sizeof(float)));
  CK(cudaMalloc(&d.y, N * sizeof(float)));
  CK(cudaMalloc(&d.res, N * sizeof(float)));
  CK(cudaMemset(d.y, 0, N * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  float *pb = (float *)malloc(N * sizeof(float)), *px = (float *)malloc(N * sizeof(float)),
        *pr = (float *)malloc(N * sizeof(float));
  float *qb, *qx, *qr;
  CK(cudaMallocHost(&qb, N * sizeof(float)));
  CK(cudaMallocHost(&qx, N * sizeof(float)));
  CK(cudaMallocHost(&qr, N * sizeof(float)));
  solve("built pageable", build(d, pb, px, pr), d, s, pb, px, pr);
  solve("built pinned", build(d, qb, qx, qr), d, s, qb, qx, qr);
  solve("captured pageable", capture(d, s, pb, px, pr), d, s, pb, px, pr);
  solve("captured pinned", capture(d, s, qb, qx, qr), d, s, qb, qx, qr);
  CK(cudaFreeHost(qb));
  CK(cudaFreeHost(qx));
  CK(cudaFreeHost(qr));
  free(pb);
  free(px);
  free(pr);
  printf("PASS\n");
  return 0;
}
