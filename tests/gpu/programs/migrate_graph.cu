// Graphs and executable graphs across a live migration (docs/architecture.md,
// 9.17b): a captured graph (two streams joined by events, kernels, a
// memset, a device copy), a graph built node by node (kernel, memset,
// device copy, a child graph, event record and wait nodes), and an
// executable graph of it changed after instantiation (an update from a
// graph of the same shape, a kernel's parameters, a memset's, a node
// disabled). Four phases each launch them in a loop and print checksums,
// integers only, so a run through SCUDA must print exactly what a native
// run prints.
//
//   migrate_graph [--pause-dir DIR]     (or MIGRATE_PAUSE_DIR=DIR)
//
// With a pause directory, after phase 2 (the executable graph changed,
// the GPU idle) DIR/reached is written and the program waits (at most
// 300 s) for DIR/go: tests/gpu/failover/migrate_cuda.sh (PROGRAM=
// migrate_graph) moves the session meanwhile. Phase 3 launches the same
// executable graphs without touching them, so what it prints depends on
// the changes having moved; phase 4 changes them again, instantiates
// again and asks the graphs' nodes. Without a pause directory it runs
// straight through (as tests/gpu/run.sh runs it).
#include "common.h"

#define N (1 << 20)
#define THREADS 256
#define BLOCKS 256

__host__ __device__ static inline unsigned int mix32(unsigned int x) {
  x ^= x >> 16; x *= 0x7feb352du;
  x ^= x >> 15; x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

__global__ void seed_buf(unsigned int *buf, int n, unsigned int seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    buf[i] = mix32((unsigned int)i * 2654435761u + seed);
}

// out[i] = mix(a[i] + b[i] * k)
__global__ void combine(const unsigned int *a, const unsigned int *b, unsigned int *out, int n, unsigned int k) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = mix32(a[i] + b[i] * k);
}

struct state {
  unsigned int *a, *b, *c, *d, *e, *f, *host;
  cudaStream_t s1, s2;
  cudaEvent_t fork, join, marker;
  cudaGraph_t captured, built, child, alt;
  cudaGraphExec_t captured_exec, built_exec, changed_exec;
  cudaGraphNode_t seed_node, combine_node, memset_node, copy_node, child_node, record_node;
};

static cudaKernelNodeParams combine_params(void **args) {
  cudaKernelNodeParams p;
  memset(&p, 0, sizeof p);
  p.func = (void *)combine;
  p.gridDim = dim3(BLOCKS);
  p.blockDim = dim3(THREADS);
  p.kernelParams = args;
  return p;
}

static cudaMemsetParams memset_params(unsigned int *dst, unsigned int value, size_t width) {
  cudaMemsetParams m;
  memset(&m, 0, sizeof m);
  m.dst = dst, m.value = value, m.elementSize = 4, m.width = width, m.height = 1;
  return m;
}

// a = seed; b = seed'; s2 waits for s1 (fork); c = a + b*3 on s2, d = 0x5a
// on s1; join; e = c.
static void capture(struct state *st) {
  CK(cudaStreamBeginCapture(st->s1, cudaStreamCaptureModeGlobal));
  seed_buf<<<BLOCKS, THREADS, 0, st->s1>>>(st->a, N, 17u);
  seed_buf<<<BLOCKS, THREADS, 0, st->s1>>>(st->b, N, 29u);
  CK(cudaEventRecord(st->fork, st->s1));
  CK(cudaStreamWaitEvent(st->s2, st->fork, 0));
  combine<<<BLOCKS, THREADS, 0, st->s2>>>(st->a, st->b, st->c, N, 3u);
  CK(cudaMemsetAsync(st->d, 0x5a, N * sizeof(unsigned int), st->s1));
  CK(cudaEventRecord(st->join, st->s2));
  CK(cudaStreamWaitEvent(st->s1, st->join, 0));
  CK(cudaMemcpyAsync(st->e, st->c, N * sizeof(unsigned int), cudaMemcpyDeviceToDevice, st->s1));
  CK(cudaStreamEndCapture(st->s1, &st->captured));
}

// Built node by node: wait for marker; seed f; d = c + f*k; memset e's
// first quarter; child graph (seed a, memset b's last half); copy d into
// c; record marker. k and the seed are the caller's.
static cudaGraph_t build(struct state *st, unsigned int seed, unsigned int k, cudaGraphNode_t nodes[7]) {
  static unsigned int seeds[2], ks[2];
  static int n = N;
  static void *seed_args[2][3], *combine_args[2][5];
  int slot = seed == 5u ? 0 : 1;  // the built graph's arguments, then the alternative's
  seeds[slot] = seed, ks[slot] = k;
  seed_args[slot][0] = &st->f, seed_args[slot][1] = &n, seed_args[slot][2] = &seeds[slot];
  combine_args[slot][0] = &st->c, combine_args[slot][1] = &st->f, combine_args[slot][2] = &st->d;
  combine_args[slot][3] = &n, combine_args[slot][4] = &ks[slot];
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t wait;
  CK(cudaGraphAddEventWaitNode(&wait, g, NULL, 0, st->marker));
  cudaKernelNodeParams sp;
  memset(&sp, 0, sizeof sp);
  sp.func = (void *)seed_buf, sp.gridDim = dim3(BLOCKS), sp.blockDim = dim3(THREADS);
  sp.kernelParams = seed_args[slot];
  CK(cudaGraphAddKernelNode(&nodes[0], g, &wait, 1, &sp));
  cudaKernelNodeParams cp = combine_params(combine_args[slot]);
  CK(cudaGraphAddKernelNode(&nodes[1], g, &nodes[0], 1, &cp));
  cudaMemsetParams m = memset_params(st->e, 0x1234u + seed, N / 4);
  CK(cudaGraphAddMemsetNode(&nodes[2], g, &nodes[1], 1, &m));
  CK(cudaGraphAddChildGraphNode(&nodes[3], g, &nodes[2], 1, st->child));
  CK(cudaGraphAddMemcpyNode1D(&nodes[4], g, &nodes[3], 1, st->c, st->d, N * sizeof(unsigned int),
                              cudaMemcpyDeviceToDevice));
  CK(cudaGraphAddEventRecordNode(&nodes[5], g, &nodes[4], 1, st->marker));
  nodes[6] = wait;
  return g;
}

static void build_child(struct state *st) {
  static unsigned int seed = 41u;
  static int n = N;
  static void *args[3];
  args[0] = &st->a, args[1] = &n, args[2] = &seed;
  CK(cudaGraphCreate(&st->child, 0));
  cudaKernelNodeParams sp;
  memset(&sp, 0, sizeof sp);
  sp.func = (void *)seed_buf, sp.gridDim = dim3(BLOCKS), sp.blockDim = dim3(THREADS), sp.kernelParams = args;
  cudaGraphNode_t k, m;
  CK(cudaGraphAddKernelNode(&k, st->child, NULL, 0, &sp));
  cudaMemsetParams mp = memset_params(st->b + N / 2, 0x77u, N / 2);
  CK(cudaGraphAddMemsetNode(&m, st->child, &k, 1, &mp));
}

// The changed executable graph's changes, in the order that matters: an
// update from the alternative graph (seed 9, k 7), then the combine's k
// set to `k`, the memset's value to `value`, the copy on or off.
static void change(struct state *st, unsigned int k, unsigned int value, int copy_on) {
  static unsigned int ks;
  static int n = N;
  static void *args[5];
  ks = k;
  args[0] = &st->c, args[1] = &st->f, args[2] = &st->d, args[3] = &n, args[4] = &ks;
  cudaGraphExecUpdateResultInfo info;
  CK(cudaGraphExecUpdate(st->changed_exec, st->alt, &info));
  cudaKernelNodeParams cp = combine_params(args);
  CK(cudaGraphExecKernelNodeSetParams(st->changed_exec, st->combine_node, &cp));
  cudaMemsetParams m = memset_params(st->e, value, N / 4);
  CK(cudaGraphExecMemsetNodeSetParams(st->changed_exec, st->memset_node, &m));
  CK(cudaGraphNodeSetEnabled(st->changed_exec, st->copy_node, copy_on));
}

static void setup(struct state *st) {
  CK(cudaStreamCreateWithFlags(&st->s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&st->s2, cudaStreamNonBlocking));
  CK(cudaEventCreateWithFlags(&st->fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&st->join, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&st->marker, cudaEventDisableTiming));
  unsigned int **bufs[] = {&st->a, &st->b, &st->c, &st->d, &st->e, &st->f};
  for (int i = 0; i < 6; i++) {
    CK(cudaMalloc(bufs[i], N * sizeof(unsigned int)));
    CK(cudaMemset(*bufs[i], 0, N * sizeof(unsigned int)));
  }
  st->host = (unsigned int *)malloc(N * sizeof(unsigned int));
  capture(st);
  build_child(st);
  cudaGraphNode_t nodes[7], alt_nodes[7];
  st->built = build(st, 5u, 3u, nodes);
  st->seed_node = nodes[0], st->combine_node = nodes[1], st->memset_node = nodes[2];
  st->child_node = nodes[3], st->copy_node = nodes[4], st->record_node = nodes[5];
  st->alt = build(st, 9u, 7u, alt_nodes);
  CK(cudaGraphInstantiate(&st->captured_exec, st->captured, 0));
  CK(cudaGraphInstantiate(&st->built_exec, st->built, 0));
  CK(cudaGraphInstantiate(&st->changed_exec, st->built, 0));
}

// Launch each executable graph `rounds` times on s1 and print every
// buffer's checksum.
static void run_phase(struct state *st, int phase, int rounds) {
  for (int r = 0; r < rounds; r++) {
    CK(cudaGraphLaunch(st->captured_exec, st->s1));
    CK(cudaGraphLaunch(st->built_exec, st->s1));
    CK(cudaGraphLaunch(st->changed_exec, st->s1));
  }
  CK(cudaStreamSynchronize(st->s1));
  CK(cudaEventSynchronize(st->marker));
  EXPECT(cudaEventQuery(st->marker) == cudaSuccess, "phase %d: the marker event is not done", phase);
  unsigned int *bufs[] = {st->a, st->b, st->c, st->d, st->e, st->f};
  printf("phase %d:", phase);
  for (int i = 0; i < 6; i++) {
    CK(cudaMemcpy(st->host, bufs[i], N * sizeof(unsigned int), cudaMemcpyDeviceToHost));
    printf(" %c=%016llx", 'a' + i, (unsigned long long)fnv1a(st->host, N * sizeof(unsigned int)));
  }
  printf("\n");
}

// After the move: the nodes still answer as they did, and the graph
// instantiates again.
static void phase4(struct state *st) {
  change(st, 11u, 0xfeedu, 1);
  run_phase(st, 4, 3);
  cudaEvent_t ev = NULL;
  CK(cudaGraphEventRecordNodeGetEvent(st->record_node, &ev));
  EXPECT(ev == st->marker, "the event record node's event changed");
  cudaGraph_t child = NULL;
  size_t n = 0;
  CK(cudaGraphChildGraphNodeGetGraph(st->child_node, &child));
  CK(cudaGraphGetNodes(child, NULL, &n));
  EXPECT(n == 2, "the child graph has %zu nodes, not 2", n);
  cudaKernelNodeParams p;
  CK(cudaGraphKernelNodeGetParams(st->combine_node, &p));
  printf("phase 4: combine node grid %u block %u, child graph nodes %zu\n", p.gridDim.x, p.blockDim.x, n);
  cudaGraphExec_t again;
  CK(cudaGraphInstantiate(&again, st->built, 0));
  CK(cudaGraphLaunch(again, st->s1));
  CK(cudaStreamSynchronize(st->s1));
  run_phase(st, 5, 1);
  CK(cudaGraphExecDestroy(again));
}

int main(int argc, char **argv) {
  test_init();
  const char *dir = pause_dir_arg(argc, argv);
  struct state st;
  setup(&st);
  run_phase(&st, 1, 4);
  change(&st, 13u, 0xc0deu, 0);
  run_phase(&st, 2, 4);
  pause_point(dir);
  run_phase(&st, 3, 4);  // the changes must have moved
  phase4(&st);
  CK(cudaGraphExecDestroy(st.captured_exec));
  CK(cudaGraphExecDestroy(st.built_exec));
  CK(cudaGraphExecDestroy(st.changed_exec));
  CK(cudaGraphDestroy(st.captured));
  CK(cudaGraphDestroy(st.built));
  CK(cudaGraphDestroy(st.alt));
  CK(cudaGraphDestroy(st.child));
  CK(cudaEventDestroy(st.fork));
  CK(cudaEventDestroy(st.join));
  CK(cudaEventDestroy(st.marker));
  CK(cudaStreamDestroy(st.s1));
  CK(cudaStreamDestroy(st.s2));
  unsigned int *bufs[] = {st.a, st.b, st.c, st.d, st.e, st.f};
  for (int i = 0; i < 6; i++) CK(cudaFree(bufs[i]));
  free(st.host);
  return test_finish();
}
