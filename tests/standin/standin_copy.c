/* SCUDA CPU stand-in driver: copies and memsets, every form.
 *
 * Every copy becomes one strided descriptor (si_copy): rows of `width`
 * bytes, row (y, z) at base + (z * height_of_planes + y) * pitch.
 * Any side that lies in device memory, or in memory the stand-in allocated
 * for the host (cuMemAllocHost, cuMemHostRegister), is checked to lie
 * wholly inside one allocation; other host pointers are the caller's.
 *
 * Host synchronization follows the real driver's rules:
 *  - a copy to pageable host memory returns when it is done (sync or async);
 *  - a copy from pageable host memory is staged (the caller may reuse its
 *    buffer at once) and does not wait;
 *  - a synchronous copy to or from pinned host memory waits;
 *  - device-to-device copies and memsets (except to pinned host memory)
 *    do not wait.
 */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>

#define SI_MAX_PITCH 2147483647u

/* bytes from the first to one past the last byte touched, 0 if empty */
static bool si_span(size_t pitch, size_t plane_rows, size_t width, size_t height, size_t depth,
                    size_t *out)
{
    if (!width || !height || !depth) {
        *out = 0;
        return true;
    }
    size_t rows, off;
    if (__builtin_mul_overflow(depth - 1, plane_rows, &rows) ||
        __builtin_add_overflow(rows, height - 1, &rows) ||
        __builtin_mul_overflow(rows, pitch, &off) || __builtin_add_overflow(off, width, out))
        return false;
    return true;
}

/* kind of memory at p: 0 foreign host memory, 1 a stand-in allocation
 * (device, global, pinned host), -1 invalid */
static int si_side_kind(uintptr_t p, size_t span)
{
    si_alloc *a = si_alloc_find(p);
    if (a || si_in_device_range(p))
        return si_range(p, span) ? 1 : -1;
    return p ? 0 : -1;
}

static bool si_pinned(uintptr_t p)
{
    si_alloc *a = si_alloc_find(p);
    return a && (a->kind == SI_AK_HOST || a->kind == SI_AK_HOST_REG);
}

CUresult si_copy_validate(const si_copy *c)
{
    size_t ss, ds;
    if (!si_span(c->spitch, c->sheight, c->width, c->height, c->depth, &ss) ||
        !si_span(c->dpitch, c->dheight, c->width, c->height, c->depth, &ds))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ss)
        return CUDA_SUCCESS;
    if (si_side_kind(c->src, ss) < 0 || si_side_kind(c->dst, ds) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

void si_copy_exec(const si_copy *c)
{
    for (size_t z = 0; z < c->depth; z++)
        for (size_t y = 0; y < c->height; y++) {
            const unsigned char *s =
                (const unsigned char *)(c->src + (z * c->sheight + y) * c->spitch);
            unsigned char *d = (unsigned char *)(c->dst + (z * c->dheight + y) * c->dpitch);
            memmove(d, s, c->width);
        }
}

/* one copy, from the API layer: validates, stages, submits, waits */
static CUresult si_copy_submit(si_copy *c, bool src_cuda, bool dst_cuda, CUstream h, bool async,
                               bool per_thread)
{
    si_stream *s = NULL;
    CUresult rc;
    if (async)
        rc = si_resolve_stream(h, per_thread, &s);
    else
        rc = si_resolve_stream(per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY, false, &s);
    if (rc)
        return rc;
    size_t ss, ds;
    if (!si_span(c->spitch, c->sheight, c->width, c->height, c->depth, &ss) ||
        !si_span(c->dpitch, c->dheight, c->width, c->height, c->depth, &ds))
        return CUDA_ERROR_INVALID_VALUE;
    if (!ss)
        return CUDA_SUCCESS;
    int sk = si_side_kind(c->src, ss), dk = si_side_kind(c->dst, ds);
    if (sk < 0 || dk < 0 || (src_cuda && sk == 0) || (dst_cuda && dk == 0))
        return CUDA_ERROR_INVALID_VALUE;
    bool wait = dk == 0 || (!async && (si_pinned(c->src) || si_pinned(c->dst)));
    if (wait && si_in_callback)
        return CUDA_ERROR_NOT_PERMITTED;

    si_op *op = si_op_new(SI_OP_COPY);
    op->u.copy.c = *c;
    if (sk == 0 && !si_would_inline(s)) {
        /* stage pageable source memory: the caller may reuse it at once */
        size_t packed;
        if (__builtin_mul_overflow(c->width, c->height, &packed) ||
            __builtin_mul_overflow(packed, c->depth, &packed)) {
            si_op_free(op);
            return CUDA_ERROR_INVALID_VALUE;
        }
        unsigned char *buf = malloc(packed);
        if (!buf) {
            si_op_free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        si_copy st = *c;
        st.dst = (uintptr_t)buf;
        st.dpitch = c->width;
        st.dheight = c->height;
        si_copy_exec(&st);
        op->u.copy.staging = buf;
        op->u.copy.c.src = (uintptr_t)buf;
        op->u.copy.c.spitch = c->width;
        op->u.copy.c.sheight = c->height;
    }
    si_ctx *ctx = s->ctx;
    uint64_t seq = si_submit(s, op);
    if (wait) {
        si_wait_seq(s, seq);
        if (si_ctx_valid(ctx)) {
            si_flush_printf(ctx);
            return si_g.sticky;
        }
    }
    return CUDA_SUCCESS;
}

static si_copy si_copy_linear(uintptr_t dst, uintptr_t src, size_t n)
{
    si_copy c;
    memset(&c, 0, sizeof(c));
    c.src = src;
    c.dst = dst;
    c.spitch = c.dpitch = n;
    c.sheight = c.dheight = 1;
    c.width = n;
    c.height = c.depth = 1;
    return c;
}

static CUresult si_linear(uintptr_t dst, uintptr_t src, size_t n, bool src_cuda, bool dst_cuda,
                          CUstream h, bool async, bool pt)
{
    si_enter();
    si_copy c = si_copy_linear(dst, src, n);
    CUresult rc = si_copy_submit(&c, src_cuda, dst_cuda, h, async, pt);
    si_leave();
    return rc;
}

/* ---- 1D copies ---- */

#define SI_H(p) ((uintptr_t)(p))

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SI_V2_GUARD();
    return si_linear(dstDevice, SI_H(srcHost), ByteCount, false, true, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                             size_t ByteCount)
{
    return si_linear(dstDevice, SI_H(srcHost), ByteCount, false, true, NULL, false, true);
}
CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SI_V2_GUARD();
    return si_linear(SI_H(dstHost), srcDevice, ByteCount, true, false, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return si_linear(SI_H(dstHost), srcDevice, ByteCount, true, false, NULL, false, true);
}
CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SI_V2_GUARD();
    return si_linear(dstDevice, srcDevice, ByteCount, true, true, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                             size_t ByteCount)
{
    return si_linear(dstDevice, srcDevice, ByteCount, true, true, NULL, false, true);
}
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return si_linear(dst, src, ByteCount, false, false, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    return si_linear(dst, src, ByteCount, false, false, NULL, false, true);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                      CUstream hStream)
{
    SI_V2_GUARD();
    return si_linear(dstDevice, SI_H(srcHost), ByteCount, false, true, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                                  size_t ByteCount, CUstream hStream)
{
    return si_linear(dstDevice, SI_H(srcHost), ByteCount, false, true, hStream, true, true);
}
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    SI_V2_GUARD();
    return si_linear(SI_H(dstHost), srcDevice, ByteCount, true, false, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                                  size_t ByteCount, CUstream hStream)
{
    return si_linear(SI_H(dstHost), srcDevice, ByteCount, true, false, hStream, true, true);
}
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
    SI_V2_GUARD();
    return si_linear(dstDevice, srcDevice, ByteCount, true, true, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                                  size_t ByteCount, CUstream hStream)
{
    return si_linear(dstDevice, srcDevice, ByteCount, true, true, hStream, true, true);
}
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream)
{
    return si_linear(dst, src, ByteCount, false, false, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                           CUstream hStream)
{
    return si_linear(dst, src, ByteCount, false, false, hStream, true, true);
}

/* ---- peer copies ---- */

static CUresult si_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                        size_t n, CUstream h, bool async, bool pt)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!si_ctx_valid((si_ctx *)dctx) || !si_ctx_valid((si_ctx *)sctx)))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (!rc) {
        si_copy c = si_copy_linear(dst, src, n);
        rc = si_copy_submit(&c, true, true, h, async, pt);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
    return si_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
                                          CUdeviceptr srcDevice, CUcontext srcContext,
                                          size_t ByteCount)
{
    return si_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, NULL, false, true);
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                   CUstream hStream)
{
    return si_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
                                               CUdeviceptr srcDevice, CUcontext srcContext,
                                               size_t ByteCount, CUstream hStream)
{
    return si_peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true, true);
}

/* ---- 2D and 3D copies ---- */

/* start address of one side: base + (z * height + y) * pitch + x */
static CUresult si_side_addr(CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
                             size_t x, size_t y, size_t z, size_t *pitch_io, size_t *height_io,
                             const size_t extent[3], uintptr_t *addr, bool *must_cuda)
{
    uintptr_t base;
    size_t pitch = *pitch_io, height = *height_io;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        base = (uintptr_t)host;
        *must_cuda = false;
        break;
    case CU_MEMORYTYPE_DEVICE:
        base = (uintptr_t)dev;
        *must_cuda = true;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        base = (uintptr_t)dev;
        *must_cuda = false;
        break;
    case CU_MEMORYTYPE_ARRAY: /* dense rows: the array's own pitch and height (standin_array.c) */
        *must_cuda = true;
        return si_array_side(array, x, y, z, extent[0], extent[1], extent[2], addr, pitch_io, height_io);
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t rows, off;
    if (__builtin_mul_overflow(z, height, &rows) || __builtin_add_overflow(rows, y, &rows) ||
        __builtin_mul_overflow(rows, pitch, &off) || __builtin_add_overflow(off, x, &off) ||
        base + off < base)
        return CUDA_ERROR_INVALID_VALUE;
    *addr = base + off;
    return CUDA_SUCCESS;
}

static CUresult si_copy2d(const CUDA_MEMCPY2D *p, CUstream h, bool async, bool pt)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !p)
        rc = CUDA_ERROR_INVALID_VALUE;
    si_copy c;
    memset(&c, 0, sizeof(c));
    bool sm = false, dm = false;
    size_t ext[3] = {p ? p->WidthInBytes : 0, p ? p->Height : 0, 1};
    size_t sp = p ? p->srcPitch : 0, dp = p ? p->dstPitch : 0, sh = p ? p->Height : 0, dh = sh;
    if (!rc)
        rc = si_side_addr(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                          p->srcY, 0, &sp, &sh, ext, &c.src, &sm);
    if (!rc)
        rc = si_side_addr(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                          p->dstY, 0, &dp, &dh, ext, &c.dst, &dm);
    if (!rc && p->Height > 1 && (sp < p->WidthInBytes || dp < p->WidthInBytes))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && (sp > SI_MAX_PITCH || dp > SI_MAX_PITCH))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        c.spitch = sp;
        c.dpitch = dp;
        c.sheight = sh;
        c.dheight = dh;
        c.width = p->WidthInBytes;
        c.height = p->Height;
        c.depth = 1;
        rc = si_copy_submit(&c, sm, dm, h, async, pt);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    SI_V2_GUARD();
    return si_copy2d(pCopy, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return si_copy2d(pCopy, NULL, false, true);
}
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    SI_V2_GUARD();
    return si_copy2d(pCopy, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    return si_copy2d(pCopy, NULL, false, true);
}
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    SI_V2_GUARD();
    return si_copy2d(pCopy, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    return si_copy2d(pCopy, hStream, true, true);
}

/* a 3D copy; the peer form passes contexts (validated) */
static CUresult si_copy3d_core(const CUDA_MEMCPY3D_PEER *p, bool peer, const void *reserved0,
                               const void *reserved1, CUstream h, bool async, bool pt)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !p)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && (reserved0 || reserved1 || p->srcLOD || p->dstLOD))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && peer) {
        if ((p->srcMemoryType == CU_MEMORYTYPE_DEVICE && !si_ctx_valid((si_ctx *)p->srcContext)) ||
            (p->dstMemoryType == CU_MEMORYTYPE_DEVICE && !si_ctx_valid((si_ctx *)p->dstContext)))
            rc = CUDA_ERROR_INVALID_CONTEXT;
    }
    si_copy c;
    memset(&c, 0, sizeof(c));
    bool sm = false, dm = false;
    size_t ext[3] = {p ? p->WidthInBytes : 0, p ? p->Height : 0, p ? p->Depth : 0};
    size_t sp = p ? p->srcPitch : 0, dp = p ? p->dstPitch : 0;
    size_t sh = p ? p->srcHeight : 0, dh = p ? p->dstHeight : 0;
    if (!rc)
        rc = si_side_addr(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes,
                          p->srcY, p->srcZ, &sp, &sh, ext, &c.src, &sm);
    if (!rc)
        rc = si_side_addr(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes,
                          p->dstY, p->dstZ, &dp, &dh, ext, &c.dst, &dm);
    if (!rc && (p->Height > 1 || p->Depth > 1) && (sp < p->WidthInBytes || dp < p->WidthInBytes))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && p->Depth > 1 && (sh < p->Height || dh < p->Height))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && (sp > SI_MAX_PITCH || dp > SI_MAX_PITCH))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        c.spitch = sp;
        c.dpitch = dp;
        c.sheight = sh;
        c.dheight = dh;
        c.width = p->WidthInBytes;
        c.height = p->Height;
        c.depth = p->Depth;
        rc = si_copy_submit(&c, sm, dm, h, async, pt);
    }
    si_leave();
    return rc;
}

static CUresult si_copy3d(const CUDA_MEMCPY3D *p, CUstream h, bool async, bool pt)
{
    if (!p)
        return si_copy3d_core(NULL, false, NULL, NULL, h, async, pt);
    CUDA_MEMCPY3D_PEER q;
    memset(&q, 0, sizeof(q));
    q.srcXInBytes = p->srcXInBytes;
    q.srcY = p->srcY;
    q.srcZ = p->srcZ;
    q.srcLOD = p->srcLOD;
    q.srcMemoryType = p->srcMemoryType;
    q.srcHost = p->srcHost;
    q.srcDevice = p->srcDevice;
    q.srcArray = p->srcArray;
    q.srcPitch = p->srcPitch;
    q.srcHeight = p->srcHeight;
    q.dstXInBytes = p->dstXInBytes;
    q.dstY = p->dstY;
    q.dstZ = p->dstZ;
    q.dstLOD = p->dstLOD;
    q.dstMemoryType = p->dstMemoryType;
    q.dstHost = p->dstHost;
    q.dstDevice = p->dstDevice;
    q.dstArray = p->dstArray;
    q.dstPitch = p->dstPitch;
    q.dstHeight = p->dstHeight;
    q.WidthInBytes = p->WidthInBytes;
    q.Height = p->Height;
    q.Depth = p->Depth;
    return si_copy3d_core(&q, false, p->reserved0, p->reserved1, h, async, pt);
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    SI_V2_GUARD();
    return si_copy3d(pCopy, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    return si_copy3d(pCopy, NULL, false, true);
}
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    SI_V2_GUARD();
    return si_copy3d(pCopy, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    return si_copy3d(pCopy, hStream, true, true);
}
CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    return si_copy3d_core(pCopy, true, NULL, NULL, NULL, false, false);
}
SI_API CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
    return si_copy3d_core(pCopy, true, NULL, NULL, NULL, false, true);
}
CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    return si_copy3d_core(pCopy, true, NULL, NULL, hStream, true, false);
}
SI_API CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy,
                                                 CUstream hStream)
{
    return si_copy3d_core(pCopy, true, NULL, NULL, hStream, true, true);
}

/* ---- memsets ---- */

static CUresult si_memset(uintptr_t dst, size_t pitch, uint32_t value, size_t width,
                          size_t height, unsigned elem, CUstream h, bool async, bool pt)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc;
    if (async)
        rc = si_resolve_stream(h, pt, &s);
    else
        rc = si_resolve_stream(pt ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY, false, &s);
    size_t row = 0, span = 0;
    if (!rc && (dst % elem != 0 || __builtin_mul_overflow(width, (size_t)elem, &row)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && height > 1 && (pitch < row || pitch % elem != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && width && height) {
        if (__builtin_mul_overflow(height - 1, pitch, &span) ||
            __builtin_add_overflow(span, row, &span) || !si_range(dst, span))
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc && width && height) {
        bool wait = !async && si_pinned(dst);
        if (wait && si_in_callback) {
            rc = CUDA_ERROR_NOT_PERMITTED;
        } else {
            si_op *op = si_op_new(SI_OP_MEMSET);
            op->u.memset.dst = dst;
            op->u.memset.pitch = height > 1 ? pitch : row;
            op->u.memset.width = width;
            op->u.memset.height = height;
            op->u.memset.elem = elem;
            op->u.memset.value = value;
            uint64_t seq = si_submit(s, op);
            if (wait)
                si_wait_seq(s, seq);
        }
    }
    si_leave();
    return rc;
}

#define SI_MEMSET_1D(NAME, T, ELEM, PT)                                              \
    SI_API CUresult CUDAAPI NAME(CUdeviceptr dstDevice, T v, size_t N)               \
    {                                                                                \
        return si_memset(dstDevice, 0, (uint32_t)v, N, 1, ELEM, NULL, false, PT);    \
    }
#define SI_MEMSET_1D_ASYNC(NAME, T, ELEM, PT)                                         \
    SI_API CUresult CUDAAPI NAME(CUdeviceptr dstDevice, T v, size_t N, CUstream h)    \
    {                                                                                 \
        return si_memset(dstDevice, 0, (uint32_t)v, N, 1, ELEM, h, true, PT);         \
    }
#define SI_MEMSET_2D(NAME, T, ELEM, PT)                                                  \
    SI_API CUresult CUDAAPI NAME(CUdeviceptr dstDevice, size_t dstPitch, T v,            \
                                 size_t Width, size_t Height)                            \
    {                                                                                    \
        return si_memset(dstDevice, dstPitch, (uint32_t)v, Width, Height, ELEM, NULL,    \
                         false, PT);                                                     \
    }
#define SI_MEMSET_2D_ASYNC(NAME, T, ELEM, PT)                                            \
    SI_API CUresult CUDAAPI NAME(CUdeviceptr dstDevice, size_t dstPitch, T v,            \
                                 size_t Width, size_t Height, CUstream h)                \
    {                                                                                    \
        return si_memset(dstDevice, dstPitch, (uint32_t)v, Width, Height, ELEM, h, true, \
                         PT);                                                            \
    }

SI_MEMSET_1D(cuMemsetD8_v2, unsigned char, 1, false)
SI_MEMSET_1D(cuMemsetD8_v2_ptds, unsigned char, 1, true)
SI_MEMSET_1D(cuMemsetD16_v2, unsigned short, 2, false)
SI_MEMSET_1D(cuMemsetD16_v2_ptds, unsigned short, 2, true)
SI_MEMSET_1D(cuMemsetD32_v2, unsigned int, 4, false)
SI_MEMSET_1D(cuMemsetD32_v2_ptds, unsigned int, 4, true)
SI_MEMSET_1D_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
SI_MEMSET_1D_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
SI_MEMSET_1D_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
SI_MEMSET_1D_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
SI_MEMSET_1D_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
SI_MEMSET_1D_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
SI_MEMSET_2D(cuMemsetD2D8_v2, unsigned char, 1, false)
SI_MEMSET_2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
SI_MEMSET_2D(cuMemsetD2D16_v2, unsigned short, 2, false)
SI_MEMSET_2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
SI_MEMSET_2D(cuMemsetD2D32_v2, unsigned int, 4, false)
SI_MEMSET_2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
SI_MEMSET_2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
SI_MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
SI_MEMSET_2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
SI_MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
SI_MEMSET_2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
SI_MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)
