/* sticky_error.c - a faulting kernel poisons only its own session.
 *
 * Client A launches `fault`: the launch returns SUCCESS, the next
 * synchronize returns CUDA_ERROR_ILLEGAL_ADDRESS, and the context stays
 * broken (sticky: later calls keep failing). Client B launches
 * `trap_assert` and gets CUDA_ERROR_ASSERT. Meanwhile (both A and B still
 * connected) client C on the same server works normally, and no session
 * dies from a signal. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "workload.h"

static int hold[2];  /* A and B wait on it so their sessions stay alive */
static int ready[2]; /* A and B report that they saw their error */

static int faulting(void *arg)
{
    const char *kernel = arg;
    close(hold[1]); /* EOF on hold[0] once the test closes its end */
    close(ready[0]);
    CUresult want = strcmp(kernel, "fault") == 0 ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_ERROR_ASSERT;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    CU(cuMemsetD32_v2(d, 1, 1024));
    CU(cuCtxSynchronize());
    CU_EXPECT(CUDA_SUCCESS, cuLaunchKernel(h_func(kernel), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CU_EXPECT(want, cuCtxSynchronize());
    /* sticky: the context is unusable from now on */
    CU_EXPECT(want, cuCtxSynchronize());
    uint32_t v;
    CU_EXPECT(want, cuMemcpyDtoH_v2(&v, d, 4));
    CUdeviceptr e;
    CUresult r = cuMemAlloc_v2(&e, 64);
    CHECK(r == want, "cuMemAlloc after %s returned %s", kernel, h_cu_name(r));
    CHECK(write(ready[1], "r", 1) == 1);
    char c;
    CHECK(read(hold[0], &c, 1) == 0, "hold pipe"); /* until the test closes it */
    return 0;
}

static int normal(void *arg)
{
    (void)arg;
    workload_check();
    return 0;
}

int main(void)
{
    h_begin("sticky_error", 28);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    CHECK(pipe(hold) == 0 && pipe(ready) == 0);
    pid_t a = h_spawn(faulting, "fault", 20, -1, -1);
    pid_t b = h_spawn(faulting, "trap_assert", 20, -1, -1);
    close(hold[0]);
    close(ready[1]);
    char r2[2];
    CHECK(read(ready[0], r2, 1) == 1 && read(ready[0], r2 + 1, 1) == 1, "the faulting clients did not fault");
    h_wait_ok(h_spawn(normal, NULL, 20, -1, -1), 20000, "a normal client next to faulted sessions");
    pid_t sessions[8];
    int ns = h_server_sessions(&srv, sessions, 8);
    CHECK(ns == 3, "%d sessions", ns);
    CHECK(h_pid_alive(sessions[0]) && h_pid_alive(sessions[1]), "a faulted session is gone");
    close(hold[1]);
    h_wait_ok(a, 10000, "client with a faulting kernel");
    h_wait_ok(b, 10000, "client with an assert");
    h_sleep_ms(300);
    h_server_stop(&srv);
    printf("PASS sticky_error\n");
    return 0;
}
