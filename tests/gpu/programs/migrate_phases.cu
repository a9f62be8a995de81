// Four phases of deterministic GPU work over every kind of state a live
// migration must carry (docs/architecture.md, 9.17): module globals
// (`__device__` arrays), `__managed__` variables, cudaMallocManaged and
// cudaMalloc memory, two streams ordered by events. Built with nvcc's
// defaults (static cudart), so its kernels arrive as a library
// (cuLibraryLoadData). Each phase prints checksums, integers only, so
// every line is deterministic and a run through SCUDA must print exactly
// what a native run prints.
//
//   migrate_phases [--pause-dir DIR]     (or MIGRATE_PAUSE_DIR=DIR)
//
// With a pause directory, after phase 2 the GPU is left idle, DIR/reached
// is written, and the program waits (at most 300 s) for DIR/go before the
// phases that use the old objects again: tests/gpu/failover/migrate_cuda.sh
// moves the session to another server meanwhile. Without one it runs
// straight through (as tests/gpu/run.sh runs it).
#include "common.h"

#define TABLE_N (1 << 16)
#define BUF_N (16 << 20)  // 64 MiB of device memory
#define MANAGED_N (1 << 18)
#define COUNTERS 64
#define THREADS 256

__device__ unsigned int g_table[TABLE_N];
__device__ unsigned long long g_sum;
__managed__ unsigned int m_counters[COUNTERS];
__managed__ int m_phase;

__host__ __device__ static inline unsigned int mix32(unsigned int x) {
  x ^= x >> 16; x *= 0x7feb352du;
  x ^= x >> 15; x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

__global__ void fill_table(unsigned int seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < TABLE_N; i += gridDim.x * blockDim.x)
    g_table[i] = mix32((unsigned int)i ^ seed);
}

__global__ void fill_buf(unsigned int *buf, int n, unsigned int seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    buf[i] = mix32((unsigned int)i * 2654435761u + seed);
}

// buf[i] += table[i % TABLE_N] ^ managed[i % MANAGED_N]; counts into the managed counters.
__global__ void stir(unsigned int *buf, int n, const unsigned int *managed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned int v = buf[i] + (g_table[i % TABLE_N] ^ managed[i % MANAGED_N]);
    buf[i] = mix32(v);
    if ((v & 1023u) == 0) atomicAdd(&m_counters[v % COUNTERS], 1u);
  }
}

// The table follows the buffer; the managed memory follows the table.
__global__ void fold_back(const unsigned int *buf, int n, unsigned int *managed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < TABLE_N) g_table[i] = mix32(g_table[i] + buf[(i * 97) % n]);
  if (i < MANAGED_N) managed[i] = mix32(managed[i] ^ (unsigned int)m_phase);
}

__global__ void reduce(const unsigned int *buf, int n) {
  unsigned long long local = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) local += buf[i];
  atomicAdd(&g_sum, local);  // integer addition: the order does not matter
}

struct state {
  unsigned int *buf, *host;
  unsigned int *managed;
  cudaStream_t s1, s2;
  cudaEvent_t e1, e2;
};

// What every phase prints: the buffer, the table, the managed memory and
// variables, and a reduction made on the GPU.
static void report(struct state *st, int phase) {
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(st->host, st->buf, BUF_N * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  static unsigned int table[TABLE_N];
  CK(cudaMemcpyFromSymbol(table, g_table, sizeof table));
  unsigned long long zero = 0, sum = 0;
  CK(cudaMemcpyToSymbolAsync(g_sum, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, st->s2));
  reduce<<<128, THREADS, 0, st->s2>>>(st->buf, BUF_N);
  CK(cudaGetLastError());
  CK(cudaMemcpyFromSymbolAsync(&sum, g_sum, sizeof sum, 0, cudaMemcpyDeviceToHost, st->s2));
  CK(cudaStreamSynchronize(st->s2));
  unsigned long long counted = 0;
  for (int i = 0; i < COUNTERS; i++) counted += m_counters[i];
  printf("phase %d: buf=%016llx table=%016llx managed=%016llx counters=%016llx (%llu) sum=%llu m_phase=%d\n", phase,
         (unsigned long long)fnv1a(st->host, BUF_N * sizeof(unsigned int)),
         (unsigned long long)fnv1a(table, sizeof table),
         (unsigned long long)fnv1a(st->managed, MANAGED_N * sizeof(unsigned int)),
         (unsigned long long)fnv1a(m_counters, sizeof m_counters), counted, sum, m_phase);
  unsigned long long want = 0;
  for (int i = 0; i < BUF_N; i++) want += st->host[i];
  EXPECT(sum == want, "phase %d: the GPU's sum %llu, the host's %llu", phase, sum, want);
}

// s1 fills, s2 waits for it through e1 and stirs; then s1 waits for s2 through e2 and folds back.
static void round_trip(struct state *st, unsigned int seed) {
  fill_buf<<<256, THREADS, 0, st->s1>>>(st->buf, BUF_N / 2, seed);
  CK(cudaEventRecord(st->e1, st->s1));
  CK(cudaStreamWaitEvent(st->s2, st->e1, 0));
  stir<<<256, THREADS, 0, st->s2>>>(st->buf, BUF_N, st->managed);
  CK(cudaEventRecord(st->e2, st->s2));
  CK(cudaStreamWaitEvent(st->s1, st->e2, 0));
  fold_back<<<(MANAGED_N + THREADS - 1) / THREADS, THREADS, 0, st->s1>>>(st->buf, BUF_N, st->managed);
  CK(cudaGetLastError());
  CK(cudaEventSynchronize(st->e2));
  EXPECT(cudaEventQuery(st->e2) == cudaSuccess, "e2 not done after cudaEventSynchronize");
}

static void phase1(struct state *st) {
  CK(cudaStreamCreateWithFlags(&st->s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&st->s2, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&st->e1, cudaEventDisableTiming));
  CK(cudaEventCreate(&st->e2));
  CK(cudaMalloc(&st->buf, BUF_N * sizeof(unsigned int)));
  CK(cudaMallocManaged(&st->managed, MANAGED_N * sizeof(unsigned int)));
  st->host = (unsigned int *)malloc(BUF_N * sizeof(unsigned int));
  for (int i = 0; i < MANAGED_N; i++) st->managed[i] = mix32((unsigned int)i + 7u);  // host writes
  m_phase = 1;
  fill_table<<<64, THREADS, 0, st->s1>>>(0x5eedu);
  fill_buf<<<256, THREADS, 0, st->s1>>>(st->buf, BUF_N, 1u);
  CK(cudaStreamSynchronize(st->s1));
  round_trip(st, 11u);
}

static void phase2(struct state *st) {
  m_phase = 2;
  for (int i = 0; i < COUNTERS; i += 3) m_counters[i] += (unsigned int)i;  // host writes managed variables
  for (unsigned int r = 0; r < 4; r++) round_trip(st, 100u + r);
}

static void phase3(struct state *st) {
  m_phase = 3;
  static unsigned int table[TABLE_N];
  for (int i = 0; i < TABLE_N; i++) table[i] = mix32((unsigned int)i * 31u);
  CK(cudaMemcpyToSymbolAsync(g_table, table, sizeof table / 2, 0, cudaMemcpyHostToDevice, st->s1));
  CK(cudaStreamSynchronize(st->s1));
  for (unsigned int r = 0; r < 3; r++) round_trip(st, 200u + r);
}

// New objects after the pause, beside the old ones.
static void phase4(struct state *st) {
  m_phase = 4;
  unsigned int *more;
  CK(cudaMallocManaged(&more, MANAGED_N * sizeof(unsigned int)));
  for (int i = 0; i < MANAGED_N; i++) more[i] = st->managed[i] ^ 0xa5a5a5a5u;
  cudaStream_t s3;
  CK(cudaStreamCreate(&s3));
  stir<<<256, THREADS, 0, s3>>>(st->buf, BUF_N, more);
  CK(cudaStreamSynchronize(s3));
  round_trip(st, 300u);
  CK(cudaStreamDestroy(s3));
  CK(cudaFree(more));
}

int main(int argc, char **argv) {
  test_init();
  const char *dir = pause_dir_arg(argc, argv);
  struct state st;
  phase1(&st);
  report(&st, 1);
  phase2(&st);
  report(&st, 2);
  pause_point(dir);
  phase3(&st);
  report(&st, 3);
  phase4(&st);
  report(&st, 4);
  CK(cudaEventDestroy(st.e1));
  CK(cudaEventDestroy(st.e2));
  CK(cudaStreamDestroy(st.s1));
  CK(cudaStreamDestroy(st.s2));
  CK(cudaFree(st.managed));
  CK(cudaFree(st.buf));
  free(st.host);
  return test_finish();
}
