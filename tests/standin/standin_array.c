/* SCUDA CPU stand-in driver: CUDA arrays, mipmapped arrays, array copies.
 *
 * An array is a dense block of device memory (an SI_AK_ARRAY allocation):
 * rows of Width elements back to back, Height rows (1 for 1D) per slice,
 * Depth slices (layers; 6 per cubemap). So an array side of a copy is a
 * device address with pitch Width * element size (si_array_side), and the
 * 1D copies (cuMemcpyAtoH...) are device copies at base + offset.
 * A mipmapped array owns its levels; an NV12 array owns its two planes
 * (luma W x H x 1, chroma W/2 x H/2 x 2): both are arrays the application
 * did not create and may not destroy. */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

static si_hset si_arrays, si_mipmaps;

size_t si_format_size(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_NV12:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

static void si_array_free(si_array *a)
{
    si_hset_del(&si_arrays, a);
    for (int i = 0; i < 2; i++)
        if (a->planes[i])
            si_array_free(a->planes[i]);
    if (a->mem && si_alloc_find(a->mem->base) == a->mem && a->mem->id == a->mem_id)
        si_alloc_release(a->mem);
    free(a);
}

/* a new array of desc (validated); owner is the mipmapped array or array it belongs to */
static CUresult si_array_new(si_ctx *c, const CUDA_ARRAY3D_DESCRIPTOR *d, void *owner, si_array **out)
{
    size_t es = si_format_size(d->Format);
    unsigned known = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |
                     CUDA_ARRAY3D_TEXTURE_GATHER;
    if (!es || (d->Format != CU_AD_FORMAT_NV12 && !(d->NumChannels == 1 || d->NumChannels == 2 || d->NumChannels == 4)) ||
        d->Width == 0 || (d->Flags & ~known) || d->Width > 65536 || d->Height > 65536 || d->Depth > 16384)
        return CUDA_ERROR_INVALID_VALUE;
    if ((d->Flags & CUDA_ARRAY3D_CUBEMAP) &&
        (d->Width != d->Height || d->Depth == 0 || d->Depth % 6 != 0 ||
         (!(d->Flags & CUDA_ARRAY3D_LAYERED) && d->Depth != 6)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((d->Flags & CUDA_ARRAY3D_LAYERED) && d->Depth == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (d->Format == CU_AD_FORMAT_NV12 && (d->Width % 2 || d->Height % 2 || d->Height == 0 || d->Depth))
        return CUDA_ERROR_INVALID_VALUE;
    si_array *a = si_xcalloc(1, sizeof(*a));
    a->desc = *d;
    a->ctx = c;
    a->owner = owner;
    a->elem = es * (d->Format == CU_AD_FORMAT_NV12 ? 1 : d->NumChannels);
    a->pitch = d->Width * a->elem;
    a->rows = d->Height ? d->Height : 1;
    a->slices = d->Depth ? d->Depth : 1;
    CUresult rc = CUDA_SUCCESS;
    if (d->Format == CU_AD_FORMAT_NV12) {
        CUDA_ARRAY3D_DESCRIPTOR p = {d->Width, d->Height, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, d->Flags};
        rc = si_array_new(c, &p, a, &a->planes[0]);
        p.Width /= 2, p.Height /= 2, p.NumChannels = 2;
        if (!rc)
            rc = si_array_new(c, &p, a, &a->planes[1]);
    } else {
        rc = si_dev_alloc(c, a->pitch * a->rows * a->slices, SI_AK_ARRAY, NULL, &a->mem);
        if (!rc)
            a->mem_id = a->mem->id;
    }
    si_hset_add(&si_arrays, a);
    if (rc) {
        si_array_free(a);
        return rc;
    }
    *out = a;
    return CUDA_SUCCESS;
}

/* a live array whose memory is still there (its context may have gone) */
si_array *si_array_get(CUarray h)
{
    si_array *a = (si_array *)h;
    if (!h || !si_hset_has(&si_arrays, a))
        return NULL;
    if (a->mem && (si_alloc_find(a->mem->base) != a->mem || a->mem->id != a->mem_id))
        return NULL;
    return a;
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!pHandle || !d))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_array *a = NULL;
    if (!rc)
        rc = si_array_new(c, d, NULL, &a);
    if (!rc)
        *pHandle = (CUarray)a;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return cuArray3DCreate_v2(pHandle, NULL);
    CUDA_ARRAY3D_DESCRIPTOR e = {d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
    return cuArray3DCreate_v2(pHandle, &e);
}

CUresult CUDAAPI cuArrayDestroy(CUarray h)
{
    si_enter();
    CUresult rc = si_check_init();
    si_array *a = (si_array *)h;
    if (!rc && (!h || !si_hset_has(&si_arrays, a)))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && a->owner)
        rc = CUDA_ERROR_INVALID_HANDLE; /* a level or a plane: its owner frees it */
    if (!rc) {
        si_dev_wait_idle(a->ctx->dev);
        si_array_free(a);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray h)
{
    si_enter();
    CUresult rc = si_check_init();
    si_array *a = si_array_get(h);
    if (!rc && !a)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && !d)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *d = a->desc;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *d, CUarray h)
{
    CUDA_ARRAY3D_DESCRIPTOR e;
    CUresult rc = cuArray3DGetDescriptor_v2(d ? &e : NULL, h);
    if (!rc && (e.Depth || e.Flags))
        return CUDA_ERROR_INVALID_VALUE; /* as the driver: only for 1D and 2D arrays */
    if (!rc) {
        d->Width = e.Width, d->Height = e.Height;
        d->Format = e.Format, d->NumChannels = e.NumChannels;
    }
    return rc;
}

CUresult CUDAAPI cuArrayGetPlane(CUarray *pPlaneArray, CUarray h, unsigned int planeIdx)
{
    si_enter();
    CUresult rc = si_check_init();
    si_array *a = si_array_get(h);
    if (!rc && !a)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && (!pPlaneArray || planeIdx > 1 || !a->planes[planeIdx]))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pPlaneArray = (CUarray)a->planes[planeIdx];
    si_leave();
    return rc;
}

/* ---- mipmapped arrays ---- */

static void si_mipmap_free(si_mipmap *m)
{
    si_hset_del(&si_mipmaps, m);
    for (unsigned i = 0; i < m->n_levels; i++)
        if (m->levels[i])
            si_array_free(m->levels[i]);
    free(m);
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
                                        unsigned int numLevels)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!pHandle || !d || numLevels == 0 || numLevels > SI_MAX_LEVELS ||
                d->Format == CU_AD_FORMAT_NV12))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_mipmap *m = NULL;
    if (!rc) {
        m = si_xcalloc(1, sizeof(*m));
        m->desc = *d;
        m->n_levels = numLevels;
        si_hset_add(&si_mipmaps, m);
        CUDA_ARRAY3D_DESCRIPTOR l = *d;
        bool layered = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
        for (unsigned i = 0; !rc && i < numLevels; i++) {
            rc = si_array_new(c, &l, m, &m->levels[i]);
            l.Width = l.Width > 1 ? l.Width / 2 : 1;
            l.Height = l.Height > 1 ? l.Height / 2 : l.Height;
            if (!layered)
                l.Depth = l.Depth > 1 ? l.Depth / 2 : l.Depth;
        }
        if (rc)
            si_mipmap_free(m);
    }
    if (!rc)
        *pHandle = (CUmipmappedArray)m;
    si_leave();
    return rc;
}

si_mipmap *si_mipmap_get(CUmipmappedArray h)
{
    si_mipmap *m = (si_mipmap *)h;
    if (!h || !si_hset_has(&si_mipmaps, m))
        return NULL;
    for (unsigned i = 0; i < m->n_levels; i++)
        if (!si_array_get((CUarray)m->levels[i]))
            return NULL; /* its context went */
    return m;
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray *pLevelArray, CUmipmappedArray h, unsigned int level)
{
    si_enter();
    CUresult rc = si_check_init();
    si_mipmap *m = si_mipmap_get(h);
    if (!rc && !m)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && (!pLevelArray || level >= m->n_levels))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pLevelArray = (CUarray)m->levels[level];
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    si_enter();
    CUresult rc = si_check_init();
    si_mipmap *m = (si_mipmap *)h;
    if (!rc && (!h || !si_hset_has(&si_mipmaps, m)))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        if (m->levels[0])
            si_dev_wait_idle(m->levels[0]->ctx->dev);
        si_mipmap_free(m);
    }
    si_leave();
    return rc;
}

/* ---- copies ---- */

/* The start of a copy's array side, checked against the array's extent
 * (x in bytes). Lock held. */
CUresult si_array_side(CUarray h, size_t x, size_t y, size_t z, size_t wbytes, size_t height,
                       size_t depth, uintptr_t *addr, size_t *pitch, size_t *rows)
{
    si_array *a = si_array_get(h);
    if (!a)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!a->mem)
        return CUDA_ERROR_INVALID_VALUE; /* a planar array: copy its planes */
    if (x > a->pitch || wbytes > a->pitch - x || y > a->rows || height > a->rows - y ||
        z > a->slices || depth > a->slices - z)
        return CUDA_ERROR_INVALID_VALUE;
    *addr = a->mem->base + (z * a->rows + y) * a->pitch + x;
    *pitch = a->pitch;
    *rows = a->rows;
    return CUDA_SUCCESS;
}

/* the device address of bytes [off, off + n) of an array, for the 1D copies */
static CUresult si_array_span(CUarray h, size_t off, size_t n, CUdeviceptr *out)
{
    si_enter();
    CUresult rc = si_check_init();
    si_array *a = rc ? NULL : si_array_get(h);
    if (!rc && !a)
        rc = CUDA_ERROR_INVALID_HANDLE;
    size_t total = a && a->mem ? a->pitch * a->rows * a->slices : 0;
    if (!rc && (off > total || n > total - off))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *out = (CUdeviceptr)(a->mem->base + off);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray dst, size_t off, const void *src, size_t n)
{
    CUdeviceptr d;
    CUresult rc = si_array_span(dst, off, n, &d);
    return rc ? rc : cuMemcpyHtoD_v2(d, src, n);
}

CUresult CUDAAPI cuMemcpyAtoH_v2(void *dst, CUarray src, size_t off, size_t n)
{
    CUdeviceptr s;
    CUresult rc = si_array_span(src, off, n, &s);
    return rc ? rc : cuMemcpyDtoH_v2(dst, s, n);
}

CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray dst, size_t off, const void *src, size_t n, CUstream st)
{
    CUdeviceptr d;
    CUresult rc = si_array_span(dst, off, n, &d);
    return rc ? rc : cuMemcpyHtoDAsync_v2(d, src, n, st);
}

CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void *dst, CUarray src, size_t off, size_t n, CUstream st)
{
    CUdeviceptr s;
    CUresult rc = si_array_span(src, off, n, &s);
    return rc ? rc : cuMemcpyDtoHAsync_v2(dst, s, n, st);
}

CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray src, size_t off, size_t n)
{
    CUdeviceptr s;
    CUresult rc = si_array_span(src, off, n, &s);
    return rc ? rc : cuMemcpyDtoD_v2(dst, s, n);
}

CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray dst, size_t off, CUdeviceptr src, size_t n)
{
    CUdeviceptr d;
    CUresult rc = si_array_span(dst, off, n, &d);
    return rc ? rc : cuMemcpyDtoD_v2(d, src, n);
}

CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dst, size_t doff, CUarray src, size_t soff, size_t n)
{
    CUdeviceptr d, s;
    CUresult rc = si_array_span(dst, doff, n, &d);
    if (!rc)
        rc = si_array_span(src, soff, n, &s);
    return rc ? rc : cuMemcpyDtoD_v2(d, s, n);
}
