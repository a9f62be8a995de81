/* compress.c - striped copies compressed over a slow link (SCUDA_COMPRESS,
 * docs/architecture.md, "Compressed copies").
 *
 * Behind linkem at LINK_MBIT Mbit/s: with SCUDA_COMPRESS=auto, once a copy
 * has measured the link, a copy of zeros goes at least twice as fast as
 * the link's raw rate, both ways, compressed; a copy of random bytes is
 * no slower than 0.9x of the same copy with SCUDA_COMPRESS=off. On
 * loopback (a fast link) auto compresses nothing; SCUDA_COMPRESS=on
 * compresses zeros there, and random bytes go plain. Every copy is
 * byte-exact. (Hostile compressed chunks: e2e/striping.)
 *
 * Under ThreadSanitizer every access of the copy's own code is
 * instrumented, and with TLS (compress_tls) the zeros' copy to the device
 * took 1.0-1.2 s against the 1.0 s bound on a loaded two-core CI machine:
 * there the zeros must still beat the raw link, by ZEROS_GAIN (1.25x). The
 * twice-the-link figure itself is measured on the GPU machine
 * (bench/compress_link.sh). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/compress.h"
#include "common/transport.h"
#include "harness.h"

#ifndef LINKEM_BIN
#error "LINKEM_BIN (path of the linkem relay) must be defined"
#endif

#define MiB (1u << 20)

/* How many times faster than the link's raw rate compressed zeros must go. */
#if defined(__SANITIZE_THREAD__) /* GCC */
#define ZEROS_GAIN 1.25
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang */
#define ZEROS_GAIN 1.25
#endif
#endif
#ifndef ZEROS_GAIN
#define ZEROS_GAIN 2.0
#endif
#define LINK_MBIT 200
#define LINK_DELAY_MS "5"
#define ZEROS (48 * MiB)
#define NOISE (24 * MiB)

/* Private to the shim (src/client/bulk.c). */
extern void scuda_client_compress_stats(uint64_t out[6]);
extern int scuda_client_bulk_streams(void);

static struct h_server srv;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* What a client measured: seconds per copy. */
struct timings {
    double zeros_htod, zeros_dtoh, noise_htod, noise_dtoh;
    uint64_t stats[6];
};

/* Copy src's n bytes to the device and back into a buffer filled with
 * something else; check them; the seconds each way in *htod, *dtoh. */
static void timed_round_trip(const void *src, size_t n, double *htod, double *dtoh)
{
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    char *back = malloc(n);
    CHECK(back);
    memset(back, 0xa5, n);
    double t0 = now_s();
    CU(cuMemcpyHtoD_v2(d, src, n));
    double t1 = now_s();
    CU(cuMemcpyDtoH_v2(back, d, n));
    double t2 = now_s();
    long at = h_diff(back, src, n);
    CHECK(at < 0, "a round trip of %zu bytes differs at byte %ld", n, at);
    free(back);
    CU(cuMemFree_v2(d));
    *htod = t1 - t0;
    *dtoh = t2 - t1;
}

/* A client's mode, and the file its timings go to (raw). */
struct job {
    const char *mode;
    const char *path;
};

/* The copies of one client: a first copy of noise that measures the link
 * (auto compresses nothing before it knows the link), then zeros and
 * noise (twice) both ways, timed. */
static int copies_client(void *arg)
{
    const struct job *job = arg;
    setenv("SCUDA_COMPRESS", job->mode, 1);
    h_cuda_setup();
    char *zeros = calloc(1, ZEROS), *noise = malloc(NOISE);
    CHECK(zeros && noise);
    h_pattern(noise, NOISE, 41);
    struct timings t;
    double a, b;
    timed_round_trip(noise, 8 * MiB, &a, &b);
    CHECK(scuda_client_bulk_streams() > 0, "the copies are not striped");
    timed_round_trip(zeros, ZEROS, &t.zeros_htod, &t.zeros_dtoh);
    /* The best of two: both modes are link-bound here, and this compares
     * two runs on a shared machine. */
    t.noise_htod = t.noise_dtoh = 1e9;
    for (uint32_t i = 0; i < 2; i++) {
        h_pattern(noise, NOISE, 42 + i);
        timed_round_trip(noise, NOISE, &a, &b);
        t.noise_htod = a < t.noise_htod ? a : t.noise_htod;
        t.noise_dtoh = b < t.noise_dtoh ? b : t.noise_dtoh;
    }
    scuda_client_compress_stats(t.stats);
    free(zeros);
    free(noise);
    int fd = open(job->path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, &t, sizeof t) == (ssize_t)sizeof t, "cannot write %s: %s", job->path, strerror(errno));
    close(fd);
    return 0;
}

/* Run copies_client under mode against addr; its timings in *t. */
static void run_copies(const char *addr, const char *mode, struct timings *t)
{
    setenv("SCUDA_SERVER", addr, 1);
    char path[512];
    close(h_temp_file("timings", path, sizeof path));
    struct job job = {mode, path};
    h_wait_ok(h_spawn(copies_client, &job, 120, -1, -1), 120000, mode);
    size_t len = 0;
    char *got = h_read_file(path, &len);
    CHECK(len == sizeof *t, "SCUDA_COMPRESS=%s: %zu bytes of timings", mode, len);
    memcpy(t, got, sizeof *t);
    free(got);
    setenv("SCUDA_SERVER", srv.addr, 1);
    printf("   SCUDA_COMPRESS=%-4s zeros %5.0f / %5.0f ms, noise %5.0f / %5.0f ms (to / from the device); "
           "compressed chunks %llu sent, %llu received (%llu -> %llu bytes); link %llu Mbit/s\n",
           mode, t->zeros_htod * 1e3, t->zeros_dtoh * 1e3, t->noise_htod * 1e3, t->noise_dtoh * 1e3,
           (unsigned long long)t->stats[0], (unsigned long long)t->stats[1], (unsigned long long)t->stats[2],
           (unsigned long long)t->stats[3], (unsigned long long)t->stats[4]);
}

/* linkem between the client and srv: its pid, its address in addr. */
static pid_t start_linkem(char *addr, size_t addrlen)
{
    char rate[16];
    snprintf(rate, sizeof rate, "%d", LINK_MBIT);
    const char *const args[] = {"--rate-mbit", rate, "--delay-ms", LINK_DELAY_MS, NULL};
    return h_start_linkem(LINKEM_BIN, srv.port, args, addr, addrlen);
}

static double raw_s(size_t n) { return (double)n * 8 / (LINK_MBIT * 1e6); }

static void slow_link(void)
{
    char addr[64];
    pid_t relay = start_linkem(addr, sizeof addr);
    struct timings off, aut;
    run_copies(addr, "off", &off);
    run_copies(addr, "auto", &aut);
    kill(relay, SIGKILL);
    waitpid(relay, NULL, 0);
    CHECK(off.stats[0] == 0 && off.stats[1] == 0, "SCUDA_COMPRESS=off compressed chunks");
    CHECK(aut.stats[0] > 0 && aut.stats[1] > 0, "SCUDA_COMPRESS=auto compressed no zeros over a %d Mbit/s link",
          LINK_MBIT);
    double raw = raw_s(ZEROS);
    CHECK(aut.zeros_htod <= raw / ZEROS_GAIN, "zeros to the device: %.0f ms, the link's raw rate takes %.0f (%.2fx)",
          aut.zeros_htod * 1e3, raw * 1e3, ZEROS_GAIN);
    CHECK(aut.zeros_dtoh <= raw / ZEROS_GAIN, "zeros from the device: %.0f ms, the link's raw rate takes %.0f (%.2fx)",
          aut.zeros_dtoh * 1e3, raw * 1e3, ZEROS_GAIN);
    printf("ok zeros over %d Mbit/s, auto: %.1fx and %.1fx the raw link (to and from the device)\n", LINK_MBIT,
           raw / aut.zeros_htod, raw / aut.zeros_dtoh);
    CHECK(aut.noise_htod * 0.9 <= off.noise_htod, "noise to the device: auto %.0f ms, off %.0f ms",
          aut.noise_htod * 1e3, off.noise_htod * 1e3);
    CHECK(aut.noise_dtoh * 0.9 <= off.noise_dtoh, "noise from the device: auto %.0f ms, off %.0f ms",
          aut.noise_dtoh * 1e3, off.noise_dtoh * 1e3);
    printf("ok random bytes, auto: %.2fx and %.2fx the speed of off\n", off.noise_htod / aut.noise_htod,
           off.noise_dtoh / aut.noise_dtoh);
}

/* Under a sanitizer SCUDA's own code runs several times slower, zstd (not
 * instrumented) does not: loopback is then slower than a core compresses
 * zeros, and auto rightly compresses them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static void loopback(void)
{
    struct timings t;
    run_copies(srv.addr, "auto", &t);
    unsigned long long mbps = t.stats[4];
    CHECK(mbps > 0, "auto measured no link rate on loopback");
    CHECK(mbps >= COMPRESS_AUTO_MAX_MBPS || SANITIZED, "loopback measured at %llu Mbit/s", mbps);
    /* auto decides from the estimate as it stands at each copy: only an
     * estimate that never fell below the bound (a host busy with other
     * tests can slow loopback for a moment) promises no compression. */
    unsigned long long low = t.stats[5];
    if (low >= COMPRESS_AUTO_MAX_MBPS) {
        CHECK(t.stats[0] == 0 && t.stats[1] == 0, "auto compressed %llu + %llu chunks on loopback (%llu Mbit/s)",
              (unsigned long long)t.stats[0], (unsigned long long)t.stats[1], mbps);
        printf("ok auto on loopback (%llu Mbit/s measured): nothing compressed\n", mbps);
    } else if (!SANITIZED) {
        printf("ok auto on loopback, a busy host (the estimate fell to %llu Mbit/s, now %llu): %llu + %llu chunks "
               "compressed\n", low, mbps, (unsigned long long)t.stats[0], (unsigned long long)t.stats[1]);
    } else {
        printf("ok auto on loopback under a sanitizer (%llu Mbit/s measured): %llu + %llu chunks compressed\n", mbps,
               (unsigned long long)t.stats[0], (unsigned long long)t.stats[1]);
    }
    run_copies(srv.addr, "on", &t);
    CHECK(t.stats[0] > 0 && t.stats[1] > 0, "SCUDA_COMPRESS=on compressed no zeros");
    /* Zeros shrink a thousandfold; the noise went plain (no chunk of it shrinks). */
    CHECK(t.stats[2] == 2ull * ZEROS && t.stats[3] < t.stats[2] / 100,
          "on: %llu plain bytes compressed to %llu (expected the zeros only, both ways)",
          (unsigned long long)t.stats[2], (unsigned long long)t.stats[3]);
    printf("ok on: zeros compressed both ways, random bytes plain, all byte-exact\n");
}

int main(void)
{
    h_begin("compress", 280);
    h_server_start(&srv, "main", NULL);
    loopback();
    slow_link();
    CHECK(h_server_log_count(&srv, "died from signal") == 0);
    CHECK(h_server_log_count(&srv, "striping ends") == 0);
    h_server_stop(&srv);
    printf("PASS compress\n");
    return 0;
}
