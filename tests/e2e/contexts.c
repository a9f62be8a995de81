/* contexts.c - contexts that come and go while several client threads use
 * them.
 *
 * The session makes each request's context current on whichever of its
 * threads runs the request (the dispatch thread, or a worker for blocking
 * calls), and remembers per thread what it bound. The checks:
 *   - the primary context fully released and retained again works on every
 *     thread (the id stays the same, the real context is new);
 *   - the same after cuDevicePrimaryCtxReset;
 *   - created contexts, each used from several threads, destroyed, and new
 *     ones created, work; a destroyed one is refused;
 *   - push/pop: work goes to the context on top of the calling thread's
 *     stack (checked by where the allocation lands). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define THREADS 6

static CUcontext shared_ctx;

/* Blocking and non-blocking calls, checked. Returns NULL or an error text. */
static void *use_context(void *arg)
{
    (void)arg;
    static __thread char err[128];
    if (cuCtxSetCurrent(shared_ctx) != CUDA_SUCCESS) return "cuCtxSetCurrent";
    for (uint32_t i = 0; i < 30; i++) {
        CUdeviceptr d;
        CUresult r = cuMemAlloc_v2(&d, 64);
        if (r == CUDA_SUCCESS) r = cuMemsetD32_v2(d, i, 16);
        uint32_t v = ~i;
        if (r == CUDA_SUCCESS) r = cuMemcpyDtoH_v2(&v, d, 4);
        if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
        if (r == CUDA_SUCCESS) r = cuMemFree_v2(d);
        if (r != CUDA_SUCCESS || v != i) {
            snprintf(err, sizeof err, "iteration %u: %s, value %u", i, h_cu_name(r), v);
            return err;
        }
    }
    return NULL;
}

static void on_all_threads(CUcontext ctx, const char *what)
{
    shared_ctx = ctx;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, use_context, NULL) == 0);
    for (int i = 0; i < THREADS; i++) {
        void *res;
        pthread_join(t[i], &res);
        CHECK(res == NULL, "%s: a thread failed: %s", what, (const char *)res);
    }
}

int main(void)
{
    h_begin("contexts", 40);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));

    /* primary: retain, use everywhere, release fully, again */
    CUcontext first = NULL;
    for (int round = 0; round < 3; round++) {
        CUcontext p;
        CU(cuDevicePrimaryCtxRetain(&p, dev));
        if (round == 0) first = p;
        CHECK(p == first, "the primary context's handle changed");
        CU(cuCtxSetCurrent(p));
        char what[64];
        snprintf(what, sizeof what, "primary context, retain #%d", round + 1);
        on_all_threads(p, what);
        CU(cuDevicePrimaryCtxRelease_v2(dev));
    }
    printf("ok primary context released and retained again, used from %d threads each time\n", THREADS);

    /* primary: reset while retained, then use */
    CUcontext p;
    CU(cuDevicePrimaryCtxRetain(&p, dev));
    CU(cuCtxSetCurrent(p));
    on_all_threads(p, "primary before reset");
    CU(cuDevicePrimaryCtxReset_v2(dev));
    CU(cuDevicePrimaryCtxRetain(&p, dev));
    CU(cuCtxSetCurrent(p));
    on_all_threads(p, "primary after reset");
    printf("ok primary context reset, then used from %d threads\n", THREADS);

    /* created contexts */
    for (int round = 0; round < 3; round++) {
        CUcontext c;
        CU(cuCtxCreate_v4(&c, NULL, 0, dev));
        char what[64];
        snprintf(what, sizeof what, "created context #%d", round + 1);
        on_all_threads(c, what);
        CU(cuCtxDestroy_v2(c));
        CHECK(cuCtxSetCurrent(c) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS,
              "a destroyed context still works");
    }
    printf("ok created contexts used from %d threads and destroyed\n", THREADS);

    /* push/pop: allocations land in the context on top of the stack */
    CU(cuCtxSetCurrent(p));
    CUcontext c;
    CU(cuCtxCreate_v4(&c, NULL, 0, dev)); /* pushed: c on top */
    CUdeviceptr in_c;
    CU(cuMemAlloc_v2(&in_c, 64));
    CUcontext owner = NULL;
    CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, in_c));
    CHECK(owner == c, "an allocation made with the new context on top belongs to %p, not %p", (void *)owner, (void *)c);
    CUcontext popped;
    CU(cuCtxPopCurrent_v2(&popped));
    CHECK(popped == c);
    CUdeviceptr in_p;
    CU(cuMemAlloc_v2(&in_p, 64));
    CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, in_p));
    CHECK(owner == p, "after the pop an allocation belongs to %p, not the primary %p", (void *)owner, (void *)p);
    CU(cuCtxPushCurrent_v2(c));
    CU(cuMemFree_v2(in_c));
    CU(cuCtxPopCurrent_v2(NULL));
    CU(cuMemFree_v2(in_p));
    CU(cuCtxDestroy_v2(c));
    printf("ok push/pop route work to the context on top\n");

    CU(cuCtxSynchronize());
    h_server_stop(&srv);
    printf("PASS contexts\n");
    return 0;
}
