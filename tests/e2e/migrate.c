/* migrate.c - moving a running session to another server
 * (src/server/migrate_out.c, migrate_in.c; docs/architecture.md 9.17).
 *
 * Two servers on loopback. A client mid-run (allocations of every size
 * class, a pitched one, a module whose global it changed, streams and
 * events with flags, kernels, copies) asks to move to B: B must rebuild
 * it under the same ids and at the same addresses, with the same bytes
 * (B's digest of what it holds must equal A's, which is what "moved"
 * means), and the client's results must be those of a run that did not
 * move. Then the refusals, each with its reason, the session going on
 * where it was: a stream-ordered allocation, a B whose window is
 * elsewhere, a B that does not accept A's token. And a driver that takes
 * its ranges with plain mmap(NULL, ...), as the real one does: its
 * globals and managed memory keep their addresses only because each
 * session places the driver's mappings (server/driver_va.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy_checks.h"
#include "harness.h"
#include "server/device_window.h"
#include "server/driver_va.h"

int scuda_migrate(const char *to, char *why, size_t whylen); /* the shim's (src/client/migrate.c) */
int scuda_client_bulk_streams(void);                         /* bulk connections in use (bulk.c) */

#define N 4096
#define MiB (1ull << 20)

static const char *target; /* B's address for the child, NULL: no migration */
/* An outside trigger instead (scuda migrate, a drain): the child says
 * it is mid-run on `ready` and keeps calling until a byte on `done`. */
static int outside, ready_pipe[2], done_pipe[2];
static char why[512];

/* A launch counter: another thread adds `ones` into `count` in place,
 * COUNTER_LAUNCHES times, while the session moves. Each launch that ran
 * twice (or not at all) shows in the sum. */
#define COUNTER_LAUNCHES 300
struct counter {
    CUcontext ctx;
    CUfunction add;
    CUstream stream;
    CUdeviceptr count, ones;
};

static void *count_launches(void *arg)
{
    struct counter *k = arg;
    CU(cuCtxSetCurrent(k->ctx));
    unsigned n = 256;
    void *args[] = {&k->count, &k->ones, &k->count, &n};
    for (int i = 0; i < COUNTER_LAUNCHES; i++) {
        CU(cuLaunchKernel(k->add, 1, 1, 1, 256, 1, 1, 0, k->stream, args, NULL));
        h_sleep_ms(1); /* long enough for a move to happen among them */
    }
    CU(cuStreamSynchronize(k->stream));
    return NULL;
}

static void launch(CUfunction f, CUstream s, void **args)
{
    CU(cuLaunchKernel(f, 16, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

/* The run: phase one, the move (when asked), phase two, every result
 * printed so that two runs can be compared byte for byte. */
static int workload(void *arg)
{
    (void)arg;
    CUcontext ctx = h_cuda_setup();
    CUfunction add = h_func("vec_add"), fill = h_func("fill_u32");
    CUdeviceptr g = 0, a, b, c, big, pitched;
    size_t gsize = 0, pitch = 0;
    CU(cuModuleGetGlobal_v2(&g, &gsize, h_module(), "g_counter"));
    uint32_t counter = 1234;
    CU(cuMemcpyHtoD_v2(g, &counter, sizeof counter));
    CU(cuMemAlloc_v2(&a, N * sizeof(float)));
    CU(cuMemAlloc_v2(&b, N * sizeof(float)));
    CU(cuMemAlloc_v2(&c, N * sizeof(float)));
    CU(cuMemAlloc_v2(&big, 3 * MiB));
    CU(cuMemAllocPitch_v2(&pitched, &pitch, 100, 10, 4));
    CUstream s1, s2;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreateWithPriority(&s2, 0, -1));
    CUevent e1, e2;
    CU(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CU(cuEventCreate(&e2, 0));
    float ha[N], hb[N];
    for (int i = 0; i < N; i++) ha[i] = (float)i, hb[i] = (float)(2 * i) + 0.5f;
    CU(cuMemcpyHtoDAsync_v2(a, ha, sizeof ha, s1));
    CU(cuMemcpyHtoD_v2(b, hb, sizeof hb));
    unsigned n = N;
    void *add_args[] = {&a, &b, &c, &n};
    launch(add, s1, add_args);
    uint32_t v = 0xabcd0123u;
    uint64_t words = 3 * MiB / 4;
    void *fill_args[] = {&big, &v, &words};
    launch(fill, s2, fill_args);
    CU(cuEventRecord(e1, s1));
    CU(cuStreamWaitEvent(s2, e1, 0));
    CU(cuMemsetD8_v2(pitched, 0x5a, pitch * 10));

    /* A striped copy before the move: bulk connections to A. */
    size_t striped_len = 16 * MiB;
    uint8_t *striped = malloc(striped_len), *striped_back = malloc(striped_len);
    CHECK(striped && striped_back);
    for (size_t i = 0; i < striped_len; i++) striped[i] = (uint8_t)(i * 7 + 3);
    CUdeviceptr dstriped;
    CU(cuMemAlloc_v2(&dstriped, striped_len));
    CU(cuMemcpyHtoD_v2(dstriped, striped, striped_len));

    struct counter k = {.ctx = ctx, .add = add};
    CU(cuStreamCreate(&k.stream, CU_STREAM_NON_BLOCKING));
    CU(cuMemAlloc_v2(&k.count, 256 * sizeof(float)));
    CU(cuMemAlloc_v2(&k.ones, 256 * sizeof(float)));
    float ones[256];
    for (int i = 0; i < 256; i++) ones[i] = 1.0f;
    CU(cuMemcpyHtoD_v2(k.ones, ones, sizeof ones));
    CU(cuMemsetD32_v2(k.count, 0, 256));
    CU(cuCtxSynchronize());
    pthread_t counting;
    CHECK(pthread_create(&counting, NULL, count_launches, &k) == 0);

    if (target) {
        h_sleep_ms(5); /* launches on their way while the session moves */
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    if (outside) {
        CHECK(write(ready_pipe[1], "r", 1) == 1);
        char c;
        uint64_t until = h_now_ms() + 60000;
        while (read(done_pipe[0], &c, 1) != 1 && h_now_ms() < until) {
            CU(cuCtxSynchronize()); /* mid-run: calls keep coming while the session moves */
            h_sleep_ms(5);
        }
    }
    pthread_join(counting, NULL);
    /* Striped copies after the move: the bulk connections are B's now. */
    CU(cuMemcpyDtoH_v2(striped_back, dstriped, striped_len));
    CHECK(memcmp(striped, striped_back, striped_len) == 0, "the striped bytes came back");
    for (size_t i = 0; i < striped_len; i++) striped[i] ^= 0x5a;
    CU(cuMemcpyHtoD_v2(dstriped, striped, striped_len));
    CU(cuMemcpyDtoH_v2(striped_back, dstriped, striped_len));
    CHECK(memcmp(striped, striped_back, striped_len) == 0, "the striped bytes went and came back");
    CHECK(scuda_client_bulk_streams() > 0, "the copies were striped");
    free(striped);
    free(striped_back);
    float counted[256];
    CU(cuMemcpyDtoH_v2(counted, k.count, sizeof counted));
    for (int i = 0; i < 256; i++)
        CHECK(counted[i] == (float)COUNTER_LAUNCHES, "launch counter %d is %.0f, not %d: a launch ran %s", i,
              (double)counted[i], COUNTER_LAUNCHES, counted[i] > COUNTER_LAUNCHES ? "twice" : "not at all");

    /* Phase two: the same handles, addresses and bytes. */
    launch(add, s2, add_args); /* c = a + b again, on the other stream */
    CU(cuEventRecord(e2, s2));
    CU(cuEventSynchronize(e2));
    float hc[N];
    CU(cuMemcpyDtoH_v2(hc, c, sizeof hc));
    uint32_t back = 0, word = 0;
    CU(cuMemcpyDtoH_v2(&back, g, sizeof back));
    CU(cuMemcpyDtoH_v2(&word, big + 3 * MiB - 4, 4));
    uint8_t row[100];
    CU(cuMemcpyDtoH_v2(row, pitched + 9 * pitch, sizeof row));
    for (int i = 0; i < N; i++) CHECK(hc[i] == ha[i] + hb[i], "c[%d] = %f", i, (double)hc[i]);
    CHECK(back == 1234, "the global is %u", back);
    CHECK(word == 0xabcd0123u, "the last word is %08x", word);
    CHECK(row[99] == 0x5a);
    CU(cuStreamQuery(s1));
    CU(cuEventQuery(e1));
    printf("counter %.0f\n", (double)counted[0]);
    printf("global %u word %08x row %02x c[%d] %f pitch %zu\n", back, word, row[0], N - 1, (double)hc[N - 1], pitch);
    printf("a %#llx b %#llx c %#llx big %#llx pitched %#llx g %#llx\n", (unsigned long long)a, (unsigned long long)b,
           (unsigned long long)c, (unsigned long long)big, (unsigned long long)pitched, (unsigned long long)g);
    return 0;
}

static char moved_err[512]; /* the last run's stderr */

/* Wait (at most 20 s) until s's log has needle n times. */
static int log_reaches(const struct h_server *s, const char *needle, int n)
{
    uint64_t until = h_now_ms() + 20000;
    while (h_server_log_count(s, needle) < n && h_now_ms() < until) h_sleep_ms(20);
    return h_server_log_count(s, needle);
}

static int pid_gone(pid_t pid)
{
    uint64_t until = h_now_ms() + 20000;
    while (h_pid_alive(pid) && h_now_ms() < until) h_sleep_ms(20);
    return !h_pid_alive(pid);
}

/* fn in a child that moves to `to` (NULL: stays): its stdout, its stderr
 * in moved_err. */
static char *run_output(int (*fn)(void *), const char *tag, const char *to)
{
    target = to;
    return cc_run_output(fn, NULL, tag, 60, moved_err, sizeof moved_err);
}

/* fn run once staying on A and once moved to `to`: what it prints must
 * not tell them apart. Returns what the moved run printed. */
static char *moved_prints_the_same(int (*fn)(void *), const char *tag, const char *to)
{
    char plain_tag[128], moved_tag[128];
    snprintf(plain_tag, sizeof plain_tag, "%s-plain", tag);
    snprintf(moved_tag, sizeof moved_tag, "%s-moved", tag);
    char *plain = run_output(fn, plain_tag, NULL);
    char *moved = run_output(fn, moved_tag, to);
    CHECK(strcmp(plain, moved) == 0, "a moved run printed\n%s\na run that stayed\n%s", moved, plain);
    free(plain);
    return moved;
}

static char *run_workload(const char *tag, const char *to) { return run_output(workload, tag, to); }

/* Start the workload in a child that waits, mid-run, for `trigger`. */
static char *run_outside(const char *tag, void (*trigger)(void *), void *arg)
{
    char path[512], errtag[128];
    int fd = h_temp_file(tag, path, sizeof path);
    snprintf(errtag, sizeof errtag, "%s-stderr", tag);
    int efd = h_temp_file(errtag, moved_err, sizeof moved_err);
    target = NULL;
    outside = 1;
    CHECK(pipe(ready_pipe) == 0 && pipe(done_pipe) == 0);
    CHECK(fcntl(done_pipe[0], F_SETFL, O_NONBLOCK) == 0);
    pid_t child = h_spawn(workload, NULL, 90, fd, efd);
    char c;
    CHECK(read(ready_pipe[0], &c, 1) == 1, "the client got mid-run");
    trigger(arg);
    CHECK(write(done_pipe[1], "d", 1) == 1);
    h_wait_ok(child, 95000, tag);
    outside = 0;
    for (int i = 0; i < 2; i++) close(ready_pipe[i]), close(done_pipe[i]);
    close(fd);
    close(efd);
    size_t len;
    return h_read_file(path, &len);
}

struct trigger {
    struct h_server *a, *b;
    const char *control;
    int want_status;
    const char *want;
};

static pid_t newest_session(const struct h_server *s)
{
    pid_t pids[16];
    int n = h_server_sessions(s, pids, 16);
    CHECK(n > 0, "the server names its sessions");
    return pids[n - 1];
}

static void migrate_from_outside(void *arg)
{
    struct trigger *t = arg;
    char out[2048];
    int st = cc_scuda_migrate(SCUDA_BIN_PATH, newest_session(t->a), t->b->addr, t->control, out, sizeof out);
    CHECK(st == t->want_status && strstr(out, t->want), "scuda migrate exited %d, printing: %s", st, out);
    if (st == 0) CHECK(strstr(out, "hold") && strstr(out, "memory"), "it prints the pause: %s", out);
}

static void test_outside(void)
{
    struct h_server A, B;
    char control[600];
    snprintf(control, sizeof control, "%s/migrate-outside-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts ao = {.extra_args = {"--control", control, NULL}};
    h_server_start(&B, "migrate-outside-b", NULL);
    h_server_start(&A, "migrate-outside-a", &ao);
    char *plain = run_workload("migrate-outside-plain", NULL);
    struct trigger t = {&A, &B, control, 0, "moved to"};
    char *moved = run_outside("migrate-outside-moved", migrate_from_outside, &t);
    CHECK(strcmp(plain, moved) == 0, "a run moved by scuda migrate printed\n%s\na run that stayed\n%s", moved, plain);
    CHECK(log_reaches(&A, "the client resumed there, this process ends", 1) == 1, "A saw the client go");
    CHECK(log_reaches(&B, "client resumed the session", 1) == 1, "B's session serves the client");
    CHECK(pid_gone(newest_session(&A)), "A's session process is gone after the move");
    /* The control socket is the owner's alone. */
    struct stat st;
    CHECK(stat(control, &st) == 0 && (st.st_mode & 0777) == 0600, "the control socket is mode 0600");
    free(plain);
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
}

/* A blocker: scuda migrate says why, the session goes on on A. */
static int blocked_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p, q;
    CU(cuMemAllocAsync(&p, 4096, NULL));
    CU(cuMemAlloc_v2(&q, 4096));
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    char c;
    uint64_t until = h_now_ms() + 60000;
    while (read(done_pipe[0], &c, 1) != 1 && h_now_ms() < until) h_sleep_ms(5);
    uint32_t v = 7, back = 0;
    CU(cuMemcpyHtoD_v2(q, &v, 4));
    CU(cuMemcpyDtoH_v2(&back, q, 4));
    CHECK(back == 7, "the session goes on");
    return 0;
}

static void run_blocked(void (*trigger)(void *), void *arg, const char *what)
{
    CHECK(pipe(ready_pipe) == 0 && pipe(done_pipe) == 0);
    CHECK(fcntl(done_pipe[0], F_SETFL, O_NONBLOCK) == 0);
    pid_t child = h_spawn(blocked_client, NULL, 90, -1, -1);
    char c;
    CHECK(read(ready_pipe[0], &c, 1) == 1, "the client got mid-run");
    trigger(arg);
    CHECK(write(done_pipe[1], "d", 1) == 1);
    h_wait_ok(child, 95000, what);
    for (int i = 0; i < 2; i++) close(ready_pipe[i]), close(done_pipe[i]);
}

static void test_outside_refused(void)
{
    struct h_server A, B;
    char control[600];
    snprintf(control, sizeof control, "%s/migrate-refused-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts ao = {.extra_args = {"--control", control, NULL}};
    h_server_start(&B, "migrate-refused-b", NULL);
    h_server_start(&A, "migrate-refused-a", &ao);
    struct trigger t = {&A, &B, control, 1, "cannot move"};
    run_blocked(migrate_from_outside, &t, "a blocked session stays");
    CHECK(h_server_log_count(&B, "imported a session") == 0, "nothing reached B");
    char out[2048];
    CHECK(cc_scuda_migrate(SCUDA_BIN_PATH, 999999, B.addr, control, out, sizeof out) == 1 &&
              strstr(out, "no session 999999"),
          "an unknown session is named: %s", out);
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- a striped copy in flight at the move ------------------------------------- */

/* Striped copies back to back, each checked, until a byte on done_pipe.
 * A move asked from outside holds the session between two of them, so
 * the next copy's chunks wait on A's bulk connections, which the held
 * session does not read: only its main connection carries the notice. */
#define STRIPED_LEN (40 * MiB)

static int striping_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    uint8_t *src = malloc(STRIPED_LEN), *back = malloc(STRIPED_LEN);
    CHECK(src && back);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, STRIPED_LEN));
    /* Striping on A before the move is asked (a move that catches the
     * client's bulk setup itself is another case). */
    memset(src, 0x11, STRIPED_LEN);
    CU(cuMemcpyHtoD_v2(d, src, STRIPED_LEN));
    CHECK(scuda_client_bulk_streams() > 0, "the copies on A are striped");
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    char c;
    unsigned round = 0;
    for (uint64_t until = h_now_ms() + 60000; read(done_pipe[0], &c, 1) != 1 && h_now_ms() < until; round++) {
        memset(src, (int)(round * 37 + 1), STRIPED_LEN);
        for (size_t i = 0; i < STRIPED_LEN; i += 1 << 20) memcpy(src + i, &round, sizeof round);
        CU(cuMemcpyHtoD_v2(d, src, STRIPED_LEN));
        CU(cuMemcpyDtoH_v2(back, d, STRIPED_LEN));
        CHECK(memcmp(src, back, STRIPED_LEN) == 0, "copy round %u came back byte for byte", round);
    }
    /* One more, surely on B (a slow machine may have made only the cut
     * one there): it opens the bulk connections to B and stripes. */
    memset(src, 0x3c, STRIPED_LEN);
    CU(cuMemcpyHtoD_v2(d, src, STRIPED_LEN));
    CU(cuMemcpyDtoH_v2(back, d, STRIPED_LEN));
    CHECK(memcmp(src, back, STRIPED_LEN) == 0, "the last copy came back byte for byte");
    CHECK(scuda_client_bulk_streams() > 0, "the copies on B are striped");
    free(src);
    free(back);
    return 0;
}

static void test_striped_copy_moves(void)
{
    struct h_server A, B;
    char control[600];
    snprintf(control, sizeof control, "%s/migrate-striped-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts ao = {.extra_args = {"--control", control, NULL}};
    h_server_start(&B, "migrate-striped-b", NULL);
    h_server_start(&A, "migrate-striped-a", &ao);
    CHECK(pipe(ready_pipe) == 0 && pipe(done_pipe) == 0);
    CHECK(fcntl(done_pipe[0], F_SETFL, O_NONBLOCK) == 0);
    pid_t child = h_spawn(striping_client, NULL, 90, -1, -1);
    char c;
    CHECK(read(ready_pipe[0], &c, 1) == 1, "the client got mid-run");
    h_sleep_ms(200); /* copies under way */
    struct trigger t = {&A, &B, control, 0, "moved to"};
    migrate_from_outside(&t);
    CHECK(log_reaches(&B, "client resumed the session", 1) == 1, "the client went on on B");
    h_sleep_ms(500); /* copies on B */
    CHECK(write(done_pipe[1], "d", 1) == 1);
    h_wait_ok(child, 95000, "a striped copy in flight at the move");
    for (int i = 0; i < 2; i++) close(ready_pipe[i]), close(done_pipe[i]);
    CHECK(h_server_log_count(&A, "the session moved to") == 1, "A ended striping at the switch");
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- drain: SIGTERM with --peer ------------------------------------------------ */

static void sigterm_server(void *arg)
{
    struct trigger *t = arg;
    /* The earlier run's session first ends (slowly under sanitizers): the
     * drain is about this run's session alone. */
    pid_t pids[16];
    int n = h_server_sessions(t->a, pids, 16);
    for (int i = 0; i + 1 < n; i++) CHECK(pid_gone(pids[i]), "session %d ended", (int)pids[i]);
    CHECK(kill(t->a->pid, SIGTERM) == 0);
    CHECK(log_reaches(t->a, t->want, 1) == 1, "A logs '%s'", t->want);
}

static void test_drain(void)
{
    struct h_server A, B, C;
    char peers[256], control[600];
    snprintf(control, sizeof control, "%s/migrate-drain-%d.sock", E2E_LOG_DIR, (int)getpid());
    h_server_start(&B, "migrate-drain-b", NULL);
    h_server_start(&C, "migrate-drain-c", NULL);
    /* A peer that is not there first: the next one takes the session. */
    snprintf(peers, sizeof peers, "127.0.0.1:1,%s", C.addr);
    struct h_server_opts ao = {.extra_args = {"--peer", peers, "--control", control, NULL}};
    h_server_start(&A, "migrate-drain-a", &ao);
    char *plain = run_workload("migrate-drain-plain", NULL);
    struct trigger t = {.a = &A, .want = "drained: 1 of 1 session(s) moved"};
    char *moved = run_outside("migrate-drain-moved", sigterm_server, &t);
    CHECK(strcmp(plain, moved) == 0, "a drained run printed\n%s\na run that stayed\n%s", moved, plain);
    CHECK(h_server_log_count(&A, "trying the next peer") == 1, "the absent peer was skipped");
    CHECK(log_reaches(&C, "client resumed the session", 1) == 1, "the client finished on the peer");
    CHECK(pid_gone(A.pid), "A exited once its session had moved");
    free(plain);
    free(moved);
    /* A session that cannot move is left to finish with its client. */
    struct h_server D;
    char peer_b[128];
    snprintf(peer_b, sizeof peer_b, "%s", B.addr);
    snprintf(control, sizeof control, "%s/migrate-drain-d-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts dopt = {.extra_args = {"--peer", peer_b, "--control", control, NULL}};
    h_server_start(&D, "migrate-drain-d", &dopt);
    struct trigger td = {.a = &D, .want = "stays until its client ends it"};
    run_blocked(sigterm_server, &td, "a drain leaves a blocked session");
    CHECK(h_wait_log(&D, "stream-ordered memory", 1, 10000) >= 1, "the reason is logged");
    h_server_kill(&D); /* both parents exited by themselves (the drain) */
    h_server_kill(&A);
    h_server_stop(&C);
    h_server_stop(&B);
}

static void test_moves(void)
{
    struct h_server A, B;
    h_server_start(&B, "migrate-b", NULL);
    h_server_start(&A, "migrate-a", NULL); /* last: SCUDA_SERVER is A's */
    char *moved = moved_prints_the_same(workload, "migrate", B.addr);
    CHECK(h_server_log_count(&A, "migrated session") == 1, "A logs the move with its timings");
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    char *log = h_server_log(&A);
    CHECK(strstr(log, "hold+sync") && strstr(log, "replay") && strstr(log, "MiB memory in"), "the pause, in parts");
    free(log);
    /* The switch: the client's later calls ran on B, and A's session is gone. */
    CHECK(log_reaches(&A, "the client resumed there, this process ends", 1) == 1, "A saw the client go");
    CHECK(h_server_log_count(&B, "the client resumed here") == 1, "B took the client's resume");
    CHECK(h_server_log_count(&B, "client resumed the session") == 1, "B's session serves the client");
    pid_t pids[4];
    CHECK(h_server_sessions(&A, pids, 4) == 2, "A ran the plain run's session and the moved one's");
    CHECK(pid_gone(pids[1]), "A's session process %d is gone after the move", (int)pids[1]);
    char *err = h_read_file(moved_err, &(size_t){0});
    CHECK(strstr(err, "session moved from") && strstr(err, B.addr) && strstr(err, "hold") && strstr(err, "memory"),
          "the client says where it moved and the pause: %s", err);
    free(err);
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- libraries, managed memory, the application's VMM ------------------------ */

/* More dynamic shared memory than a kernel gets by default: a launch with
 * it works only where cuFuncSetAttribute was replayed. */
#define LIB_SMEM (64u << 10)

struct lib_state {
    CUlibrary l1, l2;
    CUkernel kadd, kfill;
    CUfunction fadd, fill2;
    CUdeviceptr a, c, g1, g2, gpi, m_b, m_c, va;
    size_t gran;
    CUmemGenericAllocationHandle h1, h2;
};

static void lib_setup_vmm(struct lib_state *st)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CU(cuMemGetAllocationGranularity(&st->gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU(cuMemAddressReserve(&st->va, 4 * st->gran, 0, 0, 0));
    CU(cuMemCreate(&st->h1, st->gran, &prop, 0));
    CU(cuMemCreate(&st->h2, st->gran, &prop, 0));
    CU(cuMemMap(st->va, st->gran, 0, st->h1, 0));
    CU(cuMemMap(st->va + 2 * st->gran, st->gran, 0, st->h2, 0));
    CU(cuMemRelease(st->h2)); /* still mapped: the driver keeps it */
    CUmemAccessDesc rw = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU(cuMemSetAccess(st->va, st->gran, &rw, 1));
    CU(cuMemSetAccess(st->va + 2 * st->gran, st->gran, &rw, 1));
    CU(cuMemsetD32_v2(st->va, 0x22222222u, st->gran / 4));
    uint32_t pattern[256];
    for (int i = 0; i < 256; i++) pattern[i] = 0x5000u + (uint32_t)i;
    CU(cuMemcpyHtoD_v2(st->va + 2 * st->gran + 4096, pattern, sizeof pattern));
}

/* Libraries loaded, kernels bound, globals placed in an order that
 * decides their addresses; managed memory allocated, freed and written
 * by the host; the application's own VMM mappings. */
static void lib_setup(struct lib_state *st)
{
    size_t len, size = 0;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CU(cuLibraryLoadData(&st->l1, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuMemAlloc_v2(&st->a, N * sizeof(float)));
    CU(cuMemAlloc_v2(&st->c, N * sizeof(float)));
    CU(cuLibraryGetKernel(&st->kadd, st->l1, "vec_add"));
    CU(cuLibraryGetKernel(&st->kfill, st->l1, "fill_u32"));
    /* Launched as a kernel: the session asks for its function (the
     * parameter layout), which is where the driver loads l1 here. */
    float one = 1.5f;
    uint32_t v;
    memcpy(&v, &one, sizeof v);
    uint64_t words = N;
    void *fargs[] = {&st->a, &v, &words};
    CU(cuLaunchKernel((CUfunction)st->kfill, 16, 1, 1, 256, 1, 1, 0, NULL, fargs, NULL));
    CU(cuLibraryLoadData(&st->l2, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    CU(cuLibraryGetGlobal(&st->g2, &size, st->l2, "g_counter")); /* placed after l1's */
    CU(cuLibraryGetGlobal(&st->g1, &size, st->l1, "g_floats"));
    CU(cuKernelGetFunction(&st->fadd, st->kadd));
    CU(cuFuncSetAttribute(st->fadd, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)LIB_SMEM));
    CUmodule m2;
    CU(cuLibraryGetModule(&m2, st->l2));
    CU(cuModuleGetFunction(&st->fill2, m2, "fill_u32"));
    CU(cuModuleGetGlobal_v2(&st->gpi, &size, m2, "g_pi"));
    uint32_t g2val = 777;
    CU(cuMemcpyHtoD_v2(st->g2, &g2val, sizeof g2val));
    CUdeviceptr m_a;
    CU(cuMemAllocManaged(&m_a, 1000, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&st->m_b, 3 * 4096 + 12, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemFree_v2(m_a)); /* the allocator's later choices depended on it */
    CU(cuMemAllocManaged(&st->m_c, 100 << 10, CU_MEM_ATTACH_GLOBAL));
    CU(cuCtxSynchronize()); /* the host writes managed memory next */
    uint32_t *hb = (uint32_t *)(uintptr_t)st->m_b, *hc = (uint32_t *)(uintptr_t)st->m_c;
    for (int i = 0; i < 3 * 1024 + 3; i++) hb[i] = 3u * (uint32_t)i;
    for (int i = 0; i < 25 * 1024; i++) hc[i] = 0xc0000000u + (uint32_t)i; /* dirty when the move starts */
    lib_setup_vmm(st);
}

/* After the move (or not): the same handles, addresses and bytes. */
static void lib_after(struct lib_state *st)
{
    unsigned n = N;
    void *add_args[] = {&st->a, &st->a, &st->c, &n};
    CU(cuLaunchKernel(st->fadd, 16, 1, 1, 256, 1, 1, LIB_SMEM, NULL, add_args, NULL));
    uint32_t v = 0xfeed0000u;
    uint64_t words = 3;
    void *fargs[] = {&st->m_b, &v, &words};
    CU(cuLaunchKernel(st->fill2, 1, 1, 1, 32, 1, 1, 0, NULL, fargs, NULL));
    CU(cuCtxSynchronize());
    float hc[N];
    CU(cuMemcpyDtoH_v2(hc, st->c, sizeof hc));
    for (int i = 0; i < N; i++) CHECK(hc[i] == 3.0f, "c[%d] = %f", i, (double)hc[i]);
    uint32_t g2 = 0, mc = 0, vm[2] = {0}, word = 0;
    float g1[3];
    double pi = 0;
    CU(cuMemcpyDtoH_v2(&g2, st->g2, sizeof g2));
    CU(cuMemcpyDtoH_v2(g1, st->g1, sizeof g1));
    CU(cuMemcpyDtoH_v2(&pi, st->gpi, sizeof pi));
    CU(cuMemcpyDtoH_v2(&mc, st->m_c + 4 * 25000, sizeof mc));
    CU(cuMemcpyDtoH_v2(&vm[0], st->va + 100, 4));
    CU(cuMemcpyDtoH_v2(&vm[1], st->va + 2 * st->gran + 4096 + 4 * 200, 4));
    const uint32_t *hb = (const uint32_t *)(uintptr_t)st->m_b;
    CHECK(hb[0] == 0xfeed0000u && hb[3] == 9 && hb[3 * 1024 + 2] == 3u * (3 * 1024 + 2),
          "managed memory after a kernel: %x %u %u", hb[0], hb[3], hb[3 * 1024 + 2]);
    CHECK(g2 == 777 && g1[2] == 3.0f && mc == 0xc0000000u + 25000 && vm[0] == 0x22222222u && vm[1] == 0x5000u + 200,
          "globals, managed and mapped bytes: %u %f %x %x %x", g2, (double)g1[2], mc, vm[0], vm[1]);
    for (int i = 0; i < 4; i++) word ^= hb[i * 1000];
    CU(cuMemcpyHtoD_v2(st->va + 8, &word, sizeof word)); /* the mapping takes writes */
    CU(cuMemcpyDtoH_v2(&word, st->va + 8, sizeof word));
    printf("c %f g2 %u g1 %f pi %f managed %x %x mapped %x %x word %x\n", (double)hc[N - 1], g2, (double)g1[2], pi,
           hb[0], mc, vm[0], vm[1], word);
    printf("g1 %#llx g2 %#llx gpi %#llx m_b %#llx m_c %#llx va %#llx\n", (unsigned long long)st->g1,
           (unsigned long long)st->g2, (unsigned long long)st->gpi, (unsigned long long)st->m_b,
           (unsigned long long)st->m_c, (unsigned long long)st->va);
}

static void lib_teardown(struct lib_state *st)
{
    CU(cuMemUnmap(st->va, st->gran));
    CU(cuMemUnmap(st->va + 2 * st->gran, st->gran));
    CU(cuMemRelease(st->h1));
    CU(cuMemAddressFree(st->va, 4 * st->gran));
    CU(cuMemFree_v2(st->m_b));
    CU(cuMemFree_v2(st->m_c));
    CU(cuLibraryUnload(st->l2));
    CU(cuLibraryUnload(st->l1));
}

static int lib_workload(void *arg)
{
    (void)arg;
    h_cuda_setup();
    struct lib_state st;
    lib_setup(&st);
    if (target) {
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    lib_after(&st);
    lib_teardown(&st);
    return 0;
}

static char *run_lib_workload(const char *tag, const char *to) { return run_output(lib_workload, tag, to); }

static void test_moves_libraries(void)
{
    struct h_server A, B;
    h_server_start(&B, "migrate-lib-b", NULL);
    h_server_start(&A, "migrate-lib-a", NULL); /* last: SCUDA_SERVER is A's */
    char *moved = moved_prints_the_same(lib_workload, "migrate-lib", B.addr);
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    CHECK(log_reaches(&A, "the client resumed there, this process ends", 1) == 1, "A saw the client go");
    CHECK(h_server_log_count(&B, "client resumed the session") == 1, "the later calls ran on B");
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- a library's __managed__ variable ------------------------------------------------ */

/* Looked up with cuLibraryGetManaged (as static cudart binds one), written
 * by the host and by a kernel before the move: B must place it at the
 * address the client mirrors, with its bytes. */
static const char managed_var_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                                      ".visible .global .attribute(.managed) .align 4 .u32 g_managed[4] = {7, 8, 9, 10};\n";

static int managed_var_workload(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, managed_var_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CUdeviceptr p = 0;
    size_t n = 0;
    CU(cuLibraryGetManaged(&p, &n, lib, "g_managed"));
    volatile uint32_t *v = (volatile uint32_t *)(uintptr_t)p;
    v[1] = 80;
    CU(cuMemsetD32_v2(p + 8, 0x55, 1));
    CU(cuCtxSynchronize());
    v[3] = 99; /* dirty when the move starts */
    if (target) {
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    uint32_t dev[4];
    CU(cuMemcpyDtoH_v2(dev, p, sizeof dev));
    CHECK(dev[0] == 7 && dev[1] == 80 && dev[2] == 0x55 && dev[3] == 99, "the variable's bytes: %u %u %u %u", dev[0],
          dev[1], dev[2], dev[3]);
    CUdeviceptr again = 0;
    CU(cuLibraryGetManaged(&again, NULL, lib, "g_managed"));
    CHECK(again == p, "asked again: %#llx, first %#llx", (unsigned long long)again, (unsigned long long)p);
    CU(cuMemsetD32_v2(p, 0x66, 1));
    CU(cuCtxSynchronize());
    CHECK(v[0] == 0x66 && v[3] == 99, "the host sees B's writes: %u %u", v[0], v[3]);
    printf("managed variable at %#llx: %u %u %u %u\n", (unsigned long long)p, v[0], v[1], v[2], v[3]);
    CU(cuLibraryUnload(lib));
    return 0;
}

/* fn on servers A and B of its own (tag-a, tag-b): it prints the same
 * whether it stays or moves, B rebuilt the session and checked it, and
 * the later calls ran on B. */
static void check_moves(int (*fn)(void *), const char *tag)
{
    struct h_server A, B;
    char name[128];
    snprintf(name, sizeof name, "%s-b", tag);
    h_server_start(&B, name, NULL);
    snprintf(name, sizeof name, "%s-a", tag);
    h_server_start(&A, name, NULL); /* last: SCUDA_SERVER is A's */
    free(moved_prints_the_same(fn, tag, B.addr));
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    CHECK(log_reaches(&A, "the client resumed there, this process ends", 1) == 1, "the later calls ran on B");
    h_server_stop(&A);
    h_server_stop(&B);
}

static void test_moves_managed_variable(void) { check_moves(managed_var_workload, "migrate-mvar"); }

/* ---- the memory's links --------------------------------------------------------- */

/* A move with A's SCUDA_MIGRATE_LINKS at `links` (NULL: unset): the memory
 * goes over `conns` connections, B joins `joins` links, and the session
 * still moves whole. */
static void check_links(const char *links, const char *tag, const char *conns, int joins)
{
    struct h_server A, B;
    char name[128];
    snprintf(name, sizeof name, "%s-b", tag);
    h_server_start(&B, name, NULL);
    if (links) setenv("SCUDA_MIGRATE_LINKS", links, 1);
    snprintf(name, sizeof name, "%s-a", tag);
    h_server_start(&A, name, NULL); /* A reads it from its environment */
    unsetenv("SCUDA_MIGRATE_LINKS");
    free(moved_prints_the_same(workload, tag, B.addr));
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    CHECK(h_server_log_count(&A, conns) == 1, "A sent the memory %s", conns);
    CHECK(h_server_log_count(&B, ": joined") == joins, "B joined %d links", joins);
    h_server_stop(&A);
    h_server_stop(&B);
}

static void test_memory_links(void)
{
    check_links(NULL, "migrate-links", "over 4 connections:", 4);
    check_links("0", "migrate-links0", "over 1 connection:", 0);
    check_links("2", "migrate-links2", "over 2 connections:", 2);
}

/* ---- images by digest: bytes only where B's cache lacks them ----------------------- */

/* A token file of two users for B; A proves one of them (its SCUDA_TOKEN,
 * which its clients use too). */
static void start_a_as(struct h_server *a, const char *tag, const char *token)
{
    setenv("SCUDA_TOKEN", token, 1);
    struct h_server_opts o = {.token = token};
    h_server_start(a, tag, &o);
}

static void test_images_by_digest(void)
{
    char users[512];
    int tfd = h_temp_file("migrate-users", users, sizeof users);
    const char *lines = "alice tok-alice\nbob tok-bob\n";
    CHECK(write(tfd, lines, strlen(lines)) == (ssize_t)strlen(lines));
    close(tfd);
    chmod(users, 0600);
    struct h_server A, A2, B;
    struct h_server_opts bo = {.token_file = users};
    h_server_start(&B, "migrate-digest-b", &bo);
    start_a_as(&A, "migrate-digest-a", "tok-alice");
    free(run_lib_workload("migrate-digest-first", B.addr));
    free(run_lib_workload("migrate-digest-again", B.addr));
    /* B kept what it received for alice: the second move names the images. */
    CHECK(h_server_log_count(&B, "; 0 of 2 images from the module cache") == 1, "the first move sent the bytes");
    CHECK(h_server_log_count(&B, "; 2 of 2 images from the module cache") == 1, "the second sent digests alone");
    CHECK(h_server_log_count(&A, "; 2 of 2 images sent by digest alone") == 1, "A says so too");
    h_server_stop(&A);
    /* Bob never loaded them on B: to him B has nothing (no oracle). */
    start_a_as(&A2, "migrate-digest-a2", "tok-bob");
    free(run_lib_workload("migrate-digest-bob", B.addr));
    CHECK(h_server_log_count(&B, "; 0 of 2 images from the module cache") == 2, "bob's move sent the bytes");
    unsetenv("SCUDA_TOKEN");
    h_server_stop(&A2);
    h_server_stop(&B);
    unlink(users);
}

/* ---- variables the client never looked up --------------------------------- */

/* bump_global adds its argument and c_table[1] (2, a __constant__) to its
 * module's g_counter (42 at load): kernels change a variable the client
 * asks about only after the move, in a library and in a module. */
#define BUMPS 3

static void bump(CUfunction lib_fn, CUfunction mod_fn)
{
    unsigned lib_add = 5, mod_add = 100;
    void *la[] = {&lib_add}, *ma[] = {&mod_add};
    CU(cuLaunchKernel(lib_fn, 1, 1, 1, 1, 1, 1, 0, NULL, la, NULL));
    CU(cuLaunchKernel(mod_fn, 1, 1, 1, 1, 1, 1, 0, NULL, ma, NULL));
}

static int unlooked_workload(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t len, size = 0;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CUlibrary lib;
    CUmodule mod;
    CUkernel kb;
    CUfunction fb;
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuModuleLoadData(&mod, ptx));
    free(ptx);
    CU(cuLibraryGetKernel(&kb, lib, "bump_global"));
    CU(cuModuleGetFunction(&fb, mod, "bump_global"));
    for (int i = 0; i < BUMPS; i++) bump((CUfunction)kb, fb);
    CU(cuCtxSynchronize());
    if (target) {
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    bump((CUfunction)kb, fb);
    CU(cuCtxSynchronize());
    CUdeviceptr lg, mg, table;
    CU(cuLibraryGetGlobal(&lg, &size, lib, "g_counter"));
    CU(cuModuleGetGlobal_v2(&mg, &size, mod, "g_counter"));
    CU(cuModuleGetGlobal_v2(&table, &size, mod, "c_table"));
    uint32_t lv = 0, mv = 0, t[4] = {0};
    CU(cuMemcpyDtoH_v2(&lv, lg, sizeof lv));
    CU(cuMemcpyDtoH_v2(&mv, mg, sizeof mv));
    CU(cuMemcpyDtoH_v2(t, table, sizeof t));
    CHECK(lv == 42 + (BUMPS + 1) * 7, "the library's counter is %u, not %u: bumps before the move were lost", lv,
          42 + (BUMPS + 1) * 7);
    CHECK(mv == 42 + (BUMPS + 1) * 102, "the module's counter is %u, not %u", mv, 42 + (BUMPS + 1) * 102);
    CHECK(t[0] == 1 && t[1] == 2 && t[2] == 3 && t[3] == 4, "the __constant__ table is %u %u %u %u", t[0], t[1],
          t[2], t[3]);
    printf("library counter %u module counter %u table %u %u %u %u at %#llx %#llx %#llx\n", lv, mv, t[0], t[1], t[2],
           t[3], (unsigned long long)lg, (unsigned long long)mg, (unsigned long long)table);
    CU(cuModuleUnload(mod));
    CU(cuLibraryUnload(lib));
    return 0;
}

static void test_moves_unlooked_globals(void) { check_moves(unlooked_workload, "migrate-unlooked"); }

/* B's driver places module memory elsewhere: the library global the
 * client holds would move, so the migration is refused and the session
 * goes on on A with its bytes. */
static int refused_placement(void *arg)
{
    (void)arg;
    h_cuda_setup();
    struct lib_state st;
    lib_setup(&st);
    int moved = scuda_migrate(target, why, sizeof why);
    CHECK(moved == 0, "a session whose library global would move moved");
    CHECK(strstr(why, "placed it elsewhere"), "the reason names it: %s", why);
    lib_after(&st);
    lib_teardown(&st);
    return 0;
}

static void test_refused_placement(void)
{
    struct h_server A, B;
    setenv("STANDIN_VA_SKEW", "0x200000", 1); /* B's stand-in places globals 2 MiB further */
    h_server_start(&B, "migrate-skew-b", NULL);
    unsetenv("STANDIN_VA_SKEW");
    h_server_start(&A, "migrate-skew-a", NULL);
    target = B.addr;
    h_wait_ok(h_spawn(refused_placement, NULL, 60, -1, -1), 65000, "a misplaced global refuses");
    CHECK(h_server_log_count(&B, "not rebuilt") == 1, "B discarded it, and said why");
    CHECK(h_server_log_count(&A, "cannot move") == 1, "A said why, and the session went on");
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- a driver that places its own ranges (server/driver_va.h) ---------------- */

/* The stand-in takes its device range and managed blocks with plain
 * mmap(NULL, ...), as the real driver does, so where they land depends on
 * each server's randomized mmap area: only the session's arena puts the
 * globals and managed memory at the same addresses on A and on B. */
static void test_moves_driver_mmap(void)
{
    struct h_server A, B;
    setenv("STANDIN_PLAIN_MMAP", "1", 1);
    setenv("SCUDA_DRIVER_VA_LOG", "1", 1);
    h_server_start(&B, "migrate-va-b", NULL);
    h_server_start(&A, "migrate-va-a", NULL); /* last: SCUDA_SERVER is A's */
    unsetenv("SCUDA_DRIVER_VA_LOG");
    unsetenv("STANDIN_PLAIN_MMAP");
#if DRIVER_VA_HOOKED
    char *moved = moved_prints_the_same(lib_workload, "migrate-va", B.addr);
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    CHECK(h_server_log_count(&B, "client resumed the session") == 1, "the later calls ran on B");
    /* The device range is the driver's first mapping: the arena's base, in every session. */
    char first[128];
    snprintf(first, sizeof first, "driver mapping #1 placed: %#llx bytes --- flags 0x4022 at %#llx\n",
             (unsigned long long)(4 * 1024 * MiB + 256 * MiB), (unsigned long long)DRIVER_VA_BASE_DEFAULT);
    CHECK(h_server_log_count(&A, first) == 2 && h_server_log_count(&B, first) == 1,
          "each session logged its first placement: %d on A, %d on B", h_server_log_count(&A, first),
          h_server_log_count(&B, first));
    unsigned long long g1 = 0;
    const char *at = strstr(moved, "\ng1 "); /* the line of addresses */
    CHECK(at && sscanf(at + 1, "g1 %llx", &g1) == 1 && g1 >= DRIVER_VA_BASE_DEFAULT &&
              g1 < DRIVER_VA_BASE_DEFAULT + DRIVER_VA_SIZE_DEFAULT,
          "a library global lies in the arena: %#llx", g1);
    free(moved);
#else
    /* Sanitizer builds have no arena (the sanitizers own mmap): where the
     * kernel puts the ranges then decides, so only the log is checked. */
    CHECK(h_server_log_count(&A, "compiled out of this build") == 0, "A has run no session yet");
    free(run_lib_workload("migrate-va-plain", NULL));
    CHECK(h_server_log_count(&A, "compiled out of this build") == 1, "the session said the arena is off");
#endif
    h_server_stop(&A);
    h_server_stop(&B);
}

/* The same driver without the arena, B's reserving one range more: its
 * globals and managed memory land elsewhere, and the move is refused. */
static void test_refused_driver_mmap(void)
{
    struct h_server A, B;
    struct h_server_opts off = {.extra_args = {"--driver-va-base", "off", NULL}};
    setenv("STANDIN_PLAIN_MMAP", "1", 1);
    setenv("STANDIN_MMAP_PAD", "0x200000", 1);
    h_server_start(&B, "migrate-va-off-b", &off);
    unsetenv("STANDIN_MMAP_PAD");
    h_server_start(&A, "migrate-va-off-a", &off);
    unsetenv("STANDIN_PLAIN_MMAP");
    target = B.addr;
    h_wait_ok(h_spawn(refused_placement, NULL, 60, -1, -1), 65000, "a driver that placed its ranges elsewhere refuses");
    CHECK(h_server_log_count(&B, "not rebuilt") == 1, "B discarded it, and said why");
    CHECK(h_server_log_count(&A, "--driver-va-base off") == 1, "A's session said the driver places its memory");
    h_server_stop(&A);
    h_server_stop(&B);
}

/* ---- refusals: the session goes on where it was ----------------------------- */

static int refused_blocker(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p, q;
    CU(cuMemAllocAsync(&p, 4096, NULL));
    CU(cuMemAlloc_v2(&q, 4096));
    int moved = scuda_migrate(target, why, sizeof why);
    CHECK(moved == 0, "a session with stream-ordered memory moved");
    CHECK(strstr(why, "stream-ordered memory"), "the reason names it: %s", why);
    uint32_t v = 7, back = 0;
    CU(cuMemcpyHtoD_v2(q, &v, 4));
    CU(cuMemcpyDtoH_v2(&back, q, 4));
    CHECK(back == 7, "the session goes on");
    CU(cuMemFreeAsync(p, NULL));
    return 0;
}

static int refused_elsewhere(void *arg)
{
    const char *want = arg;
    h_cuda_setup();
    CUdeviceptr q;
    CU(cuMemAlloc_v2(&q, 4096));
    uint32_t v = 9, back = 0;
    CU(cuMemcpyHtoD_v2(q, &v, 4));
    int moved = scuda_migrate(target, why, sizeof why);
    CHECK(moved == 0, "the session moved");
    CHECK(strstr(why, want), "the reason says '%s': %s", want, why);
    CU(cuMemcpyDtoH_v2(&back, q, 4));
    CHECK(back == 9, "the session goes on with its bytes");
    return 0;
}

static void run_child(int (*fn)(void *), void *arg, const char *what)
{
    h_wait_ok(h_spawn(fn, arg, 60, -1, -1), 65000, what);
}

static void test_refusals(void)
{
    struct h_server A, B, C, D;
    char base[64];
    /* A window elsewhere: what was at an address there cannot be here. */
    snprintf(base, sizeof base, "%#llx", (unsigned long long)(WINDOW_BASE_DEFAULT + (128ull << 30)));
    struct h_server_opts other_window = {.extra_args = {"--window-base", base, "--window-size", "64G", NULL}};
    struct h_server_opts beta = {.token = "beta"}, alpha = {.token = "alpha"};
    h_server_start(&B, "migrate-window-b", &other_window);
    h_server_start(&C, "migrate-token-c", &beta);
    h_server_start(&A, "migrate-blocker-a", NULL);
    target = B.addr;
    run_child(refused_blocker, NULL, "a stream-ordered allocation refuses");
    CHECK(h_server_log_count(&B, "imported a session") == 0, "nothing reached B");
    run_child(refused_elsewhere, "--window-base", "a window elsewhere refuses");
    CHECK(h_server_log_count(&B, "not rebuilt") == 1, "B discarded it, and said why");
    CHECK(h_server_log_count(&A, "cannot move") == 2, "A said why, each time");
    h_server_stop(&A);
    /* A's token is not B's. */
    setenv("SCUDA_TOKEN", "alpha", 1);
    h_server_start(&D, "migrate-token-a", &alpha);
    target = C.addr;
    run_child(refused_elsewhere, "bad token", "a bad token refuses");
    CHECK(h_server_log_count(&C, "bad token") == 1, "B refused A's token");
    unsetenv("SCUDA_TOKEN");
    h_server_stop(&D);
    h_server_stop(&C);
    h_server_stop(&B);
}

/* ---- an idle client follows its session ------------------------------------- */

/* A client that makes no call while its session moves must still follow
 * it (src/client/conn.c, read_while_idle): it resumes on B at once, so A's
 * session process ends and a drained A exits, instead of both waiting out
 * --resume-within for a call that may never come. The client of these
 * cases holds a CUDA session and, when asked, an NVML one (PyTorch opens
 * both at start and then asks NVML nothing more), then waits on a pipe
 * without a call until the parent has checked the move. */

/* The NVML shim (libnvidia-ml.so.1) sits next to the driver shim in the
 * build; the session's NVML is the stand-in, next to them. Empty when the
 * build has no NVML (nvml.h missing: src/client/nvml/nvml.cmake). */
static char nvml_shim[512], nvml_standin[512];

static void find_nvml(void)
{
    Dl_info info;
    CHECK(dladdr((void *)cuInit, &info) && info.dli_fname, "where the driver shim is");
    char dir[400];
    snprintf(dir, sizeof dir, "%s", info.dli_fname);
    char *slash = strrchr(dir, '/');
    CHECK(slash != NULL, "the driver shim's path %s", info.dli_fname);
    *slash = '\0';
    snprintf(nvml_shim, sizeof nvml_shim, "%s/libnvidia-ml.so.1", dir);
    snprintf(nvml_standin, sizeof nvml_standin, "%s/standin/libnvidia-ml-standin.so", dir);
    if (access(nvml_shim, R_OK) != 0 || access(nvml_standin, R_OK) != 0) nvml_shim[0] = nvml_standin[0] = '\0';
}

/* The few NVML calls the idle client makes, through the shim. */
struct nvml_calls {
    int (*init)(void);
    int (*count)(unsigned *);
    int (*by_index)(unsigned, void **);
    int (*name)(void *, char *, unsigned);
};

static void nvml_load(struct nvml_calls *nv)
{
    void *h = dlopen(nvml_shim, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", nvml_shim, dlerror());
    *(void **)&nv->init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv->count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&nv->by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv->name = dlsym(h, "nvmlDeviceGetName");
    CHECK(nv->init && nv->count && nv->by_index && nv->name, "the NVML shim exports what the test calls");
}

/* The NVML session answers: one device, the stand-in's. */
static void nvml_works(const struct nvml_calls *nv)
{
    unsigned n = 0;
    void *dev = NULL;
    char name[96] = "";
    CHECK(nv->count(&n) == 0 && n == 1, "NVML counts %u device(s)", n);
    CHECK(nv->by_index(0, &dev) == 0 && nv->name(dev, name, sizeof name) == 0, "NVML names the device");
    CHECK(strcmp(name, "SCUDA CPU stand-in") == 0, "NVML's device is '%s'", name);
}

static int idle_nvml; /* the idle client opens an NVML session too */
static int idle_lost; /* its session is killed while it is idle: calls then fail */

static int idle_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    uint32_t words[1024], back[1024];
    for (unsigned i = 0; i < 1024; i++) words[i] = i * 2654435761u;
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, sizeof words));
    CU(cuMemcpyHtoD_v2(d, words, sizeof words));
    CU(cuCtxSynchronize());
    struct nvml_calls nv;
    if (idle_nvml) {
        nvml_load(&nv);
        CHECK(nv.init() == 0, "nvmlInit through the shim");
        nvml_works(&nv);
    }
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    char c;
    CHECK(read(done_pipe[0], &c, 1) == 1, "the parent checked the move"); /* idle: not one call meanwhile */
    if (idle_lost) {
        CU_EXPECT(CUDA_ERROR_DEVICE_UNAVAILABLE, cuCtxSynchronize());
        return 0;
    }
    /* Wherever the session is now, it has the same bytes and runs kernels. */
    CU(cuMemcpyDtoH_v2(back, d, sizeof back));
    CHECK(memcmp(words, back, sizeof back) == 0, "the bytes came back after the move");
    uint32_t v = 0x600df00du;
    uint64_t n = 1024;
    void *fill_args[] = {&d, &v, &n};
    CU(cuLaunchKernel(h_func("fill_u32"), 4, 1, 1, 256, 1, 1, 0, NULL, fill_args, NULL));
    CU(cuMemcpyDtoH_v2(back, d, sizeof back));
    for (unsigned i = 0; i < 1024; i++) CHECK(back[i] == v, "word %u is %08x after a kernel on B", i, back[i]);
    if (idle_nvml) {
        /* The NVML connection is on B; NVML's own state (its init, its
         * handles) is not moved yet, so the client initializes it again. */
        CHECK(nv.init() == 0, "nvmlInit on B");
        nvml_works(&nv);
    }
    return 0;
}

/* Wait at most ms until s's log has needle n times. */
static int log_within(const struct h_server *s, const char *needle, int n, unsigned ms)
{
    uint64_t until = h_now_ms() + ms;
    while (h_server_log_count(s, needle) < n && h_now_ms() < until) h_sleep_ms(10);
    return h_server_log_count(s, needle) >= n;
}

static int pid_gone_within(pid_t pid, unsigned ms)
{
    uint64_t until = h_now_ms() + ms;
    while (h_pid_alive(pid) && h_now_ms() < until) h_sleep_ms(10);
    return !h_pid_alive(pid);
}

/* How long a client may take to follow: the notice is read on the next
 * 100 ms tick and the resume is a few round trips; the rest is slack for
 * sanitizers on a loaded machine. Without the idle read the client never
 * follows before its next call, which the parent holds back. */
#define FOLLOW_MS 4000u
/* A drain moves its sessions one after the other, each a full move. */
#define DRAIN_IDLE_MS 15000u

/* Start the idle client on A (its sessions logged), then return its pid
 * once it is idle, and stderr's path in err. */
static pid_t start_idle_client(const struct h_server *a, int sessions, char *err, size_t errlen)
{
    CHECK(pipe(ready_pipe) == 0 && pipe(done_pipe) == 0);
    int efd = h_temp_file("migrate-idle-stderr", err, errlen);
    pid_t child = h_spawn(idle_client, NULL, 90, -1, efd);
    close(efd);
    char c;
    CHECK(read(ready_pipe[0], &c, 1) == 1, "the client got going");
    CHECK(h_wait_sessions(a, sessions, 10000), "A runs the client's %d session(s)", sessions);
    h_sleep_ms(1500); /* idle for a while: no call, only pings */
    return child;
}

/* Wait at most ms until the file at path holds needle. */
static int file_within(const char *path, const char *needle, unsigned ms)
{
    uint64_t until = h_now_ms() + ms;
    for (;;) {
        char *text = h_read_file(path, &(size_t){0});
        int found = strstr(text, needle) != NULL;
        free(text);
        if (found || h_now_ms() >= until) return found;
        h_sleep_ms(20);
    }
}

/* The client's note that it moved (and its NVML shim's, if checked) is
 * written once its resume is done, a moment after B logs the resume: wait
 * for it rather than race it. */
static int moved_note_within(const char *path, unsigned ms)
{
    uint64_t until = h_now_ms() + ms;
    for (;;) {
        char *text = h_read_file(path, &(size_t){0});
        const char *nvml = strstr(text, "[nvml ");
        int found = strstr(text, "session moved from") && (!idle_nvml || (nvml && strstr(nvml, "session moved from")));
        free(text);
        if (found || h_now_ms() >= until) return found;
        h_sleep_ms(20);
    }
}

static void finish_idle_client(pid_t child, const char *err_path, const char *what)
{
    if (!idle_lost) moved_note_within(err_path, FOLLOW_MS);
    char *err = h_read_file(err_path, &(size_t){0});
    CHECK(idle_lost || strstr(err, "session moved from"), "the client moved before its next call: %s", err);
    CHECK(!idle_nvml || (strstr(err, "[nvml ") && strstr(strstr(err, "[nvml "), "session moved from")),
          "the NVML shim's connection moved too: %s", err);
    free(err);
    CHECK(write(done_pipe[1], "d", 1) == 1);
    h_wait_ok_err(child, 95000, what, err_path);
    for (int i = 0; i < 2; i++) close(ready_pipe[i]), close(done_pipe[i]);
}

static void test_idle_moves(void)
{
    find_nvml();
    if (nvml_shim[0]) setenv("SCUDA_NVML_PATH", nvml_standin, 1);
    else printf("migrate: no NVML shim in this build (nvml.h missing): the idle NVML case does not run\n");

    /* scuda migrate of an idle CUDA client. */
    struct h_server A, B;
    char control[600], err[512], out[2048];
    snprintf(control, sizeof control, "%s/migrate-idle-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts ao = {.extra_args = {"--control", control, NULL}};
    h_server_start(&B, "migrate-idle-b", NULL);
    h_server_start(&A, "migrate-idle-a", &ao);
    idle_nvml = 0;
    pid_t child = start_idle_client(&A, 1, err, sizeof err);
    pid_t session = newest_session(&A);
    int st = cc_scuda_migrate(SCUDA_BIN_PATH, session, B.addr, control, out, sizeof out);
    CHECK(st == 0 && strstr(out, "moved to"), "scuda migrate exited %d, printing: %s", st, out);
    uint64_t moved_at = h_now_ms();
    CHECK(log_within(&B, "client resumed the session", 1, FOLLOW_MS), "the idle client resumed on B by itself");
    CHECK(pid_gone_within(session, FOLLOW_MS), "A's session process ended once its idle client was on B");
    printf("migrate: an idle client followed its session in %llu ms\n", (unsigned long long)(h_now_ms() - moved_at));
    finish_idle_client(child, err, "an idle client's calls run on B");
    CHECK(h_server_log_count(&A, "the client resumed there, this process ends") == 1, "A saw the client go");
    h_server_stop(&A);

    /* A drain (--peer, SIGTERM) of an idle client with a CUDA session and
     * an NVML one: both follow, and A exits without waiting for a call. */
    struct h_server D;
    int sessions = nvml_shim[0] ? 2 : 1;
    /* A drain waits for moved sessions' processes at most --resume-within
     * (and some slack): 60 s here, far beyond what following takes. */
    struct h_server_opts dopt = {.extra_args = {"--peer", B.addr, "--resume-within", "60", NULL}};
    h_server_start(&D, "migrate-idle-drain", &dopt);
    idle_nvml = nvml_shim[0] != 0;
    child = start_idle_client(&D, sessions, err, sizeof err);
    CHECK(kill(D.pid, SIGTERM) == 0);
    uint64_t term_at = h_now_ms();
    CHECK(pid_gone_within(D.pid, DRAIN_IDLE_MS), "the drained server exited once its idle clients were on B");
    printf("migrate: a drain of %d idle session(s) took %llu ms\n", sessions,
           (unsigned long long)(h_now_ms() - term_at));
    char want[64];
    snprintf(want, sizeof want, "drained: %d of %d session(s) moved", sessions, sessions);
    CHECK(h_server_log_count(&D, want) == 1, "A logs '%s'", want);
    CHECK(h_server_log_count(&B, "client resumed the session") == 1 + sessions, "every idle session resumed on B");
    finish_idle_client(child, err, "an idle client's CUDA and NVML calls run on B");
    h_server_kill(&D); /* it exited by itself (the drain) */
    h_server_stop(&B);
    unsetenv("SCUDA_NVML_PATH");

    /* The same path reports a session that ended while its client was
     * idle: the client sees the EOF, its resume is refused, and it says
     * the connection is lost, before any call. (Before the idle read, the
     * failed write of a later ping found it too, a few seconds later: this
     * case guards the promise, it is not what the idle read added.) */
    struct h_server E;
    h_server_start(&E, "migrate-idle-lost", NULL);
    idle_nvml = 0;
    idle_lost = 1;
    child = start_idle_client(&E, 1, err, sizeof err);
    CHECK(kill(newest_session(&E), SIGKILL) == 0);
    CHECK(file_within(err, "lost the connection to server", FOLLOW_MS),
          "an idle client noticed its session ended, before its next call");
    finish_idle_client(child, err, "an idle client's calls fail once its session is gone");
    idle_lost = 0;
    h_server_kill(&E); /* its session died from a signal, on purpose */
}

int main(void)
{
    const char *tls = getenv("E2E_TLS");
    h_begin(tls && strcmp(tls, "1") == 0 ? "migrate_tls" : "migrate", 170); /* ctest runs both at once */
    test_moves();
    test_moves_libraries();
    test_moves_unlooked_globals();
    test_images_by_digest();
    test_moves_managed_variable();
    test_memory_links();
    test_refused_placement();
    test_moves_driver_mmap();
    test_refused_driver_mmap();
    test_outside();
    test_outside_refused();
    test_striped_copy_moves();
    test_drain();
    test_refusals();
    test_idle_moves();
    printf("PASS migrate\n");
    return 0;
}
