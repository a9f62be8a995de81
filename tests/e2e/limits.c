/* limits.c - the server's limits (docs/architecture.md, 2 Processes): a limit
 * that is hit gives
 * the client a clear CUDA error and the server a log line, never a crash.
 *
 *   --max-sessions 2   a third client is refused (cuInit: NO_DEVICE, and
 *                      stderr says the server is full); once a session
 *                      ends, a new client gets in.
 *   --mem-quota 1M     allocations beyond 1 MiB per session fail with
 *                      CUDA_ERROR_OUT_OF_MEMORY; freeing makes room again.
 *   --idle-timeout 1   a client idle for longer loses its session; a client
 *                      that waits in a 2.5 s synchronize is not idle. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int hold[2];

static int holder(void *arg)
{
    (void)arg;
    close(hold[1]); /* EOF on hold[0] once the test closes its end */
    h_cuda_setup();
    char c;
    CHECK(read(hold[0], &c, 1) == 0);
    return 0;
}

static int simple(void *arg)
{
    (void)arg;
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) return 10;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    return 0;
}

/* Wait until the server has reaped session pid (its log says so). A
 * process can take a while to go after it said "session ends" (under
 * ThreadSanitizer, hundreds of milliseconds to unmap its shadow memory). */
static int session_reaped(const struct h_server *s, pid_t pid, int timeout_ms)
{
    char line[64];
    snprintf(line, sizeof line, "session %d ended", (int)pid);
    for (uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms; h_now_ms() < deadline; h_sleep_ms(20))
        if (h_server_log_count(s, line) > 0) return 1;
    return 0;
}

static void max_sessions(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--max-sessions", "2"}};
    h_server_start(&srv, "max-sessions", &opt);
    CHECK(pipe(hold) == 0);
    pid_t a = h_spawn(holder, NULL, 20, -1, -1), b = h_spawn(holder, NULL, 20, -1, -1);
    close(hold[0]);
    CHECK(h_wait_sessions(&srv, 2, 10000));
    pid_t sessions[2];
    CHECK(h_server_sessions(&srv, sessions, 2) == 2);
    char path[512];
    int err_fd = h_temp_file("full", path, sizeof path);
    pid_t c = h_spawn(simple, NULL, 15, -1, err_fd);
    close(err_fd);
    int st = h_wait(c, 15000);
    char *err = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 10, "a third client was not refused (status %d)", st);
    CHECK(strstr(err, "full") != NULL, "the refused client's stderr does not say the server is full:\n%s", err);
    free(err);
    close(hold[1]);
    h_wait_ok(a, 10000, "holder a");
    h_wait_ok(b, 10000, "holder b");
    for (int i = 0; i < 2; i++)
        CHECK(session_reaped(&srv, sessions[i], 10000), "session %d never ended", (int)sessions[i]);
    h_wait_ok(h_spawn(simple, NULL, 15, -1, -1), 15000, "a client after the sessions ended");
    h_server_stop(&srv);
    printf("ok --max-sessions 2: the third client is refused, a later one gets in\n");
}

static int quota_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr a, b, c;
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&a, 2u << 20));
    CU(cuMemAlloc_v2(&a, 512u << 10));
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&b, 768u << 10));
    size_t pitch;
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocPitch_v2(&b, &pitch, 1024, 1024, 4));
    CU(cuMemFree_v2(a));
    CU(cuMemAlloc_v2(&b, 768u << 10));
    CU(cuMemAlloc_v2(&c, 128u << 10));
    return 0;
}

static void mem_quota(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--mem-quota", "1M"}};
    h_server_start(&srv, "mem-quota", &opt);
    h_wait_ok(h_spawn(quota_client, NULL, 15, -1, -1), 15000, "allocations under --mem-quota 1M");
    h_server_stop(&srv);
    printf("ok --mem-quota 1M is enforced\n");
}

static int busy_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    uint32_t ms = 2500;
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize()); /* waiting for the GPU is not being idle */
    CU(cuCtxSynchronize());
    return 0;
}

static int idle_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    h_sleep_ms(2500);
    CUresult r = cuMemsetD32_v2(d, 1, 16);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    CHECK(r != CUDA_SUCCESS, "an idle client's session outlived --idle-timeout 1");
    return 0;
}

static void idle_timeout(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--idle-timeout", "1"}};
    h_server_start(&srv, "idle-timeout", &opt);
    h_wait_ok(h_spawn(idle_client, NULL, 15, -1, -1), 15000, "an idle client");
    CHECK(h_wait_log(&srv, "idle", 1, 10000) >= 1, "the server did not log the idle session");
    h_wait_ok(h_spawn(busy_client, NULL, 15, -1, -1), 15000, "a client in a 2.5 s synchronize under --idle-timeout 1");
    h_server_stop(&srv);
    printf("ok --idle-timeout 1 closes idle sessions, not busy ones\n");
}

static int part(void *arg)
{
    ((void (*)(void))arg)();
    return 0;
}

int main(void)
{
    h_begin("limits", 45);
    /* Each limit in a process of its own, so that one failing does not
     * hide the others. */
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {{"--max-sessions", max_sessions}, {"--idle-timeout", idle_timeout}, {"--mem-quota", mem_quota}};
    pid_t pids[3];
    for (int i = 0; i < 3; i++) pids[i] = h_spawn(part, (void *)parts[i].fn, 40, -1, -1);
    int failed = 0;
    for (int i = 0; i < 3; i++) {
        int st = h_wait(pids[i], 42000);
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL limits: %s\n", parts[i].name);
            failed++;
        }
    }
    CHECK(failed == 0, "%d of 3 limits not enforced as documented", failed);
    printf("PASS limits\n");
    return 0;
}
