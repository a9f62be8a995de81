// Managed memory with hints, and one matmul over four kinds of memory.
//  - cudaMemAdvise (SetReadMostly, SetPreferredLocation, SetAccessedBy),
//    cudaMemPrefetchAsync to the device and to the host,
//    cudaMemRangeGetAttribute(s) reading the hints back.
//  - The device attributes a program must check before sharing memory
//    with a running kernel (ConcurrentManagedAccess, PageableMemoryAccess,
//    HostNativeAtomicSupported): the path taken is printed on "# " lines,
//    since SCUDA answers 0 where a local GPU may answer 1; both paths give
//    the same numbers.
//  - C = A * B over managed, pinned (cudaMallocHost, copied), zero-copy
//    (cudaHostAllocMapped + cudaHostGetDevicePointer) and plain memory;
//    the four sums must agree with each other and with the host's.
#include "common.h"

#define M 192  // a multiple of the 16x16 tile

__global__ void matmul(const float *a, const float *b, float *c, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || col >= n) return;
  float s = 0.0f;
  for (int k = 0; k < n; k++) s += a[row * n + k] * b[k * n + col];
  c[row * n + col] = s;
}

__global__ void add_one(int *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

__global__ void count_up(unsigned *counter, int times) {
  for (int i = 0; i < times; i++) atomicAdd_system(counter, 1u);
}

static void fill_inputs(float *a, float *b, int n) {
  for (int i = 0; i < n * n; i++) {
    a[i] = (float)((i * 7) % 13) * 0.5f;
    b[i] = (float)((i * 5) % 11) * 0.25f;
  }
}

static double sum_of(const float *c, int n) {
  double s = 0;
  for (int i = 0; i < n * n; i++) s += c[i];
  return s;
}

static void run_matmul(const float *a, const float *b, float *c) {
  dim3 block(16, 16), grid(M / 16, M / 16);
  matmul<<<grid, block>>>(a, b, c, M);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

static int attr(cudaDeviceAttr a) {
  int v = -1;
  CK(cudaDeviceGetAttribute(&v, a, 0));
  return v;
}

// cudaMemAdvise and cudaMemPrefetchAsync take a location (CUDA 13).
static cudaMemLocation on_device(int dev) {
  cudaMemLocation l = {};
  l.type = cudaMemLocationTypeDevice;
  l.id = dev;
  return l;
}
static cudaMemLocation on_host(void) {
  cudaMemLocation l = {};
  l.type = cudaMemLocationTypeHost;
  return l;
}

static void hints(void) {
  const int n = 1 << 20;
  const size_t bytes = n * sizeof(int);
  int *m;
  CK(cudaMallocManaged(&m, bytes));
  for (int i = 0; i < n; i++) m[i] = i;
  CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetReadMostly, on_device(0)));
  CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, on_device(0)));
  CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, on_device(0)));
  int read_mostly = -1, preferred = -2;
  CK(cudaMemRangeGetAttribute(&read_mostly, sizeof read_mostly, cudaMemRangeAttributeReadMostly, m, bytes));
  CK(cudaMemRangeGetAttribute(&preferred, sizeof preferred, cudaMemRangeAttributePreferredLocation, m, bytes));
  int accessed[4] = {-9, -9, -9, -9};
  CK(cudaMemRangeGetAttribute(accessed, sizeof accessed, cudaMemRangeAttributeAccessedBy, m, bytes));
  printf("hints: read mostly %d, preferred location %d, accessed by %d\n", read_mostly, preferred, accessed[0]);
  EXPECT(read_mostly == 1 && preferred == 0 && accessed[0] == 0, "hints not kept");

  CK(cudaMemPrefetchAsync(m, bytes, on_device(0), 0, 0));
  add_one<<<n / 256, 256>>>(m, n);
  CK(cudaMemPrefetchAsync(m, bytes, on_host(), 0, 0));
  CK(cudaDeviceSynchronize());
  int bad = 0;
  for (int i = 0; i < n; i++) bad += m[i] != i + 1;
  printf("prefetch to the device, kernel, prefetch to the host: %s\n", bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "%d wrong after prefetches", bad);

  // Several attributes at once.
  int rm = -1, pl = -2, last = -3;
  void *data[3] = {&rm, &pl, &last};
  size_t sizes[3] = {sizeof rm, sizeof pl, sizeof last};
  cudaMemRangeAttribute which[3] = {cudaMemRangeAttributeReadMostly, cudaMemRangeAttributePreferredLocation,
                                    cudaMemRangeAttributeLastPrefetchLocation};
  CK(cudaMemRangeGetAttributes(data, sizes, which, 3, m, bytes));
  printf("attributes: read mostly %d, preferred location %d, last prefetch %d\n", rm, pl, last);
  EXPECT(rm == 1 && pl == 0 && last == cudaCpuDeviceId, "range attributes");

  CK(cudaMemAdvise(m, bytes, cudaMemAdviseUnsetReadMostly, on_device(0)));
  CK(cudaMemAdvise(m, bytes, cudaMemAdviseUnsetPreferredLocation, on_device(0)));
  CK(cudaMemAdvise(m, bytes, cudaMemAdviseUnsetAccessedBy, on_device(0)));
  CK(cudaMemRangeGetAttribute(&read_mostly, sizeof read_mostly, cudaMemRangeAttributeReadMostly, m, bytes));
  printf("after unset: read mostly %d\n", read_mostly);
  CK(cudaFree(m));
}

// What a careful program does with the attributes: share a counter with a
// running kernel only where the device allows it, else wait for the kernel.
static void attribute_paths(void) {
  int concurrent = attr(cudaDevAttrConcurrentManagedAccess);
  int pageable = attr(cudaDevAttrPageableMemoryAccess);
  int atomics = attr(cudaDevAttrHostNativeAtomicSupported);
  printf("# concurrent managed access %d, pageable memory access %d, host native atomics %d\n", concurrent,
         pageable, atomics);
  unsigned *counter;
  CK(cudaMallocManaged(&counter, sizeof *counter));
  *counter = 0;
  count_up<<<1, 32>>>(counter, 100);
  if (concurrent && atomics) {
    printf("# path: host atomics while the kernel runs\n");
    for (int i = 0; i < 100; i++) __atomic_fetch_add(counter, 1u, __ATOMIC_SEQ_CST);
    CK(cudaDeviceSynchronize());
  } else {
    printf("# path: host adds after the kernel (no concurrent access or no host atomics)\n");
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < 100; i++) *counter += 1;
  }
  printf("counter: %u\n", *counter);
  EXPECT(*counter == 32 * 100 + 100, "counter %u", *counter);

  // Pageable memory: only where the device reaches it, else copy first.
  int *plain_host = (int *)malloc(1024 * sizeof(int));
  for (int i = 0; i < 1024; i++) plain_host[i] = i;
  if (pageable) {
    printf("# path: kernel on pageable memory\n");
    add_one<<<4, 256>>>(plain_host, 1024);
    CK(cudaDeviceSynchronize());
  } else {
    printf("# path: pageable memory copied to the device and back\n");
    int *d;
    CK(cudaMalloc(&d, 1024 * sizeof(int)));
    CK(cudaMemcpy(d, plain_host, 1024 * sizeof(int), cudaMemcpyHostToDevice));
    add_one<<<4, 256>>>(d, 1024);
    CK(cudaMemcpy(plain_host, d, 1024 * sizeof(int), cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
  }
  int bad = 0;
  for (int i = 0; i < 1024; i++) bad += plain_host[i] != i + 1;
  printf("pageable: %s\n", bad ? "MISMATCH" : "ok");
  EXPECT(!bad, "%d wrong", bad);
  free(plain_host);
  CK(cudaFree(counter));
}

static void matmul_kinds(void) {
  const size_t bytes = (size_t)M * M * sizeof(float);
  float *ha = (float *)malloc(bytes), *hb = (float *)malloc(bytes), *hc = (float *)malloc(bytes);
  fill_inputs(ha, hb, M);
  for (int r = 0; r < M; r++)
    for (int col = 0; col < M; col++) {
      float s = 0.0f;
      for (int k = 0; k < M; k++) s += ha[r * M + k] * hb[k * M + col];
      hc[r * M + col] = s;
    }
  double want = sum_of(hc, M);
  printf("host sum: %.3f\n", want);

  // Managed.
  float *ma, *mb, *mc;
  CK(cudaMallocManaged(&ma, bytes));
  CK(cudaMallocManaged(&mb, bytes));
  CK(cudaMallocManaged(&mc, bytes));
  fill_inputs(ma, mb, M);
  run_matmul(ma, mb, mc);
  double managed = sum_of(mc, M);

  // Pinned, copied to and from device memory.
  float *pa, *pb, *pc, *da, *db, *dc;
  CK(cudaMallocHost(&pa, bytes));
  CK(cudaMallocHost(&pb, bytes));
  CK(cudaMallocHost(&pc, bytes));
  CK(cudaMalloc(&da, bytes));
  CK(cudaMalloc(&db, bytes));
  CK(cudaMalloc(&dc, bytes));
  fill_inputs(pa, pb, M);
  CK(cudaMemcpy(da, pa, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, pb, bytes, cudaMemcpyHostToDevice));
  run_matmul(da, db, dc);
  CK(cudaMemcpy(pc, dc, bytes, cudaMemcpyDeviceToHost));
  double pinned = sum_of(pc, M);

  // Pinned, its host pointer handed to the kernel (unified addressing).
  run_matmul(pa, pb, pc);
  double pinned_direct = sum_of(pc, M);

  // Zero-copy.
  float *za, *zb, *zc, *zda, *zdb, *zdc;
  CK(cudaHostAlloc(&za, bytes, cudaHostAllocMapped));
  CK(cudaHostAlloc(&zb, bytes, cudaHostAllocMapped));
  CK(cudaHostAlloc(&zc, bytes, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&zda, za, 0));
  CK(cudaHostGetDevicePointer(&zdb, zb, 0));
  CK(cudaHostGetDevicePointer(&zdc, zc, 0));
  fill_inputs(za, zb, M);
  run_matmul(zda, zdb, zdc);
  double zero_copy = sum_of(zc, M);

  // Plain: pageable host memory copied to and from device memory.
  float *xa = (float *)malloc(bytes), *xb = (float *)malloc(bytes), *xc = (float *)malloc(bytes);
  fill_inputs(xa, xb, M);
  CK(cudaMemcpy(da, xa, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, xb, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(dc, 0, bytes));
  run_matmul(da, db, dc);
  CK(cudaMemcpy(xc, dc, bytes, cudaMemcpyDeviceToHost));
  double plain = sum_of(xc, M);

  printf("sums: managed %.3f, pinned %.3f, pinned direct %.3f, zero-copy %.3f, plain %.3f\n", managed, pinned,
         pinned_direct, zero_copy, plain);
  EXPECT(managed == plain && pinned == plain && pinned_direct == plain && zero_copy == plain,
         "the kinds disagree");
  EXPECT(fabs(plain - want) <= 1e-3 * fabs(want), "device %.3f, host %.3f", plain, want);

  CK(cudaFree(ma)); CK(cudaFree(mb)); CK(cudaFree(mc));
  CK(cudaFreeHost(pa)); CK(cudaFreeHost(pb)); CK(cudaFreeHost(pc));
  CK(cudaFreeHost(za)); CK(cudaFreeHost(zb)); CK(cudaFreeHost(zc));
  CK(cudaFree(da)); CK(cudaFree(db)); CK(cudaFree(dc));
  free(ha); free(hb); free(hc); free(xa); free(xb); free(xc);
}

int main(void) {
  test_init();
  hints();
  attribute_paths();
  matmul_kinds();
  return test_finish();
}
