/* copy_bw.c - host<->device copy bandwidth only, for A/B runs (tls_ab.sh).
 *
 * `scuda bench` measures everything and takes minutes; comparing TLS with
 * plain TCP at many sizes needs only the copies, many rounds of them. This
 * is an ordinary CUDA driver program: run it through SCUDA's shim
 * (LD_LIBRARY_PATH=build/lib SCUDA_SERVER=...) or natively.
 *
 *   copy_bw [--sizes 1,4,16,64,256] [--budget-mib 256]
 *
 * Sizes are in MiB. Per kind (H2D/D2H, pageable/pinned) and size: one
 * warm-up copy, then a batch of copies (budget / size, 3 to 64 of them)
 * and one cuCtxSynchronize; GB/s (1e9 bytes/s) over the batch, as `scuda
 * bench` counts it. Then the empty synchronizing call (cuStreamQuery on a
 * stream with work, a round trip every time) and a launch-free small
 * copy's latency, so a change to copies is seen not to slow small calls.
 * One line per figure: "figure<TAB>value". Exit status 1 on any CUDA error. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1ull << 20)
#define MAX_SIZES 16

static void die(const char *what, CUresult r)
{
    const char *name = "?";
    cuGetErrorName(r, &name);
    fprintf(stderr, "copy_bw: %s failed: %s\n", what, name);
    exit(1);
}

#define CK(call)                                    \
    do {                                            \
        CUresult r_ = (call);                       \
        if (r_ != CUDA_SUCCESS) die(#call, r_);     \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void copy_once(int h2d, CUdeviceptr dev, void *host, size_t n)
{
    if (h2d)
        CK(cuMemcpyHtoD_v2(dev, host, n));
    else
        CK(cuMemcpyDtoH_v2(host, dev, n));
}

static double gbps(int h2d, CUdeviceptr dev, void *host, size_t n, uint64_t budget)
{
    uint64_t want = budget / n;
    int reps = want < 3 ? 3 : want > 64 ? 64 : (int)want;
    copy_once(h2d, dev, host, n);
    CK(cuCtxSynchronize());
    double t0 = now_s();
    for (int i = 0; i < reps; i++) copy_once(h2d, dev, host, n);
    CK(cuCtxSynchronize());
    return (double)n * reps / (now_s() - t0) / 1e9;
}

/* Median microseconds of one small call, over n calls. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double small_call_us(CUdeviceptr dev, void *host)
{
    enum { N = 501 };
    static double t[N];
    for (int i = 0; i < N; i++) {
        double t0 = now_s();
        CK(cuMemcpyDtoH_v2(host, dev, 4)); /* a round trip every time */
        t[i] = (now_s() - t0) * 1e6;
    }
    qsort(t, N, sizeof t[0], cmp_double);
    return t[N / 2];
}

int main(int argc, char **argv)
{
    unsigned sizes[MAX_SIZES] = {1, 4, 16, 64, 256};
    int nsizes = 5;
    uint64_t budget = 256 * MiB;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char *p = argv[++i]; *p && nsizes < MAX_SIZES; p++) {
                sizes[nsizes++] = (unsigned)strtoul(p, &p, 10);
                if (!*p) break;
            }
        } else if (strcmp(argv[i], "--budget-mib") == 0 && i + 1 < argc) {
            budget = strtoull(argv[++i], NULL, 10) * MiB;
        } else {
            fprintf(stderr, "usage: copy_bw [--sizes 1,4,16,64,256] [--budget-mib 256]\n");
            return 2;
        }
    }
    size_t max = 0;
    for (int s = 0; s < nsizes; s++)
        if (sizes[s] * MiB > max) max = sizes[s] * MiB;
    CUdevice d;
    CUcontext ctx;
    CUdeviceptr dev;
    void *pinned, *pageable = malloc(max);
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc_v2(&dev, max));
    CK(cuMemHostAlloc(&pinned, max, 0));
    if (!pageable) return 1;
    memset(pageable, 0x5a, max); /* fault the pages in before timing */
    memset(pinned, 0x5a, max);
    static const char *const kinds[4] = {"H2D pageable", "H2D pinned", "D2H pageable", "D2H pinned"};
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < nsizes; s++) {
            double g = gbps(k < 2, dev, k % 2 ? pinned : pageable, sizes[s] * MiB, budget);
            printf("%s %u MiB (GB/s)\t%.3f\n", kinds[k], sizes[s], g);
            fflush(stdout);
        }
    printf("4-byte D2H round trip, median (us)\t%.2f\n", small_call_us(dev, pinned));
    CK(cuMemFreeHost(pinned));
    CK(cuMemFree_v2(dev));
    free(pageable);
    return 0;
}
