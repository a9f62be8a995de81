/* srv_memory.c - copies between the client's memory and the GPU.
 *
 * Host memory on the client is never addressable here: host-to-device
 * bytes arrive in the request, device-to-host bytes leave in the reply, and
 * the session copies through its own buffers. 2D/3D copies with a host
 * side travel packed (rows back to back) and are unpacked here by giving
 * the driver the packed buffer with pitch = row width. The messages are
 * the scuda_memcpy_* ops of codegen/driver_spec.py. */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "host_quota.h"
#include "session.h"
#include "snapshot_dirty.h"
#include "staging.h"
#include "../common/log.h"
#include "../common/protocol.h"

static CUresult stream_of(srv_call *c, uint64_t id, CUstream *out)
{
    void *h;
    CUresult r = handle_get(c->s, id, HK_STREAM, &h);
    *out = (CUstream)h;
    return r;
}

/* A copy through the session's own buffers must never be captured into a
 * graph: a replay would use a buffer long gone. The client routes host
 * work of a capturing stream elsewhere (graph_host.c) or refuses it; this
 * is the session's own guard. */
static CUresult not_capturing(CUstream st, uint8_t mode)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (mode != COPY_ASYNC || !real.cuStreamIsCapturing || REAL(cuStreamIsCapturing, st, &cs) != CUDA_SUCCESS ||
        cs == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_SUCCESS;
    LOG_WARN("a copy with a side in client memory on a capturing stream: refused "
             "(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* The bytes arrived in pinned memory (the session received the request's
 * bulk field there; `r` says whether the rest decoded): copy
 * asynchronously, and give the buffer back when the copy is done. A copy
 * with synchronous semantics (cuMemcpyHtoD) is waited for before the
 * session runs the next call. */
static CUresult htod_staged(srv_call *c, const struct msg_scuda_memcpy_htod_req *m, CUresult r)
{
    struct staging *b = c->staging;
    CUstream st = NULL;
    if (r == CUDA_SUCCESS) r = stream_of(c, m->stream, &st);
    if (r == CUDA_SUCCESS) r = not_capturing(st, m->mode);
    if (r == CUDA_SUCCESS)
        r = REAL(cuMemcpyHtoDAsync_v2, m->dst, staging_data(b), m->data_len, m->mode == COPY_ASYNC ? st : NULL);
    staging_release_after(b, m->mode == COPY_ASYNC ? st : NULL);
    if (m->mode != COPY_ASYNC) session_after_copy(b);
    return r;
}

CUresult srv_scuda_memcpy_htod(srv_call *c)
{
    struct msg_scuda_memcpy_htod_req m;
    CUresult r = msg_scuda_memcpy_htod_req_get(&c->in, &c->arena, &m) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) snapshot_note_range(m.dst, m.data_len); /* the next snapshot copies it */
    if (c->staging) return htod_staged(c, &m, r); /* it owns the buffer, even when the request is bad */
    if (r != CUDA_SUCCESS) return r;
    CUstream st;
    r = stream_of(c, m.stream, &st);
    if (r == CUDA_SUCCESS) r = not_capturing(st, m.mode);
    if (r != CUDA_SUCCESS) return r;
    /* From pageable memory the driver has consumed the source when the
     * async call returns, so the request buffer may be freed after it. */
    return m.mode == COPY_ASYNC ? REAL(cuMemcpyHtoDAsync_v2, m.dst, m.data, m.data_len, st)
                                : REAL(cuMemcpyHtoD_v2, m.dst, m.data, m.data_len);
}

/* How long a large copy to the host waits for a staging buffer held by
 * another call before it takes the plain way, which needs the copy's whole
 * size in host memory. One client thread never meets a held buffer: a
 * copy gives its buffers back before its reply ends (send_last_piece).
 * Calls of other client threads do: a copy to the host of each (on
 * workers), or a large copy to the device being received. Under a tight
 * --host-mem-quota the plain way would fail, and the holder gives its
 * buffer back within one chunk's copy and send, unless that copy waits
 * behind a long kernel: hence a bound. */
#define STAGING_HELD_WAIT_MS 2000

/* The reply's last bytes, sent from a copy once the buffers are back. */
#define REPLY_TAIL 4096

/* Send piece b (len bytes) once its copy is done; *failed: a write failed
 * (then the rest is not sent). */
static void send_piece(srv_call *c, struct staging *b, size_t len, int *failed)
{
    staging_wait(b);
    if (!*failed && len && session_stream_write(c, staging_data(b), len) != 0) *failed = 1;
}

/* Send the last piece, giving both buffers back before its last bytes go
 * out. The client sends its next call once it has them, and that call runs
 * on another thread (a synchronous copy to the host runs on a worker): it
 * must find the buffers free, and the copy's error deferred. */
static void send_last_piece(srv_call *c, struct staging *b, size_t len, struct staging *buf[2], CUresult r,
                            int *failed)
{
    uint8_t tail[REPLY_TAIL];
    size_t t = len < sizeof tail ? len : sizeof tail;
    send_piece(c, b, len - t, failed);
    memcpy(tail, (uint8_t *)staging_data(b) + len - t, t);
    staging_release(buf[0]);
    if (buf[1]) staging_release(buf[1]);
    if (r != CUDA_SUCCESS) session_defer_error(c->s, r, c->op);
    if (!*failed && session_stream_write(c, tail, t) != 0) *failed = 1;
}

/* Send a large device-to-host copy as it is made: the GPU copies chunk
 * i+1 into one pinned buffer while chunk i goes out from the other.
 * Returns -1 when it could not start (no buffers: the caller copies the
 * plain way), 0 when all went out, 1 when a chunk failed midway: the reply
 * still carries n bytes (zeros after the failure) and the error is
 * reported by the next synchronizing call, like any asynchronous error. */
static int dtoh_streamed(srv_call *c, uint64_t src, uint64_t n, CUstream st)
{
    /* Two buffers overlap the next piece's copy with this piece's send.
     * One is enough to stream (piece by piece, without the overlap): under
     * a tight --host-mem-quota the other may be held by a copy still in
     * flight, and a reply buffer of n bytes would not fit either. */
    struct staging *buf[2] = {staging_acquire_within(STAGING_HELD_WAIT_MS), NULL};
    if (!buf[0]) return -1;
    buf[1] = staging_acquire();
    int single = buf[1] == NULL;
    CUresult r = CUDA_SUCCESS;
    int failed = session_stream_begin(c, n) != 0;
    struct staging *prev = NULL;
    size_t prev_len = 0;
    for (uint64_t off = 0, i = 0; off < n; i++) {
        size_t len = n - off < STAGING_SIZE ? (size_t)(n - off) : STAGING_SIZE;
        struct staging *cur = buf[single ? 0 : i % 2];
        if (single && prev) send_piece(c, prev, prev_len, &failed); /* sent before it is filled again */
        if (r == CUDA_SUCCESS) r = REAL(cuMemcpyDtoHAsync_v2, staging_data(cur), src + off, len, st);
        if (r == CUDA_SUCCESS) r = staging_record(cur, st);
        if (r != CUDA_SUCCESS) memset(staging_data(cur), 0, len);
        if (!single && prev) send_piece(c, prev, prev_len, &failed);
        prev = cur;
        prev_len = len;
        off += len;
    }
    send_last_piece(c, prev, prev_len, buf, r, &failed); /* n > 0: there is one */
    session_stream_end(c);
    return r != CUDA_SUCCESS || failed;
}

/* The reply is its bulk field alone, the n bytes: c->bulk, or a reply
 * streamed as it is made. */
CUresult srv_scuda_memcpy_dtoh(srv_call *c)
{
    struct msg_scuda_memcpy_dtoh_req m;
    /* The reply carries the bytes: it must fit in one frame (the client
     * sends copies in SCUDA_CHUNK pieces). */
    if (msg_scuda_memcpy_dtoh_req_get(&c->in, &c->arena, &m) != 0 || m.n > SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN)
        return CUDA_ERROR_INVALID_VALUE;
    CUstream st;
    CUresult r = stream_of(c, m.stream, &st);
    if (r == CUDA_SUCCESS) r = not_capturing(st, m.mode);
    if (r != CUDA_SUCCESS) return r;
    if (m.n > (1u << 20)) {
        int streamed = dtoh_streamed(c, m.src, m.n, m.mode == COPY_ASYNC ? st : NULL);
        if (streamed >= 0) return streamed ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
    }
    /* Reply buffers are charged to the session (host_quota.h) and freed
     * after the reply, by session.c. */
    void *buf = host_quota_alloc(m.n ? m.n : 1, "a copy's reply");
    if (!buf) return CUDA_ERROR_OUT_OF_MEMORY;
    if (m.mode == COPY_ASYNC) {
        r = REAL(cuMemcpyDtoHAsync_v2, buf, m.src, m.n, st);
        if (r == CUDA_SUCCESS) r = REAL(cuStreamSynchronize, st);
    } else {
        r = REAL(cuMemcpyDtoH_v2, buf, m.src, m.n);
    }
    c->bulk = buf;
    c->bulk_len = m.n;
    c->bulk_free = buf;
    return r;
}

CUresult srv_scuda_memcpy_dtod(srv_call *c)
{
    struct msg_scuda_memcpy_dtod_req m;
    if (msg_scuda_memcpy_dtod_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    snapshot_note_range(m.dst, m.n); /* the next snapshot copies it */
    CUstream st;
    CUresult r = stream_of(c, m.stream, &st);
    if (r != CUDA_SUCCESS) return r;
    return m.mode == COPY_ASYNC ? REAL(cuMemcpyDtoDAsync_v2, m.dst, m.src, m.n, st)
                                : REAL(cuMemcpyDtoD_v2, m.dst, m.src, m.n);
}

CUresult srv_scuda_memcpy_peer(srv_call *c)
{
    struct msg_scuda_memcpy_peer_req m;
    if (msg_scuda_memcpy_peer_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *dctx, *sctx;
    CUstream st;
    CUresult r;
    if ((r = handle_get(c->s, m.dst_ctx, HK_CONTEXT, &dctx)) != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, m.src_ctx, HK_CONTEXT, &sctx)) != CUDA_SUCCESS) return r;
    if ((r = stream_of(c, m.stream, &st)) != CUDA_SUCCESS) return r;
    return m.mode == COPY_ASYNC ? REAL(cuMemcpyPeerAsync, m.dst, (CUcontext)dctx, m.src, (CUcontext)sctx, m.n, st)
                                : REAL(cuMemcpyPeer, m.dst, (CUcontext)dctx, m.src, (CUcontext)sctx, m.n);
}

/* Each pointer's memory type: 0 when the driver does not know the
 * pointer (client host memory). */
CUresult srv_scuda_pointer_kind(srv_call *c)
{
    struct msg_scuda_pointer_kind_req m;
    if (msg_scuda_pointer_kind_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint32_t types[POINTER_KIND_MAX];
    for (uint32_t i = 0; i < m.ptrs_count; i++) {
        unsigned type = 0;
        if (REAL(cuPointerGetAttribute, &type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, m.ptrs[i]) != CUDA_SUCCESS) type = 0;
        types[i] = type;
    }
    struct msg_scuda_pointer_kind_rep rep = {.types = types, .types_count = m.ptrs_count};
    msg_scuda_pointer_kind_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* ---- 2D and 3D ---------------------------------------------------------- */

/* Fill one side of the driver's descriptor. `host` is the packed buffer
 * for a host side, whose rows start at x=y=z=0 with pitch = width. */
static CUresult fill_side(srv_call *c, const struct msg_copy_side *sd, void *host, uint64_t width, uint64_t height,
                          CUmemorytype *type, size_t *x, size_t *y, size_t *z, size_t *lod, void **hptr,
                          CUdeviceptr *dptr, CUarray *arr, size_t *pitch, size_t *h)
{
    *type = (CUmemorytype)sd->type;
    *x = sd->x; *y = sd->y; *z = sd->z; *lod = sd->lod;
    *pitch = sd->pitch; *h = sd->height;
    switch (sd->type) {
    case CU_MEMORYTYPE_HOST:
        *hptr = host;
        *x = *y = *z = 0;
        *pitch = width;
        *h = height;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
        *dptr = sd->ptr;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY: {
        void *a;
        CUresult r = handle_get(c->s, sd->array, HK_ARRAY, &a);
        *arr = (CUarray)a;
        return r;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The driver's copy for descriptor d; a 2D one as a CUDA_MEMCPY2D. */
static CUresult driver_copy(int dims, const CUDA_MEMCPY3D *d, uint8_t mode, CUstream st)
{
    if (dims == 3) return mode == COPY_ASYNC ? REAL(cuMemcpy3DAsync_v2, d, st) : REAL(cuMemcpy3D_v2, d);
    CUDA_MEMCPY2D d2 = {
        .srcXInBytes = d->srcXInBytes, .srcY = d->srcY, .srcMemoryType = d->srcMemoryType,
        .srcHost = d->srcHost, .srcDevice = d->srcDevice, .srcArray = d->srcArray, .srcPitch = d->srcPitch,
        .dstXInBytes = d->dstXInBytes, .dstY = d->dstY, .dstMemoryType = d->dstMemoryType,
        .dstHost = d->dstHost, .dstDevice = d->dstDevice, .dstArray = d->dstArray, .dstPitch = d->dstPitch,
        .WidthInBytes = d->WidthInBytes, .Height = d->Height,
    };
    return mode == COPY_ASYNC ? REAL(cuMemcpy2DAsync_v2, &d2, st) : REAL(cuMemcpy2DUnaligned_v2, &d2);
}

/* A 2D (dims 2: depth is 1 whatever m says) or 3D copy. `in_bytes`, n:
 * the packed source when it is host memory. The packed destination, when
 * it is host memory, is the reply's bulk field (c->bulk). *st receives
 * the stream. */
static CUresult copy_nd(srv_call *c, int dims, const struct msg_copy_nd *m, const void *in_bytes, uint64_t n,
                        CUstream *st)
{
    uint64_t depth = dims == 3 ? m->depth : 1, packed;
    if (__builtin_mul_overflow(m->width, m->height, &packed) || __builtin_mul_overflow(packed, depth, &packed))
        return CUDA_ERROR_INVALID_VALUE;
    /* A host side travels in one frame, either way. */
    int host_side = m->src.type == CU_MEMORYTYPE_HOST || m->dst.type == CU_MEMORYTYPE_HOST;
    if (host_side && packed > SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN) return CUDA_ERROR_INVALID_VALUE;
    if (m->src.type == CU_MEMORYTYPE_HOST && n != packed) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = stream_of(c, m->stream, st);
    if (r == CUDA_SUCCESS && host_side) r = not_capturing(*st, m->mode);
    if (r != CUDA_SUCCESS) return r;

    void *dst_host = NULL;
    if (m->dst.type == CU_MEMORYTYPE_HOST) {
        if (!(dst_host = host_quota_alloc(packed ? packed : 1, "a copy's reply"))) return CUDA_ERROR_OUT_OF_MEMORY;
        memset(dst_host, 0, packed ? packed : 1);
    }
    CUDA_MEMCPY3D d = {.WidthInBytes = m->width, .Height = m->height, .Depth = depth};
    r = fill_side(c, &m->src, (void *)in_bytes, m->width, m->height, &d.srcMemoryType, &d.srcXInBytes, &d.srcY,
                  &d.srcZ, &d.srcLOD, (void **)&d.srcHost, &d.srcDevice, &d.srcArray, &d.srcPitch, &d.srcHeight);
    if (r == CUDA_SUCCESS)
        r = fill_side(c, &m->dst, dst_host, m->width, m->height, &d.dstMemoryType, &d.dstXInBytes, &d.dstY,
                      &d.dstZ, &d.dstLOD, &d.dstHost, &d.dstDevice, &d.dstArray, &d.dstPitch, &d.dstHeight);
    if (r == CUDA_SUCCESS) r = driver_copy(dims, &d, m->mode, *st);
    if (r == CUDA_SUCCESS && dst_host && m->mode == COPY_ASYNC) r = REAL(cuStreamSynchronize, *st);
    if (dst_host) {
        c->bulk = dst_host;
        c->bulk_len = packed;
        c->bulk_free = dst_host;
    }
    return r;
}

/* A large packed source arrives in staging memory (srv_call.staging, the
 * request's bulk field; `r` says whether the rest decoded). The copy owns
 * that buffer, whatever becomes of it: the buffer is free again once the
 * copy is done. */
static CUresult copy_nd_staged(srv_call *c, int dims, const struct msg_copy_nd *m, const void *data, uint64_t n,
                               CUresult r)
{
    struct staging *b = c->staging;
    CUstream st = NULL;
    if (r == CUDA_SUCCESS) r = copy_nd(c, dims, m, b ? staging_data(b) : data, n, &st);
    if (b) staging_release_after(b, m->mode == COPY_ASYNC ? st : NULL);
    return r;
}

CUresult srv_scuda_memcpy_2d(srv_call *c)
{
    struct msg_scuda_memcpy_2d_req m;
    CUresult r = msg_scuda_memcpy_2d_req_get(&c->in, &c->arena, &m) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return copy_nd_staged(c, 2, &m.copy, m.data, m.data_len, r);
}

CUresult srv_scuda_memcpy_3d(srv_call *c)
{
    struct msg_scuda_memcpy_3d_req m;
    CUresult r = msg_scuda_memcpy_3d_req_get(&c->in, &c->arena, &m) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return copy_nd_staged(c, 3, &m.copy, m.data, m.data_len, r);
}

/* ---- pointer attributes -------------------------------------------------- */

/* The driver writes a different size for each attribute. Running the query
 * into two buffers pre-filled differently shows which bytes it wrote, so
 * exactly those travel back and the client never overruns its variable. */
static size_t written_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t last = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] == b[i]) last = i + 1;
    return last;
}

CUresult srv_scuda_pointer_get_attributes(srv_call *c)
{
    struct msg_scuda_pointer_get_attributes_req m;
    if (msg_scuda_pointer_get_attributes_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint32_t attr = m.attr;
    uint64_t ptr = m.ptr;
    uint8_t a[POINTER_ATTR_MAX], b[POINTER_ATTR_MAX];
    memset(a, 0x00, sizeof a);
    memset(b, 0xff, sizeof b);
    CUresult r = REAL(cuPointerGetAttribute, a, (CUpointer_attribute)attr, ptr);
    if (r != CUDA_SUCCESS) return r;
    if ((r = REAL(cuPointerGetAttribute, b, (CUpointer_attribute)attr, ptr)) != CUDA_SUCCESS) return r;
    size_t n = written_bytes(a, b, sizeof a);
    if (attr == CU_POINTER_ATTRIBUTE_CONTEXT) {
        void *ctx;
        memcpy(&ctx, a, sizeof ctx);
        uint64_t id = handle_find_id(c->s, HK_CONTEXT, ctx);
        memcpy(a, &id, sizeof id);
        n = sizeof id;
    }
    struct msg_scuda_pointer_get_attributes_rep rep = {.value = a, .value_len = n};
    msg_scuda_pointer_get_attributes_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
