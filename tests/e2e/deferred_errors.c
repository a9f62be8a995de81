/* deferred_errors.c - errors of one-way (async) calls.
 *
 * An async call that fails on the server returns CUDA_SUCCESS to the
 * caller; the next call that observes earlier work (synchronize, query,
 * copy to the host) returns the error, exactly once (protocol.h); other
 * calls answer for themselves. Checked through the shim (memsets on a bad
 * device pointer, a launch of a function whose module is gone) and at the
 * protocol level with a raw connection (a memset of a pointer the session
 * never allocated, an async op the server does not know). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "harness.h"

#define BOGUS_PTR ((CUdeviceptr)0xdead0000ull)

static void through_shim(void)
{
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    /* memset on an invalid device pointer: legacy stream, then a stream */
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD32_v2(BOGUS_PTR, 7, 16));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSynchronize());
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize()); /* reported once */

    CU_EXPECT(CUDA_SUCCESS, cuMemsetD8Async(BOGUS_PTR, 1, 100, st));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSynchronize(st));
    CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));

    /* Two failures before one sync: the first is reported, once. */
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD16_v2(BOGUS_PTR, 1, 8));
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD2D8_v2(BOGUS_PTR, 64, 1, 8, 8));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSynchronize());
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize());

    /* Any synchronizing call reports it: here a device-to-host copy. */
    uint32_t out[4] = {0};
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD32_v2(BOGUS_PTR, 7, 16));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH_v2(out, d, sizeof out));
    CU_EXPECT(CUDA_SUCCESS, cuCtxSynchronize());

    /* The session still works, and valid work around a failure happens. */
    CU(cuMemsetD32_v2(d, 0x01020304, 1024));
    CU_EXPECT(CUDA_SUCCESS, cuMemsetD32_v2(BOGUS_PTR, 9, 4));
    CU(cuMemsetD32_v2(d + 4, 0x0a0b0c0d, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(out[0] == 0x01020304 && out[1] == 0x0a0b0c0d && out[2] == 0x01020304, "got %08x %08x %08x", out[0],
          out[1], out[2]);

    /* A launch of a function whose module was unloaded: the client still
     * has the handle, the server no longer has a live function for it. */
    CUmodule m = h_load_module();
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CU(cuCtxSynchronize());
    CU(cuModuleUnload(m));
    uint32_t v = 5;
    uint64_t n = 16;
    void *args[] = {&d, &v, &n};
    CUresult r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
    if (r == CUDA_SUCCESS) {
        CUresult s = cuStreamSynchronize(st);
        CHECK(s != CUDA_SUCCESS, "a launch of an unloaded module's function was reported as success");
        CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));
        printf("ok stale function: launch returned SUCCESS, the next sync %s, then SUCCESS\n", h_cu_name(s));
    } else {
        printf("ok stale function: the launch itself returned %s\n", h_cu_name(r));
    }
    /* A launch the driver refuses (2048 threads per block): the refusal
     * comes from the server, so it is deferred too. */
    r = cuLaunchKernel(h_func("fill_u32"), 1, 1, 1, 2048, 1, 1, 0, st, args, NULL);
    if (r == CUDA_SUCCESS) {
        CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamSynchronize(st));
        CU_EXPECT(CUDA_SUCCESS, cuStreamSynchronize(st));
    } else {
        CHECK(r == CUDA_ERROR_INVALID_VALUE, "a 2048-thread launch returned %s", h_cu_name(r));
    }
    /* and the stream still runs good launches */
    v = 0x600d;
    CU(cuLaunchKernel(h_func("fill_u32"), 1, 1, 1, 64, 1, 1, 0, st, args, NULL));
    CU(cuStreamSynchronize(st));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(out[0] == 0x600d && out[3] == 0x600d, "fill after a refused launch: %08x", out[0]);

    CU(cuStreamDestroy_v2(st));
    CU(cuMemFree_v2(d));
    printf("ok deferred errors through the shim\n");
}

static uint32_t seq = 1;

static long call(int fd, uint16_t op, uint32_t ctx, const wire_buf *b)
{
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, op, 0, s, ctx, b ? b->data : NULL, b ? (uint32_t)b->len : 0) == 0);
    return h_raw_call_reply(fd, s, 10000, NULL, NULL);
}

static void post(int fd, uint16_t op, uint32_t ctx, const wire_buf *b)
{
    CHECK(h_raw_send(fd, op, FRAME_ASYNC, seq++, ctx, b ? b->data : NULL, b ? (uint32_t)b->len : 0) == 0);
}

/* An observing call; a ping before it must not report the error. */
static long ping_then_sync(int fd, uint32_t ctx)
{
    CHECK(call(fd, OP_scuda_ping, ctx, NULL) == CUDA_SUCCESS, "a ping reported an earlier one-way call's error");
    struct msg_scuda_ctx_synchronize_req m = {.ctx = ctx};
    wire_buf b;
    wb_init(&b);
    msg_scuda_ctx_synchronize_req_put(&b, &m);
    long r = call(fd, OP_scuda_ctx_synchronize, ctx, &b);
    wb_free(&b);
    return r;
}

static void raw_protocol(const char *addr)
{
    uint32_t status;
    int fd = h_raw_connect(addr, NULL, &status);
    CHECK(fd >= 0, "raw handshake failed (welcome status %u)", status);
    const uint32_t ctx = 0x100;
    struct msg_scuda_primary_ctx_retain_req m = {.dev = 0, .ctx = ctx};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &m);
    CHECK(call(fd, OP_scuda_primary_ctx_retain, 0, &b) == CUDA_SUCCESS);
    CHECK(call(fd, OP_scuda_ping, ctx, NULL) == CUDA_SUCCESS);

    /* memset of a pointer the session never allocated (cuMemsetD32_v2's
     * generated encoding: u64 pointer, u32 value, u64 count) */
    wb_reset(&b);
    wb_put_u64(&b, 0xdead0000ull);
    wb_put_u32(&b, 7);
    wb_put_u64(&b, 16);
    post(fd, OP_cuMemsetD32_v2, ctx, &b);
    long r = ping_then_sync(fd, ctx);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "synchronize after a bad memset returned %ld", r);
    CHECK(ping_then_sync(fd, ctx) == CUDA_SUCCESS, "the error was reported twice");

    /* an async op this server does not know */
    post(fd, 60000, ctx, NULL);
    r = ping_then_sync(fd, ctx);
    CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "synchronize after an unknown async op returned %ld", r);
    CHECK(ping_then_sync(fd, ctx) == CUDA_SUCCESS);

    /* an unknown op as a request gets its own reply */
    r = call(fd, 60001, ctx, NULL);
    CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "unknown sync op returned %ld", r);
    wb_free(&b);
    io_close(fd);
    printf("ok deferred errors at the protocol level\n");
}

static int shim_client(void *arg)
{
    (void)arg;
    through_shim();
    return 0;
}

int main(void)
{
    h_begin("deferred_errors", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    raw_protocol(srv.addr);
    h_wait_ok(h_spawn(shim_client, NULL, 20, -1, -1), 20000, "shim client");
    h_server_stop(&srv);
    printf("PASS deferred_errors\n");
    return 0;
}
