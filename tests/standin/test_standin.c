/*
 * Direct test of the CPU stand-in driver (tests/standin/).
 *
 * Built only with -DSTANDIN_TEST_MAIN (the library's *.c glob compiles this
 * file to nothing). Links against libcuda-standin.so; see build.sh.
 *   build-standin/test_standin [path/to/kernels.ptx]
 * Prints "N passed, N failed" and exits nonzero on failure.
 *
 * With -DREAL_DRIVER it links against the real libcuda instead (-lcuda) and
 * skips what only the stand-in promises (its device name, memory size,
 * launch log, exact accounting): that is how the expectations here were
 * checked against driver 580 (on an H200).
 */
#ifdef STANDIN_TEST_MAIN

#include <cuda.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef REAL_DRIVER
#include "standin_api.h"
#define STANDIN 1
#else
#define STANDIN 0
#endif

static int g_pass, g_fail;
static int g_trace; /* STANDIN_TEST_TRACE=1: print each check's line first */
#define TRACE()                                          \
    do {                                                 \
        if (g_trace)                                     \
            fprintf(stderr, "@%d\n", __LINE__);          \
    } while (0)
static const char *g_ptx_path;
static char *g_ptx;

static const char *ename(CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
        return "?";
    return s;
}

#define CHECK(cond)                                                              \
    do {                                                                         \
        TRACE();                                                                 \
        if (cond)                                                                \
            g_pass++;                                                            \
        else {                                                                   \
            g_fail++;                                                            \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);      \
        }                                                                        \
    } while (0)

#define CK(call, want)                                                              \
    do {                                                                            \
        TRACE();                                                                    \
        CUresult r_ = (call);                                                       \
        CUresult w_ = (want);                                                       \
        if (r_ == w_)                                                               \
            g_pass++;                                                               \
        else {                                                                      \
            g_fail++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s = %d %s, want %d %s\n", __FILE__,       \
                    __LINE__, #call, (int)r_, ename(r_), (int)w_, ename(w_));       \
        }                                                                           \
    } while (0)

#define OK(call) CK(call, CUDA_SUCCESS)
/* checks only the stand-in promises */
#define SI_CHECK(cond)      \
    do {                    \
        if (STANDIN)        \
            CHECK(cond);    \
    } while (0)
/* (not even called on the real driver: these pass bad handles or ranges) */
#define SI_CK(call, want)     \
    do {                      \
        if (STANDIN)          \
            CK(call, want);   \
    } while (0)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static CUdevice g_dev;
static CUcontext g_primary;
static CUmodule g_mod;

static CUfunction fn(const char *name)
{
    CUfunction f = NULL;
    CUresult r = cuModuleGetFunction(&f, g_mod, name);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "FAIL: no function %s (%s)\n", name, ename(r));
        g_fail++;
    }
    return f;
}

static CUresult launch1(CUfunction f, CUstream s, void **params)
{
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, NULL);
}

/* ------------------------------------------------------------------ */

static void test_before_init(void)
{
    int n = -1;
    CK(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    CUdevice d;
    CK(cuDeviceGet(&d, 0), CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    int v = 0;
    OK(cuDriverGetVersion(&v));
    CHECK(v >= 13000);
    SI_CHECK(v == 13000);
    CK(cuDriverGetVersion(NULL), CUDA_ERROR_INVALID_VALUE);
    const char *s = NULL;
    OK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    CHECK(s && strcmp(s, "invalid argument") == 0);
    CK(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    OK(cuInit(0));
    OK(cuInit(0));
}

static void test_device(void)
{
    int n = 0;
    OK(cuDeviceGetCount(&n));
    CHECK(n >= 1);
    SI_CHECK(n == 1);
    CK(cuDeviceGetCount(NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGet(&g_dev, 0));
    CUdevice d;
    CK(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
    char name[256];
    OK(cuDeviceGetName(name, sizeof(name), g_dev));
    SI_CHECK(strcmp(name, "SCUDA CPU stand-in") == 0);
    CK(cuDeviceGetName(NULL, 10, g_dev), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetName(name, sizeof(name), 99), CUDA_ERROR_INVALID_DEVICE);
    CUuuid u1, u2;
    OK(cuDeviceGetUuid_v2(&u1, g_dev));
    OK(cuDeviceGetUuid_v2(&u2, g_dev));
    CHECK(memcmp(&u1, &u2, sizeof(u1)) == 0);
    /* STANDIN_UUID_TAG (the standin/uuid_tag test sets it) is byte 14, so
     * two stand-in servers report different UUIDs; unset, it is 0. */
    SI_CHECK(memcmp(u1.bytes, "SCUDA-STANDIN", 13) == 0);
    SI_CHECK((unsigned char)u1.bytes[14] == (getenv("STANDIN_UUID_TAG") ? atoi(getenv("STANDIN_UUID_TAG")) : 0));
    SI_CHECK((unsigned char)u1.bytes[15] == 0);
    CK(cuDeviceGetUuid_v2(NULL, g_dev), CUDA_ERROR_INVALID_VALUE);
    size_t total = 0;
    OK(cuDeviceTotalMem(&total, g_dev));
    SI_CHECK(total == (size_t)1024 << 20);
    CHECK(total > 0);
    int ok = 1;
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
        int v = -12345;
        CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, g_dev);
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "  attribute %d: %s\n", a, ename(r));
            ok = 0;
        }
    }
    CHECK(ok);
    int v = 0;
    CK(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, g_dev), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, g_dev), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, g_dev), CUDA_ERROR_INVALID_VALUE);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, g_dev));
    CHECK(v == 32);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, g_dev));
    CHECK(v == 1024);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g_dev));
    CHECK(v == 9);
    OK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, g_dev));
    CHECK(v == 1);
    int maj = 0, min = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    OK(cuDeviceComputeCapability(&maj, &min, g_dev));
#pragma GCC diagnostic pop
    CHECK(maj == 9 && min == 0);
    char bus[64];
    OK(cuDeviceGetPCIBusId(bus, sizeof(bus), g_dev));
    unsigned dom, b, dv, f;
    CHECK(sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dv, &f) == 4);
    CUdevice back = -1;
    OK(cuDeviceGetByPCIBusId(&back, bus));
    CHECK(back == g_dev);
}

/* ------------------------------------------------------------------ */

static void *thread_no_ctx(void *arg)
{
    CUcontext c = (CUcontext)1;
    int *res = arg;
    res[0] = cuCtxGetCurrent(&c) == CUDA_SUCCESS && c == NULL;
    CUdeviceptr p;
    res[1] = cuMemAlloc(&p, 16) == CUDA_ERROR_INVALID_CONTEXT;
    res[2] = cuCtxSetCurrent(g_primary) == CUDA_SUCCESS;
    res[3] = cuMemAlloc(&p, 16) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS;
    return NULL;
}

static void test_context(void)
{
    CUcontext cur = (CUcontext)1;
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == NULL);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    CUdevice d;
    CK(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);

    unsigned flags = 99;
    int active = -1;
    OK(cuDevicePrimaryCtxGetState(g_dev, &flags, &active));
    CHECK(active == 0);
    OK(cuDevicePrimaryCtxSetFlags(g_dev, CU_CTX_SCHED_BLOCKING_SYNC));
    CK(cuDevicePrimaryCtxSetFlags(g_dev, 0x7), CUDA_ERROR_INVALID_VALUE);
    OK(cuDevicePrimaryCtxRetain(&g_primary, g_dev));
    CHECK(g_primary != NULL);
    OK(cuDevicePrimaryCtxGetState(g_dev, &flags, &active));
    CHECK(active == 1);
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    OK(cuDevicePrimaryCtxSetFlags(g_dev, 0));
    CUcontext again = NULL;
    OK(cuDevicePrimaryCtxRetain(&again, g_dev));
    CHECK(again == g_primary);
    OK(cuDevicePrimaryCtxRelease(g_dev));
    OK(cuCtxSetCurrent(g_primary));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == g_primary);
    OK(cuCtxGetDevice(&d));
    CHECK(d == g_dev);
    CUdevice d2 = -1;
    OK(cuCtxGetDevice_v2(&d2, g_primary));
    CHECK(d2 == g_dev);
    unsigned ver = 0;
    OK(cuCtxGetApiVersion(g_primary, &ver));
    CHECK(ver >= 3020);
    unsigned long long id1 = 0, id2 = 0;
    OK(cuCtxGetId(g_primary, &id1));
    OK(cuCtxGetId(NULL, &id2));
    CHECK(id1 == id2 && id1 != 0);
    int least = 99, greatest = 99;
    OK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CHECK(least == 0 && greatest < 0);
    size_t lim = 0;
    OK(cuCtxGetLimit(&lim, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK(lim == 8650752);
    OK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    CHECK(lim == 1024);
    OK(cuCtxGetLimit(&lim, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(lim == 8388608);
    CK(cuCtxGetLimit(&lim, CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH), CUDA_ERROR_UNSUPPORTED_LIMIT);
    OK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 2u << 20));
    OK(cuCtxGetLimit(&lim, CU_LIMIT_PRINTF_FIFO_SIZE));
    CHECK(lim == 2u << 20);
    CK(cuCtxGetLimit(&lim, (CUlimit)0x55), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxGetFlags(&flags));
    CHECK(flags & CU_CTX_MAP_HOST);
    OK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
    CUfunc_cache cc;
    OK(cuCtxGetCacheConfig(&cc));
    CHECK(cc == CU_FUNC_CACHE_PREFER_SHARED);
    OK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_NONE));

    /* created contexts and the stack */
    CUcontext c2 = NULL, c3 = NULL, popped = NULL;
    OK(cuCtxCreate(&c2, NULL, 0, g_dev));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == c2 && c2 != g_primary);
    CK(cuCtxCreate(NULL, NULL, 0, g_dev), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxCreate(&c3, NULL, 0, 77), CUDA_ERROR_INVALID_DEVICE);
    CK(cuCtxCreate(&c3, NULL, 0x7, g_dev), CUDA_ERROR_INVALID_VALUE);
    CUctxCreateParams cp;
    memset(&cp, 0, sizeof(cp));
    OK(cuCtxCreate(&c3, &cp, CU_CTX_SCHED_YIELD, g_dev));
    OK(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD);
    OK(cuCtxPopCurrent(&popped));
    CHECK(popped == c3);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == c2);
    OK(cuCtxPushCurrent(c3));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == c3);
    OK(cuCtxDestroy(c3));
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == c2);
    OK(cuCtxSynchronize_v2(c2));
    OK(cuCtxDestroy(c2));
    SI_CK(cuCtxDestroy(c2), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == g_primary);
    CK(cuCtxPushCurrent(NULL), CUDA_ERROR_INVALID_VALUE);

    /* the current context is per thread */
    int res[4] = {0, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, thread_no_ctx, res);
    pthread_join(t, NULL);
    CHECK(res[0] && res[1] && res[2] && res[3]);
    OK(cuCtxGetCurrent(&cur));
    CHECK(cur == g_primary);
}

/* ------------------------------------------------------------------ */

static void test_memory(void)
{
    size_t free0 = 0, total = 0, free1 = 0;
    OK(cuMemGetInfo(&free0, &total));
    CHECK(free0 <= total && total > 0);
    CUdeviceptr p = 0, q = 0;
    OK(cuMemAlloc(&p, 1 << 20));
    CHECK(p != 0 && p % 256 == 0);
    OK(cuMemGetInfo(&free1, &total));
    CHECK(free1 <= free0 - (1 << 20));
    SI_CHECK(free1 == free0 - (1 << 20));
    CK(cuMemAlloc(&q, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAlloc(&q, (size_t)1 << 50), CUDA_ERROR_OUT_OF_MEMORY);
    if (STANDIN) {
        /* beyond the reported total */
        CK(cuMemAlloc(&q, total - (1 << 20) + 1), CUDA_ERROR_OUT_OF_MEMORY);
        OK(cuMemAlloc(&q, free1));
        size_t f2 = 1;
        OK(cuMemGetInfo(&f2, &total));
        CHECK(f2 == 0);
        OK(cuMemFree(q));
    }
    CUdeviceptr base = 0;
    size_t size = 0;
    OK(cuMemGetAddressRange(&base, &size, p + 100));
    CHECK(base == p && size >= (1 << 20));
    int host_var = 0;
    CK(cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)&host_var), CUDA_ERROR_NOT_FOUND);

    unsigned mt = 0;
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 8));
    CHECK(mt == CU_MEMORYTYPE_DEVICE);
    CUcontext pc = NULL;
    OK(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, p));
    CHECK(pc == g_primary);
    int ord = -1;
    OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    CHECK(ord == g_dev);
    CUdeviceptr rs = 0;
    OK(cuPointerGetAttribute(&rs, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 5));
    CHECK(rs == p);
    size_t rsz = 0;
    OK(cuPointerGetAttribute(&rsz, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 5));
    CHECK(rsz >= (1 << 20));
    unsigned long long bid = 0;
    OK(cuPointerGetAttribute(&bid, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
    CHECK(bid != 0);
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                             (CUdeviceptr)(uintptr_t)&host_var),
       CUDA_ERROR_INVALID_VALUE);
    {
        CUpointer_attribute attrs[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        CU_POINTER_ATTRIBUTE_CONTEXT,
                                        CU_POINTER_ATTRIBUTE_RANGE_SIZE};
        unsigned t2 = 99;
        CUcontext c2 = (CUcontext)1;
        size_t sz2 = 99;
        void *data[3] = {&t2, &c2, &sz2};
        OK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)&host_var));
        if (!(t2 == 0 && c2 == NULL && sz2 == 0))
            fprintf(stderr, "  host pointer attributes: type %u ctx %p size %zu\n", t2, (void *)c2,
                    sz2);
        CHECK(t2 == 0 && c2 == NULL);
        SI_CHECK(sz2 == 0);
        OK(cuPointerGetAttributes(3, attrs, data, p));
        CHECK(t2 == CU_MEMORYTYPE_DEVICE && c2 == g_primary && sz2 >= (1 << 20));
    }

    /* pinned host memory */
    void *h = NULL;
    OK(cuMemAllocHost(&h, 4096));
    CHECK(h != NULL);
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    CUdeviceptr hd = 0;
    OK(cuMemHostGetDevicePointer(&hd, h, 0));
    CHECK(hd == (CUdeviceptr)(uintptr_t)h);
    void *h2 = NULL;
    OK(cuMemHostAlloc(&h2, 100, CU_MEMHOSTALLOC_DEVICEMAP));
    unsigned hf = 0;
    OK(cuMemHostGetFlags(&hf, h2));
    CHECK(hf & CU_MEMHOSTALLOC_DEVICEMAP);
    CK(cuMemHostAlloc(&h2, 100, 0x100), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeHost(h2));
    OK(cuMemFreeHost(h));
    CK(cuMemFreeHost(&host_var), CUDA_ERROR_INVALID_VALUE);

    /* registered host memory */
    static char reg[8192];
    OK(cuMemHostRegister(reg, sizeof(reg), 0));
    CK(cuMemHostRegister(reg, sizeof(reg), 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)reg));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    OK(cuMemHostUnregister(reg));
    CK(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);

    /* frees */
    CK(cuMemFree(p + 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(p));
    CK(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(0));
    size_t free2 = 0;
    OK(cuMemGetInfo(&free2, &total));
    SI_CHECK(free2 == free0);

    /* pitched allocation */
    size_t pitch = 0;
    OK(cuMemAllocPitch(&p, &pitch, 100, 10, 4));
    CHECK(pitch >= 100 && pitch % 32 == 0);
    CK(cuMemAllocPitch(&q, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFree(p));
}

/* ------------------------------------------------------------------ */

static void test_copies(void)
{
    enum { N = 4096 };
    unsigned char *a = malloc(N), *b = malloc(N);
    for (int i = 0; i < N; i++)
        a[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr d1, d2;
    OK(cuMemAlloc(&d1, N));
    OK(cuMemAlloc(&d2, N));
    OK(cuMemcpyHtoD(d1, a, N));
    OK(cuMemcpyDtoD(d2, d1, N));
    memset(b, 0, N);
    OK(cuMemcpyDtoH(b, d2, N));
    CHECK(memcmp(a, b, N) == 0);
    /* zero bytes */
    OK(cuMemcpyHtoD(d1, a, 0));
    /* bounds: the device side must lie within one allocation */
    CK(cuMemcpyHtoD(d1 + N - 4, a, 8), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyDtoH(b, d1 + 1, N), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyDtoD(d2, d1, N + 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyHtoD(0, a, 8), CUDA_ERROR_INVALID_VALUE);
    if (STANDIN) {
        /* a freed range is not device memory any more */
        CUdeviceptr d3;
        OK(cuMemAlloc(&d3, 64));
        OK(cuMemFree(d3));
        CK(cuMemcpyHtoD(d3, a, 8), CUDA_ERROR_INVALID_VALUE);
        CK(cuMemcpy(d3, (CUdeviceptr)(uintptr_t)a, 8), CUDA_ERROR_INVALID_VALUE);
    }
    /* unified copies */
    memset(b, 0, N);
    OK(cuMemcpy(d2, (CUdeviceptr)(uintptr_t)a, N));
    OK(cuMemcpy((CUdeviceptr)(uintptr_t)b, d2, N));
    CHECK(memcmp(a, b, N) == 0);
    /* peer (same context) */
    OK(cuMemsetD8(d2, 0, N));
    OK(cuMemcpyPeer(d2, g_primary, d1, g_primary, N));
    memset(b, 0, N);
    OK(cuMemcpyDtoH(b, d2, N));
    CHECK(memcmp(a, b, N) == 0);

    /* memsets */
    OK(cuMemsetD8(d1, 0xab, N));
    OK(cuMemcpyDtoH(b, d1, N));
    int ok = 1;
    for (int i = 0; i < N; i++)
        ok &= b[i] == 0xab;
    CHECK(ok);
    OK(cuMemsetD16(d1 + 2, 0x1234, 10));
    OK(cuMemsetD32(d1 + 64, 0xdeadbeef, 4));
    OK(cuMemcpyDtoH(b, d1, 128));
    uint16_t w;
    uint32_t dw;
    memcpy(&w, b + 2, 2);
    CHECK(w == 0x1234);
    memcpy(&w, b + 20, 2);
    CHECK(w == 0x1234);
    CHECK(b[22] == 0xab && b[1] == 0xab);
    memcpy(&dw, b + 76, 4);
    CHECK(dw == 0xdeadbeef);
    CHECK(b[80] == 0xab);
    CK(cuMemsetD16(d1 + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD32(d1 + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD8(d1 + N - 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD32(d1, 0, N / 4 + 1), CUDA_ERROR_INVALID_VALUE);

    /* 2D: a 4x3 block from (x=2,y=1) of an 8-wide host image into (x=1,y=2)
     * of a pitched device image */
    size_t pitch = 0;
    CUdeviceptr img;
    OK(cuMemAllocPitch(&img, &pitch, 16, 8, 4));
    OK(cuMemsetD2D8(img, pitch, 0, 16, 8));
    unsigned char host[8 * 5];
    for (int i = 0; i < 40; i++)
        host[i] = (unsigned char)(i + 1);
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof(c2));
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = host;
    c2.srcPitch = 8;
    c2.srcXInBytes = 2;
    c2.srcY = 1;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = img;
    c2.dstPitch = pitch;
    c2.dstXInBytes = 1;
    c2.dstY = 2;
    c2.WidthInBytes = 4;
    c2.Height = 3;
    OK(cuMemcpy2D(&c2));
    unsigned char *back = calloc(pitch * 8, 1);
    OK(cuMemcpyDtoH(back, img, pitch * 8));
    ok = 1;
    for (size_t y = 0; y < 8; y++)
        for (size_t x = 0; x < 16; x++) {
            unsigned char want = 0;
            if (y >= 2 && y < 5 && x >= 1 && x < 5)
                want = host[(y - 2 + 1) * 8 + (x - 1 + 2)];
            ok &= back[y * pitch + x] == want;
        }
    CHECK(ok);
    /* the same block back to the host, unaligned form */
    unsigned char host2[8 * 5];
    memset(host2, 0, sizeof(host2));
    CUDA_MEMCPY2D r2;
    memset(&r2, 0, sizeof(r2));
    r2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    r2.srcDevice = img;
    r2.srcPitch = pitch;
    r2.srcXInBytes = 1;
    r2.srcY = 2;
    r2.dstMemoryType = CU_MEMORYTYPE_HOST;
    r2.dstHost = host2;
    r2.dstPitch = 8;
    r2.dstXInBytes = 2;
    r2.dstY = 1;
    r2.WidthInBytes = 4;
    r2.Height = 3;
    OK(cuMemcpy2DUnaligned(&r2));
    ok = 1;
    for (int y = 0; y < 5; y++)
        for (int x = 0; x < 8; x++) {
            bool in = y >= 1 && y < 4 && x >= 2 && x < 6;
            ok &= host2[y * 8 + x] == (in ? host[y * 8 + x] : 0);
        }
    CHECK(ok);
    /* out of bounds: a row past the pitched allocation */
    r2.srcY = 6;
    CK(cuMemcpy2D(&r2), CUDA_ERROR_INVALID_VALUE);
    r2.srcY = 2;
    r2.srcPitch = 2; /* pitch < width */
    CK(cuMemcpy2D(&r2), CUDA_ERROR_INVALID_VALUE);
    /* memset 2D: a 3x2 block of 32-bit values */
    OK(cuMemsetD2D32(img + pitch, pitch, 0x01020304, 3, 2));
    OK(cuMemcpyDtoH(back, img, pitch * 8));
    memcpy(&dw, back + pitch + 8, 4);
    CHECK(dw == 0x01020304);
    memcpy(&dw, back + 2 * pitch, 4);
    CHECK(dw == 0x01020304);
    CHECK(back[pitch + 12] == 0 || pitch < 13);
    OK(cuMemsetD2D16(img, pitch, 0x7777, 2, 1));
    OK(cuMemcpyDtoH(back, img, 4));
    memcpy(&w, back + 2, 2);
    CHECK(w == 0x7777);

    /* 3D: a 2x2x2 box from a 4x3x3 host volume at (1,1,1) into a 3x3x2
     * device volume at (0,1,0) */
    unsigned char vol[4 * 3 * 3];
    for (int i = 0; i < 36; i++)
        vol[i] = (unsigned char)(100 + i);
    CUdeviceptr dv;
    OK(cuMemAlloc(&dv, 3 * 3 * 2));
    OK(cuMemsetD8(dv, 0, 18));
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof(c3));
    c3.srcMemoryType = CU_MEMORYTYPE_HOST;
    c3.srcHost = vol;
    c3.srcPitch = 4;
    c3.srcHeight = 3;
    c3.srcXInBytes = 1;
    c3.srcY = 1;
    c3.srcZ = 1;
    c3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.dstDevice = dv;
    c3.dstPitch = 3;
    c3.dstHeight = 3;
    c3.dstY = 1;
    c3.WidthInBytes = 2;
    c3.Height = 2;
    c3.Depth = 2;
    OK(cuMemcpy3D(&c3));
    unsigned char vb[18];
    OK(cuMemcpyDtoH(vb, dv, 18));
    ok = 1;
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            for (int x = 0; x < 3; x++) {
                unsigned char want = 0;
                if (y >= 1 && x < 2)
                    want = vol[((z + 1) * 3 + (y - 1 + 1)) * 4 + (x + 1)];
                ok &= vb[(z * 3 + y) * 3 + x] == want;
            }
    CHECK(ok);
    c3.Depth = 3; /* one plane too many for the device volume (the real driver
                   * does not check 3D copies against the allocation) */
    SI_CK(cuMemcpy3D(&c3), CUDA_ERROR_INVALID_VALUE);
    c3.Depth = 2;
    c3.reserved0 = (void *)1; /* "must be NULL"; the real driver misbehaves */
    SI_CK(cuMemcpy3D(&c3), CUDA_ERROR_INVALID_VALUE);
    c3.reserved0 = NULL;
    /* peer form */
    CUDA_MEMCPY3D_PEER p3;
    memset(&p3, 0, sizeof(p3));
    p3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p3.srcDevice = dv;
    p3.srcContext = g_primary;
    p3.srcPitch = 3;
    p3.srcHeight = 3;
    p3.dstMemoryType = CU_MEMORYTYPE_HOST;
    p3.dstHost = vb;
    p3.dstPitch = 3;
    p3.dstHeight = 3;
    p3.WidthInBytes = 3;
    p3.Height = 3;
    p3.Depth = 2;
    memset(vb, 0xee, sizeof(vb));
    OK(cuMemcpy3DPeer(&p3));
    CHECK(vb[3] == vol[(1 * 3 + 1) * 4 + 1] && vb[0] == 0);

    /* async forms on a stream, into pinned memory */
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned char *pin = NULL;
    OK(cuMemAllocHost((void **)&pin, N));
    OK(cuMemsetD32Async(d1, 0x11223344, N / 4, s));
    OK(cuMemcpyDtoHAsync(pin, d1, N, s));
    OK(cuStreamSynchronize(s));
    memcpy(&dw, pin + 100, 4);
    CHECK(dw == 0x11223344);
    OK(cuMemcpyHtoDAsync(d1, a, N, s));
    OK(cuMemcpyDtoDAsync(d2, d1, N, s));
    OK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)pin, d2, N, s));
    OK(cuStreamSynchronize(s));
    CHECK(memcmp(pin, a, N) == 0);
    OK(cuMemsetD8Async(d1, 1, N, s));
    OK(cuMemsetD16Async(d1, 0x0202, 8, s));
    OK(cuMemsetD2D8Async(d1 + 64, 16, 9, 4, 2, s));
    OK(cuMemsetD2D16Async(d1 + 128, 16, 0x0808, 2, 2, s));
    OK(cuMemsetD2D32Async(d1 + 256, 16, 0x0a0a0a0a, 2, 2, s));
    c2.srcHost = host;
    OK(cuMemcpy2DAsync(&c2, s));
    OK(cuMemcpy3DAsync(&c3, s));
    OK(cuMemcpyPeerAsync(d2, g_primary, d1, g_primary, N, s));
    OK(cuMemcpy3DPeerAsync(&p3, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(b, d2, N));
    CHECK(b[0] == 2 && b[15] == 2 && b[16] == 1 && b[64] == 9 && b[67] == 9 && b[68] == 1 &&
          b[80] == 9 && b[84] == 1 && b[128] == 8 && b[256] == 10 && b[264] == 1);
    OK(cuMemFreeHost(pin));
    OK(cuStreamDestroy(s));
    OK(cuMemFree(dv));
    OK(cuMemFree(img));
    OK(cuMemFree(d1));
    OK(cuMemFree(d2));
    free(back);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------ */

static void load_module(void)
{
    FILE *f = fopen(g_ptx_path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL: cannot open %s\n", g_ptx_path);
        g_fail++;
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    g_ptx = calloc((size_t)n + 1, 1);
    if (fread(g_ptx, 1, (size_t)n, f) != (size_t)n)
        g_fail++;
    fclose(f);
    OK(cuModuleLoadData(&g_mod, g_ptx));
}

typedef struct {
    const char *name;
    size_t n;
    size_t off[6], size[6];
} sig;

static const sig g_sigs[] = {
    {"fill_u32", 3, {0, 8, 16}, {8, 4, 8}},
    {"vec_add", 4, {0, 8, 16, 24}, {8, 8, 8, 4}},
    {"copy_params_struct", 2, {0, 8}, {8, 24}},
    {"copy_params_odd", 6, {0, 8, 10, 12, 16, 24}, {8, 1, 2, 4, 3, 8}},
    {"copy_params_4k", 2, {0, 8}, {8, 4096}},
    {"sleep_ms", 1, {0}, {4}},
    {"fault", 0, {0}, {0}},
    {"trap_assert", 0, {0}, {0}},
    {"say_hello", 1, {0}, {4}},
    {"noop", 0, {0}, {0}},
    {"launch_shape", 1, {0}, {8}},
    {"tex_sample", 5, {0, 8, 16, 24, 28}, {8, 8, 8, 4, 4}},
    {"texref_sample", 3, {0, 8, 16}, {8, 8, 4}},
    {"surf_write", 5, {0, 8, 12, 16, 20}, {8, 4, 4, 4, 4}},
    {"bump_global", 1, {0}, {4}},
};
#define N_KERNELS (sizeof(g_sigs) / sizeof(g_sigs[0]))

static void check_sig(CUfunction f, const sig *s)
{
    int ok = 1;
    for (size_t i = 0; i < s->n; i++) {
        size_t off = 99, size = 99;
        CUresult r = cuFuncGetParamInfo(f, i, &off, &size);
        if (r != CUDA_SUCCESS || off != s->off[i] || size != s->size[i]) {
            fprintf(stderr, "  %s param %zu: %s off %zu size %zu\n", s->name, i, ename(r), off,
                    size);
            ok = 0;
        }
    }
    size_t off, size;
    CHECK(ok);
    CK(cuFuncGetParamInfo(f, s->n, &off, &size), CUDA_ERROR_INVALID_VALUE);
}

static void build_fatbin(unsigned char **out, size_t *len, const char *ptx, bool compressed_flag)
{
    size_t plen = strlen(ptx) + 1;
    size_t padded = (plen + 7) & ~(size_t)7;
    size_t total = 16 + 80 + padded;
    unsigned char *fb = calloc(total, 1);
    uint32_t magic = 0xBA55ED50u;
    uint16_t ver = 1, hs = 16;
    uint64_t fsize = 80 + padded;
    memcpy(fb, &magic, 4);
    memcpy(fb + 4, &ver, 2);
    memcpy(fb + 6, &hs, 2);
    memcpy(fb + 8, &fsize, 8);
    unsigned char *e = fb + 16;
    uint16_t kind = 1, unk = 0x0101;
    uint32_t ehs = 80, arch = 75, ptxver = 0x00080000, x40 = 0x40;
    uint64_t pad64 = padded, flags = compressed_flag ? 0x8011 : 0x11;
    memcpy(e, &kind, 2);
    memcpy(e + 2, &unk, 2);
    memcpy(e + 4, &ehs, 4);
    memcpy(e + 8, &pad64, 8);
    memcpy(e + 20, &x40, 4);
    memcpy(e + 24, &ptxver, 4);
    memcpy(e + 28, &arch, 4);
    memcpy(e + 40, &flags, 8);
    memcpy(e + 80, ptx, plen);
    *out = fb;
    *len = total;
}

static void test_modules(void)
{
    unsigned cnt = 0;
    OK(cuModuleGetFunctionCount(&cnt, g_mod));
    CHECK(cnt == N_KERNELS);
    CUfunction fs[32];
    memset(fs, 0, sizeof(fs));
    OK(cuModuleEnumerateFunctions(fs, cnt, g_mod));
    int found = 0;
    for (unsigned i = 0; i < cnt && i < 32; i++) {
        const char *nm = NULL;
        OK(cuFuncGetName(&nm, fs[i]));
        for (size_t k = 0; k < N_KERNELS; k++)
            if (nm && strcmp(nm, g_sigs[k].name) == 0)
                found++;
    }
    CHECK(found == (int)N_KERNELS);
    for (size_t k = 0; k < N_KERNELS; k++)
        check_sig(fn(g_sigs[k].name), &g_sigs[k]);
    CUfunction f;
    CK(cuModuleGetFunction(&f, g_mod, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CK(cuModuleGetFunction(NULL, g_mod, "noop"), CUDA_ERROR_INVALID_VALUE);

    /* globals */
    CUdeviceptr gp;
    size_t gs = 0;
    OK(cuModuleGetGlobal(&gp, &gs, g_mod, "g_counter"));
    CHECK(gs == 4);
    uint32_t gv = 0;
    OK(cuMemcpyDtoH(&gv, gp, 4));
    CHECK(gv == 42);
    gv = 7;
    OK(cuMemcpyHtoD(gp, &gv, 4));
    gv = 0;
    OK(cuMemcpyDtoH(&gv, gp, 4));
    CHECK(gv == 7);
    CK(cuMemcpyHtoD(gp, &gv, 8), CUDA_ERROR_INVALID_VALUE);
    OK(cuModuleGetGlobal(&gp, &gs, g_mod, "c_table"));
    uint32_t tab[4] = {0, 0, 0, 0};
    CHECK(gs == 16);
    OK(cuMemcpyDtoH(tab, gp, 16));
    CHECK(tab[0] == 1 && tab[1] == 2 && tab[2] == 3 && tab[3] == 4);
    double pi = 0;
    OK(cuModuleGetGlobal(&gp, &gs, g_mod, "g_pi"));
    OK(cuMemcpyDtoH(&pi, gp, 8));
    CHECK(pi > 3.14159 && pi < 3.1416);
    float fl[3] = {0, 0, 0};
    OK(cuModuleGetGlobal(&gp, &gs, g_mod, "g_floats"));
    CHECK(gs == 12);
    OK(cuMemcpyDtoH(fl, gp, 12));
    CHECK(fl[0] == 1.0f && fl[1] == 2.0f && fl[2] == 3.0f);
    OK(cuModuleGetGlobal(&gp, NULL, g_mod, "g_buf"));
    OK(cuModuleGetGlobal(NULL, &gs, g_mod, "g_buf"));
    CHECK(gs == 24);
    CK(cuModuleGetGlobal(&gp, &gs, g_mod, "nope"), CUDA_ERROR_NOT_FOUND);

    /* attributes */
    int v = 0;
    f = fn("fill_u32");
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(v == 1024);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PTX_VERSION, f));
    if (v != 75)
        fprintf(stderr, "  PTX_VERSION %d\n", v);
    CHECK(v == 75); /* the virtual architecture of .target */
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f));
    CHECK(v == 90);
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    CHECK(v == 49152);
    OK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
    OK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    CHECK(v == 65536);
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 20),
       CUDA_ERROR_INVALID_VALUE);
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 3), CUDA_ERROR_INVALID_VALUE);
    CK(cuFuncGetAttribute(&v, (CUfunction_attribute)99, f), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_L1));
    CUmodule fm = NULL;
    OK(cuFuncGetModule(&fm, f));
    CHECK(fm == g_mod);

    /* other ways in */
    CUmodule m2;
    OK(cuModuleLoad(&m2, g_ptx_path));
    OK(cuModuleUnload(m2));
    if (STANDIN)
        CK(cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
    CK(cuModuleLoad(&m2, "/nonexistent/kernels.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
    char elog[1024] = "", ilog[1024] = "";
    CUjit_option opts[4] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void *vals[4] = {elog, (void *)(uintptr_t)sizeof(elog), ilog, (void *)(uintptr_t)sizeof(ilog)};
    OK(cuModuleLoadDataEx(&m2, g_ptx, 4, opts, vals));
    OK(cuModuleUnload(m2));
    const char *bad = ".version 8.0\n.target sm_75\n.address_size 64\n"
                      ".visible .entry broken(.param .u64 x\n{\n ret;\n}\n";
    vals[1] = (void *)(uintptr_t)sizeof(elog);
    vals[3] = (void *)(uintptr_t)sizeof(ilog);
    CK(cuModuleLoadDataEx(&m2, bad, 4, opts, vals), CUDA_ERROR_INVALID_PTX);
    CHECK(elog[0] != '\0');
    CK(cuModuleLoadData(&m2, ".version 99.0\n.target sm_75\n.address_size 64\n"),
       CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
    static const unsigned char elf[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    CK(cuModuleLoadData(&m2, elf), CUDA_ERROR_INVALID_IMAGE);
    static const unsigned char junk[16] = {0x01, 0x02, 0xfe, 0x00};
    CK(cuModuleLoadData(&m2, junk), CUDA_ERROR_INVALID_IMAGE);
    CK(cuModuleLoadData(NULL, g_ptx), CUDA_ERROR_INVALID_VALUE);

    /* a fatbin holding the PTX, bare and behind the __fatBinC_Wrapper_t */
    unsigned char *fb = NULL;
    size_t fblen = 0;
    build_fatbin(&fb, &fblen, g_ptx, false);
    if (cuModuleLoadData(&m2, fb) == CUDA_SUCCESS) {
        g_pass++;
        OK(cuModuleGetFunction(&f, m2, "copy_params_odd"));
        check_sig(f, &g_sigs[3]);
        OK(cuModuleUnload(m2));
    } else {
        g_fail++;
        fprintf(stderr, "FAIL: fatbin with PTX did not load\n");
    }
    struct {
        int magic, version;
        const void *data;
        void *filename;
    } wrapper = {0x466243b1, 1, fb, NULL};
    /* the driver takes the fatbin itself, not cudart's wrapper */
    CK(cuModuleLoadFatBinary(&m2, &wrapper), CUDA_ERROR_INVALID_IMAGE);
    CK(cuModuleLoadData(&m2, &wrapper), CUDA_ERROR_INVALID_IMAGE);
    OK(cuModuleLoadFatBinary(&m2, fb));
    OK(cuModuleUnload(m2));
    free(fb);
    if (STANDIN) {
        build_fatbin(&fb, &fblen, g_ptx, true); /* "compressed": unusable */
        CK(cuModuleLoadData(&m2, fb), CUDA_ERROR_INVALID_IMAGE);
        free(fb);
    }
    CUmoduleLoadingMode mode;
    OK(cuModuleGetLoadingMode(&mode));

    /* libraries */
    CUlibrary lib;
    OK(cuLibraryLoadData(&lib, g_ptx, NULL, NULL, 0, NULL, NULL, 0));
    unsigned kc = 0;
    OK(cuLibraryGetKernelCount(&kc, lib));
    CHECK(kc == N_KERNELS);
    CUkernel ks[32];
    OK(cuLibraryEnumerateKernels(ks, kc, lib));
    CUkernel k;
    OK(cuLibraryGetKernel(&k, lib, "copy_params_odd"));
    CK(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    OK(cuLibraryGetKernel(&k, lib, "copy_params_odd"));
    const char *kn = NULL;
    OK(cuKernelGetName(&kn, k));
    CHECK(kn && strcmp(kn, "copy_params_odd") == 0);
    int allok = 1;
    for (size_t i = 0; i < g_sigs[3].n; i++) {
        size_t off = 0, size = 0;
        allok &= cuKernelGetParamInfo(k, i, &off, &size) == CUDA_SUCCESS &&
                 off == g_sigs[3].off[i] && size == g_sigs[3].size[i];
    }
    CHECK(allok);
    CUfunction kf;
    OK(cuKernelGetFunction(&kf, k));
    check_sig(kf, &g_sigs[3]);
    OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, g_dev));
    CHECK(v == 1024);
    OK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 70000, k, g_dev));
    OK(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, g_dev));
    CHECK(v == 70000);
    CUmodule lm;
    OK(cuLibraryGetModule(&lm, lib));
    OK(cuModuleGetFunction(&f, lm, "fill_u32"));
    OK(cuLibraryGetGlobal(&gp, &gs, lib, "g_counter"));
    gv = 0;
    OK(cuMemcpyDtoH(&gv, gp, 4));
    CHECK(gv == 42 && gs == 4);
    CUlibrary kl;
    OK(cuKernelGetLibrary(&kl, k));
    CHECK(kl == lib);
    /* a CUkernel launches like a CUfunction */
    CUkernel kfill;
    OK(cuLibraryGetKernel(&kfill, lib, "fill_u32"));
    CUdeviceptr out;
    OK(cuMemAlloc(&out, 64));
    uint32_t val = 0x5a5a5a5a;
    uint64_t n16 = 16;
    void *params[3] = {&out, &val, &n16};
    OK(cuLaunchKernel((CUfunction)kfill, 1, 1, 1, 16, 1, 1, 0, NULL, params, NULL));
    uint32_t res[16];
    OK(cuMemcpyDtoH(res, out, 64));
    CHECK(res[0] == 0x5a5a5a5a && res[15] == 0x5a5a5a5a);
    OK(cuMemFree(out));
    char *tmp = strdup("/tmp/standin_lib_XXXXXX");
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        if (write(fd, g_ptx, strlen(g_ptx)) < 0)
            g_fail++;
        close(fd);
        CUlibrary lib2;
        OK(cuLibraryLoadFromFile(&lib2, tmp, NULL, NULL, 0, NULL, NULL, 0));
        OK(cuLibraryUnload(lib2));
        unlink(tmp);
    }
    free(tmp);
    OK(cuLibraryUnload(lib));
    SI_CK(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
}

/* ------------------------------------------------------------------ */

static void test_launch(void)
{
    CUdeviceptr out, a, b, c;
    OK(cuMemAlloc(&out, 4096 + 64));
    OK(cuMemsetD8(out, 0, 4096 + 64));
#if STANDIN
    unsigned long long n0 = standin_launch_count();
#endif

    /* fill_u32 */
    uint32_t val = 0xcafef00d;
    uint64_t n = 1000;
    void *fp[3] = {&out, &val, &n};
    OK(cuLaunchKernel(fn("fill_u32"), 4, 1, 1, 256, 1, 1, 0, NULL, fp, NULL));
    uint32_t *host = calloc(1024 + 16, 4);
    OK(cuMemcpyDtoH(host, out, 4096 + 64));
    int ok = 1;
    for (int i = 0; i < 1000; i++)
        ok &= host[i] == 0xcafef00d;
    CHECK(ok && host[1000] == 0);
    /* through `extra` */
    unsigned char pbuf[24];
    memset(pbuf, 0, sizeof(pbuf));
    uint32_t val2 = 0x01010101;
    uint64_t n2 = 10;
    memcpy(pbuf, &out, 8);
    memcpy(pbuf + 8, &val2, 4);
    memcpy(pbuf + 16, &n2, 8);
    size_t psz = sizeof(pbuf);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, pbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &psz,
                     CU_LAUNCH_PARAM_END};
    OK(cuLaunchKernel(fn("fill_u32"), 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    OK(cuMemcpyDtoH(host, out, 64));
    CHECK(host[0] == 0x01010101 && host[9] == 0x01010101 && host[10] == 0xcafef00d);

    /* vec_add */
    enum { VN = 300 };
    float fa[VN], fb[VN], fc[VN];
    for (int i = 0; i < VN; i++) {
        fa[i] = (float)i;
        fb[i] = (float)(2 * i) + 0.5f;
    }
    OK(cuMemAlloc(&a, sizeof(fa)));
    OK(cuMemAlloc(&b, sizeof(fb)));
    OK(cuMemAlloc(&c, sizeof(fc)));
    OK(cuMemcpyHtoD(a, fa, sizeof(fa)));
    OK(cuMemcpyHtoD(b, fb, sizeof(fb)));
    int vn = VN;
    void *vp[4] = {&a, &b, &c, &vn};
    OK(cuLaunchKernel(fn("vec_add"), 2, 1, 1, 256, 1, 1, 0, NULL, vp, NULL));
    OK(cuMemcpyDtoH(fc, c, sizeof(fc)));
    ok = 1;
    for (int i = 0; i < VN; i++)
        ok &= fc[i] == fa[i] + fb[i];
    CHECK(ok);

    /* copy_params_* */
    unsigned char s24[24], got[4104], want[4104];
    for (int i = 0; i < 24; i++)
        s24[i] = (unsigned char)(i * 3 + 1);
    void *sp[2] = {&out, s24};
    OK(cuMemsetD8(out, 0, 64));
    OK(launch1(fn("copy_params_struct"), NULL, sp));
    OK(cuMemcpyDtoH(got, out, 32));
    memset(want, 0, sizeof(want));
    memcpy(want, &out, 8);
    memcpy(want + 8, s24, 24);
    CHECK(memcmp(got, want, 32) == 0);

    uint8_t pa = 0x11;
    uint16_t pb = 0x2233;
    uint32_t pcv = 0x44556677;
    unsigned char pd[3] = {0xaa, 0xbb, 0xcc};
    double pe = 3.5;
    void *op[6] = {&out, &pa, &pb, &pcv, pd, &pe};
    OK(cuMemsetD8(out, 0, 64));
    OK(launch1(fn("copy_params_odd"), NULL, op));
    OK(cuMemcpyDtoH(got, out, 32));
    memset(want, 0, 32);
    memcpy(want, &out, 8);
    want[8] = pa;
    memcpy(want + 10, &pb, 2);
    memcpy(want + 12, &pcv, 4);
    memcpy(want + 16, pd, 3);
    memcpy(want + 24, &pe, 8);
    CHECK(memcmp(got, want, 32) == 0);
#if STANDIN
    {
        unsigned long long idx = standin_launch_count() - 1;
        char name[64];
        unsigned g[3], bl[3], sh = 99;
        unsigned char lp[64];
        size_t lps = 0;
        CHECK(standin_launch_get(idx, name, sizeof(name), g, bl, &sh, lp, sizeof(lp), &lps) == 0);
        CHECK(strcmp(name, "copy_params_odd") == 0 && lps == 32 && memcmp(lp, want, 32) == 0);
        CHECK(g[0] == 1 && bl[0] == 32 && sh == 0);
        CHECK(standin_launch_get(idx + 1, NULL, 0, NULL, NULL, NULL, NULL, 0, NULL) == -1);
    }
#endif
    unsigned char *big = malloc(4096);
    for (int i = 0; i < 4096; i++)
        big[i] = (unsigned char)(i * 7);
    void *bp[2] = {&out, big};
    OK(cuMemsetD8(out, 0, 4104));
    OK(launch1(fn("copy_params_4k"), NULL, bp));
    OK(cuMemcpyDtoH(got, out, 4104));
    memcpy(want, &out, 8);
    memcpy(want + 8, big, 4096);
    CHECK(memcmp(got, want, 4104) == 0);
    free(big);

    /* unknown-to-the-stand-in kernel: runs, does nothing */
    OK(launch1(fn("noop"), NULL, NULL));
    OK(cuCtxSynchronize());
#if STANDIN
    CHECK(standin_launch_count() - n0 == 7);
#endif

    /* launch validation */
    CUfunction nf = fn("noop");
    CK(cuLaunchKernel(nf, 1, 1, 1, 1025, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(nf, 1, 1, 1, 32, 32, 2, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(nf, 1, 1, 1, 1, 1, 65, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(nf, 0, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(nf, 1, 65536, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(nf, 1, 1, 1, 32, 1, 1, 60000, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuFuncSetAttribute(nf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000));
    OK(cuLaunchKernel(nf, 1, 1, 1, 32, 1, 1, 60000, NULL, NULL, NULL));
    CK(cuLaunchKernel(nf, 1, 1, 1, 32, 1, 1, 0, NULL, fp, extra), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
    SI_CK(cuLaunchKernel(nf, 1, 1, 1, 32, 1, 1, 0, (CUstream)&ok, NULL, NULL),
          CUDA_ERROR_INVALID_HANDLE);

    /* cuLaunchKernelEx, cooperative launches */
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = 4;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 64;
    cfg.blockDimY = cfg.blockDimZ = 1;
    CUlaunchAttribute at[2];
    memset(at, 0, sizeof(at));
    at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[0].value.clusterDim.x = 2;
    at[0].value.clusterDim.y = 1;
    at[0].value.clusterDim.z = 1;
    at[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    at[1].value.priority = 0;
    cfg.attrs = at;
    cfg.numAttrs = 2;
    val = 77;
    n = 8;
    OK(cuLaunchKernelEx(&cfg, fn("fill_u32"), fp, NULL));
    OK(cuMemcpyDtoH(host, out, 32));
    CHECK(host[0] == 77 && host[7] == 77);
    cfg.gridDimX = 3; /* not a multiple of the cluster */
    CK(cuLaunchKernelEx(&cfg, fn("fill_u32"), fp, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    cfg.gridDimX = 2;
    at[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    at[0].value.cooperative = 1;
    OK(cuLaunchKernelEx(&cfg, fn("fill_u32"), fp, NULL));
    int sms = 0;
    OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g_dev));
    OK(cuLaunchCooperativeKernel(nf, 2, 1, 1, 64, 1, 1, 0, NULL, NULL));
    CK(cuLaunchCooperativeKernel(nf, (unsigned)sms * 32 + 1, 1, 1, 64, 1, 1, 0, NULL, NULL),
       CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    OK(cuCtxSynchronize());

    /* device printf, flushed at synchronization */
    int hn = 3;
    void *hp[1] = {&hn};
    char tmpl[] = "/tmp/standin_out_XXXXXX";
    int fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    if (fd >= 0) {
        fflush(stdout);
        int saved = dup(1);
        dup2(fd, 1);
        OK(launch1(fn("say_hello"), NULL, hp));
        OK(cuCtxSynchronize());
        fflush(stdout);
        dup2(saved, 1);
        close(saved);
        char text[256] = "";
        lseek(fd, 0, SEEK_SET);
        ssize_t got_n = read(fd, text, sizeof(text) - 1);
        text[got_n > 0 ? got_n : 0] = '\0';
        close(fd);
        unlink(tmpl);
        CHECK(strcmp(text, "hello from thread 0\nhello from thread 1\nhello from thread 2\n") == 0);
    }
    OK(cuMemFree(a));
    OK(cuMemFree(b));
    OK(cuMemFree(c));
    OK(cuMemFree(out));
    free(host);
}

/* Sticky errors. On driver 580 a kernel fault poisons the whole process:
 * every later call that does work returns the error, in every context, and
 * new contexts cannot be made; only destroy/reset still succeed. So each case
 * runs in a child process (this program again, with --sticky KERNEL). */
static int sticky_child(const char *kernel)
{
    bool oob = strcmp(kernel, "oob") == 0;
    CUresult want = strcmp(kernel, "trap_assert") == 0 ? CUDA_ERROR_ASSERT
                                                         : CUDA_ERROR_ILLEGAL_ADDRESS;
    OK(cuInit(0));
    OK(cuDeviceGet(&g_dev, 0));
    OK(cuDevicePrimaryCtxRetain(&g_primary, g_dev));
    OK(cuCtxSetCurrent(g_primary));
    load_module();
    CUfunction f = fn(oob ? "fill_u32" : kernel), noop = fn("noop");
    CUcontext other = NULL;
    OK(cuCtxCreate(&other, NULL, 0, g_dev));
    OK(cuCtxPopCurrent(NULL));
    CUdeviceptr p = 0, q = 0;
    OK(cuMemAlloc(&p, 64));
    CUstream s, s2;
    OK(cuStreamCreate(&s, 0));
    if (oob) {
        /* a kernel writing past its allocation faults (stand-in: always) */
        uint32_t v = 1;
        uint64_t n = 17; /* 68 bytes into 64 */
        void *fp[3] = {&p, &v, &n};
        OK(launch1(f, NULL, fp));
    } else {
        OK(launch1(f, NULL, NULL));
    }
    CK(cuCtxSynchronize(), want);
    CK(cuCtxSynchronize(), want);
    CK(cuMemAlloc(&q, 64), want);
    uint32_t x;
    CK(cuMemcpyDtoH(&x, p, 4), want);
    CK(cuStreamCreate(&s2, 0), want);
    CK(cuStreamSynchronize(s), want);
    CK(launch1(noop, NULL, NULL), want);
    /* the whole process */
    OK(cuCtxPushCurrent(other));
    CK(cuMemAlloc(&q, 64), want);
    OK(cuCtxPopCurrent(NULL));
    CUcontext c3;
    CK(cuCtxCreate(&c3, NULL, 0, g_dev), want);
    int n = 0;
    OK(cuDeviceGetCount(&n));
    OK(cuCtxDestroy(other));
    OK(cuDevicePrimaryCtxReset(g_dev));
    CK(cuDevicePrimaryCtxRetain(&c3, g_dev), want);
    free(g_ptx);
    fprintf(stderr, "  sticky %s: %d passed, %d failed\n", kernel, g_pass, g_fail);
    return g_fail ? 1 : 0;
}

static void test_sticky(void)
{
    const char *cases[3] = {"fault", "trap_assert", "oob"};
    for (int i = 0; i < (STANDIN ? 3 : 2); i++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "test_standin", "--sticky", cases[i], g_ptx_path,
                  (char *)NULL);
            _exit(127);
        }
        int st = 0;
        TRACE();
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            g_pass++;
        } else {
            g_fail++;
            fprintf(stderr, "FAIL: sticky case %s (status 0x%x)\n", cases[i], st);
        }
    }
}

/* ------------------------------------------------------------------ */

static atomic_int g_flag;
static atomic_int g_cb_status = -1;
static CUstream g_cb_stream;

static void CUDA_CB host_set_flag(void *arg)
{
    atomic_store(&g_flag, (int)(intptr_t)arg);
}

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *arg)
{
    g_cb_stream = s;
    atomic_store(&g_cb_status, (int)status);
    atomic_store(&g_flag, (int)(intptr_t)arg);
}

static atomic_int g_release;
static void CUDA_CB host_block(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_release))
        usleep(1000);
}

typedef struct {
    double elapsed;
    CUresult rc;
} sleeper;

static void *thread_sleeper(void *arg)
{
    sleeper *s = arg;
    cuCtxSetCurrent(g_primary);
    CUstream st;
    cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
    unsigned ms = 400;
    void *p[1] = {&ms};
    double t0 = now_ms();
    cuLaunchKernel(fn("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, st, p, NULL);
    s->rc = cuStreamSynchronize(st);
    s->elapsed = now_ms() - t0;
    cuStreamDestroy(st);
    return NULL;
}

static void test_streams(void)
{
    CUfunction sl = fn("sleep_ms");
    CUstream s1, s2;
    OK(cuStreamCreate(&s1, 0));
    OK(cuStreamCreateWithPriority(&s2, CU_STREAM_NON_BLOCKING, -1));
    CK(cuStreamCreate(&s1, 0x10), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    int prio = 99;
    OK(cuStreamGetPriority(s2, &prio));
    CHECK(prio == -1);
    unsigned fl = 99;
    OK(cuStreamGetFlags(s2, &fl));
    CHECK(fl == CU_STREAM_NON_BLOCKING);
    OK(cuStreamGetFlags(s1, &fl));
    CHECK(fl == 0);
    unsigned long long i1 = 0, i2 = 0;
    OK(cuStreamGetId(s1, &i1));
    OK(cuStreamGetId(s2, &i2));
    CHECK(i1 != i2);
    CUcontext sc = NULL;
    OK(cuStreamGetCtx(s1, &sc));
    CHECK(sc == g_primary);
    OK(cuStreamGetCtx(NULL, &sc));
    CHECK(sc == g_primary);
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    OK(cuStreamIsCapturing(s1, &cs));
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    OK(cuStreamQuery(s1));
    OK(cuStreamQuery(NULL));
    OK(cuStreamQuery(CU_STREAM_LEGACY));
    OK(cuStreamQuery(CU_STREAM_PER_THREAD));
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));

    /* a sleeping kernel keeps its stream busy, not the others */
    unsigned ms = 300;
    void *sp[1] = {&ms};
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 1024));
    unsigned char *pin;
    OK(cuMemAllocHost((void **)&pin, 1024));
    double t0 = now_ms();
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL));
    CK(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    OK(cuMemsetD8Async(d, 5, 1024, s2));
    OK(cuMemcpyDtoHAsync(pin, d, 1024, s2));
    OK(cuStreamSynchronize(s2));
    double t_other = now_ms() - t0;
    CHECK(t_other < 150);
    CHECK(pin[1023] == 5);
    OK(cuStreamSynchronize(s1));
    double t_all = now_ms() - t0;
    CHECK(t_all >= 290);
    OK(cuStreamQuery(s1));

    /* events: timing across the sleep */
    CUevent e0, e1, e2;
    OK(cuEventCreate(&e0, 0));
    OK(cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
    OK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&e2, 0x40), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventCreate(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    float el = -1;
    CK(cuEventElapsedTime(&el, e0, e1), CUDA_ERROR_INVALID_HANDLE); /* not recorded */
    OK(cuEventQuery(e0));
    OK(cuEventSynchronize(e0));
    ms = 120;
    OK(cuEventRecord(e0, s1));
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL));
    OK(cuEventRecordWithFlags(e1, s1, 0));
    OK(cuEventRecord(e2, s1));
    CK(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CK(cuEventElapsedTime(&el, e0, e1), CUDA_ERROR_NOT_READY);
    OK(cuEventSynchronize(e1));
    OK(cuEventQuery(e1));
    OK(cuEventElapsedTime(&el, e0, e1));
    CHECK(el >= 115 && el < 1000);
    OK(cuEventElapsedTime_v2(&el, e0, e1));
    CHECK(el >= 115);
    OK(cuEventSynchronize(e2));
    CK(cuEventElapsedTime(&el, e0, e2), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventElapsedTime(NULL, e0, e1), CUDA_ERROR_INVALID_HANDLE); /* sic, driver 580 */

    /* a stream waits for an event of another stream */
    ms = 200;
    t0 = now_ms();
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL));
    OK(cuEventRecord(e0, s1));
    OK(cuStreamWaitEvent(s2, e0, 0));
    CK(cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
    OK(cuMemsetD8Async(d, 6, 1024, s2));
    OK(cuMemcpyDtoHAsync(pin, d, 1024, s2));
    OK(cuStreamSynchronize(s2));
    CHECK(now_ms() - t0 >= 190);
    CHECK(pin[0] == 6);

    /* host functions and callbacks run after the work before them */
    atomic_store(&g_flag, 0);
    ms = 100;
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL));
    OK(cuLaunchHostFunc(s1, host_set_flag, (void *)(intptr_t)5));
    CHECK(atomic_load(&g_flag) == 0);
    OK(cuStreamSynchronize(s1));
    CHECK(atomic_load(&g_flag) == 5);
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL));
    OK(cuStreamAddCallback(s1, stream_cb, (void *)(intptr_t)9, 0));
    CK(cuStreamAddCallback(s1, stream_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(s1));
    CHECK(atomic_load(&g_flag) == 9 && atomic_load(&g_cb_status) == 0 && g_cb_stream == s1);
    /* a host function that blocks holds its stream only */
    atomic_store(&g_release, 0);
    OK(cuLaunchHostFunc(s1, host_block, NULL));
    OK(cuLaunchHostFunc(s1, host_set_flag, (void *)(intptr_t)11));
    usleep(20000);
    CK(cuStreamQuery(s1), CUDA_ERROR_NOT_READY);
    OK(cuMemsetD8Async(d, 7, 1024, s2));
    OK(cuMemcpyDtoHAsync(pin, d, 1024, s2));
    OK(cuStreamSynchronize(s2));
    CHECK(pin[5] == 7);
    CHECK(atomic_load(&g_flag) == 9);
    atomic_store(&g_release, 1);
    OK(cuStreamSynchronize(s1));
    CHECK(atomic_load(&g_flag) == 11);

    /* the legacy default stream waits for blocking streams, not for
     * non-blocking ones */
    unsigned char hb[16];
    ms = 200;
    t0 = now_ms();
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s1, sp, NULL)); /* s1: blocking */
    OK(cuMemcpyDtoH(hb, d, 16));
    CHECK(now_ms() - t0 >= 190);
    t0 = now_ms();
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s2, sp, NULL)); /* s2: non-blocking */
    OK(cuMemcpyDtoH(hb, d, 16));
    CHECK(now_ms() - t0 < 150);
    OK(cuStreamSynchronize(s2));
    /* ... and blocking streams wait for the legacy stream */
    t0 = now_ms();
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, NULL, sp, NULL));
    OK(cuMemsetD8Async(d, 8, 16, s1));
    OK(cuMemcpyDtoHAsync(pin, d, 16, s1));
    OK(cuStreamSynchronize(s1));
    CHECK(now_ms() - t0 >= 190);
    CHECK(pin[0] == 8);
    OK(cuStreamSynchronize(NULL));

    /* the per-thread default stream */
    ms = 100;
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_PER_THREAD, sp, NULL));
    CK(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
    OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    OK(cuStreamQuery(CU_STREAM_PER_THREAD));

    /* a thread blocked in a synchronize does not stall this one */
    sleeper sl_res = {0, CUDA_ERROR_UNKNOWN};
    pthread_t th;
    pthread_create(&th, NULL, thread_sleeper, &sl_res);
    usleep(50000);
    t0 = now_ms();
    for (int i = 0; i < 20; i++) {
        OK(cuMemsetD8(d, (unsigned char)i, 1024));
        OK(cuMemcpyDtoH(hb, d, 16));
    }
    CHECK(now_ms() - t0 < 150);
    pthread_join(th, NULL);
    CHECK(sl_res.rc == CUDA_SUCCESS && sl_res.elapsed >= 390);

    /* destroying a stream with work pending: the work still completes */
    CUstream s3;
    OK(cuStreamCreate(&s3, 0));
    atomic_store(&g_flag, 0);
    OK(cuLaunchKernel(sl, 1, 1, 1, 1, 1, 1, 0, s3, sp, NULL));
    OK(cuLaunchHostFunc(s3, host_set_flag, (void *)(intptr_t)13));
    t0 = now_ms();
    OK(cuStreamDestroy(s3));
    CHECK(now_ms() - t0 < 50);
    SI_CK(cuStreamQuery(s3), CUDA_ERROR_INVALID_HANDLE);
    OK(cuCtxSynchronize());
    CHECK(atomic_load(&g_flag) == 13);

    OK(cuEventDestroy(e0));
    OK(cuEventDestroy(e1));
    OK(cuEventDestroy(e2));
    SI_CK(cuEventQuery(e2), CUDA_ERROR_INVALID_HANDLE);
    OK(cuStreamDestroy(s1));
    OK(cuStreamDestroy(s2));
    SI_CK(cuStreamDestroy(s1), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFreeHost(pin));
    OK(cuMemFree(d));
}

/* ------------------------------------------------------------------ */

static void test_errors(void)
{
    static const CUresult codes[] = {
        CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INVALID_DEVICE,
        CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_PTX,
        CUDA_ERROR_FILE_NOT_FOUND, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_FOUND,
        CUDA_ERROR_NOT_READY, CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_ASSERT,
        CUDA_ERROR_LAUNCH_FAILED, CUDA_ERROR_NOT_PERMITTED, CUDA_ERROR_NOT_SUPPORTED,
        CUDA_ERROR_UNKNOWN,
    };
    static const char *names[] = {
        "CUDA_SUCCESS", "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_OUT_OF_MEMORY",
        "CUDA_ERROR_NOT_INITIALIZED", "CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INVALID_DEVICE",
        "CUDA_ERROR_INVALID_IMAGE", "CUDA_ERROR_INVALID_CONTEXT", "CUDA_ERROR_INVALID_PTX",
        "CUDA_ERROR_FILE_NOT_FOUND", "CUDA_ERROR_INVALID_HANDLE", "CUDA_ERROR_NOT_FOUND",
        "CUDA_ERROR_NOT_READY", "CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_ASSERT",
        "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_NOT_SUPPORTED",
        "CUDA_ERROR_UNKNOWN",
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *n = NULL, *s = NULL;
        OK(cuGetErrorName(codes[i], &n));
        OK(cuGetErrorString(codes[i], &s));
        CHECK(n && strcmp(n, names[i]) == 0);
        CHECK(s && *s);
    }
    /* every value of the enum has a name */
    int all = 1;
    for (int c = 0; c < 1000; c++) {
        const char *n = NULL;
        if (cuGetErrorName((CUresult)c, &n) == CUDA_SUCCESS)
            all &= n != NULL && strncmp(n, "CUDA_", 5) == 0;
    }
    CHECK(all);
    const char *s = "x";
    CK(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    CHECK(s == NULL);
    SI_CK(cuGetErrorName(CUDA_SUCCESS, NULL), CUDA_ERROR_INVALID_VALUE); /* driver 580 crashes */
    OK(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
    CHECK(strcmp(s, "an illegal memory access was encountered") == 0);
}

static void test_procaddr(void)
{
    void *p = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    OK(cuGetProcAddress("cuMemAlloc", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    CHECK(p != NULL && st == CU_GET_PROC_ADDRESS_SUCCESS);
    SI_CHECK(p == (void *)&cuMemAlloc_v2);
    OK(cuGetProcAddress("cuCtxCreate", &p, 12050, 0, &st));
    SI_CHECK(p == (void *)&cuCtxCreate_v4);
    /* driver 580: a symbol not found is CUDA_SUCCESS with a NULL pointer and
     * the reason in symbolStatus (if given) */
    p = (void *)1;
    OK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, &st));
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    p = (void *)1;
    OK(cuGetProcAddress("cuNoSuchFunction", &p, 13000, 0, NULL));
    CHECK(p == NULL);
    p = (void *)1;
    OK(cuGetProcAddress("cuLibraryLoadData", &p, 11000, 0, &st));
    CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    OK(cuGetProcAddress("cuLibraryLoadData", &p, 11000, 0, NULL));
    SI_CK(cuGetProcAddress(NULL, &p, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE); /* 580 crashes */
    CK(cuGetProcAddress("cuInit", &p, 13000, 0x100, &st), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress("cuLaunchKernel", &p, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                        &st));
    CHECK(p != NULL);
    if (STANDIN) {
        void *self = dlopen(NULL, RTLD_LAZY);
        void *ptsz = self ? dlsym(self, "cuLaunchKernel_ptsz") : NULL;
        CHECK(ptsz != NULL && p == ptsz);
        OK(cuGetProcAddress("cuMemcpyHtoD", &p, 13000,
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
        CHECK(self && p == dlsym(self, "cuMemcpyHtoD_v2_ptds"));
        OK(cuGetProcAddress("cuCtxCreate", &p, 11040, 0, &st));
        CHECK(self && p == dlsym(self, "cuCtxCreate_v3"));
        /* not implemented by the stand-in: absent */
        OK(cuGetProcAddress("cuImportExternalMemory", &p, 13000, 0, &st));
        CHECK(p == NULL && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        /* the 32-bit cuMemAlloc of CUDA 2.0 (standin_legacy.c) */
        OK(cuGetProcAddress("cuMemAlloc", &p, 2000, 0, &st));
        CHECK(self && p == dlsym(self, "cuMemAlloc"));
        if (self)
            dlclose(self);
    }
    /* a resolved entry point works */
    CUresult (*get_count)(int *) = NULL;
    OK(cuGetProcAddress("cuDeviceGetCount", (void **)&get_count, 13000, 0, &st));
    int n = 0;
    CHECK(get_count && get_count(&n) == CUDA_SUCCESS && n >= 1);
}

/* A thread bound to the primary context: its binding works again once the
 * primary is retained again (driver 580), and is dead while it is not. */
static pthread_barrier_t g_b1, g_b2;

static void *bound_thread(void *arg)
{
    int *res = arg;
    CUdeviceptr d;
    cuCtxSetCurrent(g_primary);
    res[0] = cuMemAlloc(&d, 64) == CUDA_SUCCESS && cuMemFree(d) == CUDA_SUCCESS;
    pthread_barrier_wait(&g_b1); /* main: full release, retain again */
    pthread_barrier_wait(&g_b2);
    res[1] = cuMemAlloc(&d, 64) == CUDA_SUCCESS && cuMemFree(d) == CUDA_SUCCESS;
    pthread_barrier_wait(&g_b1); /* main: reset */
    pthread_barrier_wait(&g_b2);
    res[2] = cuMemAlloc(&d, 64) == CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return NULL;
}

static void test_reset(void)
{
    int res[3] = {0, 0, 0};
    pthread_barrier_init(&g_b1, NULL, 2);
    pthread_barrier_init(&g_b2, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, bound_thread, res);
    pthread_barrier_wait(&g_b1);
    OK(cuDevicePrimaryCtxRelease(g_dev)); /* retain count 1 -> 0: destroyed */
    unsigned flags;
    int active = 1;
    OK(cuDevicePrimaryCtxGetState(g_dev, &flags, &active));
    CHECK(active == 0);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CUcontext c;
    OK(cuDevicePrimaryCtxRetain(&c, g_dev));
    CHECK(c == g_primary);
    OK(cuMemAlloc(&p, 64)); /* no cuCtxSetCurrent needed */
    pthread_barrier_wait(&g_b2);
    pthread_barrier_wait(&g_b1);
    OK(cuDevicePrimaryCtxReset(g_dev));
    pthread_barrier_wait(&g_b2);
    pthread_join(t, NULL);
    CHECK(res[0] && res[1] && res[2]);
    OK(cuDevicePrimaryCtxGetState(g_dev, &flags, &active));
    CHECK(active == 0);
    unsigned mt;
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_ERROR_INVALID_VALUE);
    OK(cuDevicePrimaryCtxRelease(g_dev)); /* the retain count survived the reset */
    CK(cuDevicePrimaryCtxRelease(g_dev), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&c, g_dev));
    OK(cuMemAlloc(&p, 64));
    OK(cuMemFree(p));
    OK(cuDevicePrimaryCtxRelease(g_dev));
    pthread_barrier_destroy(&g_b1);
    pthread_barrier_destroy(&g_b2);
}

int main(int argc, char **argv)
{
    static char def[4096];
    g_trace = getenv("STANDIN_TEST_TRACE") != NULL;
    if (argc > 3 && strcmp(argv[1], "--sticky") == 0) {
        g_ptx_path = argv[3];
        return sticky_child(argv[2]);
    }
    if (argc > 1) {
        g_ptx_path = argv[1];
    } else {
        snprintf(def, sizeof(def), "%s", __FILE__);
        char *slash = strrchr(def, '/');
        if (slash)
            snprintf(slash + 1, sizeof(def) - (size_t)(slash + 1 - def), "kernels.ptx");
        else
            snprintf(def, sizeof(def), "kernels.ptx");
        g_ptx_path = def;
    }
    test_before_init();
    test_device();
    test_context();
    test_memory();
    test_copies();
    load_module();
    test_modules();
    test_launch();
    test_streams();
    test_errors();
    test_procaddr();
    test_sticky();
    OK(cuModuleUnload(g_mod));
    test_reset();
    free(g_ptx);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}

#else
typedef int standin_test_unused; /* compiled into the library by the *.c glob: empty */
#endif
