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

static CUresult si_pre32_check(void)
{
    si_enter();
    si_ctx *c = si_current();
    CUresult rc = c && c->pre32 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    si_leave();
    return rc;
}

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
