/* legacy_abi.c - the pre-3.2 entry points (32-bit device pointers and
 * sizes, CUDA_MEMCPY2D_v1 / CUDA_MEMCPY3D_v1) through the shim.
 *
 * As in driver 580: outside a context made by cuCtxCreate's first export
 * every one of them is CUDA_ERROR_INVALID_CONTEXT; inside one (the server's
 * stand-in places memory below 4 GiB with STANDIN_LOW_VA=1, as the real
 * driver does for such a context) they copy the right bytes, the 2D/3D
 * layouts convert field by field, a module global comes back as 32 bits,
 * the _v2 forms are refused in a legacy context, a context made after a
 * legacy one (the primary one) is not legacy,
 * and a 64-bit address that does not fit (pinned client memory mirrored at
 * its own high address) is CUDA_ERROR_OUT_OF_MEMORY, never truncated. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void refused_outside_legacy_context(void)
{
    char buf[16] = {0};
    CUDA_MEMCPY2D_v1 c2 = {0};
    CUDA_MEMCPY3D_v1 c3 = {0};
    CUdeviceptr_v1 d32;
    unsigned int s32;
    void *hp;
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD(0x1000, buf, 16));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoH(buf, 0x1000, 16));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoD(0x1000, 0x2000, 16));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoDAsync(0x1000, buf, 16, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoHAsync(buf, 0x1000, 16, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoDAsync(0x1000, 0x2000, 16, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy2D(&c2));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy2DUnaligned(&c2));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy2DAsync(&c2, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy3D(&c3));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy3DAsync(&c3, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemAllocHost(&hp, 64));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemHostGetDevicePointer(&d32, buf, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuModuleGetGlobal(&d32, &s32, h_module(), "g_counter"));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&d32, 64)); /* the session's driver says so too */
}

static void linear_copies(CUdeviceptr_v1 a, CUdeviceptr_v1 b)
{
    unsigned char src[4096], dst[4096];
    h_pattern(src, sizeof src, 7);
    CU(cuMemcpyHtoD(a, src, sizeof src));
    CU(cuMemcpyDtoD(b, a, sizeof src));
    memset(dst, 0, sizeof dst);
    CU(cuMemcpyDtoH(dst, b, sizeof dst));
    CHECK(h_diff(src, dst, sizeof src) < 0, "sync round trip differs at %ld", h_diff(src, dst, sizeof src));

    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    h_pattern(src, sizeof src, 8);
    CU(cuMemcpyHtoDAsync(a + 16, src, 1000, st));
    CU(cuMemcpyDtoDAsync(b, a + 16, 1000, st));
    memset(dst, 0, sizeof dst);
    CU(cuMemcpyDtoHAsync(dst, b, 1000, st));
    CU(cuStreamSynchronize(st));
    CHECK(h_diff(src, dst, 1000) < 0, "async round trip differs at %ld", h_diff(src, dst, 1000));
    CU(cuStreamDestroy_v2(st));

    /* a 32-bit address that is not memory: the driver's own error */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(dst, 0x1000, 16));
}

/* 2D: 5 rows of 24 bytes from a host block of pitch 40 into device memory
 * of pitch 32 at x 4, y 1; then back into a host block of pitch 24. */
static void copies_2d(CUdeviceptr_v1 dev)
{
    unsigned char host[40 * 5], back[24 * 5];
    h_pattern(host, sizeof host, 9);
    CU(cuMemsetD8_v2(dev, 0, 32 * 8));
    CUDA_MEMCPY2D_v1 up = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 40,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = 32, .dstXInBytes = 4, .dstY = 1,
        .WidthInBytes = 24, .Height = 5,
    };
    CU(cuMemcpy2D(&up));
    CUDA_MEMCPY2D_v1 down = {
        .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = dev, .srcPitch = 32, .srcXInBytes = 4, .srcY = 1,
        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 24,
        .WidthInBytes = 24, .Height = 5,
    };
    memset(back, 0, sizeof back);
    CU(cuMemcpy2DUnaligned(&down));
    for (int y = 0; y < 5; y++) CHECK(memcmp(back + 24 * y, host + 40 * y, 24) == 0, "2D row %d", y);
    memset(back, 0, sizeof back);
    CU(cuMemcpy2DAsync(&down, NULL));
    CU(cuCtxSynchronize());
    for (int y = 0; y < 5; y++) CHECK(memcmp(back + 24 * y, host + 40 * y, 24) == 0, "2D async row %d", y);
    /* the byte before the block on row 1 stayed zero: x went through */
    unsigned char edge[8];
    CU(cuMemcpyDtoH(edge, dev + 32, 8));
    CHECK(edge[3] == 0 && edge[4] == host[0], "2D x offset: %#x %#x", edge[3], edge[4]);
}

/* 3D: 2 slices of 3 rows of 8 bytes, host pitch 8 height 3 into device
 * pitch 16 height 4 (z 1), and back. */
static void copies_3d(CUdeviceptr_v1 dev)
{
    unsigned char host[8 * 3 * 2], back[8 * 3 * 2];
    h_pattern(host, sizeof host, 10);
    CUDA_MEMCPY3D_v1 up = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 8, .srcHeight = 3,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = 16, .dstHeight = 4, .dstZ = 1,
        .WidthInBytes = 8, .Height = 3, .Depth = 2,
    };
    CU(cuMemcpy3D(&up));
    CUDA_MEMCPY3D_v1 down = {
        .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = dev, .srcPitch = 16, .srcHeight = 4, .srcZ = 1,
        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 8, .dstHeight = 3,
        .WidthInBytes = 8, .Height = 3, .Depth = 2,
    };
    memset(back, 0, sizeof back);
    CU(cuMemcpy3DAsync(&down, NULL));
    CU(cuCtxSynchronize());
    CHECK(h_diff(host, back, sizeof host) < 0, "3D round trip differs at %ld", h_diff(host, back, sizeof host));
    /* slice 1, row 0 starts at 16 * 4 */
    unsigned char first[8];
    CU(cuMemcpyDtoH(first, dev + 64, 8));
    CHECK(memcmp(first, host, 8) == 0, "3D z offset");
}

static void globals_and_host_memory(void)
{
    CUmodule m = h_load_module(); /* in the legacy context */
    CUdeviceptr_v1 g;
    unsigned int size;
    CU(cuModuleGetGlobal(&g, &size, m, "g_counter"));
    CHECK(size == 4, "g_counter size %u", size);
    uint32_t v = 0;
    CU(cuMemcpyDtoH(&v, g, 4));
    CHECK(v == 42, "g_counter %u", v);
    CU(cuModuleGetGlobal(NULL, &size, m, "g_pi"));
    CHECK(size == 8, "g_pi size %u", size);
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&g, &size, m, "no_such_global"));

    void *hp = NULL;
    CU(cuMemAllocHost(&hp, 4096));
    memset(hp, 0x5a, 4096); /* it is ordinary client memory */
    CUdeviceptr_v1 d32 = 0x12345678;
    /* the session maps it for the GPU; where the 32-bit form cannot say
     * the address, the answer is an error and nothing is written */
    CUresult r = cuMemHostGetDevicePointer(&d32, hp, 0);
    CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "cuMemHostGetDevicePointer: %s", h_cu_name(r));
    if (r != CUDA_SUCCESS) CHECK(d32 == 0x12345678, "a refused output was written: %#x", d32);
    CU(cuMemFreeHost(hp));
}

static void client(void)
{
    /* the legacy context first, before the primary one exists: the primary
     * context made after it must not inherit anything of it */
    CU(cuInit(0));
    CUcontext legacy;
    CU(cuCtxCreate(&legacy, 0, 0)); /* the pre-3.2 export: a legacy context, current */
    CUdeviceptr_v1 a, b;
    CU(cuMemAlloc(&a, 8192));
    CU(cuMemAlloc(&b, 8192));
    CHECK(a && b, "32-bit allocations %#x %#x", a, b);
    linear_copies(a, b);
    copies_2d(a);
    copies_3d(b);
    globals_and_host_memory();
    /* their _v2 forms are the ones refused here, as by the driver */
    char buf[16];
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD_v2(a, buf, sizeof buf));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoH_v2(buf, a, sizeof buf));
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcPitch = 16,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = a, .dstPitch = 16,
                        .WidthInBytes = 16, .Height = 1};
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpy2D_v2(&c2));
    CUdeviceptr g64;
    size_t gsize;
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuModuleGetGlobal_v2(&g64, &gsize, h_load_module(), "g_counter"));
    CU(cuMemFree(a));
    CU(cuMemFree(b));
    CU(cuCtxDestroy_v2(legacy));

    h_cuda_setup();
    refused_outside_legacy_context();
    CUcontext regular;
    CU(cuCtxCreate_v2(&regular, 0, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD(a, &a, 4));
    CU(cuCtxDestroy_v2(regular));

}

int main(void)
{
    /* the stand-in's memory below 4 GiB (64 MiB of it), as a legacy context's */
    setenv("STANDIN_LOW_VA", "1", 1);
    setenv("STANDIN_MEM_MB", "64", 1);
    h_run_client_test("legacy_abi", 30, NULL, client);
    return 0;
}
