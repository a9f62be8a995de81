/* SCUDA CPU stand-in driver: older exported forms whose signature matches
 * the current one (the real driver keeps them for old binaries and for
 * cuGetProcAddress with an old CUDA version). */
#include "standin_internal.h"

#undef cuDeviceGetUuid
#undef cuEventElapsedTime
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
#undef cuCtxDestroy
#undef cuCtxPopCurrent
#undef cuCtxPushCurrent
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuCtxCreate
#undef cuMemAlloc
#undef cuMemFree
#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemcpyDtoD
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemcpy2D
#undef cuMemcpy2DUnaligned
#undef cuMemcpy2DAsync
#undef cuMemcpy3D
#undef cuMemcpy3DAsync
#undef cuModuleGetGlobal
#undef cuMemHostGetDevicePointer

SI_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid_v2(uuid, dev);
}

SI_API CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

SI_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

SI_API CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

/* the first form refuses while the primary context is active */
SI_API CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    unsigned int cur = 0;
    int active = 0;
    CUresult rc = cuDevicePrimaryCtxGetState(dev, &cur, &active);
    if (rc)
        return rc;
    if (active)
        return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SI_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

SI_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

SI_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    return cuCtxPushCurrent_v2(ctx);
}

SI_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

SI_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

/* Pre-3.2 contexts and the 32-bit entry points: driver 580 runs the 32-bit
 * forms only in a context made by cuCtxCreate's first export, and answers
 * CUDA_ERROR_INVALID_CONTEXT in any other (measured on an H200). Its
 * addresses then lie below 4 GiB; here that takes STANDIN_LOW_VA=1, and an
 * address above is OUT_OF_MEMORY (the 32-bit space has no room). */
SI_API CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult rc = cuCtxCreate_v4(pctx, NULL, flags, dev);
    if (rc == CUDA_SUCCESS)
        ((si_ctx *)*pctx)->pre32 = true;
    return rc;
}

static bool si_current_pre32(void)
{
    si_enter();
    si_ctx *c = si_current();
    bool pre32 = c && c->pre32;
    si_leave();
    return pre32;
}

static CUresult si_pre32_check(void)
{
    return si_current_pre32() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

__thread bool si_v1_entry;

CUresult si_v2_guard(void)
{
    return !si_v1_entry && si_current_pre32() ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

/* A 32-bit form: in a pre-3.2 context, its _v2 form with the guard off. */
#define SI_V1(call)                         \
    do {                                    \
        CUresult rc_ = si_pre32_check();    \
        if (rc_)                            \
            return rc_;                     \
        si_v1_entry = true;                 \
        rc_ = (call);                       \
        si_v1_entry = false;                \
        return rc_;                         \
    } while (0)

SI_API CUresult CUDAAPI cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    CUresult rc = si_pre32_check();
    if (rc)
        return rc;
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = 0;
    if ((rc = cuMemAlloc_v2(&p, bytesize)))
        return rc;
    if (p + bytesize > 0xffffffffu) {
        cuMemFree_v2(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (unsigned int)p;
    return CUDA_SUCCESS;
}

SI_API CUresult CUDAAPI cuMemFree(unsigned int dptr)
{
    CUresult rc = si_pre32_check();
    return rc ? rc : cuMemFree_v2(dptr);
}

SI_API CUresult CUDAAPI cuMemcpyHtoD(unsigned int dst, const void *src, unsigned int n)
{
    SI_V1(cuMemcpyHtoD_v2(dst, src, n));
}

SI_API CUresult CUDAAPI cuMemcpyDtoH(void *dst, unsigned int src, unsigned int n)
{
    SI_V1(cuMemcpyDtoH_v2(dst, src, n));
}

SI_API CUresult CUDAAPI cuMemcpyDtoD(unsigned int dst, unsigned int src, unsigned int n)
{
    SI_V1(cuMemcpyDtoD_v2(dst, src, n));
}

SI_API CUresult CUDAAPI cuMemcpyHtoDAsync(unsigned int dst, const void *src, unsigned int n, CUstream st)
{
    SI_V1(cuMemcpyHtoDAsync_v2(dst, src, n, st));
}

SI_API CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, unsigned int src, unsigned int n, CUstream st)
{
    SI_V1(cuMemcpyDtoHAsync_v2(dst, src, n, st));
}

SI_API CUresult CUDAAPI cuMemcpyDtoDAsync(unsigned int dst, unsigned int src, unsigned int n, CUstream st)
{
    SI_V1(cuMemcpyDtoDAsync_v2(dst, src, n, st));
}

/* cuda.h declares the 32-bit layouts only for the driver's own build. */
typedef struct {
    unsigned int srcXInBytes, srcY;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    unsigned int srcDevice;
    CUarray srcArray;
    unsigned int srcPitch;
    unsigned int dstXInBytes, dstY;
    CUmemorytype dstMemoryType;
    void *dstHost;
    unsigned int dstDevice;
    CUarray dstArray;
    unsigned int dstPitch;
    unsigned int WidthInBytes, Height;
} si_memcpy2d_v1;

typedef struct {
    unsigned int srcXInBytes, srcY, srcZ, srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    unsigned int srcDevice;
    CUarray srcArray;
    void *reserved0;
    unsigned int srcPitch, srcHeight;
    unsigned int dstXInBytes, dstY, dstZ, dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    unsigned int dstDevice;
    CUarray dstArray;
    void *reserved1;
    unsigned int dstPitch, dstHeight;
    unsigned int WidthInBytes, Height, Depth;
} si_memcpy3d_v1;

static CUDA_MEMCPY2D si_wide_2d(const si_memcpy2d_v1 *p)
{
    return (CUDA_MEMCPY2D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost,
        .srcDevice = p->srcDevice, .srcArray = p->srcArray, .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost,
        .dstDevice = p->dstDevice, .dstArray = p->dstArray, .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height,
    };
}

static CUDA_MEMCPY3D si_wide_3d(const si_memcpy3d_v1 *p)
{
    return (CUDA_MEMCPY3D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
        .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
        .srcArray = p->srcArray, .reserved0 = p->reserved0, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
        .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
        .dstArray = p->dstArray, .reserved1 = p->reserved1, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth,
    };
}

SI_API CUresult CUDAAPI cuMemcpy2D(const si_memcpy2d_v1 *p)
{
    CUDA_MEMCPY2D w = p ? si_wide_2d(p) : (CUDA_MEMCPY2D){0};
    SI_V1(cuMemcpy2D_v2(p ? &w : NULL));
}

SI_API CUresult CUDAAPI cuMemcpy2DUnaligned(const si_memcpy2d_v1 *p)
{
    CUDA_MEMCPY2D w = p ? si_wide_2d(p) : (CUDA_MEMCPY2D){0};
    SI_V1(cuMemcpy2DUnaligned_v2(p ? &w : NULL));
}

SI_API CUresult CUDAAPI cuMemcpy2DAsync(const si_memcpy2d_v1 *p, CUstream st)
{
    CUDA_MEMCPY2D w = p ? si_wide_2d(p) : (CUDA_MEMCPY2D){0};
    SI_V1(cuMemcpy2DAsync_v2(p ? &w : NULL, st));
}

SI_API CUresult CUDAAPI cuMemcpy3D(const si_memcpy3d_v1 *p)
{
    CUDA_MEMCPY3D w = p ? si_wide_3d(p) : (CUDA_MEMCPY3D){0};
    SI_V1(cuMemcpy3D_v2(p ? &w : NULL));
}

SI_API CUresult CUDAAPI cuMemcpy3DAsync(const si_memcpy3d_v1 *p, CUstream st)
{
    CUDA_MEMCPY3D w = p ? si_wide_3d(p) : (CUDA_MEMCPY3D){0};
    SI_V1(cuMemcpy3DAsync_v2(p ? &w : NULL, st));
}

static CUresult si_get_global_v1(unsigned int *dptr, unsigned int *bytes, CUmodule m, const char *name)
{
    CUdeviceptr d = 0;
    size_t n = 0;
    CUresult rc = cuModuleGetGlobal_v2(dptr ? &d : NULL, bytes ? &n : NULL, m, name);
    if (!rc && (d > 0xffffffffu || n > 0xffffffffu))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc && dptr)
        *dptr = (unsigned int)d;
    if (!rc && bytes)
        *bytes = (unsigned int)n;
    return rc;
}

SI_API CUresult CUDAAPI cuModuleGetGlobal(unsigned int *dptr, unsigned int *bytes, CUmodule m, const char *name)
{
    SI_V1(si_get_global_v1(dptr, bytes, m, name));
}

static CUresult si_host_dev_v1(unsigned int *pdptr, void *p, unsigned int flags)
{
    CUdeviceptr d = 0;
    CUresult rc = cuMemHostGetDevicePointer_v2(pdptr ? &d : NULL, p, flags);
    if (!rc && d > 0xffffffffu)
        return CUDA_ERROR_OUT_OF_MEMORY; /* host memory above 4 GiB: no room in 32 bits */
    if (!rc && pdptr)
        *pdptr = (unsigned int)d;
    return rc;
}

SI_API CUresult CUDAAPI cuMemHostGetDevicePointer(unsigned int *pdptr, void *p, unsigned int flags)
{
    SI_V1(si_host_dev_v1(pdptr, p, flags));
}
