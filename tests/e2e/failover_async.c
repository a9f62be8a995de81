/* failover_async.c - a snapshot's memory streams to the standby after the
 * hold, while the application runs on (src/server/migrate_stage.c,
 * snapshot.c; src/client/failover.c; docs/architecture.md 9.24, "The
 * memory goes after the hold").
 *
 * A client with a standby fills 256 MiB of device memory and synchronizes:
 * the first snapshot. Its synchronize returns before the copy is parked,
 * and calls right after it (copies to the host, each a round trip to the
 * session) complete before the primary logs the copy parked: the session
 * served them while the memory streamed. The primary's log says the
 * memory streamed after the hold; the client's, that the application
 * paused 0 ms. A move asked for while the memory streams is refused, with
 * the reason. Then the primary dies, and the client fails over and reads
 * back every byte.
 *
 * Then a primary whose device has no room for a second copy of the
 * memory (STANDIN_MEM_MB): staging is refused, the snapshot copies during
 * the hold as a move does, and still parks. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/messages.gen.h"
#include "common/ops.gen.h"
#include "common/wire.h"
#include "copy_checks.h"
#include "harness.h"

#define SIZE (256u << 20)
#define HEAD 4096u
#define CALLS 20

static int ready_pipe[2] = {-1, -1}, go_pipe[2] = {-1, -1};

/* Wall-clock ms, as the server's log lines are stamped. */
static uint64_t wall_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void check_bytes(const uint8_t *got, size_t n, const char *when)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t want = i < HEAD ? (uint8_t)(i * 7 + 1) : 0x5a;
        CHECK(got[i] == want, "%s: byte %zu is %u, not %u", when, i, got[i], want);
    }
}

static int client(void *arg)
{
    int fail_over = arg != NULL;
    h_cuda_setup();
    uint8_t *host = malloc(SIZE);
    CHECK(host != NULL);
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, SIZE));
    CU(cuMemsetD8_v2(p, 0x5a, SIZE));
    for (unsigned i = 0; i < HEAD; i++) host[i] = (uint8_t)(i * 7 + 1);
    CU(cuMemcpyHtoD_v2(p, host, HEAD));
    uint64_t t0 = h_now_ms();
    CU(cuCtxSynchronize()); /* the first snapshot */
    uint64_t sync_ms = h_now_ms() - t0;
    uint8_t small[64];
    for (int i = 0; i < CALLS; i++) CU(cuMemcpyDtoH_v2(small, p + (uint64_t)i * 64, sizeof small));
    printf("sync took %llu ms; %d calls done at %llu\n", (unsigned long long)sync_ms, CALLS,
           (unsigned long long)wall_ms());
    fflush(stdout);
    char ch;
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    CHECK(read(go_pipe[0], &ch, 1) == 1); /* the test waited for the copy, and killed the primary */
    memset(host, 0, SIZE);
    CU(cuMemcpyDtoH_v2(host, p, SIZE)); /* fails over when the primary is gone */
    check_bytes(host, SIZE, fail_over ? "after the failover" : "read back");
    printf("read back: ok\n");
    free(host);
    return 0;
}

/* The wall-clock ms of the log line holding needle ("2026-11-27T07:57:43.943Z ..."). */
static uint64_t stamp_of(const struct h_server *s, const char *needle)
{
    char *log = h_server_log(s);
    const char *at = strstr(log, needle);
    CHECK(at, "no '%s' in the log", needle);
    while (at > log && at[-1] != '\n') at--;
    struct tm tm = {0};
    int ms = 0;
    CHECK(sscanf(at, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                 &tm.tm_sec, &ms) == 7, "no time stamp on '%.40s'", at);
    tm.tm_year -= 1900, tm.tm_mon -= 1;
    free(log);
    return (uint64_t)timegm(&tm) * 1000u + (uint64_t)ms;
}

/* The number after `key` in the client's output. */
static unsigned long long number_after(const char *text, const char *key)
{
    const char *at = strstr(text, key);
    CHECK(at, "no '%s' in the client's output:\n%s", key, text);
    return strtoull(at + strlen(key), NULL, 10);
}

static void streamed_then_failover(const struct h_server *S)
{
    struct h_server P;
    char control[600];
    snprintf(control, sizeof control, "%s/failover-async-%d.sock", E2E_LOG_DIR, (int)getpid());
    struct h_server_opts po = {.extra_args = {"--control", control, NULL}};
    h_server_start(&P, "failover-async-primary", &po);
    char out_path[512], err_path[512];
    int out = h_temp_file("failover-async-out", out_path, sizeof out_path);
    int err = h_temp_file("failover-async-err", err_path, sizeof err_path);
    pid_t pid = h_spawn(client, (void *)1, 120, out, err);
    close(out);
    close(err);
    char ch;
    CHECK(read(ready_pipe[0], &ch, 1) == 1, "the client did not get past its synchronize");
    pid_t sessions[8];
    int ns = h_server_sessions(&P, sessions, 8);
    CHECK(ns == 1, "P names %d sessions", ns);
    char said[2048];
    int st = cc_scuda_migrate(SCUDA_BIN_PATH, sessions[0], S->addr, control, said, sizeof said);
    CHECK(st != 0 && strstr(said, "a snapshot's memory still streams to its standby"),
          "a move while the snapshot streamed: exit %d, %s(parked already: %d)", st, said,
          h_server_log_count(&P, "snapshot parked on"));
    CHECK(h_wait_log(&P, "memory streamed after the hold", 1, 60000) == 1,
          "the snapshot's memory did not stream after the hold");
    uint64_t parked = stamp_of(&P, "snapshot parked on");
    char *text = h_read_file(out_path, NULL);
    unsigned long long done = number_after(text, "calls done at "), sync_ms = number_after(text, "sync took ");
    CHECK(done < parked, "the calls after the synchronize completed at %llu, not before the copy parked at %llu: "
          "the session did not serve them while the memory streamed", done, (unsigned long long)parked);
    CHECK(h_server_log_count(&P, "256.0 MiB staged") == 1, "the snapshot did not stage the 256 MiB");
    free(text);
    /* The client logs the snapshot when the reply comes: wait for it. */
    for (int i = 0; i < 100; i++) {
        text = h_read_file(err_path, NULL);
        if (text && strstr(text, "snapshot on standby")) break;
        free(text);
        text = NULL;
        h_sleep_ms(50);
    }
    CHECK(text && strstr(text, "the application paused 0 ms") && strstr(text, "in the background"),
          "the client did not report a snapshot it did not wait for:\n%s", text ? text : "");
    free(text);
    kill(-P.pid, SIGKILL);
    CHECK(write(go_pipe[1], "g", 1) == 1);
    h_wait_ok_err(pid, 90000, "the client", err_path);
    text = h_read_file(err_path, NULL);
    CHECK(text && strstr(text, "failed over to standby"), "the client did not fail over:\n%s", text ? text : "");
    free(text);
    printf("the synchronize took %llu ms, the calls after it completed %llu ms before the copy parked; the "
           "failover read back 256 MiB\n", sync_ms, parked - done);
    h_server_kill(&P);
}

static void staging_refused(void)
{
    struct h_server P;
    setenv("STANDIN_MEM_MB", "400", 1); /* 256 MiB used, 144 free: no room for a second copy and the margin */
    h_server_start(&P, "failover-async-small", NULL);
    unsetenv("STANDIN_MEM_MB");
    char err_path[512];
    int err = h_temp_file("failover-async-err2", err_path, sizeof err_path);
    pid_t pid = h_spawn(client, NULL, 120, -1, err);
    close(err);
    char ch;
    CHECK(read(ready_pipe[0], &ch, 1) == 1, "the client did not get past its synchronize");
    CHECK(h_wait_log(&P, "snapshot parked on", 1, 60000) == 1, "the snapshot without staging did not park");
    CHECK(h_server_log_count(&P, "the snapshot's memory goes during the hold: ") == 1,
          "staging was not refused for want of room");
    CHECK(h_server_log_count(&P, "memory streamed after the hold") == 0, "the memory streamed without staging");
    CHECK(write(go_pipe[1], "g", 1) == 1);
    h_wait_ok_err(pid, 90000, "the client", err_path);
    printf("without room to stage, the snapshot copied during the hold and parked\n");
    h_server_stop(&P);
}

/* An older client's request (scuda_snapshot, the first layout) gets
 * NOT_SUPPORTED and a warning, not a reply it would misread. */
static void older_request(const struct h_server *S)
{
    struct h_server P;
    h_server_start(&P, "failover-async-older", NULL);
    int fd = h_raw_session(P.addr);
    struct msg_scuda_snapshot_req m = {.to = S->addr};
    wire_buf b;
    wb_init(&b);
    msg_scuda_snapshot_req_put(&b, &m);
    long r = h_raw_call(fd, OP_scuda_snapshot, H_RAW_CTX, b.data, b.len, NULL, NULL);
    wb_free(&b);
    CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "an older snapshot request: %ld, not NOT_SUPPORTED", r);
    CHECK(h_wait_log(&P, "asked for a snapshot in an older form", 1, 5000) == 1, "no warning for the older request");
    close(fd);
    h_server_kill(&P);
    printf("an older client's snapshot request: NOT_SUPPORTED, logged\n");
}

int main(void)
{
    h_begin("failover_async", 240);
    struct h_server S;
    struct h_server_opts sopt = {.extra_args = {"--resume-within", "20", NULL}};
    h_server_start(&S, "failover-async-standby", &sopt);
    setenv("SCUDA_STANDBY", S.addr, 1);
    setenv("SCUDA_SNAPSHOT_EVERY", "600", 1); /* the first synchronize only */
    setenv("SCUDA_LOG", "info", 1);
    CHECK(pipe(ready_pipe) == 0 && pipe(go_pipe) == 0);
    streamed_then_failover(&S);
    staging_refused();
    older_request(&S);
    h_server_kill(&S); /* parked copies wait for resumes: no clean stop to check */
    printf("PASS failover_async\n");
    return 0;
}
