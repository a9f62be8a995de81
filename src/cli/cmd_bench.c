/* cmd_bench.c - `scuda bench [--server HOST:PORT] [--json FILE] [--quick] [--native]`.
 *
 * Measures in one run what SCUDA costs on a link, and what the link itself
 * allows (docs/architecture.md, 7 Performance):
 *   - the raw link: TCP round trip, and bandwidth over one stream and over
 *     K streams at once (K = SCUDA_BULK_STREAMS, the connections a striped
 *     copy uses; 4 when striping is off), to the same server, in its raw
 *     echo and sink modes (protocol.h, HELLO_RAW_*): the handshake, then
 *     bytes, no CUDA and no SCUDA frames;
 *   - an empty synchronizing call (the shim's private scuda_client_ping);
 *   - through the shim, loaded like `scuda info` loads it, as a CUDA
 *     program sees it: cuStreamSynchronize on an idle stream, empty-kernel
 *     launches per second, H2D and D2H copies from 4 KiB to 1 GiB out of
 *     pageable and pinned memory, and module load time: cold, warm in
 *     the same process, and warm in a new process.
 * With --native the same driver workloads also run against this machine's
 * own libcuda.so.1, in a child process, for a native column.
 *
 * Progress goes to stderr while it runs, the table to stdout at the end,
 * and every figure to the --json file. A workload that fails is shown as
 * FAILED with its CUDA error and the others still run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"
#include "../common/why.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/protocol.h"
#include "common/transport.h"

static const char *const CMD = "scuda bench";

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define RAW_TIMEOUT_MS 60000

static const uint64_t COPY_SIZES[] = {4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB};
/* cuMemAlloc + cuMemFree pairs: sub-allocated, one chunk, several chunks. */
#define N_ALLOC_SIZES 4
static const uint64_t ALLOC_SIZES[N_ALLOC_SIZES] = {256, 64 * KiB, 2 * MiB, 64 * MiB};
#define N_SIZES ((int)(sizeof COPY_SIZES / sizeof COPY_SIZES[0]))

enum copy_kind { H2D_PAGEABLE, H2D_PINNED, D2H_PAGEABLE, D2H_PINNED, N_KINDS };
static const char *const KIND_NAME[N_KINDS] = {"H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"};
static const char *const KIND_DIR[N_KINDS] = {"h2d", "h2d", "d2h", "d2h"};
static const char *const KIND_MEM[N_KINDS] = {"pageable", "pinned", "pageable", "pinned"};

/* How much each part does; --quick shrinks it. */
struct plan {
    int quick;
    int rtt_n;            /* raw echo pings */
    int sync_n;           /* scuda pings and stream synchronizes */
    int launch_n;         /* empty-kernel launches */
    uint64_t raw_bytes;   /* raw sink transfer */
    int raw_reps;
    uint64_t max_copy;    /* largest copy size */
    uint64_t copy_budget; /* bytes per copy point: reps = budget / size ... */
    int copy_max_reps;    /* ... clamped to [3, this] */
    int alloc_n;          /* cuMemAlloc + cuMemFree pairs per size */
    double figure_s;      /* on a slow link, about the most one figure's round trips take (plan_fit_link) */
};

static const struct plan FULL = {0, 10000, 2000, 100000, 256 * MiB, 3, 1 * GiB, 1 * GiB, 1000, 1000, 10.0};
static const struct plan QUICK = {1, 2000, 500, 20000, 256 * MiB, 3, 256 * MiB, 256 * MiB, 300, 200, 2.0};

/* The fewest samples a latency figure gets however slow the link. */
#define FIT_MIN_SAMPLES 20

/* ---- results: plain data, so the native child can send them through a pipe ---- */

struct lat {
    int ok, n;
    double min, median, p99; /* microseconds */
    char err[112];
};

struct rate {
    int ok, reps;
    uint64_t bytes;
    /* Per repetition: the median run (raw link); for copies, the median of
     * 5 batch means up to 1 MiB, one batch mean above. */
    double seconds;
    double gbps;    /* 1e9 bytes per second */
    char err[112];
};

struct gpu_results {
    int ok; /* cuInit, device, context and stream worked */
    char err[200];
    char gpu[128];
    int driver_version;
    struct lat ping; /* shim only */
    struct lat sync;
    struct {
        int ok, count;
        double seconds, per_s;
        char err[112];
    } launch;
    struct {
        int ok;          /* cold and warm, in this process */
        double cold_ms, warm_ms;
        int fresh_ok;    /* warm, in a new process */
        double fresh_ms;
        char err[112];
    } module;
    struct rate copy[N_KINDS][N_SIZES];
    struct lat alloc[N_ALLOC_SIZES]; /* one cuMemAlloc + cuMemFree pair, microseconds */
    int bulk_streams; /* bulk connections the shim used (striping); 0: none */
};

struct raw_results {
    struct lat rtt;
    struct rate bw;   /* one stream */
    struct rate bw_k; /* k streams at once */
    int k;
};

/* ---- small helpers ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void progress(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench [%s] ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v. */
static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* Sorts v (microseconds). */
static void lat_fill(struct lat *l, double *v, int n)
{
    l->median = median_of(v, n);
    l->min = v[0];
    int i99 = (n * 99 + 99) / 100 - 1; /* nearest rank */
    l->p99 = v[i99 < n ? i99 : n - 1];
    l->n = n;
    l->ok = 1;
}

static const char *size_name(uint64_t b, char *out, size_t n)
{
    if (b >= GiB && b % GiB == 0)
        snprintf(out, n, "%llu GiB", (unsigned long long)(b / GiB));
    else if (b >= MiB && b % MiB == 0)
        snprintf(out, n, "%llu MiB", (unsigned long long)(b / MiB));
    else if (b >= KiB && b % KiB == 0)
        snprintf(out, n, "%llu KiB", (unsigned long long)(b / KiB));
    else
        snprintf(out, n, "%llu B", (unsigned long long)b);
    return out;
}

/* ---- the driver, loaded by path: SCUDA's shim, or this machine's own ---- */

/* Typed from cuda.h's declarations (compiled with __CUDA_API_VERSION_INTERNAL,
 * so each name is the literal exported symbol). */
struct driver {
    __typeof__(cuInit) *cuInit;
    __typeof__(cuDriverGetVersion) *cuDriverGetVersion;
    __typeof__(cuDeviceGet) *cuDeviceGet;
    __typeof__(cuDeviceGetName) *cuDeviceGetName;
    __typeof__(cuDevicePrimaryCtxRetain) *cuDevicePrimaryCtxRetain;
    __typeof__(cuDevicePrimaryCtxRelease_v2) *cuDevicePrimaryCtxRelease_v2;
    __typeof__(cuCtxSetCurrent) *cuCtxSetCurrent;
    __typeof__(cuCtxSynchronize) *cuCtxSynchronize;
    __typeof__(cuStreamCreate) *cuStreamCreate;
    __typeof__(cuStreamDestroy_v2) *cuStreamDestroy_v2;
    __typeof__(cuStreamSynchronize) *cuStreamSynchronize;
    __typeof__(cuModuleLoadData) *cuModuleLoadData;
    __typeof__(cuModuleGetFunction) *cuModuleGetFunction;
    __typeof__(cuModuleUnload) *cuModuleUnload;
    __typeof__(cuLaunchKernel) *cuLaunchKernel;
    __typeof__(cuMemAlloc_v2) *cuMemAlloc_v2;
    __typeof__(cuMemFree_v2) *cuMemFree_v2;
    __typeof__(cuMemHostAlloc) *cuMemHostAlloc;
    __typeof__(cuMemFreeHost) *cuMemFreeHost;
    __typeof__(cuMemcpyHtoD_v2) *cuMemcpyHtoD_v2;
    __typeof__(cuMemcpyDtoH_v2) *cuMemcpyDtoH_v2;
    __typeof__(cuGetErrorName) *cuGetErrorName;
    /* Private to the shim (see cmd_info.c); NULL in a real driver. */
    int (*scuda_client_ping)(double *rtt_us, int iterations);
    int (*scuda_client_bulk_streams)(void);
};

/* Returns 0, or -1 with the reason in err. */
static int load_driver(const char *path, struct driver *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return why_fail(err, errlen, "cannot load %s: %s", path, dlerror());
#define LOAD(name)                                                                          \
    if ((d->name = (__typeof__(d->name))dlsym(h, #name)) == NULL) {                         \
        snprintf(err, errlen, "%s does not export " #name ": it is not a CUDA driver", path); \
        return -1;                                                                          \
    }
    LOAD(cuInit)
    LOAD(cuDriverGetVersion)
    LOAD(cuDeviceGet)
    LOAD(cuDeviceGetName)
    LOAD(cuDevicePrimaryCtxRetain)
    LOAD(cuDevicePrimaryCtxRelease_v2)
    LOAD(cuCtxSetCurrent)
    LOAD(cuCtxSynchronize)
    LOAD(cuStreamCreate)
    LOAD(cuStreamDestroy_v2)
    LOAD(cuStreamSynchronize)
    LOAD(cuModuleLoadData)
    LOAD(cuModuleGetFunction)
    LOAD(cuModuleUnload)
    LOAD(cuLaunchKernel)
    LOAD(cuMemAlloc_v2)
    LOAD(cuMemFree_v2)
    LOAD(cuMemHostAlloc)
    LOAD(cuMemFreeHost)
    LOAD(cuMemcpyHtoD_v2)
    LOAD(cuMemcpyDtoH_v2)
    LOAD(cuGetErrorName)
#undef LOAD
    d->scuda_client_ping = (__typeof__(d->scuda_client_ping))dlsym(h, "scuda_client_ping");
    d->scuda_client_bulk_streams = (__typeof__(d->scuda_client_bulk_streams))dlsym(h, "scuda_client_bulk_streams");
    /* Never dlclosed: a driver starts threads. */
    return 0;
}

static void cu_err(const struct driver *d, char *out, size_t n, const char *call, CUresult r)
{
    const char *name = NULL;
    if (d->cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL) name = "unknown CUresult";
    snprintf(out, n, "%s: %s (%d)", call, name, (int)r);
}

/* ---- the driver workloads (run once through the shim, once natively) ---- */

static void bench_ping(const struct driver *d, const struct plan *p, const char *who, struct gpu_results *g)
{
    progress(who, "empty synchronizing call (scuda_client_ping) x %d", p->sync_n);
    double *v = malloc(sizeof(double) * (size_t)p->sync_n);
    if (v == NULL || d->scuda_client_ping(v, 20) != 0 || d->scuda_client_ping(v, p->sync_n) != 0)
        snprintf(g->ping.err, sizeof g->ping.err, "%s", v ? "scuda_client_ping failed" : "out of memory");
    else
        lat_fill(&g->ping, v, p->sync_n);
    free(v);
}

static void bench_sync(const struct driver *d, const struct plan *p, CUstream st, const char *who,
                       struct gpu_results *g)
{
    progress(who, "cuStreamSynchronize on an idle stream x %d", p->sync_n);
    double *v = malloc(sizeof(double) * (size_t)p->sync_n);
    if (v == NULL) {
        snprintf(g->sync.err, sizeof g->sync.err, "out of memory");
        return;
    }
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 20 && r == CUDA_SUCCESS; i++) r = d->cuStreamSynchronize(st);
    for (int i = 0; i < p->sync_n && r == CUDA_SUCCESS; i++) {
        double t0 = now_s();
        r = d->cuStreamSynchronize(st);
        v[i] = (now_s() - t0) * 1e6;
    }
    if (r != CUDA_SUCCESS)
        cu_err(d, g->sync.err, sizeof g->sync.err, "cuStreamSynchronize", r);
    else
        lat_fill(&g->sync, v, p->sync_n);
    free(v);
}

/* cuMemAlloc + cuMemFree of one size, back to back: what an allocator
 * that does not cache (or a program that allocates per step) pays. */
static void bench_alloc(const struct driver *d, const struct plan *p, const char *who, struct gpu_results *g)
{
    int n = p->alloc_n;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int si = 0; si < N_ALLOC_SIZES; si++) {
        struct lat *l = &g->alloc[si];
        char sz[32];
        progress(who, "cuMemAlloc + cuMemFree of %s x %d", size_name(ALLOC_SIZES[si], sz, sizeof sz), n);
        if (v == NULL) {
            snprintf(l->err, sizeof l->err, "out of memory");
            continue;
        }
        CUresult r = CUDA_SUCCESS;
        CUdeviceptr ptr;
        for (int i = 0; i < 20 && r == CUDA_SUCCESS; i++)
            if ((r = d->cuMemAlloc_v2(&ptr, ALLOC_SIZES[si])) == CUDA_SUCCESS) r = d->cuMemFree_v2(ptr);
        for (int i = 0; i < n && r == CUDA_SUCCESS; i++) {
            double t0 = now_s();
            if ((r = d->cuMemAlloc_v2(&ptr, ALLOC_SIZES[si])) == CUDA_SUCCESS) r = d->cuMemFree_v2(ptr);
            v[i] = (now_s() - t0) * 1e6;
        }
        if (r != CUDA_SUCCESS) cu_err(d, l->err, sizeof l->err, "cuMemAlloc/cuMemFree", r);
        else lat_fill(l, v, n);
    }
    free(v);
}

/* A pipe, not a socket: plain write(), not io_write_full's sendmsg. */
static int pipe_write(int fd, const void *p, size_t n)
{
    const char *q = p;
    while (n > 0) {
        ssize_t w = write(fd, q, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        q += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The empty kernel. The first line makes the text unique to this run, so
 * the first load is cold in every cache (the driver's JIT cache, a
 * server's module cache); loading the same text again is the warm case. */
static const char PTX_FMT[] = "// scuda bench %s %d %.9f\n"
                              ".version 8.0\n"
                              ".target sm_75\n"
                              ".address_size 64\n"
                              "\n"
                              ".visible .entry empty()\n"
                              "{\n"
                              "\tret;\n"
                              "}\n";

/* ---- the warm load in a new process ---- */

/* What a program's startup pays for its modules once caches are warm: a
 * process that never loaded the text loads it after another one did (a
 * hit in the server's module cache; natively, in the driver's JIT cache).
 * That process is forked before its parent loads a driver (a driver cannot
 * be used across fork, nor loaded twice into one process); it waits for
 * the text on a pipe, so it starts its driver only then. */
struct fresh_loader {
    pid_t pid; /* -1: none */
    int to, from;
};

struct fresh_result {
    int ok;
    double ms;
    char err[112];
};

static void fresh_load(const char *driver_path, const char *text, struct fresh_result *res)
{
    struct driver d;
    CUdevice dev;
    CUcontext ctx;
    CUmodule m;
    char ptx[sizeof PTX_FMT + 80];
    if (load_driver(driver_path, &d, res->err, sizeof res->err) != 0) return;
    CUresult r = d.cuInit(0);
    if (r == CUDA_SUCCESS) r = d.cuDeviceGet(&dev, 0);
    if (r == CUDA_SUCCESS) r = d.cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r == CUDA_SUCCESS) r = d.cuCtxSetCurrent(ctx);
    if (r != CUDA_SUCCESS) {
        cu_err(&d, res->err, sizeof res->err, "new process: context", r);
        return;
    }
    /* Untimed, as in this process: the first JIT of a process is not a module's cost. */
    snprintf(ptx, sizeof ptx, PTX_FMT, "fresh-prewarm", (int)getpid(), now_s());
    if (d.cuModuleLoadData(&m, ptx) == CUDA_SUCCESS) d.cuModuleUnload(m);
    double t0 = now_s();
    r = d.cuModuleLoadData(&m, text);
    res->ms = (now_s() - t0) * 1e3;
    if (r != CUDA_SUCCESS)
        cu_err(&d, res->err, sizeof res->err, "cuModuleLoadData (new process)", r);
    else
        res->ok = 1;
}

static void fresh_start(struct fresh_loader *f, const char *driver_path)
{
    int to[2], from[2];
    f->pid = -1;
    if (pipe(to) != 0) return;
    if (pipe(from) != 0) {
        close(to[0]);
        close(to[1]);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        uint32_t len;
        char *text;
        static struct fresh_result res;
        if (io_read_full(to[0], &len, 4) != 0 || len > (1u << 20) || !(text = calloc(1, len + 1)) ||
            io_read_full(to[0], text, len) != 0)
            _exit(0); /* the parent did not need us */
        fresh_load(driver_path, text, &res);
        _exit(pipe_write(from[1], &res, sizeof res) == 0 ? 0 : 1);
    }
    close(to[0]);
    close(from[1]);
    if (pid < 0) {
        close(to[1]);
        close(from[0]);
        return;
    }
    f->pid = pid;
    f->to = to[1];
    f->from = from[0];
}

static void fresh_stop(struct fresh_loader *f)
{
    if (f->pid <= 0) return;
    close(f->to);
    close(f->from);
    waitpid(f->pid, NULL, 0);
    f->pid = -1;
}

static void fresh_measure(struct fresh_loader *f, const char *text, struct gpu_results *g)
{
    struct fresh_result res = {0};
    uint32_t len = (uint32_t)strlen(text);
    if (f->pid <= 0)
        snprintf(res.err, sizeof res.err, "cannot start a new process for the warm load");
    else if (pipe_write(f->to, &len, 4) != 0 || pipe_write(f->to, text, len) != 0 ||
             io_read_full(f->from, &res, sizeof res) != 0)
        snprintf(res.err, sizeof res.err, "the new process for the warm load ended without results");
    fresh_stop(f);
    g->module.fresh_ok = res.ok;
    g->module.fresh_ms = res.ms;
    if (!res.ok && !g->module.err[0]) snprintf(g->module.err, sizeof g->module.err, "%s", res.err);
}

/* Returns the module holding `empty` (the warm one), or NULL. */
static CUmodule bench_module(const struct driver *d, const char *who, struct gpu_results *g, CUfunction *fn,
                             struct fresh_loader *fresh)
{
    progress(who, "module load, cold and warm");
    char ptx[sizeof PTX_FMT + 80];
    CUmodule cold = NULL, warm = NULL;
    /* First an untimed load of other text: what a process pays once, at
     * its first JIT (loading the JIT compiler, from disk if nobody ran it
     * lately), is not a module's cost and must not favour whoever runs second. */
    snprintf(ptx, sizeof ptx, PTX_FMT, "prewarm", (int)getpid(), now_s());
    if (d->cuModuleLoadData(&cold, ptx) == CUDA_SUCCESS) d->cuModuleUnload(cold);
    snprintf(ptx, sizeof ptx, PTX_FMT, "module", (int)getpid(), now_s());
    double t0 = now_s();
    CUresult r = d->cuModuleLoadData(&cold, ptx);
    double t1 = now_s();
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->module.err, sizeof g->module.err, "cuModuleLoadData (cold)", r);
        return NULL;
    }
    r = d->cuModuleLoadData(&warm, ptx);
    double t2 = now_s();
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->module.err, sizeof g->module.err, "cuModuleLoadData (warm)", r);
        d->cuModuleUnload(cold);
        return NULL;
    }
    g->module.cold_ms = (t1 - t0) * 1e3;
    g->module.warm_ms = (t2 - t1) * 1e3;
    g->module.ok = 1;
    d->cuModuleUnload(cold);
    progress(who, "module load, warm, in a new process");
    fresh_measure(fresh, ptx, g);
    r = d->cuModuleGetFunction(fn, warm, "empty");
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->launch.err, sizeof g->launch.err, "cuModuleGetFunction", r);
        d->cuModuleUnload(warm);
        return NULL;
    }
    return warm;
}

static void bench_launch(const struct driver *d, const struct plan *p, CUfunction fn, CUstream st, const char *who,
                         struct gpu_results *g)
{
    progress(who, "empty kernel launches x %d, then synchronize", p->launch_n);
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 100 && r == CUDA_SUCCESS; i++) r = d->cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL);
    if (r == CUDA_SUCCESS) r = d->cuStreamSynchronize(st);
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->launch.err, sizeof g->launch.err, "cuLaunchKernel (warm-up)", r);
        return;
    }
    double t0 = now_s();
    int i;
    for (i = 0; i < p->launch_n && r == CUDA_SUCCESS; i++) r = d->cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL);
    if (r != CUDA_SUCCESS) {
        char call[64];
        snprintf(call, sizeof call, "cuLaunchKernel (launch %d)", i);
        cu_err(d, g->launch.err, sizeof g->launch.err, call, r);
        return;
    }
    r = d->cuStreamSynchronize(st);
    double dt = now_s() - t0;
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->launch.err, sizeof g->launch.err, "cuStreamSynchronize after the launches", r);
        return;
    }
    g->launch.count = p->launch_n;
    g->launch.seconds = dt;
    g->launch.per_s = p->launch_n / dt;
    g->launch.ok = 1;
}

static CUresult copy_once(const struct driver *d, int kind, CUdeviceptr dev, void *host, size_t n)
{
    return kind == H2D_PAGEABLE || kind == H2D_PINNED ? d->cuMemcpyHtoD_v2(dev, host, n)
                                                      : d->cuMemcpyDtoH_v2(host, dev, n);
}

/* Copies of this size or less are timed in several batches and reported
 * as the median batch: one batch of 4 KiB copies lasts well under a
 * millisecond, so a single scheduler hiccup would move its mean by
 * several percent. */
#define COPY_SMALL (1 * MiB)
#define COPY_SMALL_BATCHES 5

/* One batch: reps back-to-back copies, then cuCtxSynchronize, so a copy
 * that returns before its bytes have landed (allowed for pageable H2D)
 * still counts in full. Returns the mean seconds per copy, or -1. */
static double copy_batch(const struct driver *d, int kind, CUdeviceptr dev, void *host, uint64_t size, int reps,
                         struct rate *out)
{
    CUresult r = CUDA_SUCCESS;
    double t0 = now_s();
    for (int i = 0; i < reps && r == CUDA_SUCCESS; i++) r = copy_once(d, kind, dev, host, size);
    if (r != CUDA_SUCCESS) {
        cu_err(d, out->err, sizeof out->err, kind < D2H_PAGEABLE ? "cuMemcpyHtoD" : "cuMemcpyDtoH", r);
        return -1;
    }
    if ((r = d->cuCtxSynchronize()) != CUDA_SUCCESS) {
        cu_err(d, out->err, sizeof out->err, "cuCtxSynchronize after the copies", r);
        return -1;
    }
    return (now_s() - t0) / reps;
}

static void copy_point(const struct driver *d, const struct plan *p, int kind, CUdeviceptr dev, void *host,
                       uint64_t size, struct rate *out)
{
    uint64_t want = p->copy_budget / size;
    int reps = want < 3 ? 3 : want > (uint64_t)p->copy_max_reps ? p->copy_max_reps : (int)want;
    int batches = size <= COPY_SMALL ? COPY_SMALL_BATCHES : 1;
    double per_copy[COPY_SMALL_BATCHES];
    out->bytes = size;
    CUresult r = CUDA_SUCCESS;
    if (size <= 16 * MiB) r = copy_once(d, kind, dev, host, size); /* warm-up */
    if (r == CUDA_SUCCESS) r = d->cuCtxSynchronize();
    if (r != CUDA_SUCCESS) {
        cu_err(d, out->err, sizeof out->err, "the warm-up copy", r);
        return;
    }
    for (int b = 0; b < batches; b++)
        if ((per_copy[b] = copy_batch(d, kind, dev, host, size, reps, out)) < 0) return;
    out->reps = reps * batches;
    out->seconds = median_of(per_copy, batches);
    out->gbps = (double)size / out->seconds / 1e9;
    out->ok = 1;
}

static void bench_copies(const struct driver *d, const struct plan *p, const char *who, struct gpu_results *g)
{
    char err[112] = "", perr[112] = "", sz[32];
    CUdeviceptr dev = 0;
    void *pageable = NULL, *pinned = NULL;
    CUresult r = d->cuMemAlloc_v2(&dev, p->max_copy);
    if (r != CUDA_SUCCESS) cu_err(d, err, sizeof err, "cuMemAlloc", r);
    if (!err[0] && (pageable = malloc(p->max_copy)) == NULL) snprintf(err, sizeof err, "malloc: out of memory");
    if (!err[0]) {
        memset(pageable, 0x5a, p->max_copy); /* fault the pages in before timing */
        r = d->cuMemHostAlloc(&pinned, p->max_copy, 0);
        if (r != CUDA_SUCCESS)
            cu_err(d, perr, sizeof perr, "cuMemHostAlloc", r);
        else
            memset(pinned, 0x5a, p->max_copy);
    }
    for (int k = 0; k < N_KINDS; k++) {
        int is_pinned = k == H2D_PINNED || k == D2H_PINNED;
        for (int s = 0; s < N_SIZES; s++) {
            struct rate *out = &g->copy[k][s];
            out->bytes = COPY_SIZES[s];
            if (COPY_SIZES[s] > p->max_copy) continue;
            if (err[0] || (is_pinned && perr[0])) {
                snprintf(out->err, sizeof out->err, "%s", err[0] ? err : perr);
                continue;
            }
            copy_point(d, p, k, dev, is_pinned ? pinned : pageable, COPY_SIZES[s], out);
            if (out->ok)
                progress(who, "%s %s: %.3f GB/s", KIND_NAME[k], size_name(COPY_SIZES[s], sz, sizeof sz), out->gbps);
            else
                progress(who, "%s %s: FAILED: %s", KIND_NAME[k], size_name(COPY_SIZES[s], sz, sizeof sz), out->err);
        }
    }
    if (pinned) d->cuMemFreeHost(pinned);
    free(pageable);
    if (dev) d->cuMemFree_v2(dev);
}

static void run_gpu(const struct driver *d, const struct plan *p, const char *who, struct gpu_results *g,
                    struct fresh_loader *fresh)
{
    memset(g, 0, sizeof *g);
    CUdevice dev;
    CUcontext ctx = NULL;
    CUstream st = NULL;
    progress(who, "cuInit and context");
    CUresult r = d->cuInit(0);
    if (r != CUDA_SUCCESS) {
        cu_err(d, g->err, sizeof g->err, "cuInit", r);
        return;
    }
    d->cuDriverGetVersion(&g->driver_version);
    if ((r = d->cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) {
        cu_err(d, g->err, sizeof g->err, "cuDeviceGet", r);
        return;
    }
    if (d->cuDeviceGetName(g->gpu, (int)sizeof g->gpu, dev) != CUDA_SUCCESS) snprintf(g->gpu, sizeof g->gpu, "?");
    if ((r = d->cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS ||
        (r = d->cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) {
        cu_err(d, g->err, sizeof g->err, "primary context", r);
        return;
    }
    if ((r = d->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        cu_err(d, g->err, sizeof g->err, "cuStreamCreate", r);
        d->cuDevicePrimaryCtxRelease_v2(dev);
        return;
    }
    g->ok = 1;

    if (d->scuda_client_ping) bench_ping(d, p, who, g);
    bench_sync(d, p, st, who, g);
    CUfunction fn = NULL;
    CUmodule mod = bench_module(d, who, g, &fn, fresh);
    if (mod) {
        bench_launch(d, p, fn, st, who, g);
    } else if (!g->launch.err[0]) {
        snprintf(g->launch.err, sizeof g->launch.err, "not run: the module did not load");
    }
    bench_copies(d, p, who, g);
    bench_alloc(d, p, who, g);
    if (d->scuda_client_bulk_streams) g->bulk_streams = d->scuda_client_bulk_streams();

    if (mod) d->cuModuleUnload(mod);
    d->cuStreamDestroy_v2(st);
    d->cuDevicePrimaryCtxRelease_v2(dev);
}

/* The same workloads against this machine's own driver, in a child, so
 * that the real driver and the shim (both libcuda.so.1) never share a
 * process. */
static void run_native(const struct plan *p, struct gpu_results *g)
{
    memset(g, 0, sizeof *g);
    int pfd[2];
    if (pipe(pfd) != 0) {
        snprintf(g->err, sizeof g->err, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        static struct gpu_results res;
        struct driver d;
        struct fresh_loader fresh;
        memset(&res, 0, sizeof res);
        fresh_start(&fresh, "libcuda.so.1");
        if (load_driver("libcuda.so.1", &d, res.err, sizeof res.err) != 0) {
            /* res.err says why */
        } else if (d.scuda_client_ping != NULL) {
            snprintf(res.err, sizeof res.err,
                     "the libcuda.so.1 the loader finds here is SCUDA's shim (check LD_LIBRARY_PATH); "
                     "--native needs this machine's own driver");
        } else {
            run_gpu(&d, p, "native", &res, &fresh);
        }
        fresh_stop(&fresh);
        _exit(pipe_write(pfd[1], &res, sizeof res) == 0 ? 0 : 1);
    }
    close(pfd[1]);
    if (pid < 0) {
        snprintf(g->err, sizeof g->err, "fork: %s", strerror(errno));
        close(pfd[0]);
        return;
    }
    int got = io_read_full(pfd[0], g, sizeof *g);
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != 0) {
        memset(g, 0, sizeof *g);
        if (WIFSIGNALED(status))
            snprintf(g->err, sizeof g->err, "the native run died from signal %d", WTERMSIG(status));
        else
            snprintf(g->err, sizeof g->err, "the native run ended without results (status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

/* ---- the raw link ---- */

/* Connect in raw mode (HELLO_RAW_ECHO or HELLO_RAW_SINK). Returns the fd,
 * or -1 with the reason in err. */
static int raw_open(const char *addr, uint16_t mode, char *err, size_t errlen)
{
    int fd = dial(addr, 5000, PREFACE_SESSION, err, errlen);
    if (fd < 0) return -1;
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint32_t status = WELCOME_INTERNAL;
    char msg[256];
    if (hello_read_server(fd, 5000, nonce, err, errlen) != 0) goto fail;
    if (hello_send_client(fd, mode, 0 /* a raw link uses no device */, scuda_token(), nonce, NULL, 0) != 0 ||
        hello_read_welcome(fd, 10000, &status, msg, sizeof msg) != 0) {
        /* A server without raw link modes starts a CUDA session, whose
         * welcome carries session info after the message. */
        snprintf(err, errlen, "%s",
                 status == WELCOME_OK ? "the server has no raw link mode: update it"
                                      : "no welcome from the server: see its log");
        goto fail;
    }
    if (status != WELCOME_OK) {
        snprintf(err, errlen, "refused: %.60s%s", msg,
                 status == WELCOME_BAD_TOKEN ? " (set SCUDA_TOKEN to the server's token)" : "");
        goto fail;
    }
    if (strcmp(msg, mode == HELLO_RAW_ECHO ? "raw echo" : "raw sink") != 0) {
        snprintf(err, errlen, "the server has no raw link mode: update it");
        goto fail;
    }
    return fd;
fail:
    io_close(fd);
    return -1;
}

static void raw_rtt(const char *addr, const struct plan *p, struct lat *out)
{
    progress("link", "raw TCP round trip x %d (16 bytes, echo)", p->rtt_n);
    int fd = raw_open(addr, HELLO_RAW_ECHO, out->err, sizeof out->err);
    if (fd < 0) return;
    double *v = malloc(sizeof(double) * (size_t)p->rtt_n);
    uint8_t msg[16] = "scuda bench rtt", back[16];
    int ok = v != NULL, n = 0;
    /* 100 pings to warm up, then rtt_n, each part bounded by time: over a
     * WAN 2000 round trips alone took 40 s. */
    double warm_until = now_s() + p->figure_s / 10, until = 0;
    for (int i = -100; ok && i < p->rtt_n; i++) {
        double t0 = now_s();
        if (i < 0 && t0 > warm_until) i = 0;
        if (i == 0 && until == 0) until = t0 + p->figure_s;
        if (i >= FIT_MIN_SAMPLES && t0 > until) break;
        ok = io_write_full(fd, msg, sizeof msg) == 0 && io_read_full_timeout(fd, back, sizeof back, RAW_TIMEOUT_MS) == 0;
        if (i >= 0) v[i] = (now_s() - t0) * 1e6, n = i + 1;
    }
    if (!ok)
        snprintf(out->err, sizeof out->err, "raw echo: %s", v ? strerror(errno) : "out of memory");
    else if (memcmp(msg, back, sizeof msg) != 0)
        snprintf(out->err, sizeof out->err, "raw echo: the server sent back other bytes");
    else
        lat_fill(out, v, n);
    free(v);
    io_close(fd);
}

/* Fixed counts suit a loopback or a LAN, where a round trip takes tens of
 * microseconds; over a WAN (20 ms) they made one run take more than five
 * minutes. So each figure that costs a round trip a sample gets as many as
 * fit in about p->figure_s at the link's measured round trip, at least
 * FIT_MIN_SAMPLES (copies: 3 a batch). Nothing changes where the counts fit. */
static void plan_fit_link(struct plan *p, double rtt_us)
{
    double fit = rtt_us > 0 ? p->figure_s / (rtt_us * 1e-6) : 1e9;
    int fit_n = fit < FIT_MIN_SAMPLES ? FIT_MIN_SAMPLES : fit > 1e9 ? 1000000000 : (int)fit;
    if (p->sync_n > fit_n) p->sync_n = fit_n;
    if (p->alloc_n > fit_n / 2) p->alloc_n = fit_n / 2 > FIT_MIN_SAMPLES ? fit_n / 2 : FIT_MIN_SAMPLES; /* 2 calls a pair */
    int copy_fit = fit_n / COPY_SMALL_BATCHES; /* a small copy point runs its reps COPY_SMALL_BATCHES times */
    if (p->copy_max_reps > copy_fit) p->copy_max_reps = copy_fit > 3 ? copy_fit : 3;
}

/* One sink transfer of n bytes from buf: seconds until acknowledged, or < 0. */
static double raw_send(int fd, const uint8_t *buf, uint64_t n)
{
    uint64_t ack = 0;
    double t0 = now_s();
    if (io_write_full(fd, &n, sizeof n) != 0 || io_write_full(fd, buf, n) != 0 ||
        io_read_full_timeout(fd, &ack, sizeof ack, RAW_TIMEOUT_MS) != 0)
        return -1;
    if (ack != n) {
        errno = EPROTO;
        return -1;
    }
    return now_s() - t0;
}

/* The warm-up transfer before the timed ones: 16 MiB, or less when the
 * source buffer (raw_bytes) is smaller. */
static uint64_t raw_warmup(const struct plan *p) { return p->raw_bytes < 16 * MiB ? p->raw_bytes : 16 * MiB; }

static void raw_bw(const char *addr, const struct plan *p, struct rate *out)
{
    char sz[32];
    progress("link", "raw TCP one-stream bandwidth, %s x %d (sink)", size_name(p->raw_bytes, sz, sizeof sz),
             p->raw_reps);
    out->bytes = p->raw_bytes;
    int fd = raw_open(addr, HELLO_RAW_SINK, out->err, sizeof out->err);
    if (fd < 0) return;
    /* A source as large as the transfer, touched first, like a copy's. */
    uint8_t *buf = malloc(p->raw_bytes);
    double v[16];
    int ok = buf != NULL;
    if (ok) memset(buf, 0x5a, p->raw_bytes);
    if (ok) ok = raw_send(fd, buf, raw_warmup(p)) >= 0; /* warm-up */
    for (int i = 0; ok && i < p->raw_reps; i++) ok = (v[i] = raw_send(fd, buf, p->raw_bytes)) >= 0;
    if (!ok) {
        snprintf(out->err, sizeof out->err, "raw sink: %s", buf ? strerror(errno) : "out of memory");
    } else {
        uint64_t end = 0;
        io_write_full(fd, &end, sizeof end);
        out->reps = p->raw_reps;
        out->seconds = median_of(v, p->raw_reps);
        out->gbps = (double)p->raw_bytes / out->seconds / 1e9;
        out->ok = 1;
    }
    free(buf);
    io_close(fd);
}

/* The start line of a transfer over several streams at once. */
struct start {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int go;
};

/* One stream's part of it. */
struct raw_part {
    int fd;
    const uint8_t *buf;
    uint64_t bytes;
    struct start *start;
    int ok, err;
};

static void *raw_part_main(void *arg)
{
    struct raw_part *r = arg;
    pthread_mutex_lock(&r->start->lock);
    while (!r->start->go) pthread_cond_wait(&r->start->cv, &r->start->lock);
    pthread_mutex_unlock(&r->start->lock);
    r->ok = raw_send(r->fd, r->buf, r->bytes) >= 0;
    r->err = errno;
    return NULL;
}

/* total bytes from buf, split over the k connections fds, all at once:
 * seconds from the common start until the last acknowledgement, or < 0
 * (errno set). */
static double raw_send_k(const int *fds, int k, const uint8_t *buf, uint64_t total)
{
    struct raw_part part[BULK_MAX_STREAMS];
    pthread_t t[BULK_MAX_STREAMS];
    struct start start = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    uint64_t each = total / (uint64_t)k;
    int started = 0;
    for (int i = 0; i < k; i++) {
        uint64_t bytes = i == k - 1 ? total - each * (uint64_t)(k - 1) : each;
        part[i] = (struct raw_part){fds[i], buf + each * (uint64_t)i, bytes, &start, 0, 0};
        if (pthread_create(&t[i], NULL, raw_part_main, &part[i]) != 0) break;
        started++;
    }
    pthread_mutex_lock(&start.lock);
    start.go = 1;
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.lock);
    double t0 = now_s();
    int ok = started == k, err = EAGAIN;
    for (int i = 0; i < started; i++) {
        pthread_join(t[i], NULL);
        if (!part[i].ok) {
            ok = 0;
            err = part[i].err;
        }
    }
    double dt = now_s() - t0;
    errno = err;
    return ok ? dt : -1;
}

/* Bandwidth over k raw sink connections at once: what striping over k
 * bulk connections could reach on this link. */
static void raw_bw_k(const char *addr, const struct plan *p, int k, struct rate *out)
{
    char sz[32];
    progress("link", "raw TCP bandwidth over %d streams at once, %s x %d (sink)", k,
             size_name(p->raw_bytes, sz, sizeof sz), p->raw_reps);
    out->bytes = p->raw_bytes;
    int fds[BULK_MAX_STREAMS], n = 0;
    for (; n < k; n++)
        if ((fds[n] = raw_open(addr, HELLO_RAW_SINK, out->err, sizeof out->err)) < 0) break;
    uint8_t *buf = n == k ? malloc(p->raw_bytes) : NULL;
    double v[16];
    int ok = buf != NULL;
    if (ok) memset(buf, 0x5a, p->raw_bytes);
    if (ok) ok = raw_send_k(fds, k, buf, raw_warmup(p)) >= 0; /* warm-up */
    for (int i = 0; ok && i < p->raw_reps; i++) ok = (v[i] = raw_send_k(fds, k, buf, p->raw_bytes)) >= 0;
    if (ok) {
        out->reps = p->raw_reps;
        out->seconds = median_of(v, p->raw_reps);
        out->gbps = (double)p->raw_bytes / out->seconds / 1e9;
        out->ok = 1;
    } else if (n == k) {
        snprintf(out->err, sizeof out->err, "raw sink: %s", buf ? strerror(errno) : "out of memory");
    }
    uint64_t end = 0;
    for (int i = 0; i < n; i++) {
        if (ok) io_write_full(fds[i], &end, sizeof end);
        io_close(fds[i]);
    }
    free(buf);
}

/* ---- the table ---- */

static int with_native;

enum unit { U_US, U_MS, U_GBPS, U_PER_S };

/* ok: 1 measured, 0 failed, -1 not applicable. */
static void fmt_val(char *out, size_t n, int ok, double v, enum unit u)
{
    if (ok < 0) {
        snprintf(out, n, "-");
        return;
    }
    if (!ok) {
        snprintf(out, n, "FAILED");
        return;
    }
    switch (u) {
    case U_US: snprintf(out, n, "%.1f us", v); break;
    case U_MS: snprintf(out, n, "%.2f ms", v); break;
    case U_GBPS: snprintf(out, n, "%.3f GB/s", v); break;
    case U_PER_S: snprintf(out, n, "%.0f /s", v); break;
    }
}

static void fmt_ratio(char *out, size_t n, int ok, double v, double ref)
{
    if (!ok || ref <= 0)
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%.2fx", v / ref);
}

/* A raw link reference for a row: ok = 0 when there is none. */
struct ref {
    int ok;
    double v;
};

/* One row: SCUDA's value, the native one (when measured), and the ratios
 * SCUDA / native, SCUDA / raw link (one stream) and SCUDA / raw link
 * (k streams). */
static void row(const char *name, int ok, double v, int n_ok, double nv, enum unit u, struct ref raw, struct ref raw_k)
{
    char a[32], b[32], c[16], e[16], f[16];
    fmt_val(a, sizeof a, ok, v, u);
    fmt_ratio(e, sizeof e, ok && raw.ok, v, raw.v);
    fmt_ratio(f, sizeof f, ok && raw_k.ok, v, raw_k.v);
    if (with_native) {
        fmt_val(b, sizeof b, n_ok, nv, u);
        fmt_ratio(c, sizeof c, ok && n_ok > 0, v, nv);
        printf("  %-34s %16s %16s %10s %10s %10s\n", name, a, b, c, e, f);
    } else {
        printf("  %-34s %16s %10s %10s\n", name, a, e, f);
    }
}

static int gpu_failed(const struct gpu_results *g)
{
    int bad = !g->ok || g->ping.err[0] || g->sync.err[0] || g->launch.err[0] || g->module.err[0];
    for (int si = 0; si < N_ALLOC_SIZES; si++) bad |= g->alloc[si].err[0] != 0;
    for (int k = 0; k < N_KINDS; k++)
        for (int s = 0; s < N_SIZES; s++) bad |= g->copy[k][s].err[0] != 0;
    return bad;
}

static void print_errors(const char *who, const struct gpu_results *g)
{
    char sz[32];
    if (!g->ok) {
        printf("  %s: %s\n", who, g->err[0] ? g->err : "did not run");
        return;
    }
    if (g->ping.err[0]) printf("  %s: empty sync call: %s\n", who, g->ping.err);
    if (g->sync.err[0]) printf("  %s: stream synchronize: %s\n", who, g->sync.err);
    for (int si = 0; si < N_ALLOC_SIZES; si++)
        if (g->alloc[si].err[0]) printf("  %s: cuMemAlloc/cuMemFree: %s\n", who, g->alloc[si].err);
    if (g->launch.err[0]) printf("  %s: launches: %s\n", who, g->launch.err);
    if (g->module.err[0]) printf("  %s: module load: %s\n", who, g->module.err);
    for (int k = 0; k < N_KINDS; k++)
        for (int s = 0; s < N_SIZES; s++)
            if (g->copy[k][s].err[0])
                printf("  %s: %s %s: %s\n", who, KIND_NAME[k], size_name(COPY_SIZES[s], sz, sizeof sz),
                       g->copy[k][s].err);
}

static void print_table(const char *addr, const char *source, const struct plan *p, const struct raw_results *raw,
                        const struct gpu_results *s, const struct gpu_results *nat)
{
    char sz[32];
    printf("\nscuda bench%s\n", p->quick ? " (--quick)" : "");
    printf("Server:  %s (%s, from %s)\n", addr, addr_is_loopback(addr) ? "loopback" : "network", source);
    if (s->ok)
        printf("GPU:     %s, driver CUDA %d.%d (through SCUDA)\n", s->gpu, s->driver_version / 1000,
               s->driver_version % 1000 / 10);
    else
        printf("GPU:     unknown: the shim did not start (%s)\n", s->err);
    if (nat && nat->ok)
        printf("Native:  %s, driver CUDA %d.%d (this machine's libcuda.so.1)\n", nat->gpu,
               nat->driver_version / 1000, nat->driver_version % 1000 / 10);
    else if (nat)
        printf("Native:  not measured: %s\n", nat->err);
    if (raw->rtt.ok)
        printf("Link:    raw TCP round trip %.1f us median, %.1f us p99, %.1f us min (%d x 16 B)\n", raw->rtt.median,
               raw->rtt.p99, raw->rtt.min, raw->rtt.n);
    else
        printf("Link:    raw TCP round trip FAILED: %s\n", raw->rtt.err);
    if (raw->bw.ok)
        printf("         raw TCP one stream %.3f GB/s (%s, median of %d)\n", raw->bw.gbps,
               size_name(raw->bw.bytes, sz, sizeof sz), raw->bw.reps);
    else
        printf("         raw TCP one stream FAILED: %s\n", raw->bw.err);
    if (raw->bw_k.ok)
        printf("         raw TCP %d streams at once %.3f GB/s (%s in all, median of %d)\n", raw->k, raw->bw_k.gbps,
               size_name(raw->bw_k.bytes, sz, sizeof sz), raw->bw_k.reps);
    else
        printf("         raw TCP %d streams at once FAILED: %s\n", raw->k, raw->bw_k.err);
    if (s->ok)
        printf("Copies:  %s\n",
               !s->bulk_streams           ? "over the main connection only"
               : scuda_tls_for(addr) ? "striped over bulk connections from 1 MiB on (TLS)"
                                     : "striped over bulk connections from 8 MiB on");
    if (s->bulk_streams) printf("         %d bulk connections (SCUDA_BULK_STREAMS)\n", s->bulk_streams);
    printf("\n");

    const struct gpu_results empty = {0};
    const struct gpu_results *n = nat ? nat : &empty;
    char kcol[16];
    snprintf(kcol, sizeof kcol, "/raw x%d", raw->k);
    if (with_native)
        printf("  %-34s %16s %16s %10s %10s %10s\n", "figure", "SCUDA", "native", "/native", "/raw", kcol);
    else
        printf("  %-34s %16s %10s %10s\n", "figure", "SCUDA", "/raw", kcol);
    const struct ref none = {0, 0}, rtt = {raw->rtt.ok, raw->rtt.median}, rtt99 = {raw->rtt.ok, raw->rtt.p99};
    const struct ref bw = {raw->bw.ok, raw->bw.gbps}, bw_k = {raw->bw_k.ok, raw->bw_k.gbps};
    row("empty sync call, median", s->ping.ok, s->ping.median, -1, 0, U_US, rtt, none);
    row("empty sync call, p99", s->ping.ok, s->ping.p99, -1, 0, U_US, rtt99, none);
    row("cuStreamSynchronize idle, median", s->sync.ok, s->sync.median, n->sync.ok, n->sync.median, U_US, rtt, none);
    row("cuStreamSynchronize idle, p99", s->sync.ok, s->sync.p99, n->sync.ok, n->sync.p99, U_US, rtt99, none);
    row("empty kernel launches", s->launch.ok, s->launch.per_s, n->launch.ok, n->launch.per_s, U_PER_S, none, none);
    row("module load, cold (new image)", s->module.ok, s->module.cold_ms, n->module.ok, n->module.cold_ms, U_MS,
        none, none);
    row("module load, warm (same process)", s->module.ok, s->module.warm_ms, n->module.ok, n->module.warm_ms,
        U_MS, none, none);
    row("module load, warm (new process)", s->module.fresh_ok, s->module.fresh_ms, n->module.fresh_ok,
        n->module.fresh_ms, U_MS, none, none);
    for (int k = 0; k < N_KINDS; k++) {
        for (int si = 0; si < N_SIZES; si++) {
            if (COPY_SIZES[si] > p->max_copy) continue;
            char name[64];
            snprintf(name, sizeof name, "%s %s", KIND_NAME[k], size_name(COPY_SIZES[si], sz, sizeof sz));
            const struct rate *a = &s->copy[k][si], *b = &n->copy[k][si];
            row(name, a->ok, a->gbps, b->ok, b->gbps, U_GBPS, bw, bw_k);
        }
    }
    for (int si = 0; si < N_ALLOC_SIZES; si++) {
        char name[64];
        snprintf(name, sizeof name, "cuMemAlloc+Free %s, median", size_name(ALLOC_SIZES[si], sz, sizeof sz));
        row(name, s->alloc[si].ok, s->alloc[si].median, n->alloc[si].ok, n->alloc[si].median, U_US, rtt, none);
    }
    printf("\n  /native and /raw are SCUDA's figure divided by the reference: above 1 is\n"
           "  slower for times, faster for rates. /raw divides times by the raw round trip\n"
           "  and bandwidths by the raw one-stream bandwidth; %s divides bandwidths by\n"
           "  the raw bandwidth of %d streams at once.\n", kcol, raw->k);

    if (!raw->rtt.ok || !raw->bw.ok || !raw->bw_k.ok || gpu_failed(s) || (nat && gpu_failed(nat))) {
        printf("\nFailures:\n");
        if (!raw->rtt.ok) printf("  link: round trip: %s\n", raw->rtt.err);
        if (!raw->bw.ok) printf("  link: bandwidth: %s\n", raw->bw.err);
        if (!raw->bw_k.ok) printf("  link: bandwidth over %d streams: %s\n", raw->k, raw->bw_k.err);
        print_errors("SCUDA", s);
        if (nat) print_errors("native", nat);
    }
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_err(FILE *f, const char *err)
{
    if (err[0])
        json_str(f, err);
    else
        fputs("null", f);
}

static void json_ratio(FILE *f, int ok, double v, double ref)
{
    if (ok && ref > 0)
        fprintf(f, "%.6g", v / ref);
    else
        fputs("null", f);
}

static void json_lat(FILE *f, const char *name, const struct lat *l, int rok, double rtt, double rtt99)
{
    fprintf(f, "    \"%s\": ", name);
    if (!l->ok && !l->err[0]) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"ok\": %s, \"n\": %d, \"min\": %.3f, \"median\": %.3f, \"p99\": %.3f, \"median_vs_rtt\": ",
            l->ok ? "true" : "false", l->n, l->min, l->median, l->p99);
    json_ratio(f, l->ok && rok, l->median, rtt);
    fputs(", \"p99_vs_rtt_p99\": ", f);
    json_ratio(f, l->ok && rok, l->p99, rtt99);
    fputs(", \"error\": ", f);
    json_err(f, l->err);
    fputc('}', f);
}

static void json_gpu(FILE *f, const char *who, const struct gpu_results *g, const struct gpu_results *ref,
                     const struct raw_results *raw, const struct plan *p)
{
    fprintf(f, "  \"%s\": ", who);
    if (g == NULL) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\n    \"ok\": %s,\n    \"error\": ", g->ok ? "true" : "false");
    json_err(f, g->err);
    fputs(",\n    \"gpu\": ", f);
    json_str(f, g->gpu);
    fprintf(f, ",\n    \"driver_version\": %d,\n    \"bulk_streams\": %d,\n", g->driver_version, g->bulk_streams);
    json_lat(f, "empty_sync_call_us", &g->ping, raw->rtt.ok, raw->rtt.median, raw->rtt.p99);
    fputs(",\n", f);
    json_lat(f, "stream_sync_us", &g->sync, raw->rtt.ok, raw->rtt.median, raw->rtt.p99);
    for (int si = 0; si < N_ALLOC_SIZES; si++) {
        char name[48];
        snprintf(name, sizeof name, "alloc_free_%llu_bytes_us", (unsigned long long)ALLOC_SIZES[si]);
        fputs(",\n", f);
        json_lat(f, name, &g->alloc[si], raw->rtt.ok, raw->rtt.median, raw->rtt.p99);
    }
    fprintf(f, ",\n    \"launch\": {\"ok\": %s, \"count\": %d, \"seconds\": %.6f, \"per_s\": %.1f, \"vs_native\": ",
            g->launch.ok ? "true" : "false", g->launch.count, g->launch.seconds, g->launch.per_s);
    json_ratio(f, ref && g->launch.ok && ref->launch.ok, g->launch.per_s, ref ? ref->launch.per_s : 0);
    fputs(", \"error\": ", f);
    json_err(f, g->launch.err);
    fprintf(f, "},\n    \"module_load_ms\": {\"ok\": %s, \"cold\": %.3f, \"warm\": %.3f, \"cold_vs_native\": ",
            g->module.ok ? "true" : "false", g->module.cold_ms, g->module.warm_ms);
    json_ratio(f, ref && g->module.ok && ref->module.ok, g->module.cold_ms, ref ? ref->module.cold_ms : 0);
    fputs(", \"warm_vs_native\": ", f);
    json_ratio(f, ref && g->module.ok && ref->module.ok, g->module.warm_ms, ref ? ref->module.warm_ms : 0);
    fprintf(f, ", \"warm_new_process_ok\": %s, \"warm_new_process\": %.3f, \"warm_new_process_vs_native\": ",
            g->module.fresh_ok ? "true" : "false", g->module.fresh_ms);
    json_ratio(f, ref && g->module.fresh_ok && ref->module.fresh_ok, g->module.fresh_ms,
               ref ? ref->module.fresh_ms : 0);
    fputs(", \"error\": ", f);
    json_err(f, g->module.err);
    fputs("},\n    \"copies\": [", f);
    int first = 1;
    for (int k = 0; k < N_KINDS; k++) {
        for (int s = 0; s < N_SIZES; s++) {
            if (COPY_SIZES[s] > p->max_copy) continue;
            const struct rate *c = &g->copy[k][s];
            fprintf(f,
                    "%s\n      {\"dir\": \"%s\", \"memory\": \"%s\", \"bytes\": %llu, \"ok\": %s, \"reps\": %d, "
                    "\"seconds\": %.9f, \"gbps\": %.6f, \"vs_raw\": ",
                    first ? "" : ",", KIND_DIR[k], KIND_MEM[k], (unsigned long long)COPY_SIZES[s],
                    c->ok ? "true" : "false", c->reps, c->seconds, c->gbps);
            json_ratio(f, c->ok && raw->bw.ok, c->gbps, raw->bw.gbps);
            fputs(", \"vs_raw_k\": ", f);
            json_ratio(f, c->ok && raw->bw_k.ok, c->gbps, raw->bw_k.gbps);
            fputs(", \"vs_native\": ", f);
            json_ratio(f, ref && c->ok && ref->copy[k][s].ok, c->gbps, ref ? ref->copy[k][s].gbps : 0);
            fputs(", \"error\": ", f);
            json_err(f, c->err);
            fputc('}', f);
            first = 0;
        }
    }
    fputs("\n    ]\n  }", f);
}

static int write_json(const char *path, const char *addr, const char *source, const struct plan *p,
                      const struct raw_results *raw, const struct gpu_results *s, const struct gpu_results *nat)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, path, strerror(errno));
        return -1;
    }
    fputs("{\n  \"tool\": \"scuda bench\",\n  \"server\": ", f);
    json_str(f, addr);
    fputs(",\n  \"server_from\": ", f);
    json_str(f, source);
    fprintf(f, ",\n  \"loopback\": %s,\n  \"quick\": %s,\n", addr_is_loopback(addr) ? "true" : "false",
            p->quick ? "true" : "false");
    fputs("  \"raw_link\": {\n", f);
    json_lat(f, "rtt_us", &raw->rtt, 0, 0, 0);
    fprintf(f, ",\n    \"one_stream\": {\"ok\": %s, \"bytes\": %llu, \"reps\": %d, \"seconds\": %.9f, \"gbps\": %.6f, "
               "\"error\": ",
            raw->bw.ok ? "true" : "false", (unsigned long long)raw->bw.bytes, raw->bw.reps, raw->bw.seconds,
            raw->bw.gbps);
    json_err(f, raw->bw.err);
    fprintf(f, "},\n    \"k_streams\": {\"ok\": %s, \"streams\": %d, \"bytes\": %llu, \"reps\": %d, \"seconds\": %.9f, "
               "\"gbps\": %.6f, \"error\": ",
            raw->bw_k.ok ? "true" : "false", raw->k, (unsigned long long)raw->bw_k.bytes, raw->bw_k.reps,
            raw->bw_k.seconds, raw->bw_k.gbps);
    json_err(f, raw->bw_k.err);
    fputs("}\n  },\n", f);
    json_gpu(f, "scuda", s, nat, raw, p);
    fputs(",\n", f);
    json_gpu(f, "native", nat, NULL, raw, p);
    fputs("\n}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "%s: cannot write %s: %s\n", CMD, path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the command ---- */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda bench [--server HOST:PORT] [--json FILE] [--quick] [--native] [--max-copy SIZE]\n"
            "\n"
            "Measure SCUDA against the link it runs on, in one run:\n"
            "  - the raw link: TCP round trip, and bandwidth over one stream and over K\n"
            "    streams at once (K = SCUDA_BULK_STREAMS, 4 when striping is off), to the\n"
            "    same server (its raw echo and sink modes: no CUDA, no SCUDA frames);\n"
            "  - an empty synchronizing call;\n"
            "  - through SCUDA's libcuda.so.1: cuStreamSynchronize on an idle stream,\n"
            "    empty-kernel launches per second, H2D and D2H copies from 4 KiB to 1 GiB\n"
            "    (pageable and pinned), and module load time: cold (an image no cache has),\n"
            "    warm in the same process, and warm in a new process (what a program's\n"
            "    startup pays once the server's module cache has its modules), and\n"
            "    cuMemAlloc + cuMemFree pairs of 256 B, 64 KiB, 2 MiB and 64 MiB.\n"
            "Progress goes to stderr, the table to stdout.\n"
            "\n"
            "Options:\n"
            "  --server HOST:PORT  server to measure (default: SCUDA_SERVER, then the address\n"
            "                      saved by 'scuda HOST:PORT' in ~/.config/scuda/host)\n"
            "  --json FILE         also write every figure, and the ratios, to FILE\n"
            "  --quick             fewer repetitions, copies up to 256 MiB\n"
            "                      (over a slow link each latency figure takes about 2 s,\n"
            "                      10 s without --quick: as many samples as fit, at least 20)\n"
            "  --max-copy SIZE     copies and raw transfers up to SIZE (e.g. 1M), for a quick check\n"
            "  --native            also run the driver workloads against this machine's own\n"
            "                      libcuda.so.1 (on the GPU machine), for a native column\n"
            "  -h, --help          show this help\n"
            "\n"
            "Exit status: 0 when every figure was measured, 1 when any failed.\n"
            "Environment: SCUDA_SERVER, SCUDA_TOKEN, SCUDA_BULK_STREAMS, SCUDA_LOG, SCUDA_LIB_DIR.\n");
}

/* --max-copy SIZE: copies and raw transfers up to SIZE, about SIZE bytes
 * per copy point (a smoke run: a slow link, a sanitizer build). */
static int limit_copies(struct plan *plan, const char *arg)
{
    uint64_t max;
    if (cli_parse_bytes(arg, &max) != 0 || max < 4096) {
        fprintf(stderr, "%s: --max-copy wants a size of at least 4K (as 64M or 1G), not '%s'\n", CMD, arg);
        return -1;
    }
    if (max < plan->max_copy) plan->max_copy = max;
    if (max < plan->raw_bytes) plan->raw_bytes = max;
    if (max < plan->copy_budget) plan->copy_budget = max;
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    const char *server = NULL, *json = NULL, *source = NULL, *max_copy = NULL;
    int quick = 0, native = 0;
    const struct cli_opt opts[] = {{"--quick", NULL, NULL, &quick},     {"--native", NULL, NULL, &native},
                                   {"--server", NULL, &server, NULL},   {"--json", NULL, &json, NULL},
                                   {"--max-copy", NULL, &max_copy, NULL}, {NULL}};
    int rc = cli_parse_options(argc, argv, CMD, opts, usage);
    if (rc >= 0) return rc;
    struct plan plan = quick ? QUICK : FULL;
    const struct plan *p = &plan;
    if (max_copy && limit_copies(&plan, max_copy) != 0) return CLI_USAGE;

    char libdir[PATH_MAX], addr[1024];
    if (cli_shim_dir(CMD, libdir, sizeof libdir) != 0) return 1;
    int have = cli_export_server(CMD, server, addr, sizeof addr, &source);
    if (have < 0) return 1;
    if (have == 0) {
        fprintf(stderr, "%s: no server to measure. Give one with --server HOST:PORT or SCUDA_SERVER,\n"
                        "  or save one with 'scuda HOST:PORT'.\n", CMD);
        return CLI_USAGE;
    }
    /* cli_export_server may have set SCUDA_SERVER; keep our own copy of the source. */
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s", source);

    static struct raw_results raw;
    static struct gpu_results scuda, nat;
    raw_rtt(addr, p, &raw.rtt);
    if (!raw.rtt.ok) {
        fprintf(stderr, "%s: cannot measure the link to %s: %s\n", CMD, addr, raw.rtt.err);
        return 1;
    }
    struct plan native_plan = plan; /* natively nothing crosses the link */
    plan_fit_link(&plan, raw.rtt.median);
    raw_bw(addr, p, &raw.bw);
    /* The streams a striped copy uses; striping off still shows what it
     * would give with the default. */
    int tls = scuda_tls_for(addr);
    int k = scuda_bulk_streams(tls);
    raw.k = k >= 2 ? k : scuda_bulk_streams_default(tls);
    raw_bw_k(addr, p, raw.k, &raw.bw_k);

    with_native = native;
    if (native) run_native(&native_plan, &nat);

    char path[PATH_MAX + 16], err[256];
    struct driver d;
    struct fresh_loader fresh;
    snprintf(path, sizeof path, "%s/libcuda.so.1", libdir);
    fresh_start(&fresh, path); /* before this process loads the shim */
    if (load_driver(path, &d, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s.\n  Rebuild SCUDA, or point SCUDA_LIB_DIR at a working build.\n", CMD, err);
        return 1;
    }
    if (d.scuda_client_ping == NULL) {
        fprintf(stderr, "%s: %s is not SCUDA's shim (no scuda_client_ping). Fix SCUDA_LIB_DIR.\n", CMD, path);
        return 1;
    }
    run_gpu(&d, p, "scuda", &scuda, &fresh);
    fresh_stop(&fresh);

    print_table(addr, src, p, &raw, &scuda, native ? &nat : NULL);
    fflush(stdout);
    if (json && write_json(json, addr, src, p, &raw, &scuda, native ? &nat : NULL) != 0) return 1;

    return !raw.bw.ok || !raw.bw_k.ok || gpu_failed(&scuda) || (native && gpu_failed(&nat)) ? 1 : 0;
}
