/* legacy.c - the pre-CUDA-3.2 entry points of hand-written functions:
 * 32-bit device pointers and sizes (CUdeviceptr_v1, unsigned int) and the
 * CUDA_MEMCPY2D_v1 / CUDA_MEMCPY3D_v1 layouts, next to their _v2 forms.
 *
 * Driver 580 runs these only in a context made by cuCtxCreate's first
 * export (a legacy context, whose addresses lie below 4 GiB) and answers
 * CUDA_ERROR_INVALID_CONTEXT in any other context, or with none (measured
 * on an H200). So does SCUDA: the client knows which contexts are legacy
 * (context.c), and the session makes them with the same export, so its
 * driver places their memory where 32 bits reach; there the driver refuses
 * the _v2 forms too, so the session sends its _v2 calls to the 32-bit
 * exports (src/server/legacy_ctx.c).
 *
 * Each form is a thin adapter onto its _v2 path: a 32-bit input widens
 * exactly. A 64-bit output that does not fit 32 bits (client host memory
 * the session mirrors at the client's own, high, address) is never
 * truncated: it is CUDA_ERROR_OUT_OF_MEMORY, the driver's answer when its
 * 32-bit space has no room, and the log says why. */
#include <limits.h>

#include "context.h"
#include "shim.h"
#include "../common/log.h"

static CUresult require_legacy_context(void)
{
    return context_current_is_legacy() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult v1_done(CUresult r)
{
    context_v1_leave();
    return r;
}

/* The _v2 form `call`, which a legacy context refuses to anyone but us. */
#define AS_V1(call) (context_v1_enter(), v1_done(call))

/* *out = v when v fits the 32-bit ABI. */
static CUresult narrow(const char *what, uint64_t v, unsigned int *out)
{
    if (v > UINT_MAX) {
        LOG_WARN("%s: %#llx does not fit the pre-3.2 (32-bit) ABI: CUDA_ERROR_OUT_OF_MEMORY; "
                 "use the _v2 entry point", what, (unsigned long long)v);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (out) *out = (unsigned int)v;
    return CUDA_SUCCESS;
}

/* ---- copies ---------------------------------------------------------- */

EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n)
{
    SHIM_ENTER(cuMemcpyHtoD, (dst, src, n));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyHtoD_v2(dst, src, n));
}

EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream st)
{
    SHIM_ENTER(cuMemcpyHtoDAsync, (dst, src, n, st));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyHtoDAsync_v2(dst, src, n, st));
}

EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n)
{
    SHIM_ENTER(cuMemcpyDtoH, (dst, src, n));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyDtoH_v2(dst, src, n));
}

EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream st)
{
    SHIM_ENTER(cuMemcpyDtoHAsync, (dst, src, n, st));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyDtoHAsync_v2(dst, src, n, st));
}

EXPORT CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n)
{
    SHIM_ENTER(cuMemcpyDtoD, (dst, src, n));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyDtoD_v2(dst, src, n));
}

EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream st)
{
    SHIM_ENTER(cuMemcpyDtoDAsync, (dst, src, n, st));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : AS_V1(cuMemcpyDtoDAsync_v2(dst, src, n, st));
}

static CUDA_MEMCPY2D widen_2d(const CUDA_MEMCPY2D_v1 *p)
{
    return (CUDA_MEMCPY2D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray, .srcPitch = p->srcPitch,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray, .dstPitch = p->dstPitch,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height,
    };
}

static CUDA_MEMCPY3D widen_3d(const CUDA_MEMCPY3D_v1 *p)
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

/* 2D: sync, unaligned or async (st), through the _v2 form. */
static CUresult copy_2d_v1(const CUDA_MEMCPY2D_v1 *p, int unaligned, int async, CUstream st)
{
    CUresult r = require_legacy_context();
    if (r != CUDA_SUCCESS) return r;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY2D w = widen_2d(p);
    if (async) return AS_V1(cuMemcpy2DAsync_v2(&w, st));
    return unaligned ? AS_V1(cuMemcpy2DUnaligned_v2(&w)) : AS_V1(cuMemcpy2D_v2(&w));
}

static CUresult copy_3d_v1(const CUDA_MEMCPY3D_v1 *p, int async, CUstream st)
{
    CUresult r = require_legacy_context();
    if (r != CUDA_SUCCESS) return r;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D w = widen_3d(p);
    return async ? AS_V1(cuMemcpy3DAsync_v2(&w, st)) : AS_V1(cuMemcpy3D_v2(&w));
}

EXPORT CUresult cuMemcpy2D(const CUDA_MEMCPY2D_v1 *p)
{
    SHIM_ENTER(cuMemcpy2D, (p));
    return copy_2d_v1(p, 0, 0, NULL);
}

EXPORT CUresult cuMemcpy2DUnaligned(const CUDA_MEMCPY2D_v1 *p)
{
    SHIM_ENTER(cuMemcpy2DUnaligned, (p));
    return copy_2d_v1(p, 1, 0, NULL);
}

EXPORT CUresult cuMemcpy2DAsync(const CUDA_MEMCPY2D_v1 *p, CUstream st)
{
    SHIM_ENTER(cuMemcpy2DAsync, (p, st));
    return copy_2d_v1(p, 0, 1, st);
}

EXPORT CUresult cuMemcpy3D(const CUDA_MEMCPY3D_v1 *p)
{
    SHIM_ENTER(cuMemcpy3D, (p));
    return copy_3d_v1(p, 0, NULL);
}

EXPORT CUresult cuMemcpy3DAsync(const CUDA_MEMCPY3D_v1 *p, CUstream st)
{
    SHIM_ENTER(cuMemcpy3DAsync, (p, st));
    return copy_3d_v1(p, 1, st);
}

/* ---- host memory and module globals -------------------------------------- */

EXPORT CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
    SHIM_ENTER(cuMemAllocHost, (pp, bytesize));
    CUresult r = require_legacy_context();
    return r != CUDA_SUCCESS ? r : cuMemAllocHost_v2(pp, bytesize);
}

EXPORT CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    SHIM_ENTER(cuMemHostGetDevicePointer, (pdptr, p, Flags));
    CUresult r = require_legacy_context();
    if (r != CUDA_SUCCESS) return r;
    if (!pdptr) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr dev;
    r = AS_V1(cuMemHostGetDevicePointer_v2(&dev, p, Flags));
    return r != CUDA_SUCCESS ? r : narrow("cuMemHostGetDevicePointer", dev, pdptr);
}

EXPORT CUresult cuModuleGetGlobal(CUdeviceptr_v1 *dptr, unsigned int *bytes, CUmodule hmod, const char *name)
{
    SHIM_ENTER(cuModuleGetGlobal, (dptr, bytes, hmod, name));
    CUresult r = require_legacy_context();
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr dev;
    size_t size;
    r = AS_V1(cuModuleGetGlobal_v2(&dev, &size, hmod, name));
    if (r != CUDA_SUCCESS) return r;
    unsigned int d32, s32;
    if ((r = narrow("cuModuleGetGlobal", dev, &d32)) != CUDA_SUCCESS ||
        (r = narrow("cuModuleGetGlobal (size)", size, &s32)) != CUDA_SUCCESS)
        return r;
    if (dptr) *dptr = d32;
    if (bytes) *bytes = s32;
    return CUDA_SUCCESS;
}
