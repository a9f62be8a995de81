/* api_calls.c - driver calls that once were NOT_SUPPORTED and are now
 * forwarded or built on the client (docs/architecture.md, 9.19):
 *   - cuCtxSetFlags reaches the session's driver (which refuses a bad
 *     flag) and cuCtxGetFlags, answered by the client, follows it in
 *     created and primary contexts;
 *   - cuMemcpyBatchAsync and cuMemcpy3DBatchAsync (both exports each):
 *     host, device and array operands land byte-exact; a bad attribute
 *     list or operation sends nothing and names the copy in failIdx
 *     (SIZE_MAX when it concerns none); the legacy stream is refused;
 *   - cuLogsDumpToMemory returns the session's driver log (the stand-in
 *     keeps one entry) and advances the iterator; cuLogsDumpToFile
 *     writes it to a path of the client. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void ctx_flags(void)
{
    CUcontext primary = h_cuda_setup();
    unsigned flags = 0;
    CU(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary flags %#x", flags);
    /* the session's driver checks the value: a bad one comes back refused
     * and the client's answer does not change */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSetFlags(0x40000000u));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "flags after a refused set %#x", flags);

    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUcontext mine;
    CU(cuCtxCreate_v2(&mine, CU_CTX_SCHED_SPIN, dev));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN, "created context's flags %#x", flags);
    CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD, "created context's flags after set %#x", flags);
    CU(cuCtxDestroy_v2(mine));
    CU(cuCtxSetCurrent(primary));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "the primary's flags changed: %#x", flags);
    h_copy_round_trip(7);
}

#define N 4096

static void batch_1d(void)
{
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    static uint8_t host_a[N], host_b[N], back_a[N], back_b[N];
    h_pattern(host_a, N, 11);
    h_pattern(host_b, N, 12);
    CUdeviceptr da, db, dc;
    CU(cuMemAlloc_v2(&da, N));
    CU(cuMemAlloc_v2(&db, N));
    CU(cuMemAlloc_v2(&dc, N));
    /* host->device twice, then (second attribute) device->device */
    CUdeviceptr dsts[3] = {da, db, dc}, srcs[3] = {(CUdeviceptr)host_a, (CUdeviceptr)host_b, da};
    size_t sizes[3] = {N, N, N}, idxs[2] = {0, 2}, fail = 7;
    CUmemcpyAttributes attrs[2] = {{.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL},
                                   {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM}};
    CU(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, idxs, 2, &fail, st));
    /* device->host with the other export */
    CUdeviceptr dsts2[2] = {(CUdeviceptr)back_a, (CUdeviceptr)back_b}, srcs2[2] = {dc, db};
    size_t idx0 = 0;
    CU(cuMemcpyBatchAsync_v2(dsts2, srcs2, sizes, 2, attrs, &idx0, 1, st));
    CU(cuStreamSynchronize(st));
    CHECK(h_diff(back_a, host_a, N) < 0, "batch: device->device->host differs");
    CHECK(h_diff(back_b, host_b, N) < 0, "batch: host->device->host differs");

    /* refusals: nothing is sent, failIdx says SIZE_MAX */
    size_t bad_idxs[2] = {1, 2};
    fail = 7;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync(dsts, srcs, sizes, 3, attrs, bad_idxs, 2, &fail, st));
    CHECK(fail == SIZE_MAX, "failIdx %zu for a bad attribute list", fail);
    CUmemcpyAttributes no_order = {0};
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, &no_order, &idx0, 1, st));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 3, attrs, &idx0, 1, NULL));
    CU(cuMemFree_v2(da));
    CU(cuMemFree_v2(db));
    CU(cuMemFree_v2(dc));
    CU(cuStreamDestroy_v2(st));
}

static CUmemcpy3DOperand pointer_operand(const void *p, size_t row, size_t layer)
{
    CUmemcpy3DOperand o = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER};
    o.op.ptr.ptr = (CUdeviceptr)p;
    o.op.ptr.rowLength = row;
    o.op.ptr.layerHeight = layer;
    return o;
}

static void batch_3d(void)
{
    enum { W = 8, H = 4, D = 2, ROW = 10 }; /* floats; host rows padded to ROW */
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUDA_ARRAY3D_DESCRIPTOR ad = {.Width = W, .Height = H, .Depth = D, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray arr;
    CU(cuArray3DCreate_v2(&arr, &ad));
    static float in[D][H][ROW], out[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < ROW; x++) in[z][y][x] = (float)(z * 1000 + y * 100 + x);
    CUdeviceptr dev;
    CU(cuMemAlloc_v2(&dev, sizeof out));
    CUDA_MEMCPY3D_BATCH_OP ops[2] = {0};
    ops[0].src = pointer_operand(in, ROW, H); /* padded host rows -> array */
    ops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    ops[0].dst.op.array.array = arr;
    ops[0].extent = (CUextent3D){W, H, D};
    ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    ops[1] = ops[0]; /* placeholder, replaced below */
    size_t fail = 7;
    CU(cuMemcpy3DBatchAsync(1, ops, &fail, 0, st));
    /* array -> packed device memory (rowLength 0: tight) */
    CUDA_MEMCPY3D_BATCH_OP back = {0};
    back.src = ops[0].dst;
    back.dst = pointer_operand((void *)(uintptr_t)dev, 0, 0);
    back.extent = (CUextent3D){W, H, D};
    back.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CU(cuMemcpy3DBatchAsync_v2(1, &back, 0, st));
    CU(cuStreamSynchronize(st));
    CU(cuMemcpyDtoH_v2(out, dev, sizeof out));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                CHECK(out[z][y][x] == in[z][y][x], "3D batch: (%d,%d,%d) is %g", x, y, z, out[z][y][x]);

    /* the second operation is bad (zero depth): nothing runs, failIdx 1 */
    CU(cuMemsetD8_v2(dev, 0, sizeof out));
    ops[1] = back;
    ops[1].extent.depth = 0;
    fail = 7;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync(2, ops, &fail, 0, st));
    CHECK(fail == 1, "failIdx %zu for a zero-depth operation", fail);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync_v2(1, &back, 1, st)); /* flags must be 0 */
    CU(cuStreamSynchronize(st));
    CU(cuArrayDestroy(arr));
    CU(cuMemFree_v2(dev));
    CU(cuStreamDestroy_v2(st));
}

static void driver_logs(void)
{
    static const char entry[] = "[stand-in] driver log: loaded\n";
    char buf[256];
    size_t n = sizeof buf;
    CUlogIterator it = 0;
    CU(cuLogsDumpToMemory(&it, buf, &n, 0));
    CHECK(n == strlen(entry) && memcmp(buf, entry, n) == 0 && buf[n] == 0 && it == 1, "dump: %zu bytes, it %u",
          n, (unsigned)it);
    n = sizeof buf;
    CU(cuLogsDumpToMemory(&it, buf, &n, 0));
    CHECK(n == 0 && it == 1, "nothing after the iterator: %zu bytes, it %u", n, (unsigned)it);
    CUlogIterator cur = 0;
    CU(cuLogsCurrent(&cur, 0));
    CHECK(cur == 1, "cuLogsCurrent %u", (unsigned)cur);

    char path[] = "/tmp/scuda-e2e-logs-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    CU(cuLogsDumpToFile(NULL, path, 0));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    unlink(path);
    CHECK(got == strlen(entry) && memcmp(buf, entry, got) == 0, "file holds %zu bytes", got);
    CHECK(cuLogsDumpToFile(NULL, "/nonexistent-dir/x", 0) == CUDA_ERROR_INVALID_VALUE, "unwritable path");
    CHECK(cuLogsDumpToFile(NULL, NULL, 0) == CUDA_ERROR_INVALID_VALUE, "no path");
}

static void client(void)
{
    ctx_flags();
    batch_1d();
    batch_3d();
    driver_logs();
}

int main(void)
{
    h_run_client_test("api_calls", 60, NULL, client);
    return 0;
}
