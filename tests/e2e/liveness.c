/* liveness.c - a hung host is noticed in seconds (docs/architecture.md,
 * 3.10 Liveness).
 *
 * - A session frozen with SIGSTOP (a wedged host answers TCP keepalives,
 *   so only the heartbeat can tell) fails the client's waiting call with
 *   CUDA_ERROR_DEVICE_UNAVAILABLE within SCUDA_DEAD_AFTER + 1 s, later
 *   calls at once, and stderr names the server.
 * - A call that legitimately runs for 3x SCUDA_DEAD_AFTER (the stand-in's
 *   sleep_ms kernel, then a synchronize) is not declared dead.
 * - A client that authenticates and then sends nothing has its session
 *   ended by the server after --dead-after.
 * - A busy connection sends no pings (SCUDA_STATS), an idle one does. */
#define _GNU_SOURCE
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int to_parent[2], to_child[2];

/* ---- a frozen session ------------------------------------------------------ */

static int frozen_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CHECK(write(to_parent[1], "r", 1) == 1);
    char c;
    CHECK(read(to_child[0], &c, 1) == 1); /* the session is stopped now */
    uint64_t t0 = h_now_ms();
    CU_EXPECT(CUDA_ERROR_DEVICE_UNAVAILABLE, cuCtxSynchronize());
    uint64_t took = h_now_ms() - t0;
    CHECK(took <= 3000, "the stopped session was noticed after %llu ms, not within SCUDA_DEAD_AFTER + 1 s",
          (unsigned long long)took);
    /* Every later call fails at once. */
    t0 = h_now_ms();
    CUdeviceptr d;
    CU_EXPECT(CUDA_ERROR_DEVICE_UNAVAILABLE, cuMemAlloc_v2(&d, 4096));
    CHECK(h_now_ms() - t0 < 500, "a call after the declaration waited");
    return 0;
}

static void frozen_session(struct h_server *srv)
{
    pid_t before[256];
    int n0 = h_server_sessions(srv, before, 256);
    CHECK(pipe(to_parent) == 0 && pipe(to_child) == 0);
    char err_path[512];
    int err_fd = h_temp_file("frozen.stderr", err_path, sizeof err_path);
    setenv("SCUDA_DEAD_AFTER", "2", 1);
    /* Resume stays on (SCUDA_RESUME_WITHIN's default): a silent server
     * gets one short try, which a stopped session never answers. */
    unsetenv("SCUDA_RESUME_WITHIN");
    pid_t client = h_spawn(frozen_client, NULL, 20, -1, err_fd);
    close(err_fd);
    char c;
    CHECK(read(to_parent[0], &c, 1) == 1, "the client did not connect");
    CHECK(h_wait_sessions(srv, n0 + 1, 5000));
    pid_t sessions[256];
    pid_t session = sessions[h_server_sessions(srv, sessions, 256) - 1];
    CHECK(kill(session, SIGSTOP) == 0);
    CHECK(write(to_child[1], "g", 1) == 1);
    h_wait_ok(client, 15000, "the client of a stopped session");
    kill(session, SIGCONT); /* it then sees its client gone, and ends */
    char *err = h_read_file(err_path, NULL);
    CHECK(strstr(err, srv->addr) && strstr(err, "sent nothing for") && strstr(err, "SCUDA_DEAD_AFTER"),
          "stderr does not name the server and the cause:\n%s", err);
    free(err);
    printf("ok a stopped session fails the client within SCUDA_DEAD_AFTER + 1 s, naming the server\n");
}

/* ---- a long call is not a hang --------------------------------------------- */

static int long_call_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    uint32_t ms = 3000; /* 3x SCUDA_DEAD_AFTER */
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    uint64_t t0 = h_now_ms();
    CU(cuCtxSynchronize());
    CHECK(h_now_ms() - t0 >= 2000, "the kernel did not run long enough to prove anything");
    /* The same through a copy that waits for the kernel. */
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    uint8_t host[64];
    CU(cuMemcpyDtoH_v2(host, d, sizeof host));
    return 0;
}

static void long_call(void)
{
    setenv("SCUDA_DEAD_AFTER", "1", 1);
    pid_t client = h_spawn(long_call_client, NULL, 30, -1, -1);
    h_wait_ok(client, 25000, "a client whose calls run for 3x SCUDA_DEAD_AFTER");
    printf("ok calls that run for 3x SCUDA_DEAD_AFTER are not declared dead\n");
}

/* ---- a silent client --------------------------------------------------------- */

static void silent_client(struct h_server *srv)
{
    pid_t before[256];
    int n0 = h_server_sessions(srv, before, 256);
    uint32_t status = 0;
    int fd = h_raw_connect(srv->addr, NULL, &status);
    CHECK(fd >= 0, "raw connect failed (status %u)", status);
    CHECK(h_wait_sessions(srv, n0 + 1, 5000));
    pid_t sessions[256];
    pid_t session = sessions[h_server_sessions(srv, sessions, 256) - 1];
    uint64_t t0 = h_now_ms();
    while (h_pid_alive(session) && h_now_ms() - t0 < 8000) h_sleep_ms(20);
    uint64_t took = h_now_ms() - t0;
    CHECK(!h_pid_alive(session), "the session of a silent client still runs after 8 s (--dead-after 1)");
    CHECK(took >= 500, "the session ended after %llu ms, before --dead-after", (unsigned long long)took);
    CHECK(h_wait_log(srv, "client sent nothing for 1 s (--dead-after)", 1, 10000) >= 1, "no log line says why");
    close(fd);
    printf("ok a silent client's session ends after --dead-after\n");
}

/* ---- pings cost nothing on a busy connection ------------------------------------- */

static int busy_client(void *arg)
{
    int idle = (int)(intptr_t)arg;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    uint8_t host[64] = {0};
    uint64_t t0 = h_now_ms();
    while (h_now_ms() - t0 < 2000) {
        if (idle) h_sleep_ms(100);
        else CU(cuMemcpyDtoH_v2(host, d, sizeof host)); /* a round trip, again and again */
    }
    return 0;
}

static unsigned pings_of(int idle)
{
    setenv("SCUDA_DEAD_AFTER", "1", 1); /* a ping after 250 ms of quiet */
    char *out = h_client_stats(busy_client, (void *)(intptr_t)idle, 20, idle ? "idle.stats" : "busy.stats");
    unsigned n = h_stats_count(out, "async", "scuda_live_ping");
    free(out);
    return n;
}

static void busy_pings(void)
{
    unsigned busy = pings_of(0), idle = pings_of(1);
    CHECK(busy == 0, "a busy client sent %u pings", busy);
    CHECK(idle >= 2, "an idle client sent %u pings in 2 s (SCUDA_DEAD_AFTER=1: one per 250 ms of quiet)", idle);
    printf("ok a busy connection sends no pings; an idle one does (%u)\n", idle);
}

int main(void)
{
    h_begin("liveness", 100);
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--dead-after", "1", NULL}};
    h_server_start(&srv, "main", &opt);
    frozen_session(&srv);
    long_call();
    silent_client(&srv);
    busy_pings();
    h_server_stop(&srv);
    printf("PASS liveness\n");
    return 0;
}
