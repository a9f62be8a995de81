/* memcpy_batch.c - cuMemcpyBatchAsync and cuMemcpy3DBatchAsync, each copy
 * of the batch made with the client's own copy paths (memcpy.c).
 *
 * A batch promises no order among its copies, only that the batch as a
 * whole runs in stream order: copies one after another on the stream is
 * one of the orders it allows. The attributes are hints and orderings
 * that this order already satisfies: a source read "during the API call"
 * is read before the call returns (a host source's bytes are in the
 * socket by then, docs/architecture.md 3.3), and location hints only
 * concern memory the driver places. So they are checked as the driver
 * checks them, then honoured by being in order.
 *
 * The whole batch is checked before the first copy is sent, so a bad
 * argument leaves the stream untouched; a copy that fails stops the batch
 * and, in the first exports, names its index in *failIdx (SIZE_MAX when the
 * error concerns no one copy, as the driver does). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "shim.h"

#define NO_COPY SIZE_MAX

/* The legacy NULL stream synchronizes with every other stream, which a
 * batch may not ask for (the driver refuses it). */
static int stream_allowed(CUstream st) { return st != NULL && st != CU_STREAM_LEGACY; }

static int access_order_valid(CUmemcpySrcAccessOrder o)
{
    return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM || o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ||
           o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

static int copy_flags_valid(unsigned flags) { return (flags & ~CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE) == 0; }

/* attrsIdxs must start at 0, rise strictly and stay below count; every
 * attribute must name an access order. */
static CUresult check_attributes(size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs, size_t n)
{
    if (n == 0 || n > count || attrs == NULL || idxs == NULL || idxs[0] != 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < n; k++) {
        if (k > 0 && idxs[k] <= idxs[k - 1]) return CUDA_ERROR_INVALID_VALUE;
        if (idxs[k] >= count) return CUDA_ERROR_INVALID_VALUE;
        if (!access_order_valid(attrs[k].srcAccessOrder) || !copy_flags_valid(attrs[k].flags))
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult batch_1d(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
                         size_t *idxs, size_t nattrs, size_t *fail, CUstream st)
{
    if (fail) *fail = NO_COPY;
    if (count == 0 || !dsts || !srcs || !sizes || !stream_allowed(st)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_attributes(count, attrs, idxs, nattrs);
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++) {
        r = cuMemcpyAsync(dsts[i], srcs[i], sizes[i], st);
        if (r != CUDA_SUCCESS && fail) *fail = i;
    }
    return r;
}

EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                   CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                   CUstream hStream)
{
    SHIM_ENTER(cuMemcpyBatchAsync, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream));
    return batch_1d(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream);
}

EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                      CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
    SHIM_ENTER(cuMemcpyBatchAsync_v2, (dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, hStream));
    return batch_1d(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream);
}

/* ---- 3D: each operation becomes a CUDA_MEMCPY3D --------------------------- */

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0; /* block-compressed and planar formats: no element size to scale by */
    }
}

/* An array operand's element size (format times channels), or 0. */
static size_t array_element(CUarray a)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (cuArray3DGetDescriptor_v2(&d, a) != CUDA_SUCCESS) return 0;
    return format_bytes(d.Format) * d.NumChannels;
}

/* One side of the copy; pointer operands are UNIFIED: the copy paths ask
 * the session which side of the wire the address is on. */
static int operand_side(const CUmemcpy3DOperand *o, size_t elem, const CUextent3D *ext, CUmemorytype *type,
                        CUdeviceptr *ptr, CUarray *array, size_t *x, size_t *y, size_t *z, size_t *pitch,
                        size_t *height)
{
    if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER) {
        size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : ext->width;
        size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : ext->height;
        if (row < ext->width || layer < ext->height) return 0;
        *type = CU_MEMORYTYPE_UNIFIED;
        *ptr = o->op.ptr.ptr;
        *pitch = row * elem;
        *height = layer;
        return 1;
    }
    if (o->type != CU_MEMCPY_OPERAND_TYPE_ARRAY || o->op.array.array == NULL) return 0;
    *type = CU_MEMORYTYPE_ARRAY;
    *array = o->op.array.array;
    *x = o->op.array.offset.x * elem;
    *y = o->op.array.offset.y;
    *z = o->op.array.offset.z;
    return 1;
}

/* The element size of the operation: 1 between pointers, else the array's
 * (both arrays' must agree). 0 when the operation is invalid. */
static size_t op_element(const CUDA_MEMCPY3D_BATCH_OP *op)
{
    size_t se = op->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_element(op->src.op.array.array) : 1;
    size_t de = op->dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? array_element(op->dst.op.array.array) : 1;
    if (op->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY && op->dst.type == CU_MEMCPY_OPERAND_TYPE_ARRAY)
        return se == de ? se : 0;
    if (se == 0 || de == 0) return 0;
    return se > de ? se : de;
}

static CUresult op_to_copy(const CUDA_MEMCPY3D_BATCH_OP *op, CUDA_MEMCPY3D *c)
{
    memset(c, 0, sizeof *c);
    const CUextent3D *e = &op->extent;
    if (e->width == 0 || e->height == 0 || e->depth == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!access_order_valid(op->srcAccessOrder) || !copy_flags_valid(op->flags)) return CUDA_ERROR_INVALID_VALUE;
    size_t elem = op_element(op);
    if (elem == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!operand_side(&op->src, elem, e, &c->srcMemoryType, &c->srcDevice, &c->srcArray, &c->srcXInBytes, &c->srcY,
                      &c->srcZ, &c->srcPitch, &c->srcHeight) ||
        !operand_side(&op->dst, elem, e, &c->dstMemoryType, &c->dstDevice, &c->dstArray, &c->dstXInBytes, &c->dstY,
                      &c->dstZ, &c->dstPitch, &c->dstHeight))
        return CUDA_ERROR_INVALID_VALUE;
    c->WidthInBytes = e->width * elem;
    c->Height = e->height;
    c->Depth = e->depth;
    return CUDA_SUCCESS;
}

static CUresult batch_3d(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail, unsigned long long flags, CUstream st)
{
    if (fail) *fail = NO_COPY;
    if (n == 0 || ops == NULL || flags != 0 || !stream_allowed(st)) return CUDA_ERROR_INVALID_VALUE;
    if (n > SIZE_MAX / sizeof(CUDA_MEMCPY3D)) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D *copies = malloc(n * sizeof *copies);
    if (!copies) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    size_t i = 0;
    for (; r == CUDA_SUCCESS && i < n; i++) r = op_to_copy(&ops[i], &copies[i]);
    for (size_t k = 0; r == CUDA_SUCCESS && k < n; k++) {
        i = k + 1;
        r = cuMemcpy3DAsync_v2(&copies[k], st);
    }
    free(copies);
    if (r != CUDA_SUCCESS && fail) *fail = i - 1;
    return r;
}

EXPORT CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                     unsigned long long flags, CUstream hStream)
{
    SHIM_ENTER(cuMemcpy3DBatchAsync, (numOps, opList, failIdx, flags, hStream));
    return batch_3d(numOps, opList, failIdx, flags, hStream);
}

EXPORT CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
                                        CUstream hStream)
{
    SHIM_ENTER(cuMemcpy3DBatchAsync_v2, (numOps, opList, flags, hStream));
    return batch_3d(numOps, opList, NULL, flags, hStream);
}
