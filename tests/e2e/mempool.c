/* mempool.c - stream-ordered allocation and memory pools through SCUDA
 * (the shape of tests/gpu/programs/malloc_async.cu).
 *
 * - cuMemAllocAsync / cuMemFreeAsync round trips on a stream, with data;
 * - the device's default pool: its id comes from the session
 *   (handle_export) and is the same every time; attributes travel with the
 *   size their type has (int for the reuse flags, cuuint64_t for the
 *   rest): the bytes after an int stay untouched; an unknown attribute is
 *   refused before it reaches the driver;
 * - an explicit pool: its properties' win32SecurityAttributes pointer
 *   reaches the driver as NULL (the stand-in refuses anything else),
 *   cuMemAllocFromPoolAsync, the pool's usage, trim, destroy;
 * - cuDeviceSetMemPool redirects cuMemAllocAsync. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N (1u << 16)

static void fill(CUdeviceptr p, uint32_t value, uint64_t n, CUstream s)
{
    void *args[] = {&p, &value, &n};
    CU(cuLaunchKernel(h_func("fill_u32"), 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

static cuuint64_t attr64(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    CU(cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

int main(void)
{
    h_begin("mempool", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t *h = malloc(N * 4);
    CHECK(h != NULL);

    /* stream-ordered round trips */
    for (uint32_t round = 0; round < 3; round++) {
        CUdeviceptr d = 0;
        CU(cuMemAllocAsync(&d, N * 4, s));
        CHECK(d != 0);
        fill(d, 1000 * round + 7, N, s);
        CU(cuMemcpyDtoHAsync_v2(h, d, N * 4, s));
        CU(cuMemFreeAsync(d, s));
        CU(cuStreamSynchronize(s));
        for (uint32_t i = 0; i < N; i++) CHECK(h[i] == 1000 * round + 7, "round %u: h[%u] = %u", round, i, h[i]);
    }
    printf("ok 3 rounds of cuMemAllocAsync / kernel / copy / cuMemFreeAsync\n");

    /* the default pool: a handle the client never created */
    CUmemoryPool pool = NULL, again = NULL, current = NULL;
    CU(cuDeviceGetDefaultMemPool(&pool, 0));
    CU(cuDeviceGetDefaultMemPool(&again, 0));
    CU(cuDeviceGetMemPool(&current, 0));
    CHECK(pool != NULL && again == pool && current == pool, "default pool %p, again %p, current %p", (void *)pool,
          (void *)again, (void *)current);
    cuuint64_t thr = 1ull << 30;
    CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CHECK(attr64(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == thr);
    CHECK(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0, "used after frees");
    CHECK(attr64(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= N * 4);
    struct {
        int flag;
        unsigned char canary[4];
    } v;
    memset(&v, 0x5a, sizeof v);
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v.flag));
    CHECK(v.flag == 1 && v.canary[0] == 0x5a && v.canary[3] == 0x5a, "an int attribute wrote past the int");
    int zero = 0;
    CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &zero));
    CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &v.flag));
    CHECK(v.flag == 0);
    cuuint64_t junk = 0;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemPoolGetAttribute(pool, (CUmemPool_attribute)0x7777, &junk));
    printf("ok default pool: stable id, attributes of 4 and 8 bytes\n");

    /* an explicit pool, with a pointer field the server must never see */
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.win32SecurityAttributes = &props; /* a client address: travels as NULL */
    CUmemoryPool mine = NULL;
    CU(cuMemPoolCreate(&mine, &props));
    CHECK(mine != NULL && mine != pool);
    CUdeviceptr d = 0;
    CU(cuMemAllocFromPoolAsync(&d, 4096 * 4, mine, s));
    fill(d, 4242, 4096, s);
    CU(cuMemcpyDtoHAsync_v2(h, d, 4096 * 4, s));
    CHECK(attr64(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 4096 * 4);
    CU(cuMemFreeAsync(d, s));
    CU(cuStreamSynchronize(s));
    CHECK(h[0] == 4242 && h[4095] == 4242);
    CHECK(attr64(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    CU(cuMemPoolTrimTo(mine, 0));
    CHECK(attr64(mine, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);

    /* the device's current pool, redirected */
    CU(cuDeviceSetMemPool(0, mine));
    CU(cuDeviceGetMemPool(&current, 0));
    CHECK(current == mine);
    CU(cuMemAllocAsync(&d, 8192, s));
    CHECK(attr64(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 8192);
    CU(cuMemFreeAsync(d, s));
    CU(cuStreamSynchronize(s));
    CU(cuDeviceSetMemPool(0, pool));
    CU(cuMemPoolDestroy(mine));
    CU(cuCtxSynchronize());
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuMemPoolTrimTo(mine, 0)); /* its id is gone */
    printf("ok explicit pool: created, used, trimmed, current, destroyed\n");

    CU(cuStreamDestroy_v2(s));
    free(h);
    h_server_stop(&srv);
    printf("PASS mempool\n");
    return 0;
}
