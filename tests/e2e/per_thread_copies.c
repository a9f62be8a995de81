/* per_thread_copies.c - copies on the per-thread default stream run on the
 * same stream as launches and memsets on it.
 *
 * Each case queues a 300 ms kernel and then a memset on
 * CU_STREAM_PER_THREAD, then copies on it: a copy that reached another
 * stream would run before the memset and see the old bytes. Covered: the
 * explicit handle and the _ptsz entry points (NULL meaning this thread's
 * stream), host-to-device, device-to-device, device-to-host, 2D, and a
 * copy large enough to be striped over the bulk connections. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PT CU_STREAM_PER_THREAD
#define N 4096
#define BIG (8u << 20) /* BULK_MIN_COPY: striped */

/* The shim's own export (bulk.c): bulk connections in use. */
extern int scuda_client_bulk_streams(void);

static uint32_t *out; /* every copy's host side */

/* A 300 ms kernel, then `value` into every word of d, both on PT; out is
 * cleared. */
static void slow_fill(CUdeviceptr d, size_t bytes, uint32_t value)
{
    uint32_t ms = 300;
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, PT, args, NULL));
    CU(cuMemsetD32Async(d, value, bytes / 4, PT));
    memset(out, 0, bytes);
}

static void expect_words(size_t bytes, uint32_t want, const char *what)
{
    for (size_t i = 0; i < bytes / 4; i++)
        CHECK(out[i] == want, "%s: word %zu is %u, want %u (the copy ran on another stream)", what, i, out[i], want);
    printf("ok %s\n", what);
}

static void client(void)
{
    h_cuda_setup();
    CUdeviceptr a, b, big;
    CU(cuMemAlloc_v2(&a, N));
    CU(cuMemAlloc_v2(&b, N));
    CU(cuMemAlloc_v2(&big, BIG));
    uint32_t *in = malloc(N);
    out = malloc(BIG);
    CHECK(out && in);

    slow_fill(a, N, 7);
    CU(cuMemcpyDtoHAsync_v2(out, a, N, PT));
    expect_words(N, 7, "device to host");

    slow_fill(a, N, 8);
    CU(cuMemcpyDtoHAsync_v2_ptsz(out, a, N, NULL));
    expect_words(N, 8, "device to host, _ptsz with NULL");

    slow_fill(a, N, 9);
    for (int i = 0; i < N / 4; i++) in[i] = 10;
    CU(cuMemcpyHtoDAsync_v2(a, in, N, PT)); /* after the memset, so 10 stays */
    CU(cuMemcpyDtoHAsync_v2(out, a, N, PT));
    expect_words(N, 10, "host to device");

    slow_fill(a, N, 11);
    CU(cuMemcpyDtoDAsync_v2(b, a, N, PT));
    CU(cuMemcpyDtoHAsync_v2(out, b, N, PT));
    expect_words(N, 11, "device to device");

    slow_fill(a, N, 12);
    CUDA_MEMCPY2D p = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = a, .srcPitch = 256,
                       .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out, .dstPitch = 256,
                       .WidthInBytes = 256, .Height = N / 256};
    CU(cuMemcpy2DAsync_v2(&p, PT));
    expect_words(N, 12, "2D device to host");

    slow_fill(big, BIG, 13);
    CU(cuMemcpyDtoHAsync_v2(out, big, BIG, PT));
    CHECK(scuda_client_bulk_streams() > 0, "the large copy was not striped");
    expect_words(BIG, 13, "striped device to host");
    free(out);
    free(in);
}

int main(void)
{
    h_run_client_test("per_thread_copies", 30, NULL, client);
    return 0;
}
