/* fork.c - a client that forks (docs/architecture.md, 2 Processes).
 *
 * The child must not touch the parent's connection: its CUDA calls fail
 * cleanly (an error, no crash, no hang), also when it exits through exit()
 * and the shim's exit handlers run. The parent goes on unharmed, also when
 * it forks while another of its threads is in the middle of calls. A byte
 * written by a child into the shared socket would corrupt the parent's
 * stream and fail the parent's later checks. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static CUdeviceptr buf;
static CUcontext ctx;
static atomic_int stop;

static int child(void *arg)
{
    int use_exit = arg != NULL;
    uint64_t t0 = h_now_ms();
    CUdeviceptr d = 0;
    CUresult r1 = cuMemAlloc_v2(&d, 64);
    uint32_t v = 0;
    CUresult r2 = cuMemcpyDtoH_v2(&v, buf, 4);
    CUresult r3 = cuMemsetD32_v2(buf, 0xbad, 1);
    CUresult r4 = cuCtxSynchronize();
    CUresult r5 = cuInit(0);
    uint64_t took = h_now_ms() - t0;
    if (r1 == CUDA_SUCCESS || r2 == CUDA_SUCCESS || r3 == CUDA_SUCCESS || r4 == CUDA_SUCCESS) {
        fprintf(stderr, "child: a CUDA call succeeded after fork: %s %s %s %s (cuInit %s)\n", h_cu_name(r1),
                h_cu_name(r2), h_cu_name(r3), h_cu_name(r4), h_cu_name(r5));
        _exit(3);
    }
    if (took > 2000) {
        fprintf(stderr, "child: failing calls took %llu ms\n", (unsigned long long)took);
        _exit(4);
    }
    if (use_exit) exit(0); /* the shim's exit handlers run in the child */
    _exit(0);
}

static void verify_parent(uint32_t value, const char *when)
{
    CU(cuMemsetD32_v2(buf, value, 1024));
    uint32_t v[1024];
    memset(v, 0, sizeof v);
    CU(cuMemcpyDtoH_v2(v, buf, sizeof v));
    for (int i = 0; i < 1024; i++) CHECK(v[i] == value, "%s: word %d is %08x, expected %08x", when, i, v[i], value);
}

/* Another parent thread keeps the connection busy while main forks. */
static void *busy(void *arg)
{
    (void)arg;
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 1 << 16));
    /* static, not malloc'd: a forked child inherits this memory without
     * the thread that owns it, which LeakSanitizer would call a leak */
    static uint8_t h[1 << 16], o[1 << 16];
    for (uint32_t i = 0; !atomic_load(&stop); i++) {
        h_pattern(h, 1 << 16, i);
        CU(cuMemcpyHtoD_v2(d, h, 1 << 16));
        CU(cuMemcpyDtoH_v2(o, d, 1 << 16));
        CHECK(h_diff(h, o, 1 << 16) < 0, "busy thread: round trip %u differs", i);
    }
    CU(cuMemFree_v2(d));
    return NULL;
}

int main(void)
{
    h_begin("fork", 28);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    ctx = h_cuda_setup();
    CU(cuMemAlloc_v2(&buf, 4096));
    verify_parent(0x11111111, "before fork");

    /* Children exiting through _exit and through exit. */
    for (int i = 0; i < 4; i++) {
        pid_t pid = h_spawn(child, i % 2 ? (void *)1 : NULL, 10, -1, -1);
        h_wait_ok(pid, 10000, "forked child");
        verify_parent(0x22220000u + (uint32_t)i, "after a child");
    }

    /* Fork while another thread is mid-call. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, busy, NULL) == 0);
    for (int i = 0; i < 10; i++) {
        h_sleep_ms(20);
        pid_t pid = h_spawn(child, (void *)1, 10, -1, -1);
        h_wait_ok(pid, 10000, "child forked during calls");
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    verify_parent(0x33333333, "after forks during calls");
    CU(cuCtxSynchronize());
    CU(cuMemFree_v2(buf));
    h_server_stop(&srv);
    printf("PASS fork\n");
    return 0;
}
