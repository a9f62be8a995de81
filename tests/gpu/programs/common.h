// Shared helpers for the GPU suite's test programs.
//
// Output contract (tests/gpu/run.sh compares native vs. SCUDA runs):
//  - every line on stdout must be deterministic, EXCEPT lines that start with
//    "# " (timings, addresses, free memory); the runner drops those.
//  - a program prints "PASS" last and exits 0, or prints "FAIL: ..." and exits 1.
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <cuda_runtime.h>

static int g_failures = 0;

// Abort on an unexpected runtime-API error.
#define CK(call)                                                               \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      printf("FAIL: %s:%d %s -> %s\n", __FILE__, __LINE__, #call,              \
             cudaGetErrorName(e_));                                            \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// Abort on an unexpected driver-API error (only in programs that include cuda.h).
#define CU(call)                                                               \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char *n_ = "?";                                                    \
      cuGetErrorName(r_, &n_);                                                 \
      printf("FAIL: %s:%d %s -> %d %s\n", __FILE__, __LINE__, #call, (int)r_,  \
             n_);                                                              \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

// Record a failed check but keep going, so one run reports every mismatch.
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("FAIL: %s:%d ", __FILE__, __LINE__);                              \
      printf(__VA_ARGS__);                                                     \
      printf("\n");                                                            \
      g_failures++;                                                            \
    }                                                                          \
  } while (0)

// Line-buffer stdout so output survives a crash and interleaves sanely with
// the runner's pipes.
static inline void test_init(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

static inline int test_finish(void) {
  if (g_failures) {
    printf("FAIL: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}

// FNV-1a over bytes: a deterministic checksum to print.
static inline uint64_t fnv1a(const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
  return h;
}

// Monotonic host clock in seconds.
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Deterministic pseudo-random fill.
static inline void fill_pattern(void *p, size_t n, uint32_t seed) {
  unsigned char *b = (unsigned char *)p;
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; i++) { x = x * 1664525u + 1013904223u; b[i] = (unsigned char)(x >> 24); }
}

#ifdef __CUDACC__
// Busy-wait on the GPU for about `ns` nanoseconds (globaltimer is wall time).
__device__ inline void spin_ns(unsigned long long ns) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}
__global__ void spin_kernel(unsigned long long ns, int *done) {
  spin_ns(ns);
  if (done) *done = 1;
}
#endif

#include <unistd.h>
// Path of a file that lives next to this executable (module images built by
// run.sh sit beside the programs), so the cwd does not matter.
static inline const char *beside_exe(const char *name) {
  static char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n < 0) n = 0;
  buf[n] = 0;
  char *slash = strrchr(buf, '/');
  if (slash) slash[1] = 0; else buf[0] = 0;
  strncat(buf, name, sizeof buf - strlen(buf) - 1);
  return buf;
}

// Read a whole file; adds a terminating NUL (PTX must be NUL-terminated).
static inline void *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) { printf("FAIL: cannot open %s\n", path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = (char *)malloc(n + 1);
  if (fread(p, 1, n, f) != (size_t)n) { printf("FAIL: short read %s\n", path); exit(1); }
  p[n] = 0;
  fclose(f);
  if (len) *len = (size_t)n;
  return p;
}

// The migration programs' pause (tests/gpu/failover/migrate_cuda.sh): the
// directory named by --pause-dir DIR or MIGRATE_PAUSE_DIR, or NULL.
static inline const char *pause_dir_arg(int argc, char **argv) {
  const char *dir = getenv("MIGRATE_PAUSE_DIR");
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--pause-dir") == 0) dir = argv[i + 1];
  return dir;
}

// The GPU idle: write DIR/reached and wait (at most 300 s, so a lost
// script cannot hang the program) for DIR/go while the session moves.
static inline void pause_point(const char *dir) {
  if (!dir || !*dir) return;
  char reached[4096], go[4096];
  snprintf(reached, sizeof reached, "%s/reached", dir);
  snprintf(go, sizeof go, "%s/go", dir);
  CK(cudaDeviceSynchronize());
  FILE *f = fopen(reached, "w");
  if (!f) { printf("FAIL: cannot write %s\n", reached); exit(1); }
  fclose(f);
  double t0 = now_s();
  struct stat sb;
  while (stat(go, &sb) != 0) {
    if (now_s() - t0 > 300) { printf("FAIL: no %s within 300 s\n", go); exit(1); }
    usleep(20000);
  }
}

#ifdef __cuda_cuda_h__
// Driver-API programs (they include cuda.h first): cuInit, device 0, and
// its primary context made current, as the runtime would set it up.
static inline CUcontext drv_primary_context(CUdevice *dev_out) {
  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  if (dev_out) *dev_out = dev;
  return ctx;
}

// A driver answer's name, for output compared with a native run.
static inline const char *cu_name(CUresult r) {
  const char *s = "?";
  cuGetErrorName(r, &s);
  return s;
}
#endif
