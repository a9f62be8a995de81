/* server_dies.c - the server side dies while the client waits.
 *
 * The client launches sleep_ms(10000) and waits in cuStreamSynchronize.
 * The test kills the client's session process (SIGKILL); the client's
 * call must return an error (not hang) within 15 s, and every later call
 * must fail at once. Then the same with the whole server (parent and
 * sessions) killed, while the client waits in a synchronous device-to-host
 * copy queued behind the kernel. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int ready[2];

static int client(void *arg)
{
    int mode = (int)(intptr_t)arg;
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, 0));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 1 << 20));
    CUfunction noop = h_func("noop");
    uint32_t ms = 10000;
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
    CHECK(write(ready[1], "r", 1) == 1);
    uint64_t t0 = h_now_ms();
    static uint8_t buf[1 << 20];
    CUresult r = mode == 0 ? cuStreamSynchronize(st) : cuMemcpyDtoHAsync_v2(buf, d, sizeof buf, st);
    uint64_t took = h_now_ms() - t0;
    CHECK(r != CUDA_SUCCESS, "the call succeeded although the server died");
    CHECK(took < 15000, "the call returned only after %llu ms", (unsigned long long)took);
    printf("the call returned %s after %llu ms\n", h_cu_name(r), (unsigned long long)took);
    /* later calls fail at once */
    t0 = h_now_ms();
    CHECK(cuCtxSynchronize() != CUDA_SUCCESS);
    CUdeviceptr e;
    CHECK(cuMemAlloc_v2(&e, 16) != CUDA_SUCCESS);
    CHECK(cuMemsetD32_v2(d, 0, 4) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS);
    CHECK(cuLaunchKernel(noop, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS ||
          cuCtxSynchronize() != CUDA_SUCCESS);
    took = h_now_ms() - t0;
    CHECK(took < 1000, "calls after the loss took %llu ms", (unsigned long long)took);
    return 0;
}

static void run(int mode, const char *what)
{
    struct h_server srv;
    h_server_start(&srv, mode == 0 ? "session-killed" : "server-killed", NULL);
    CHECK(pipe(ready) == 0);
    pid_t pid = h_spawn(client, (void *)(intptr_t)mode, 25, -1, -1);
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "%s: the client did not get to its launch", what);
    close(ready[0]);
    CHECK(h_wait_sessions(&srv, 1, 5000));
    pid_t session;
    CHECK(h_server_sessions(&srv, &session, 1) == 1);
    h_sleep_ms(300);
    uint64_t t0 = h_now_ms();
    if (mode == 0) {
        kill(session, SIGKILL);
    } else {
        kill(-srv.pid, SIGKILL); /* parent and sessions */
    }
    h_wait_ok(pid, 16000, what);
    printf("ok %s: the client's call failed and the client exited %llu ms after the kill\n", what,
           (unsigned long long)(h_now_ms() - t0));
    if (mode == 0) {
        /* The session died from our signal: that is this test's doing. */
        h_sleep_ms(300);
        CHECK(h_server_log_count(&srv, "died from signal 9") == 1, "the parent did not reap the killed session");
    }
    h_server_kill(&srv);
}

int main(void)
{
    h_begin("server_dies", 38);
    /* A client whose server is gone tries to resume for SCUDA_RESUME_WITHIN
     * (resume.c covers that); here it must give up well within the 15 s. */
    setenv("SCUDA_RESUME_WITHIN", "2", 1);
    run(0, "session killed during cuStreamSynchronize");
    run(1, "server killed during a device-to-host copy");
    printf("PASS server_dies\n");
    return 0;
}
