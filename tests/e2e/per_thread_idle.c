/* per_thread_idle.c - the client's "provably idle" answer to
 * cuStreamSynchronize is about the stream the session runs, not the
 * handle's value.
 *
 * CU_STREAM_PER_THREAD names a different stream in every thread, and the
 * NULL (legacy) stream a different one in every context. Thread A queues
 * a 500 ms kernel on one of them; thread B then proves ITS stream of the
 * same handle value idle with a device-to-host copy; A's synchronize must
 * still wait for A's kernel. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "harness.h"

#define SLEEP_MS 500u

static CUcontext ctx_a, ctx_b;
static CUstream handle; /* the handle both threads use */
static CUfunction sleep_a; /* sleep_ms, loaded in ctx_a */
static atomic_int step;

static void wait_step(int n)
{
    while (atomic_load(&step) < n) h_sleep_ms(1);
}

/* A: warm its stream up, queue the kernel, let B copy, then synchronize. */
static void *thread_a(void *arg)
{
    uint64_t *returned = arg; /* ms after the launch */
    CU(cuCtxSetCurrent(ctx_a));
    CU(cuStreamSynchronize(handle)); /* makes this thread's stream */
    uint32_t ms = SLEEP_MS;
    void *args[] = {&ms};
    uint64_t t0 = h_now_ms();
    CU(cuLaunchKernel(sleep_a, 1, 1, 1, 1, 1, 1, 0, handle, args, NULL));
    atomic_store(&step, 1);
    wait_step(2);
    CU(cuStreamSynchronize(handle));
    *returned = h_now_ms() - t0;
    return NULL;
}

/* B: a copy on its own stream of the same handle value, after A's launch. */
static void *thread_b(void *arg)
{
    CUdeviceptr d = *(CUdeviceptr *)arg;
    CU(cuCtxSetCurrent(ctx_b));
    uint32_t out[4];
    CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, handle)); /* makes this thread's stream */
    wait_step(1);
    CU(cuMemcpyDtoHAsync_v2(out, d, sizeof out, handle)); /* proves B's stream idle */
    atomic_store(&step, 2);
    return NULL;
}

static void run_case(CUstream h, CUcontext b_ctx, const char *what)
{
    handle = h;
    ctx_b = b_ctx;
    atomic_store(&step, 0);
    CU(cuCtxSetCurrent(ctx_b));
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    uint64_t returned = 0;
    pthread_t a, b;
    pthread_create(&a, NULL, thread_a, &returned);
    pthread_create(&b, NULL, thread_b, &d);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    /* The kernel ends SLEEP_MS after it was launched, not before. */
    CHECK(returned >= SLEEP_MS - 10, "%s: A's synchronize returned %llu ms after the launch of its %u ms kernel",
          what, (unsigned long long)returned, SLEEP_MS);
    printf("ok %s: A's synchronize returned %llu ms after the launch\n", what, (unsigned long long)returned);
}

static void client(void)
{
    CUcontext primary = h_cuda_setup();
    ctx_a = primary;
    sleep_a = h_func("sleep_ms");
    /* Two threads, one context: CU_STREAM_PER_THREAD is a stream of each. */
    run_case(CU_STREAM_PER_THREAD, primary, "per-thread stream, two threads");

    /* Two contexts: the NULL stream is a stream of each. */
    CUdevice dev;
    CU(cuCtxGetDevice(&dev));
    CU(cuCtxCreate_v2(&ctx_a, 0, dev));
    CU(cuModuleGetFunction(&sleep_a, h_load_module(), "sleep_ms"));
    CU(cuCtxPopCurrent_v2(NULL));
    run_case(NULL, primary, "NULL stream, two contexts");
    CU(cuCtxDestroy_v2(ctx_a));
}

int main(void)
{
    h_run_client_test("per_thread_idle", 20, NULL, client);
    return 0;
}
