/* legacy_ctx.c - the session's _v2 calls in a legacy context go to the
 * 32-bit exports (legacy_ctx.h). Only the forms the session itself calls
 * for the client's copies, module globals and zero-copy pointers are
 * wrapped: a generated _v2 call the client forwards (cuMemAlloc_v2, say)
 * still gets the driver's own answer. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "legacy_ctx.h"

#define MAX_LEGACY 64

static struct driver_table orig;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext legacy[MAX_LEGACY];
static atomic_int count; /* 0: no wrapper asks the driver for the current context */

void legacy_ctx_add(CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LEGACY; i++)
        if (!legacy[i]) {
            legacy[i] = ctx;
            atomic_fetch_add(&count, 1);
            break;
        }
    pthread_mutex_unlock(&lock);
}

void legacy_ctx_remove(CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LEGACY; i++)
        if (ctx && legacy[i] == ctx) {
            legacy[i] = NULL;
            atomic_fetch_sub(&count, 1);
        }
    pthread_mutex_unlock(&lock);
}

static int in_legacy_context(void)
{
    if (atomic_load(&count) == 0) return 0;
    CUcontext cur = NULL;
    if (!orig.cuCtxGetCurrent || orig.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur) return 0;
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_LEGACY && !found; i++) found = legacy[i] == cur;
    pthread_mutex_unlock(&lock);
    return found;
}

static int fits(uint64_t v) { return v <= UINT_MAX; }

/* ---- linear copies ---------------------------------------------------- */

static CUresult wrap_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    if (!in_legacy_context()) return orig.cuMemcpyHtoD_v2(dst, src, n);
    if (!fits(dst) || !fits(n) || !orig.cuMemcpyHtoD) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyHtoD((CUdeviceptr_v1)dst, src, (unsigned)n);
}

static CUresult wrap_cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream st)
{
    if (!in_legacy_context()) return orig.cuMemcpyHtoDAsync_v2(dst, src, n, st);
    if (!fits(dst) || !fits(n) || !orig.cuMemcpyHtoDAsync) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyHtoDAsync((CUdeviceptr_v1)dst, src, (unsigned)n, st);
}

static CUresult wrap_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    if (!in_legacy_context()) return orig.cuMemcpyDtoH_v2(dst, src, n);
    if (!fits(src) || !fits(n) || !orig.cuMemcpyDtoH) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyDtoH(dst, (CUdeviceptr_v1)src, (unsigned)n);
}

static CUresult wrap_cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream st)
{
    if (!in_legacy_context()) return orig.cuMemcpyDtoHAsync_v2(dst, src, n, st);
    if (!fits(src) || !fits(n) || !orig.cuMemcpyDtoHAsync) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyDtoHAsync(dst, (CUdeviceptr_v1)src, (unsigned)n, st);
}

static CUresult wrap_cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    if (!in_legacy_context()) return orig.cuMemcpyDtoD_v2(dst, src, n);
    if (!fits(dst) || !fits(src) || !fits(n) || !orig.cuMemcpyDtoD) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyDtoD((CUdeviceptr_v1)dst, (CUdeviceptr_v1)src, (unsigned)n);
}

static CUresult wrap_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    if (!in_legacy_context()) return orig.cuMemcpyDtoDAsync_v2(dst, src, n, st);
    if (!fits(dst) || !fits(src) || !fits(n) || !orig.cuMemcpyDtoDAsync) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpyDtoDAsync((CUdeviceptr_v1)dst, (CUdeviceptr_v1)src, (unsigned)n, st);
}

/* ---- 2D and 3D copies -------------------------------------------------- */

static int narrow_2d(const CUDA_MEMCPY2D *p, CUDA_MEMCPY2D_v1 *o)
{
    if (!fits(p->srcXInBytes) || !fits(p->srcY) || !fits(p->srcDevice) || !fits(p->srcPitch) ||
        !fits(p->dstXInBytes) || !fits(p->dstY) || !fits(p->dstDevice) || !fits(p->dstPitch) ||
        !fits(p->WidthInBytes) || !fits(p->Height))
        return 0;
    *o = (CUDA_MEMCPY2D_v1){
        .srcXInBytes = (unsigned)p->srcXInBytes, .srcY = (unsigned)p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost, .srcDevice = (CUdeviceptr_v1)p->srcDevice, .srcArray = p->srcArray,
        .srcPitch = (unsigned)p->srcPitch,
        .dstXInBytes = (unsigned)p->dstXInBytes, .dstY = (unsigned)p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost, .dstDevice = (CUdeviceptr_v1)p->dstDevice, .dstArray = p->dstArray,
        .dstPitch = (unsigned)p->dstPitch,
        .WidthInBytes = (unsigned)p->WidthInBytes, .Height = (unsigned)p->Height,
    };
    return 1;
}

static int narrow_3d(const CUDA_MEMCPY3D *p, CUDA_MEMCPY3D_v1 *o)
{
    const size_t v[] = {p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD, p->srcDevice, p->srcPitch, p->srcHeight,
                        p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD, p->dstDevice, p->dstPitch, p->dstHeight,
                        p->WidthInBytes, p->Height, p->Depth};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!fits(v[i])) return 0;
    *o = (CUDA_MEMCPY3D_v1){
        .srcXInBytes = (unsigned)p->srcXInBytes, .srcY = (unsigned)p->srcY, .srcZ = (unsigned)p->srcZ,
        .srcLOD = (unsigned)p->srcLOD, .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost,
        .srcDevice = (CUdeviceptr_v1)p->srcDevice, .srcArray = p->srcArray, .reserved0 = p->reserved0,
        .srcPitch = (unsigned)p->srcPitch, .srcHeight = (unsigned)p->srcHeight,
        .dstXInBytes = (unsigned)p->dstXInBytes, .dstY = (unsigned)p->dstY, .dstZ = (unsigned)p->dstZ,
        .dstLOD = (unsigned)p->dstLOD, .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost,
        .dstDevice = (CUdeviceptr_v1)p->dstDevice, .dstArray = p->dstArray, .reserved1 = p->reserved1,
        .dstPitch = (unsigned)p->dstPitch, .dstHeight = (unsigned)p->dstHeight,
        .WidthInBytes = (unsigned)p->WidthInBytes, .Height = (unsigned)p->Height, .Depth = (unsigned)p->Depth,
    };
    return 1;
}

static CUresult wrap_cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p)
{
    if (!p || !in_legacy_context()) return orig.cuMemcpy2DUnaligned_v2(p);
    CUDA_MEMCPY2D_v1 o;
    if (!narrow_2d(p, &o) || !orig.cuMemcpy2DUnaligned) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpy2DUnaligned(&o);
}

static CUresult wrap_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream st)
{
    if (!p || !in_legacy_context()) return orig.cuMemcpy2DAsync_v2(p, st);
    CUDA_MEMCPY2D_v1 o;
    if (!narrow_2d(p, &o) || !orig.cuMemcpy2DAsync) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpy2DAsync(&o, st);
}

static CUresult wrap_cuMemcpy3D_v2(const CUDA_MEMCPY3D *p)
{
    if (!p || !in_legacy_context()) return orig.cuMemcpy3D_v2(p);
    CUDA_MEMCPY3D_v1 o;
    if (!narrow_3d(p, &o) || !orig.cuMemcpy3D) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpy3D(&o);
}

static CUresult wrap_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream st)
{
    if (!p || !in_legacy_context()) return orig.cuMemcpy3DAsync_v2(p, st);
    CUDA_MEMCPY3D_v1 o;
    if (!narrow_3d(p, &o) || !orig.cuMemcpy3DAsync) return CUDA_ERROR_INVALID_VALUE;
    return orig.cuMemcpy3DAsync(&o, st);
}

/* ---- module globals and zero-copy pointers ----------------------------------- */

static CUresult wrap_cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name)
{
    if (!in_legacy_context()) return orig.cuModuleGetGlobal_v2(dptr, bytes, m, name);
    if (!orig.cuModuleGetGlobal) return CUDA_ERROR_NOT_SUPPORTED;
    CUdeviceptr_v1 d = 0;
    unsigned int n = 0;
    CUresult r = orig.cuModuleGetGlobal(dptr ? &d : NULL, bytes ? &n : NULL, m, name);
    if (r == CUDA_SUCCESS && dptr) *dptr = d;
    if (r == CUDA_SUCCESS && bytes) *bytes = n;
    return r;
}

static CUresult wrap_cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
    if (!in_legacy_context()) return orig.cuMemHostGetDevicePointer_v2(pdptr, p, flags);
    if (!orig.cuMemHostGetDevicePointer) return CUDA_ERROR_NOT_SUPPORTED;
    CUdeviceptr_v1 d = 0;
    CUresult r = orig.cuMemHostGetDevicePointer(pdptr ? &d : NULL, p, flags);
    if (r == CUDA_SUCCESS && pdptr) *pdptr = d;
    return r;
}

#define WRAP(name) \
    if (t->name) t->name = wrap_##name

void legacy_ctx_install(struct driver_table *t)
{
    orig = *t;
    WRAP(cuMemcpyHtoD_v2);
    WRAP(cuMemcpyHtoDAsync_v2);
    WRAP(cuMemcpyDtoH_v2);
    WRAP(cuMemcpyDtoHAsync_v2);
    WRAP(cuMemcpyDtoD_v2);
    WRAP(cuMemcpyDtoDAsync_v2);
    WRAP(cuMemcpy2DUnaligned_v2);
    WRAP(cuMemcpy2DAsync_v2);
    WRAP(cuMemcpy3D_v2);
    WRAP(cuMemcpy3DAsync_v2);
    WRAP(cuModuleGetGlobal_v2);
    WRAP(cuMemHostGetDevicePointer_v2);
}
