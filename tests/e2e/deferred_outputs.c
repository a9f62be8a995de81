/* deferred_outputs.c - an error of a one-way call never takes the place of
 * a later call's own result and outputs.
 *
 * After a one-way call failed in the session, cuMemAlloc must still return
 * its pointer (and the session must not keep an allocation the application
 * never saw: checked against cuMemGetInfo and the session's memory quota);
 * other calls with outputs answer for themselves; the error comes back
 * from the next call that observes earlier work, exactly once, and a copy
 * to the host that reports it still delivers its bytes (small copies, and
 * a copy large enough to be streamed by the session). The library's own
 * fetch of managed memory neither loses its bytes nor swallows the error. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define BOGUS_PTR ((CUdeviceptr)0xdead0000ull)
#define QUOTA "4M"
#define BIG (3u << 20) /* over a megabyte: the session streams its copy back */

static size_t free_now(void)
{
    size_t free_b = 0, total = 0;
    CU(cuMemGetInfo_v2(&free_b, &total));
    return free_b;
}

/* A one-way call that fails in the session. */
static void fail_one_way(void) { CU_EXPECT(CUDA_SUCCESS, cuMemsetD32_v2(BOGUS_PTR, 7, 16)); }

static CUdeviceptr alloc_after_failure(size_t n, size_t free_before)
{
    fail_one_way();
    CUdeviceptr d = 0;
    CUresult r = cuMemAlloc_v2(&d, n);
    if (r != CUDA_SUCCESS) {
        size_t after = 0, total = 0;
        cuMemGetInfo_v2(&after, &total);
        h_fail(__FILE__, __LINE__, "cuMemAlloc_v2(&d, n) == CUDA_SUCCESS",
               " after a failed one-way call: %s, d = %#llx, and the session now holds %zu more bytes",
               h_cu_name(r), (unsigned long long)d, free_before - after);
    }
    CHECK(d != 0);
    return d;
}

/* Copies to the host report the deferred error with their bytes. */
static void copies_deliver(CUdeviceptr d, CUstream st, const uint8_t *pattern, uint8_t *back)
{
    memset(back, 0, BIG);
    fail_one_way();
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(back, d, 4096));
    CHECK(h_diff(back, pattern, 4096) < 0, "the copy that reported the error lost its bytes");
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize()); /* reported once */

    memset(back, 0, BIG);
    fail_one_way();
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoHAsync_v2(back, d, BIG, st));
    long at = h_diff(back, pattern, BIG);
    CHECK(at < 0, "the streamed copy that reported the error lost its bytes (from byte %ld)", at);
    CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));
    printf("ok copies to the host report the error and deliver their bytes\n");
}

/* A host read of managed memory fetches its page from the session, with
 * an observing copy: the bytes arrive, and the error stays for the
 * application's next synchronize. */
static void fetch_keeps_error(void)
{
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemsetD32_v2(m, 5, 1024));
    CU(cuCtxSynchronize()); /* the host's copy of the page is stale now */
    fail_one_way();
    uint32_t v = *(volatile uint32_t *)(uintptr_t)m;
    CHECK(v == 5, "managed memory read %u after a failed one-way call, want 5", v);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSynchronize());
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize());
    CU(cuMemFree_v2(m));
    printf("ok a fetch of managed memory keeps the error for the application\n");
}

static void client(void)
{
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    size_t free0 = free_now();

    CUdeviceptr d = alloc_after_failure(BIG, free0);
    CHECK(free_now() == free0 - BIG, "cuMemGetInfo after the allocation: %zu free, want %zu", free_now(),
          free0 - BIG);
    uint8_t *pattern = malloc(BIG), *back = malloc(BIG);
    CHECK(pattern && back);
    h_pattern(pattern, BIG, 42);
    CU(cuMemcpyHtoD_v2(d, pattern, BIG));
    /* cuMemAlloc and cuMemGetInfo left the error for the synchronize. */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSynchronize());
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(back, d, BIG));
    CHECK(h_diff(back, pattern, BIG) < 0, "the allocation does not hold what was written");
    printf("ok cuMemAlloc after a failed one-way call returns a usable pointer\n");

    copies_deliver(d, st, pattern, back);

    /* Under the 4 MiB quota a second 3 MiB allocation fits only if the
     * session holds nothing the application does not know of. */
    CU(cuMemFree_v2(d));
    CHECK(free_now() == free0, "after the free: %zu free, want %zu", free_now(), free0);
    d = alloc_after_failure(BIG, free0);
    CU(cuMemFree_v2(d));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSynchronize(st));
    CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));
    printf("ok nothing leaked under --mem-quota " QUOTA "\n");
    fetch_keeps_error();
    free(pattern);
    free(back);
}

int main(void)
{
    struct h_server_opts opt = {.extra_args = {"--mem-quota", QUOTA}};
    h_run_client_test("deferred_outputs", 20, &opt, client);
    return 0;
}
