/* failover.c - a client whose server dies carries on, on a standby
 * (src/client/failover.c, src/server/snapshot.c; docs/architecture.md 9.24).
 *
 * Two servers on loopback: A, the primary, and S, the standby. A client
 * runs a deterministic mixed workload (allocations and frees, a module
 * global a kernel changes, streams, events, kernels, copies both ways and
 * device to device, memsets, managed memory the host and kernels share, a
 * captured graph launched every round) with SCUDA_STANDBY=S and a snapshot at every
 * synchronization (SCUDA_SNAPSHOT_EVERY=0), and prints a checksum of every
 * result. The test kills A's whole process group at a random point
 * (SIGKILL, or SIGSTOP: a server gone silent, as after a power loss),
 * trial after trial: the client must finish without seeing an error, its
 * checksum equal to an uninterrupted run's, having failed over, with no
 * replayed call returning something else than the first time. A replayed
 * call that does return something else (an allocation past the standby's
 * quota) is reported on stderr. A pool of two standbys: the primary dies,
 * then the first standby, and the client finishes on the second with the
 * same checksum. Then a client without a standby, whose server stops: its
 * call fails within SCUDA_DEAD_AFTER + 1 s. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define ROUNDS 40
#define N 8192
/* The client's word that a copy of its session is parked (not the
 * warning "no snapshot on standby"). */
#define PARKED_LINE "info: snapshot on standby"
#define DEAD_AFTER_S 2

static int ready_pipe[2] = {-1, -1};
static int fail_soft; /* the no-standby client: stop at the first error, reporting it */
static int failed_pipe[2] = {-1, -1};
static unsigned round_sleep_ms = 10; /* longer for the pool: two kills land among the rounds */

/* A driver call in the workload: fatal, or in fail_soft mode the end of the
 * run (the parent times it). */
#define W(call)                                                                          \
    do {                                                                                 \
        CUresult w_r_ = (call);                                                          \
        if (w_r_ != CUDA_SUCCESS) {                                                      \
            if (!fail_soft) h_fail_cu(__FILE__, __LINE__, #call, w_r_);                  \
            printf("failed: %s returned %s\n", #call, h_cu_name(w_r_));                  \
            fflush(stdout);                                                              \
            CHECK(write(failed_pipe[1], "f", 1) == 1);                                   \
            return 0;                                                                    \
        }                                                                                \
    } while (0)

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static CUresult launch(CUfunction f, unsigned blocks, CUstream s, void **args)
{
    return cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, s, args, NULL);
}

/* The module's PTX with a line of its own for round r: an image the
 * server has not seen this run. */
static char *round_image(int r)
{
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    char *img = malloc(len + 64);
    CHECK(ptx && img);
    int n = snprintf(img, 64, "// round %d of pid %d\n", r, (int)getpid());
    memcpy(img + n, ptx, len + 1);
    free(ptx);
    return img;
}

static int workload(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUfunction add = h_func("vec_add"), fill = h_func("fill_u32"), bump = h_func("bump_global");
    CUdeviceptr g;
    size_t gsize;
    W(cuModuleGetGlobal_v2(&g, &gsize, h_module(), "g_counter"));
    CUstream s1, s2;
    W(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    W(cuStreamCreate(&s2, 0));
    CUevent e;
    W(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    static float ha[N], hb[N], hc[N];
    static uint32_t hw[N];
    CUdeviceptr a, b, c, keep[4] = {0};
    W(cuMemAlloc_v2(&a, sizeof ha));
    W(cuMemAlloc_v2(&b, sizeof hb));
    W(cuMemAlloc_v2(&c, sizeof hc));
    /* Managed memory the host writes and a kernel reads and writes. */
    CUdeviceptr ma, mc;
    W(cuMemAllocManaged(&ma, sizeof ha, CU_MEM_ATTACH_GLOBAL));
    W(cuMemAllocManaged(&mc, sizeof hc, CU_MEM_ATTACH_GLOBAL));
    float *hma = (float *)ma, *hmc = (float *)mc;
    /* A graph captured once and launched every round: a fill and a bump of
     * the module's global. */
    CUdeviceptr gbuf;
    W(cuMemAlloc_v2(&gbuf, sizeof hw));
    static uint32_t gv = 0x5eed1234u, gby = 1000;
    static uint64_t gwords = N;
    void *gfill_args[] = {&gbuf, &gv, &gwords}, *gbump_args[] = {&gby};
    CUgraph graph;
    CUgraphExec exec;
    W(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    W(launch(fill, N / 256, s1, gfill_args));
    W(cuLaunchKernel(bump, 1, 1, 1, 1, 1, 1, 0, s1, gbump_args, NULL));
    W(cuStreamEndCapture(s1, &graph));
    W(cuGraphInstantiateWithFlags(&exec, graph, 0));
    uint64_t sum = 1469598103934665603ull;
    W(cuCtxSynchronize()); /* the first snapshot */
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    for (int r = 0; r < ROUNDS; r++) {
        /* Nothing runs: the last round synchronized. (A host access to
         * managed memory has no call to fail: a client without a standby
         * is left out of it, its error comes from a call.) */
        if (!fail_soft)
            for (int i = 0; i < N; i++) hma[i] = (float)(r + i % 7);
        for (int i = 0; i < N; i++) ha[i] = (float)(i * (r + 1) % 977), hb[i] = (float)(r * 3 + i % 13);
        W(cuMemcpyHtoDAsync_v2(a, ha, sizeof ha, s1));
        W(cuMemcpyHtoD_v2(b, hb, sizeof hb));
        unsigned n = N;
        void *add_args[] = {&a, &b, &c, &n};
        W(launch(add, N / 256, s1, add_args));
        W(cuEventRecord(e, s1));
        W(cuStreamWaitEvent(s2, e, 0));
        /* A buffer made and filled this round, kept for four rounds. */
        CUdeviceptr fresh;
        W(cuMemAlloc_v2(&fresh, sizeof hw));
        uint32_t v = 0x9e3779b9u * (uint32_t)(r + 1);
        uint64_t words = N;
        void *fill_args[] = {&fresh, &v, &words};
        W(launch(fill, N / 256, s2, fill_args));
        W(cuMemsetD32Async(fresh + 4 * (r % 64), (uint32_t)r, 16, s2));
        W(cuMemcpyDtoDAsync_v2(c + 4 * (N / 2), fresh, 4 * (N / 2), s2));
        uint32_t by = (uint32_t)r + 1;
        void *bump_args[] = {&by};
        W(cuLaunchKernel(bump, 1, 1, 1, 1, 1, 1, 0, s2, bump_args, NULL));
        if (keep[r % 4]) W(cuMemFree_v2(keep[r % 4]));
        keep[r % 4] = fresh;
        /* An image new to the server every round (a library for odd
         * rounds), as a framework loads kernels as it meets new shapes:
         * loads in the journal. Its function bumps the global. */
        char *img = round_image(r);
        CUfunction rf;
        if (r % 2) {
            CUlibrary lib;
            CUkernel k;
            W(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
            W(cuLibraryGetKernel(&k, lib, "bump_global"));
            W(cuKernelGetFunction(&rf, k));
            W(cuLaunchKernel(rf, 1, 1, 1, 1, 1, 1, 0, s2, bump_args, NULL));
            W(cuStreamSynchronize(s2));
            W(cuLibraryUnload(lib));
        } else {
            CUmodule m;
            W(cuModuleLoadData(&m, img));
            W(cuModuleGetFunction(&rf, m, "bump_global"));
            W(cuLaunchKernel(rf, 1, 1, 1, 1, 1, 1, 0, s2, bump_args, NULL));
            W(cuStreamSynchronize(s2));
            W(cuModuleUnload(m));
        }
        free(img);
        W(cuMemsetD8_v2(b, (unsigned char)r, 64));
        void *madd_args[] = {&ma, &a, &mc, &n};
        W(launch(add, N / 256, s2, madd_args));
        W(cuGraphLaunch(exec, s2));
        W(cuStreamSynchronize(s2));
        W(cuMemcpyDtoH_v2(hc, c, sizeof hc));
        W(cuMemcpyDtoHAsync_v2(hw, keep[(r + 3) % 4] ? keep[(r + 3) % 4] : fresh, sizeof hw, s1));
        W(cuStreamSynchronize(s1));
        uint32_t counter = 0;
        W(cuMemcpyDtoH_v2(&counter, g, sizeof counter));
        sum = fnv(sum, hc, sizeof hc);
        sum = fnv(sum, hw, sizeof hw);
        sum = fnv(sum, &counter, sizeof counter);
        W(cuMemcpyDtoH_v2(hb, b, 256));
        sum = fnv(sum, hb, 256);
        W(cuCtxSynchronize());
        if (!fail_soft) sum = fnv(sum, hmc, sizeof hc);
        W(cuCtxSynchronize());
        h_sleep_ms(round_sleep_ms); /* the kill lands among the rounds */
    }
    printf("checksum %016llx\n", (unsigned long long)sum);
    return 0;
}

struct run {
    char out[512], err[512];
    pid_t pid;
};

static void spawn(struct run *r, const char *tag)
{
    int out = h_temp_file(tag, r->out, sizeof r->out);
    char etag[64];
    snprintf(etag, sizeof etag, "%s-err", tag);
    int err = h_temp_file(etag, r->err, sizeof r->err);
    CHECK(pipe(ready_pipe) == 0);
    r->pid = h_spawn(workload, NULL, 60, out, err);
    close(out);
    close(err);
    close(ready_pipe[1]);
}

static void wait_ready(const char *what)
{
    char ch;
    CHECK(read(ready_pipe[0], &ch, 1) == 1, "%s: the client did not get to its first synchronize", what);
    close(ready_pipe[0]);
}

static int count_of(const char *text, const char *needle);

/* Whether the file at path holds needle `times` times within timeout_ms. */
static int wait_in_file_n(const char *path, const char *needle, int times, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *text = h_read_file(path, NULL);
        int found = count_of(text, needle) >= times;
        free(text);
        if (found || h_now_ms() >= deadline) return found;
        h_sleep_ms(5);
    }
}

static int wait_in_file(const char *path, const char *needle, int timeout_ms)
{
    return wait_in_file_n(path, needle, 1, timeout_ms);
}

static char *checksum_of(const char *path)
{
    char *text = h_read_file(path, NULL);
    char *line = text ? strstr(text, "checksum ") : NULL;
    char *copy = line ? strndup(line, 25) : NULL;
    free(text);
    return copy;
}

/* Snapshots whose standby loaded images ahead of the hold (the primary's
 * "(N images loaded ahead)", N > 0): once a copy is parked, the next one
 * lets the standby replay the images while the session runs on. */
static int snapshots_loaded_ahead;

static int count_loaded_ahead(const char *err)
{
    int n = 0;
    for (const char *p = err; p && (p = strstr(p, " images loaded ahead")) != NULL; p++) {
        const char *d = p;
        while (d > err && d[-1] >= '0' && d[-1] <= '9') d--;
        n += d < p && atoi(d) > 0;
    }
    return n;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* Parked copies the primaries must have discarded: a copy goes when the
 * snapshot after next begins, so a trial whose primary parked p copies
 * discarded at least p - 2 of them before it died. */
static int discards_owed;

/* Trials whose client knew of two parked copies when it failed over: it
 * resumed one, and the other, whose primary is dead, must go after
 * --resume-within. */
static int expiries_owed;

/* The client's "snapshot on standby" lines before its failover. */
static int copies_known_at_failover(const char *err)
{
    const char *end = err ? strstr(err, "failed over to standby") : NULL;
    if (!end) return 0;
    char *head = strndup(err, (size_t)(end - err));
    int n = count_of(head, PARKED_LINE);
    free(head);
    return n;
}

/* One trial: a fresh A, the client, A killed `delay_ms` after the client's
 * first synchronize. Returns 1 when the client failed over. */
static int trial(int t, const struct h_server *S, const char *want, unsigned delay_ms, int stop)
{
    struct h_server A;
    char tag[64];
    snprintf(tag, sizeof tag, "failover-a%d", t);
    h_server_start(&A, tag, NULL);
    setenv("SCUDA_STANDBY", S->addr, 1);
    /* Snapshots at every synchronize, or seldom (a journal of many rounds),
     * or seldom with a small journal bound (snapshots taken early, before
     * the call that would pass it). */
    static const char *every[] = {"0", "0.4", "5"}, *bound[] = {"256M", "256M", "150K"};
    setenv("SCUDA_SNAPSHOT_EVERY", every[t % 3], 1);
    setenv("SCUDA_JOURNAL_MAX", bound[t % 3], 1);
    struct run r;
    setenv("SCUDA_LOG", "info", 1); /* the client says when it knows of a parked copy */
    spawn(&r, tag);
    unsetenv("SCUDA_LOG");
    wait_ready(tag);
    /* A server that dies before the client knows of a first parked copy
     * (the primary's reply says so) takes the session with it: the random
     * point is after the client heard of the first one (its images loaded
     * ahead, then the hold, then the reply). */
    CHECK(wait_in_file(r.err, PARKED_LINE, 10000), "trial %d: no copy was parked for the client", t);
    /* Snapshots at every synchronize: a second copy comes at once, and a
     * failover then leaves one copy that must expire. */
    if (t % 3 == 0) wait_in_file_n(r.err, PARKED_LINE, 2, 5000);
    h_sleep_ms(delay_ms);
    kill(-A.pid, stop ? SIGSTOP : SIGKILL);
    int st = h_wait(r.pid, 30000);
    char *got = checksum_of(r.out);
    char *err = h_read_file(r.err, NULL);
    int failed_over = err && strstr(err, "failed over to standby") != NULL;
    expiries_owed += copies_known_at_failover(err) >= 2;
    if (!(st == 0 && got && strcmp(got, want) == 0) || strstr(err ? err : "", "MISMATCH")) {
        fprintf(stderr, "trial %d (%s after %u ms): status %d, %s, want %s; the client's stderr:\n%s\n", t,
                stop ? "SIGSTOP" : "SIGKILL", delay_ms, st, got ? got : "no checksum", want, err ? err : "");
        h_dump_log(S, 4000);
    }
    CHECK(st == 0, "trial %d: the client failed (status %d)", t, st);
    CHECK(got && strcmp(got, want) == 0, "trial %d: checksum %s, an uninterrupted run's %s", t, got ? got : "none",
          want);
    CHECK(!strstr(err ? err : "", "MISMATCH"), "trial %d: a replayed call returned something else", t);
    char *replayed = err ? strstr(err, "replaying ") : NULL;
    unsigned long long frames = 0, bytes = 0;
    if (replayed && sscanf(replayed, "replaying %llu journaled frames (%llu bytes", &frames, &bytes) == 2 && t % 3 == 2)
        CHECK(bytes <= 150 * 1024, "trial %d: a journal of %llu bytes, past SCUDA_JOURNAL_MAX", t, bytes);
    if (replayed) replayed[strcspn(replayed, ")")] = '\0';
    printf("trial %d: snapshots every %s s, journal up to %s; %s %u ms after the first synchronize: %s%s\n", t,
           every[t % 3], bound[t % 3], stop ? "SIGSTOP" : "SIGKILL", delay_ms,
           failed_over ? "failed over, same checksum; " : "the client finished first, same checksum",
           failed_over && replayed ? replayed : "");
    free(got);
    free(err);
    h_server_kill(&A);
    char *log = h_read_file(A.log_path, NULL);
    snapshots_loaded_ahead += count_loaded_ahead(log);
    int parked = count_of(log, "snapshot parked on ");
    if (parked > 2) discards_owed += parked - 2;
    free(log);
    return failed_over;
}

/* A client with no standby whose server goes silent: an error within
 * SCUDA_DEAD_AFTER + 1 s. */
static void no_standby(void)
{
    struct h_server A;
    h_server_start(&A, "failover-nostandby", NULL);
    unsetenv("SCUDA_STANDBY");
    fail_soft = 1;
    CHECK(pipe(failed_pipe) == 0);
    struct run r;
    spawn(&r, "failover-nostandby");
    close(failed_pipe[1]);
    wait_ready("no standby");
    h_sleep_ms(100);
    uint64_t t0 = h_now_ms();
    kill(-A.pid, SIGSTOP);
    char ch;
    CHECK(read(failed_pipe[0], &ch, 1) == 1, "the client without a standby did not see an error");
    uint64_t took = h_now_ms() - t0;
    close(failed_pipe[0]);
    h_wait_ok(r.pid, 10000, "the client without a standby");
    char *out = h_read_file(r.out, NULL);
    CHECK(out && strstr(out, "failed: ") && !strstr(out, "checksum"), "the client without a standby finished");
    free(out);
    CHECK(took <= (DEAD_AFTER_S + 1) * 1000u, "the error came %llu ms after the server stopped",
          (unsigned long long)took);
    printf("no standby: a CUDA error %llu ms after the server stopped\n", (unsigned long long)took);
    h_server_kill(&A);
    fail_soft = 0;
}

/* After the snapshot, an allocation the standby's quota cannot hold: on
 * failover its replay fails where it succeeded the first time. */
static int outgrows_standby(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr small, big;
    CU(cuMemAlloc_v2(&small, 1 << 20));
    CU(cuCtxSynchronize()); /* the snapshot: 1 MiB fits the standby */
    CU(cuMemAlloc_v2(&big, 8 << 20));
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    char ch;
    CHECK(read(failed_pipe[0], &ch, 1) == 1); /* A is dead */
    cuCtxSynchronize(); /* fails over; what it returns is beside the point */
    return 0;
}

/* A replayed call that returns something else than the first time is
 * reported loudly on stderr. */
static void replay_mismatch(void)
{
    struct h_server A, S2;
    const char *args[] = {"--mem-quota", "4M", NULL};
    struct h_server_opts small = {.extra_args = {args[0], args[1], NULL}};
    h_server_start(&S2, "failover-small-standby", &small);
    h_server_start(&A, "failover-mismatch", NULL);
    setenv("SCUDA_STANDBY", S2.addr, 1);
    setenv("SCUDA_SNAPSHOT_EVERY", "60", 1);
    CHECK(pipe(failed_pipe) == 0);
    CHECK(pipe(ready_pipe) == 0);
    char err_path[512];
    int err = h_temp_file("failover-mismatch-err", err_path, sizeof err_path);
    pid_t pid = h_spawn(outgrows_standby, NULL, 30, -1, err);
    close(err);
    close(ready_pipe[1]);
    close(failed_pipe[0]);
    wait_ready("the client that outgrows its standby");
    /* The synchronize returns while the snapshot's memory streams: the
     * copy to fail over to is there once A logged it parked. */
    CHECK(h_wait_log(&A, "snapshot parked on", 1, 10000) >= 1, "no snapshot parked before the kill");
    h_sleep_ms(100); /* its reply, sent right after the line, reaches the client */
    kill(-A.pid, SIGKILL);
    CHECK(write(failed_pipe[1], "k", 1) == 1);
    close(failed_pipe[1]);
    h_wait_ok_err(pid, 20000, "the client that outgrows its standby", err_path);
    char *text = h_read_file(err_path, NULL);
    CHECK(text && strstr(text, "failed over to standby"), "no failover: %s", text ? text : "");
    CHECK(strstr(text, "FAILOVER REPLAY MISMATCH") && strstr(text, "cuMemAlloc"),
          "the allocation that failed on the standby was not reported: %s", text);
    printf("replay mismatch reported: %.*s\n", (int)strcspn(strstr(text, "FAILOVER"), "\n"), strstr(text, "FAILOVER"));
    free(text);
    h_server_kill(&A);
    h_server_stop(&S2);
}

/* SCUDA_STANDBY=S1,S2: the primary dies, the session goes on on S1, takes
 * a snapshot on S2 at its next synchronize; then S1 dies too. */
static void standby_pool(const char *want)
{
    struct h_server P, S1, S2;
    const char *args[] = {"--resume-within", "10", NULL};
    struct h_server_opts sopt = {.extra_args = {args[0], args[1], NULL}};
    h_server_start(&S1, "failover-pool-s1", &sopt);
    h_server_start(&S2, "failover-pool-s2", &sopt);
    h_server_start(&P, "failover-pool-primary", NULL);
    char pool[600];
    snprintf(pool, sizeof pool, "%s, %s", S1.addr, S2.addr); /* a space after the comma is allowed */
    setenv("SCUDA_STANDBY", pool, 1);
    setenv("SCUDA_SNAPSHOT_EVERY", "0", 1);
    setenv("SCUDA_JOURNAL_MAX", "256M", 1);
    round_sleep_ms = 60;
    struct run r;
    spawn(&r, "failover-pool");
    wait_ready("the pool's client");
    char parked_on[700];
    snprintf(parked_on, sizeof parked_on, "snapshot parked on %s", S1.addr);
    CHECK(h_wait_log(&P, parked_on, 1, 10000) >= 1, "no snapshot on the first standby");
    h_sleep_ms(150);
    kill(-P.pid, SIGKILL);
    /* The session, now on S1, covers itself with a snapshot on S2. */
    snprintf(parked_on, sizeof parked_on, "snapshot parked on %s", S2.addr);
    CHECK(h_wait_log(&S1, parked_on, 1, 10000) >= 1, "after the failover to S1, no snapshot on the next standby");
    h_sleep_ms(100); /* a journal after it */
    kill(-S1.pid, SIGKILL);
    int st = h_wait(r.pid, 30000);
    char *got = checksum_of(r.out);
    char *err = h_read_file(r.err, NULL);
    if (!(st == 0 && got && strcmp(got, want) == 0)) fprintf(stderr, "the pool's client's stderr:\n%s\n", err ? err : "");
    CHECK(st == 0, "the pool's client failed (status %d)", st);
    CHECK(got && strcmp(got, want) == 0, "the pool's client: checksum %s, an uninterrupted run's %s",
          got ? got : "none", want);
    CHECK(count_of(err, "replaying ") == 2, "the pool's client did not fail over twice: %s", err ? err : "");
    CHECK(strstr(err, S2.addr) && !strstr(err, "MISMATCH"), "the second failover did not go to S2: %s", err);
    printf("standby pool: failed over to S1, then to S2, same checksum\n");
    free(got);
    free(err);
    round_sleep_ms = 10;
    h_server_kill(&P);
    h_server_kill(&S1);
    h_server_stop(&S2);
}

int main(void)
{
    h_begin("failover", 240);
    char dead[16];
    snprintf(dead, sizeof dead, "%d", DEAD_AFTER_S);
    setenv("SCUDA_DEAD_AFTER", dead, 1);
    struct h_server S, ref;
    const char *standby_args[] = {"--resume-within", "10", NULL};
    struct h_server_opts sopt = {.extra_args = {standby_args[0], standby_args[1], NULL}};
    h_server_start(&S, "failover-standby", &sopt);

    /* The uninterrupted run (with the standby: snapshots change nothing),
     * with the fewest snapshots: the shortest run, whose length bounds
     * when a trial kills A. */
    h_server_start(&ref, "failover-ref", NULL);
    setenv("SCUDA_STANDBY", S.addr, 1);
    setenv("SCUDA_SNAPSHOT_EVERY", "5", 1);
    struct run r;
    spawn(&r, "failover-ref");
    wait_ready("the uninterrupted run");
    uint64_t t0 = h_now_ms();
    h_wait_ok_err(r.pid, 30000, "the uninterrupted run", r.err);
    unsigned run_ms = (unsigned)(h_now_ms() - t0);
    char *want = checksum_of(r.out);
    CHECK(want, "the uninterrupted run printed no checksum");
    CHECK(h_wait_log(&ref, "snapshot parked on", 1, 5000) >= 1, "the primary took no snapshot");
    h_server_stop(&ref);
    /* Its session ended normally: the standby dropped the parked copy. */
    CHECK(h_wait_log(&S, "the exporting session discarded this snapshot", 1, 5000) >= 1,
          "the standby kept the copy of a session that ended");
    printf("uninterrupted: %s, %u ms from the first synchronize\n", want, run_ms);

    unsigned seed = (unsigned)getpid();
    srand(seed);
    printf("seed %u\n", seed);
    int trials = 0, failed_over = 0;
    uint64_t start = h_now_ms();
    while (trials < 20 && h_now_ms() - start < 120000) {
        unsigned delay = (unsigned)rand() % (run_ms * 3 / 4 + 1);
        failed_over += trial(trials, &S, want, delay, trials % 4 == 3);
        trials++;
    }
    CHECK(trials >= 5, "only %d trials within the time budget", trials);
    CHECK(failed_over * 2 >= trials, "only %d of %d trials failed over", failed_over, trials);
    printf("%d trials, %d failed over, %d snapshots loaded images ahead\n", trials, failed_over,
           snapshots_loaded_ahead);
    CHECK(snapshots_loaded_ahead > 0, "no snapshot let the standby load the images ahead of the hold");
    /* Each snapshot replaced the one before last: parked copies do not pile up. */
    /* The uninterrupted run's copy, and those each trial's later snapshots
     * replaced (the standby hears of them within a second). */
    int owed = 1 + discards_owed;
    int discarded = h_wait_log(&S, "the exporting session discarded this snapshot", owed, 5000);
    CHECK(discarded >= owed, "only %d parked copies discarded; the primaries' snapshots replaced %d", discarded, owed);
    printf("%d parked copies discarded (%d owed)\n", discarded, owed);
    /* A copy whose primary died and whose client did not come (the one
     * before the copy a trial failed over to) goes after --resume-within. */
    CHECK(expiries_owed > 0, "no trial failed over with two parked copies");
    CHECK(h_wait_log(&S, "no client failed over here within 10 s", 1, 15000) >= 1,
          "the standby keeps the parked copies of dead primaries (%d owed)", expiries_owed);
    printf("%d trials left a parked copy of a dead primary; it expired\n", expiries_owed);

    standby_pool(want);
    free(want);
    replay_mismatch();
    no_standby();
    h_server_stop(&S);
    printf("PASS failover\n");
    return 0;
}
