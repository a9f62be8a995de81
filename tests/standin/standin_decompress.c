/* standin_decompress.c - cuMemBatchDecompressAsync: the driver's checks
 * (flags, the array, each operation's memory: device memory holding its
 * extent, padding zero), with *errorIndex naming the operation that failed
 * (SIZE_MAX for errors of no one operation), then the operations run in
 * stream order. The stand-in decodes Snappy, the one format simple
 * enough to model here; other algorithms are refused as a GPU without
 * that decompression engine refuses them (CUDA_ERROR_NOT_SUPPORTED, the
 * operation's index). */
#include <stdint.h>
#include <string.h>

#include "standin_internal.h"

/* Snappy's raw format: a varint length, then literals and back copies.
 * Returns the bytes written, or 0 for a stream that is malformed or does
 * not fit in `cap`. */
static size_t si_snappy_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    size_t at = 0, want = 0, got = 0;
    for (int shift = 0; at < n && shift < 35; shift += 7) {
        uint8_t b = in[at++];
        want |= (size_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    if (want > cap)
        return 0;
    while (at < n) {
        uint8_t tag = in[at++];
        size_t len, off = 0;
        if ((tag & 3) == 0) { /* literal */
            len = (size_t)(tag >> 2) + 1;
            if (len > 60) {
                size_t extra = len - 60;
                if (n - at < extra)
                    return 0;
                len = 0;
                for (size_t i = 0; i < extra; i++)
                    len |= (size_t)in[at + i] << (8 * i);
                len += 1, at += extra;
            }
            if (n - at < len || want - got < len)
                return 0;
            memcpy(out + got, in + at, len);
            at += len, got += len;
            continue;
        }
        size_t width = (tag & 3) == 1 ? 1 : (tag & 3) == 2 ? 2 : 4;
        if (n - at < width)
            return 0;
        len = (tag & 3) == 1 ? 4 + (size_t)((tag >> 2) & 7) : (size_t)(tag >> 2) + 1;
        for (size_t i = 0; i < width; i++)
            off |= (size_t)in[at + i] << (8 * i);
        if ((tag & 3) == 1)
            off |= (size_t)(tag >> 5) << 8;
        at += width;
        if (off == 0 || off > got || want - got < len)
            return 0;
        for (size_t i = 0; i < len; i++, got++) /* overlapping copies repeat */
            out[got] = out[got - off];
    }
    return got == want ? got : 0;
}

static bool si_padding_zero(const CUmemDecompressParams *p)
{
    for (size_t i = 0; i < sizeof p->padding; i++)
        if (p->padding[i])
            return false;
    return true;
}

static CUresult si_decompress_check(const CUmemDecompressParams *p)
{
    if (!si_padding_zero(p) || !p->src || !p->dst || !p->dstActBytes || p->srcNumBytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!si_range((uintptr_t)p->src, p->srcNumBytes) || !si_range((uintptr_t)p->dstActBytes, 4) ||
        !si_range((uintptr_t)p->dst, p->dstNumBytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (p->algo != CU_MEM_DECOMPRESS_ALGORITHM_SNAPPY)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemBatchDecompressAsync(CUmemDecompressParams *paramsArray, size_t count, unsigned int flags,
                                           size_t *errorIndex, CUstream stream)
{
    si_enter();
    si_stream *s = NULL;
    size_t failed = SIZE_MAX;
    CUresult rc = si_resolve_stream(stream, false, &s);
    if (!rc && (!paramsArray || count == 0 || flags))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !rc && i < count; i++)
        if ((rc = si_decompress_check(&paramsArray[i])) != CUDA_SUCCESS)
            failed = i;
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        /* in stream order: the stream's earlier work first, then the batch
         * (complete when the call returns, which stream order allows) */
        si_stream_wait_idle(s);
        for (size_t i = 0; i < count; i++) {
            const CUmemDecompressParams *p = &paramsArray[i];
            size_t cap = si_range((uintptr_t)p->dst, 0)->base + si_range((uintptr_t)p->dst, 0)->size - (uintptr_t)p->dst;
            uint32_t wrote = (uint32_t)si_snappy_decode(p->src, p->srcNumBytes, p->dst, cap);
            memcpy(p->dstActBytes, &wrote, sizeof wrote);
        }
    }
    if (rc && errorIndex)
        *errorIndex = failed;
    si_leave();
    return rc;
}
