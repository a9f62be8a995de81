/* blocking_threads.c - a thread blocked in a synchronize never stalls the
 * other threads of the same client (docs/architecture.md, 3.6 Threads and
 * blocking).
 *
 * Thread A launches sleep_ms(2000) on its stream and calls
 * cuStreamSynchronize. Thread B, once A's launch is out, does 200 small
 * round trips on its own stream (host-to-device, device-to-host, stream
 * synchronize, checked), then 100 with synchronous copies and a context-
 * free query, and must finish before A's synchronize returns. A's
 * synchronize must really have waited (>= ~2 s). Both streams are
 * non-blocking, so in CUDA's own semantics nothing of B waits for A.
 * Then the same while eight more threads share the connection with
 * checked round trips of their own data. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static CUcontext ctx;
static atomic_int a_launched;
static uint64_t t_start, t_a_done, t_b_done;
static uint32_t a_sleep_ms = 2000;

static void *thread_a(void *arg)
{
    (void)arg;
    CU(cuCtxSetCurrent(ctx));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    uint32_t ms = a_sleep_ms;
    void *args[] = {&ms};
    t_start = h_now_ms();
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
    atomic_store(&a_launched, 1);
    CU(cuStreamSynchronize(st));
    t_a_done = h_now_ms();
    CU(cuStreamDestroy_v2(st));
    return NULL;
}

static void *thread_b(void *arg)
{
    (void)arg;
    CU(cuCtxSetCurrent(ctx));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 256));
    while (!atomic_load(&a_launched)) h_sleep_ms(1);
    h_sleep_ms(50); /* let A's synchronize reach the server */
    for (uint32_t i = 0; i < 200; i++) {
        uint32_t in[16], out[16];
        for (int k = 0; k < 16; k++) in[k] = i * 16 + (uint32_t)k;
        memset(out, 0, sizeof out);
        CU(cuMemcpyHtoDAsync_v2(d, in, sizeof in, st));
        CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
        CU(cuStreamSynchronize(st));
        CHECK(memcmp(in, out, sizeof in) == 0, "round trip %u differs", i);
    }
    for (uint32_t i = 0; i < 100; i++) {
        uint32_t v = i ^ 0x5a5a5a5a, w = 0;
        CU(cuMemsetD32Async(d, v, 1, st));
        CU(cuMemcpyDtoHAsync_v2(&w, d, 4, st));
        CHECK(w == v, "memset round trip %u: %08x", i, w);
        size_t free_b, total_b;
        CU(cuMemGetInfo_v2(&free_b, &total_b));
    }
    t_b_done = h_now_ms();
    CU(cuMemFree_v2(d));
    CU(cuStreamDestroy_v2(st));
    return NULL;
}

/* Many threads sharing the connection: each does its own checked round
 * trips of distinct data, so a reply handed to the wrong thread, or bulk
 * bytes landing in the wrong buffer, fails. */
#define STRESS_THREADS 8
static void *stress(void *arg)
{
    uint32_t me = (uint32_t)(uintptr_t)arg;
    CU(cuCtxSetCurrent(ctx));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    static __thread uint8_t in[4096], out[4096];
    for (uint32_t i = 0; i < 150; i++) {
        h_pattern(in, sizeof in, me * 100000 + i);
        if (i % 2) {
            CU(cuMemcpyHtoD_v2(d, in, sizeof in));
            CU(cuMemcpyDtoH_v2(out, d, sizeof out));
        } else {
            CU(cuMemcpyHtoDAsync_v2(d, in, sizeof in, st));
            CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, st));
            CU(cuStreamSynchronize(st));
        }
        long at = h_diff(in, out, sizeof in);
        CHECK(at < 0, "thread %u round trip %u differs at byte %ld", me, i, at);
    }
    CU(cuMemFree_v2(d));
    CU(cuStreamDestroy_v2(st));
    return NULL;
}

int main(void)
{
    h_begin("blocking_threads", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    ctx = h_cuda_setup();
    h_module();
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, thread_a, NULL) == 0);
    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    printf("A's synchronize returned after %llu ms; B finished its 300 round trips after %llu ms\n",
           (unsigned long long)(t_a_done - t_start), (unsigned long long)(t_b_done - t_start));
    CHECK(t_a_done - t_start >= a_sleep_ms - 50, "A's synchronize did not wait for sleep_ms(%u)", a_sleep_ms);
    CHECK(t_b_done < t_a_done, "B was held up behind A's synchronize");

    /* Again with eight more threads doing checked round trips meanwhile
     * (here only correctness is checked: on two cores, nine busy threads
     * need not all finish within A's second). */
    atomic_store(&a_launched, 0);
    a_sleep_ms = 1000;
    pthread_t s[STRESS_THREADS];
    CHECK(pthread_create(&a, NULL, thread_a, NULL) == 0);
    for (uintptr_t i = 0; i < STRESS_THREADS; i++) CHECK(pthread_create(&s[i], NULL, stress, (void *)i) == 0);
    CHECK(pthread_create(&b, NULL, thread_b, NULL) == 0);
    for (int i = 0; i < STRESS_THREADS; i++) pthread_join(s[i], NULL);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    printf("with %d more threads: A %llu ms, B %llu ms\n", STRESS_THREADS, (unsigned long long)(t_a_done - t_start),
           (unsigned long long)(t_b_done - t_start));
    CHECK(t_a_done - t_start >= a_sleep_ms - 50, "A's synchronize did not wait for sleep_ms(%u)", a_sleep_ms);
    h_server_stop(&srv);
    printf("PASS blocking_threads\n");
    return 0;
}
