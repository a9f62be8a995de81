/* client_dies.c - a client killed in the middle of a blocking call.
 *
 * The client launches sleep_ms(10000) and waits in cuStreamSynchronize;
 * the test SIGKILLs it. Its session process must exit within 2 s (it would
 * otherwise hold the GPU and its memory until the kernel ends, or
 * forever), cleanly (not from a signal), and the server must go on
 * serving. Then the same with the client killed while it sends a large
 * copy, and while it waits in cuCtxSynchronize on a context it created. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "workload.h"

static int ready[2];

static int sleeper(void *arg)
{
    int mode = (int)(intptr_t)arg;
    h_cuda_setup();
    CUcontext own;
    if (mode == 2) CU(cuCtxCreate_v4(&own, NULL, 0, 0));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    uint32_t ms = 10000;
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, mode == 2 ? NULL : st, args, NULL));
    CHECK(write(ready[1], "r", 1) == 1);
    if (mode == 1) {
        /* big copies until killed */
        size_t n = 32u << 20;
        void *h = calloc(1, n);
        CUdeviceptr d;
        CU(cuMemAlloc_v2(&d, n));
        for (;;) CU(cuMemcpyHtoD_v2(d, h, n));
    }
    if (mode == 2) CU(cuCtxSynchronize());
    else CU(cuStreamSynchronize(st));
    fprintf(stderr, "the synchronize returned before the kill\n");
    return 1;
}

static int normal(void *arg)
{
    (void)arg;
    workload_check();
    return 0;
}

static void kill_during(struct h_server *srv, int mode, const char *what)
{
    pid_t before[256];
    int n0 = h_server_sessions(srv, before, 256);
    CHECK(pipe(ready) == 0);
    pid_t client = h_spawn(sleeper, (void *)(intptr_t)mode, 20, -1, -1);
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "%s: the client did not get to its launch", what);
    close(ready[0]);
    CHECK(h_wait_sessions(srv, n0 + 1, 5000));
    pid_t sessions[256];
    int n = h_server_sessions(srv, sessions, 256);
    pid_t session = sessions[n - 1];
    h_sleep_ms(300); /* the call is in flight now */
    CHECK(h_pid_alive(session), "%s: session %d is not running", what, (int)session);
    kill(client, SIGKILL);
    uint64_t t0 = h_now_ms();
    int st = h_wait(client, 5000);
    CHECK(st != -1 && WIFSIGNALED(st), "%s: the client did not die from the kill", what);
    while (h_pid_alive(session) && h_now_ms() - t0 < 2000) h_sleep_ms(10);
    uint64_t took = h_now_ms() - t0;
    CHECK(!h_pid_alive(session), "%s: session %d still runs 2 s after its client died", what, (int)session);
    printf("ok %s: session %d ended %llu ms after its client was killed\n", what, (int)session,
           (unsigned long long)took);
}

int main(void)
{
    h_begin("client_dies", 28);
    struct h_server srv;
    /* A killed client cannot say it leaves: its session would wait
     * --resume-within for a resume (resume.c tests that wait). */
    h_server_start(&srv, "main", &(struct h_server_opts){.extra_args = {"--resume-within", "0"}});
    kill_during(&srv, 0, "client killed in cuStreamSynchronize");
    kill_during(&srv, 1, "client killed while sending 32 MiB copies");
    kill_during(&srv, 2, "client killed in cuCtxSynchronize of its own context");
    h_wait_ok(h_spawn(normal, NULL, 20, -1, -1), 20000, "a normal client afterwards");
    h_sleep_ms(300);
    h_server_stop(&srv);
    printf("PASS client_dies\n");
    return 0;
}
