/* compress_bw.c - one copy each way of zeros or random bytes, timed, for
 * compress_link.sh (SCUDA_COMPRESS over a slow link).
 *
 *   compress_bw --mib 256 --data zeros|random
 *
 * First a round trip of 16 MiB of random bytes: SCUDA_COMPRESS=auto
 * compresses nothing until a copy has measured the link (a session's
 * first striped copy does not measure). Then the timed copies: host to
 * device, device to host into a buffer filled with something else,
 * checked byte for byte. Prints "h2d_s<TAB>seconds" and "d2h_s<TAB>...";
 * exit status 1 on a CUDA error or a wrong byte. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1ull << 20)

static void check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return;
    const char *name = "?";
    cuGetErrorName(r, &name);
    fprintf(stderr, "compress_bw: %s failed: %s\n", what, name);
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(seed >> 56);
    }
}

/* Copy n bytes of src there and back; the seconds each way. */
static void round_trip(CUdeviceptr d, const unsigned char *src, unsigned char *back, size_t n, double *h2d,
                       double *d2h)
{
    memset(back, 0xa5, n);
    double t0 = now_s();
    check(cuMemcpyHtoD_v2(d, src, n), "cuMemcpyHtoD");
    double t1 = now_s();
    check(cuMemcpyDtoH_v2(back, d, n), "cuMemcpyDtoH");
    double t2 = now_s();
    if (memcmp(back, src, n) != 0) {
        fprintf(stderr, "compress_bw: the copy back differs\n");
        exit(1);
    }
    *h2d = t1 - t0;
    *d2h = t2 - t1;
}

int main(int argc, char **argv)
{
    size_t n = 256 * MiB;
    int zeros = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0) n = strtoull(argv[i + 1], NULL, 10) * MiB;
        else if (strcmp(argv[i], "--data") == 0) zeros = strcmp(argv[i + 1], "random") != 0;
    }
    CUdevice dev;
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    unsigned char *src = malloc(n), *back = malloc(n);
    CUdeviceptr d;
    if (!src || !back) return 1;
    check(cuMemAlloc_v2(&d, n), "cuMemAlloc");
    double h2d, d2h;
    size_t warm = n < 16 * MiB ? n : 16 * MiB;
    fill_random(src, warm, 7);
    round_trip(d, src, back, warm, &h2d, &d2h);
    if (zeros)
        memset(src, 0, n);
    else
        fill_random(src, n, 11);
    round_trip(d, src, back, n, &h2d, &d2h);
    printf("h2d_s\t%.4f\nd2h_s\t%.4f\n", h2d, d2h);
    return 0;
}
