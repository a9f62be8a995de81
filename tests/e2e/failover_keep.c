/* failover_keep.c - a snapshot taken when no device byte changed since
 * the last one keeps the parked copy's bytes on the standby instead of
 * sending them again (src/server/snapshot_dirty.c, snapshot_keep.c;
 * docs/architecture.md 9.24, "Unchanged memory stays on the standby").
 *
 * A client fills 4 MiB (a memset and a copy to the device), synchronizes
 * (the first snapshot: every byte goes), then only reads (copies to the
 * host, synchronizes: snapshots that keep every byte), then writes again
 * (a memset: the next snapshot sends every byte). The primary dies; the
 * client fails over and reads back exactly what it wrote. The primary's
 * log says that snapshots kept 4 MiB and that the one after the write
 * kept nothing; the standby's, that the new copies took it from the
 * parked ones. A
 * local peer without the session's secret gets nothing from a parked
 * copy. A parked copy killed before the next snapshot: that snapshot
 * falls back to a full copy. After the memory was shared (an IPC handle),
 * no snapshot keeps anything. */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

#define SIZE (4u << 20)
#define SMALL (1u << 20) /* a second buffer, written alone */

static int ready_pipe[2] = {-1, -1}, go_pipe[2] = {-1, -1};

static void expect(const uint8_t *got, uint8_t head, uint8_t rest, const char *when)
{
    for (size_t i = 0; i < SIZE; i++) {
        uint8_t want = i < 4096 ? head : rest;
        CHECK(got[i] == want, "%s: byte %zu is %u, not %u", when, i, got[i], want);
    }
}

/* Tell the test where we are, and wait for its word. */
static void step(void)
{
    char ch;
    CHECK(write(ready_pipe[1], "r", 1) == 1);
    CHECK(read(go_pipe[0], &ch, 1) == 1);
}

/* Copies to the host and synchronizes: snapshots, none of them after a write. */
static void reads(CUdeviceptr p, uint8_t *host, int n)
{
    for (int i = 0; i < n; i++) {
        CU(cuMemcpyDtoH_v2(host, p, SIZE));
        CU(cuCtxSynchronize());
    }
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    static uint8_t host[SIZE];
    CUdeviceptr p, q;
    CU(cuMemAlloc_v2(&p, SIZE));
    CU(cuMemAlloc_v2(&q, SMALL));
    CU(cuMemsetD8_v2(q, 0x44, SMALL));
    CU(cuMemsetD8_v2(p, 0x11, SIZE));
    memset(host, 0x22, 4096);
    CU(cuMemcpyHtoD_v2(p, host, 4096));
    CU(cuCtxSynchronize()); /* the first snapshot: every byte */
    reads(p, host, 3);      /* snapshots that keep every byte */
    expect(host, 0x22, 0x11, "before the failover");
    step();                 /* the test kills the parked copy */
    reads(p, host, 1);      /* keeping fails: the client is told to ask again soon */
    h_sleep_ms(60);
    reads(p, host, 1);      /* taken again in full (here, or at the synchronize before) */
    CU(cuMemsetD8_v2(p + 4096, 0x33, SIZE - 4096));
    CU(cuCtxSynchronize()); /* after a write: every byte */
    reads(p, host, 1);      /* kept again */
    CU(cuMemcpyHtoD_v2(q, host, SMALL));
    CU(cuCtxSynchronize()); /* only q was written: p is kept */
    reads(p, host, 1);      /* kept again */
    CUipcMemHandle h;
    CU(cuIpcGetMemHandle(&h, p));
    reads(p, host, 2);      /* shared memory: every byte, always */
    step();                 /* the test kills the primary */
    memset(host, 0, SIZE);
    CU(cuMemcpyDtoH_v2(host, p, SIZE)); /* fails over */
    expect(host, 0x22, 0x33, "after the failover");
    printf("read back after the failover: ok\n");
    return 0;
}

/* The number just before `needle` in the line at l, or -1. */
static double number_before(const char *l, const char *needle)
{
    const char *at = strstr(l, needle), *eol = strchr(l, '\n');
    if (!at || (eol && at > eol)) return -1;
    while (at > l && at[-1] != ' ') at--;
    return atof(at);
}

/* The primary's snapshots in order: K for one that kept all 5 MiB of the
 * parked copy, F for one that sent them all, P for one that sent 1 MiB
 * (q) and kept 4 (p); ? for anything else. */
static void snapshots_of(const struct h_server *P, char *out, size_t len)
{
    char *log = h_server_log(P);
    size_t n = 0;
    for (const char *l = strstr(log, "snapshot parked on "); l && n + 1 < len;
         l = strstr(l + 1, "snapshot parked on ")) {
        double sent = number_before(l, " MiB memory in"), k = number_before(l, " MiB more kept");
        out[n++] = sent == 5 && k == 0 ? 'F' : sent == 0 && k == 5 ? 'K' : sent == 1 && k == 4 ? 'P' : '?';
    }
    out[n] = '\0';
    free(log);
}

/* The pid of the copy the last snapshot parked on the standby. */
static int last_parked_pid(const struct h_server *P)
{
    char *log = h_server_log(P);
    const char *last = NULL;
    for (const char *l = strstr(log, "snapshot parked on "); l; l = strstr(l + 1, "snapshot parked on ")) last = l;
    const char *at = last ? strstr(last, "(session ") : NULL;
    int pid = at ? atoi(at + strlen("(session ")) : 0;
    free(log);
    return pid;
}

/* A local peer without the secret asks parked copy `pid` for its memory:
 * 1 when the copy closed on it without sending a byte. */
static int refused_without_secret(int pid)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "scuda-snapshot-%d", pid);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) == 0,
          "parked copy %d does not listen", pid);
    uint8_t req[32 + 12] = {0}; /* a wrong secret, then a request */
    CHECK(write(fd, req, sizeof req) == (ssize_t)sizeof req);
    uint8_t b;
    ssize_t got = read(fd, &b, 1);
    close(fd);
    return got <= 0; /* closed (or reset: our request went unread) */
}

int main(void)
{
    h_begin("failover_keep", 90);
    struct h_server S, P;
    struct h_server_opts sopt = {.extra_args = {"--resume-within", "10", NULL}};
    h_server_start(&S, "failover-keep-standby", &sopt);
    h_server_start(&P, "failover-keep-primary", NULL);
    setenv("SCUDA_STANDBY", S.addr, 1);
    setenv("SCUDA_SNAPSHOT_EVERY", "0", 1);
    setenv("SCUDA_SNAPSHOT_WAIT", "1", 1); /* every synchronize takes its snapshot before it returns */
    setenv("SCUDA_LOG", "info", 1);
    CHECK(pipe(ready_pipe) == 0 && pipe(go_pipe) == 0);
    char err_path[512];
    int err = h_temp_file("failover-keep-err", err_path, sizeof err_path);
    pid_t pid = h_spawn(client, NULL, 60, -1, err);
    close(err);
    char ch, seq[64];

    CHECK(read(ready_pipe[0], &ch, 1) == 1, "the client did not get through its first snapshots");
    snapshots_of(&P, seq, sizeof seq);
    /* A snapshot at every synchronize and every copy to the host: the
     * first sends 4 MiB, every one after it (reads only) keeps them. */
    CHECK(seq[0] == 'F' && strlen(seq) >= 4 && strspn(seq + 1, "K") == strlen(seq) - 1,
          "snapshots before any write after the first: %s (F: sent, K: kept)", seq);
    int took = h_server_log_count(&S, "(5.0 MiB of it kept from the parked copy here)");
    CHECK(took == (int)strlen(seq) - 1, "%d copies on the standby took 5 MiB from the parked one, for %zu "
          "snapshots that kept it", took, strlen(seq) - 1);
    int victim = last_parked_pid(&P);
    CHECK(victim > 0 && refused_without_secret(victim), "parked copy %d lent memory without the secret", victim);
    CHECK(h_wait_log(&S, "memory without its secret", 1, 5000) >= 1, "the refusal was not logged");
    CHECK(kill(victim, SIGKILL) == 0, "cannot kill the parked copy %d", victim);
    CHECK(write(go_pipe[1], "g", 1) == 1);

    CHECK(read(ready_pipe[0], &ch, 1) == 1, "the client did not get through its later snapshots");
    CHECK(h_server_log_count(&P, "the snapshot that kept the parked copy's memory failed") >= 1,
          "keeping from a parked copy that is gone did not fall back to a full copy");
    snapshots_of(&P, seq, sizeof seq);
    size_t n = strlen(seq);
    /* Then: F (the parked copy was gone: in full), K, F (after the
     * memset), K K (reads), P (q written alone), K K (reads), and F F F F
     * (reads of memory shared since). */
    int sent = 0;
    for (size_t i = 0; i < n; i++) sent += seq[i] == 'F';
    CHECK(n >= 9 && strcmp(seq + n - 9, "KKPKKFFFF") == 0,
          "after the write, reads kept the bytes, a copy to q alone kept p, and after sharing nothing was kept: not "
          "so in %s", seq);
    CHECK(sent == 7, "%d snapshots sent every byte, not 7 (the first, the fallback, after the write, 4 after "
          "sharing): %s", sent, seq);
    kill(-P.pid, SIGKILL);
    CHECK(write(go_pipe[1], "k", 1) == 1);
    h_wait_ok_err(pid, 30000, "the client", err_path);
    char *text = h_read_file(err_path, NULL);
    CHECK(text && strstr(text, "failed over to standby"), "the client did not fail over:\n%s", text ? text : "");
    free(text);
    printf("snapshots %s (F: sent 5 MiB, K: kept them on the standby, P: sent 1, kept 4); the failover read back "
           "every byte\n", seq);
    h_server_kill(&P);
    h_server_kill(&S); /* a parked copy died from our signal: no clean stop to check */
    printf("PASS failover_keep\n");
    return 0;
}
