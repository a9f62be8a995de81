/* workload.c - see workload.h. */
#define _GNU_SOURCE
#include "workload.h"

#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void launch1(CUfunction f, unsigned grid, unsigned block, CUstream st, void **args)
{
    CU(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, st, args, NULL));
}

void workload_check(void)
{
    h_cuda_setup();
    const size_t n = 100000;
    CUdeviceptr a, b, c;
    CU(cuMemAlloc_v2(&a, n * 4));
    CU(cuMemAlloc_v2(&b, n * 4));
    CU(cuMemAlloc_v2(&c, n * 4));
    float *ha = malloc(n * 4), *hb = malloc(n * 4), *hc = malloc(n * 4);
    uint32_t *u = malloc(n * 4);
    CHECK(ha && hb && hc && u);
    for (size_t i = 0; i < n; i++) {
        ha[i] = (float)i;
        hb[i] = 0.5f * (float)(i % 1000);
    }
    CU(cuMemcpyHtoD_v2(a, ha, n * 4));
    CU(cuMemcpyHtoD_v2(b, hb, n * 4));

    CUfunction vec_add = h_func("vec_add"), fill = h_func("fill_u32");
    int count = (int)n;
    void *va[] = {&a, &b, &c, &count};
    launch1(vec_add, 64, 128, NULL, va);
    CU(cuMemcpyDtoH_v2(hc, c, n * 4));
    for (size_t i = 0; i < n; i++)
        CHECK(hc[i] == ha[i] + hb[i], "vec_add: c[%zu] = %f, expected %f", i, (double)hc[i], (double)(ha[i] + hb[i]));

    uint32_t value = 0xc0ffee00u + (uint32_t)(getpid() & 0xff);
    uint64_t nn = n;
    void *fa[] = {&c, &value, &nn};
    launch1(fill, 8, 256, NULL, fa);
    CU(cuMemcpyDtoH_v2(u, c, n * 4));
    for (size_t i = 0; i < n; i++) CHECK(u[i] == value, "fill_u32: word %zu is %08x", i, u[i]);

    CU(cuMemsetD32_v2(b, 0x12345678, n));
    CU(cuMemcpyDtoD_v2(a, b, n * 4));
    CU(cuMemcpyDtoH_v2(u, a, n * 4));
    for (size_t i = 0; i < n; i++) CHECK(u[i] == 0x12345678, "memset+DtoD: word %zu is %08x", i, u[i]);

    CUdeviceptr g;
    size_t gsize = 0;
    CU(cuModuleGetGlobal_v2(&g, &gsize, h_module(), "g_counter"));
    CHECK(gsize == 4, "g_counter has size %zu", gsize);
    uint32_t gv = 0;
    CU(cuMemcpyDtoH_v2(&gv, g, 4));
    CHECK(gv == 42, "g_counter is %u", gv);

    CU(cuCtxSynchronize());
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(b));
    CU(cuMemFree_v2(c));
    free(ha);
    free(hb);
    free(hc);
    free(u);
}

void workload_full(int quiet_printf)
{
    workload_check();
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CUdevice dev;
    CU(cuCtxGetDevice(&dev));
    char name[256];
    CU(cuDeviceGetName(name, sizeof name, dev));
    size_t free_b = 0, total_b = 0;
    CU(cuMemGetInfo_v2(&free_b, &total_b));
    CHECK(total_b > 0);

    CUstream s1, s2;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreateWithPriority(&s2, 0, 0));
    CUevent e1, e2;
    CU(cuEventCreate(&e1, 0));
    CU(cuEventCreate(&e2, 0));

    CUdeviceptr d, p;
    size_t pitch;
    CU(cuMemAlloc_v2(&d, 1 << 16));
    CU(cuMemAllocPitch_v2(&p, &pitch, 100, 20, 4));
    void *pin;
    CU(cuMemAllocHost_v2(&pin, 1 << 16));
    uint8_t host[4096], back[4096];
    h_pattern(host, sizeof host, 9);

    CU(cuEventRecord(e1, s1));
    CU(cuMemcpyHtoDAsync_v2(d, host, sizeof host, s1));
    CU(cuMemcpyDtoDAsync_v2(d + 8192, d, sizeof host, s1));
    CU(cuMemcpyDtoHAsync_v2(back, d + 8192, sizeof host, s1));
    CU(cuEventRecord(e2, s1));
    CU(cuStreamWaitEvent(s2, e2, 0));
    CU(cuEventSynchronize(e2));
    CHECK(memcmp(host, back, sizeof host) == 0);
    float ms = -1;
    CU(cuEventElapsedTime_v2(&ms, e1, e2));
    CHECK(ms >= 0);
    (void)cuEventQuery(e2);
    (void)cuStreamQuery(s2);

    /* memsets of every form */
    CU(cuMemsetD8_v2(d, 1, 100));
    CU(cuMemsetD16_v2(d + 128, 2, 100));
    CU(cuMemsetD32_v2(d + 512, 3, 100));
    CU(cuMemsetD2D8_v2(p, pitch, 4, 100, 20));
    CU(cuMemsetD2D16_v2(p, pitch, 5, 50, 20));
    CU(cuMemsetD2D32_v2(p, pitch, 6, 25, 20));
    CU(cuMemsetD8Async(d, 7, 100, s1));
    CU(cuMemsetD16Async(d + 128, 8, 100, s1));
    CU(cuMemsetD32Async(d + 512, 9, 100, s1));
    CU(cuMemsetD2D8Async(p, pitch, 10, 100, 20, s2));
    CU(cuMemsetD2D16Async(p, pitch, 11, 50, 20, s2));
    CU(cuMemsetD2D32Async(p, pitch, 12, 25, 20, s2));

    /* 2D and 3D */
    CUDA_MEMCPY2D c2;
    memset(&c2, 0, sizeof c2);
    c2.srcMemoryType = CU_MEMORYTYPE_HOST;
    c2.srcHost = host;
    c2.srcPitch = 200;
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstDevice = p;
    c2.dstPitch = pitch;
    c2.WidthInBytes = 100;
    c2.Height = 20;
    CU(cuMemcpy2D_v2(&c2));
    CU(cuMemcpy2DAsync_v2(&c2, s2));
    CUDA_MEMCPY3D c3;
    memset(&c3, 0, sizeof c3);
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c3.srcDevice = p;
    c3.srcPitch = pitch;
    c3.srcHeight = 10;
    c3.dstMemoryType = CU_MEMORYTYPE_HOST;
    c3.dstHost = back;
    c3.dstPitch = 100;
    c3.dstHeight = 10;
    c3.WidthInBytes = 100;
    c3.Height = 10;
    c3.Depth = 2;
    CU(cuMemcpy3D_v2(&c3));
    CU(cuMemcpy3DAsync_v2(&c3, s2));
    CU(cuMemcpy(d, (CUdeviceptr)(uintptr_t)host, 64));
    CU(cuMemcpyAsync((CUdeviceptr)(uintptr_t)back, d, 64, s1));
    CU(cuMemcpyHtoDAsync_v2(d, pin, 4096, s1));

    /* parameter-copy kernels: kernelParams, extra, cuLaunchKernelEx */
    struct {
        uint64_t a;
        uint32_t b;
        uint8_t c;
        double d;
    } st = {1, 2, 3, 4.0};
    CUfunction cps = h_func("copy_params_struct");
    void *sa[] = {&d, &st};
    CU(cuLaunchKernel(cps, 1, 1, 1, 1, 1, 1, 0, s1, sa, NULL));
    uint8_t odd_a = 1, odd_d[3] = {4, 5, 6};
    uint16_t odd_b = 2;
    uint32_t odd_c = 3;
    double odd_e = 7.5;
    void *oa[] = {&d, &odd_a, &odd_b, &odd_c, odd_d, &odd_e};
    CU(cuLaunchKernel(h_func("copy_params_odd"), 1, 1, 1, 1, 1, 1, 0, s1, oa, NULL));
    static uint8_t big[4096];
    h_pattern(big, sizeof big, 4);
    uint8_t buf[8 + 4096];
    memcpy(buf, &d, 8);
    memcpy(buf + 8, big, sizeof big);
    size_t bsize = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsize, CU_LAUNCH_PARAM_END};
    CU(cuLaunchKernel(h_func("copy_params_4k"), 1, 1, 1, 1, 1, 1, 0, s2, NULL, extra));
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s1;
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    uint32_t fv = 77;
    uint64_t fn = 16;
    void *fa[] = {&d, &fv, &fn};
    CU(cuLaunchKernelEx(&cfg, h_func("fill_u32"), fa, NULL));
    CU(cuLaunchKernel(h_func("noop"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    int hello_n = quiet_printf ? 1 : 3;
    void *ha[] = {&hello_n};
    CU(cuLaunchKernel(h_func("say_hello"), 1, 1, 1, 1, 1, 1, 0, s1, ha, NULL));
    size_t off, size;
    CU(cuFuncGetParamInfo(cps, 1, &off, &size));
    int attrv = 0;
    (void)cuFuncGetAttribute(&attrv, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, cps);

    /* a library and one of its kernels */
    size_t plen;
    char *ptx = h_read_file(h_ptx_path(), &plen);
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    CUkernel k;
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    fv = 78;
    CU(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s1, fa, NULL));
    CUfunction kf;
    CU(cuKernelGetFunction(&kf, k));
    CU(cuLaunchKernel(kf, 1, 1, 1, 1, 1, 1, 0, s1, fa, NULL));

    unsigned mtype = 0;
    CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK(mtype == CU_MEMORYTYPE_DEVICE, "memory type %u", mtype);

    CU(cuStreamSynchronize(s1));
    CU(cuStreamSynchronize(s2));
    CU(cuCtxSynchronize());
    uint32_t words[4];
    CU(cuMemcpyDtoH_v2(words, d, sizeof words));
    CHECK(words[0] == 78, "last fill left %u", words[0]);

    /* More of the forwarded surface, results not checked here (the fuzzer
     * records these frames; other tests check behaviour). */
    size_t lim;
    (void)cuCtxGetLimit(&lim, CU_LIMIT_PRINTF_FIFO_SIZE);
    (void)cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 1 << 20);
    CUfunc_cache cc;
    (void)cuCtxGetCacheConfig(&cc);
    (void)cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_NONE);
    int lo, hi;
    (void)cuCtxGetStreamPriorityRange(&lo, &hi);
    unsigned ver, flags;
    (void)cuCtxGetApiVersion(ctx, &ver);
    unsigned long long id;
    (void)cuCtxGetId(ctx, &id);
    (void)cuCtxGetFlags(&flags);
    int prio;
    (void)cuStreamGetPriority(s2, &prio);
    (void)cuStreamGetFlags(s1, &flags);
    (void)cuStreamGetId(s1, &id);
    CUstreamCaptureStatus cs;
    (void)cuStreamIsCapturing(s1, &cs);
    (void)cuEventRecordWithFlags(e1, s2, 0);
    (void)cuFuncSetAttribute(cps, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024);
    (void)cuFuncSetCacheConfig(cps, CU_FUNC_CACHE_PREFER_L1);
    int blocks;
    (void)cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, cps, 128, 0);
    CUdeviceptr base;
    size_t range;
    (void)cuMemGetAddressRange_v2(&base, &range, d + 100);
    CUpointer_attribute pattrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned ptype = 0;
    int pdev = -1;
    void *pdata[2] = {&ptype, &pdev};
    (void)cuPointerGetAttributes(2, pattrs, pdata, d);
    (void)cuMemHostGetFlags(&flags, pin);
    static uint8_t reg[8192] __attribute__((aligned(4096)));
    if (cuMemHostRegister_v2(reg, sizeof reg, 0) == CUDA_SUCCESS) (void)cuMemHostUnregister(reg);
    CUdeviceptr ad;
    if (cuMemAllocAsync(&ad, 4096, s1) == CUDA_SUCCESS) (void)cuMemFreeAsync(ad, s1);
    int can;
    (void)cuDeviceCanAccessPeer(&can, 0, 0);
    (void)cuKernelGetAttribute(&attrv, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0);
    CUdeviceptr lg;
    size_t lgs;
    (void)cuLibraryGetGlobal(&lg, &lgs, lib, "g_pi");
    CUmodule lm;
    (void)cuLibraryGetModule(&lm, lib);
    unsigned fcount;
    (void)cuModuleGetFunctionCount(&fcount, h_module());
    const char *fname;
    (void)cuFuncGetName(&fname, cps);
    (void)cuMemcpyPeer(d + 256, ctx, d, ctx, 64);
    (void)cuStreamWriteValue32_v2(s1, d, 5, 0);
    (void)cuStreamWaitValue32_v2(s1, d, 5, 0);
    (void)cuCtxResetPersistingL2Cache();
    if (cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS) {
        (void)cuMemsetD32Async(d, 1, 16, s1);
        CUgraph graph;
        if (cuStreamEndCapture(s1, &graph) == CUDA_SUCCESS) {
            CUgraphExec exec;
            if (cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS) {
                (void)cuGraphLaunch(exec, s1);
                (void)cuGraphExecDestroy(exec);
            }
            (void)cuGraphDestroy(graph);
        }
    }
    CUcontext extra_ctx;
    if (cuCtxCreate_v4(&extra_ctx, NULL, 0, 0) == CUDA_SUCCESS) {
        CUdeviceptr xd;
        if (cuMemAlloc_v2(&xd, 256) == CUDA_SUCCESS) (void)cuMemFree_v2(xd);
        (void)cuCtxSynchronize();
        (void)cuCtxPopCurrent_v2(NULL);
        (void)cuCtxDestroy_v2(extra_ctx);
    }
    CU(cuCtxSetCurrent(ctx));
    (void)cuCtxSynchronize(); /* whatever failed above is reported here */
    CU(cuCtxSynchronize());

    CU(cuLibraryUnload(lib));
    CU(cuEventDestroy_v2(e1));
    CU(cuEventDestroy_v2(e2));
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s2));
    CU(cuMemFreeHost(pin));
    CU(cuMemFree_v2(p));
    CU(cuMemFree_v2(d));
    CU(cuCtxSynchronize());
    (void)ctx;
}
