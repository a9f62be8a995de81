/* memcpy.c - every form of copy between host, device and array memory.
 *
 * Host-to-device bytes go from the caller's buffer straight to the socket
 * (writev, no staging copy) as one-way frames: CUDA only promises that the
 * source can be reused when the call returns, and the bytes are in the
 * kernel's socket buffer by then. Device-to-host bytes are received
 * straight into the caller's buffer. Anything larger than SCUDA_CHUNK
 * travels in several frames; copies of BULK_MIN_COPY bytes and more are
 * striped over the bulk connections instead, when there are any (bulk.c).
 * The plain transfers are copy.c; this file adds what each form of copy
 * means (capture, mirrored memory, 2D/3D, peers). A copy between device
 * memory of two servers goes server to server (cross_server.h). The
 * requests and replies are the scuda_memcpy_* messages of
 * codegen/driver_spec.py. Streams travel as their wire ids
 * (handle_wire_id), so a copy on CU_STREAM_PER_THREAD runs on this
 * thread's stream, like the launches and memsets before it.
 *
 * Stream capture: a graph replays on the server, which cannot reach the
 * client's memory. A device-to-host copy on a capturing stream is captured
 * through graph.c (the session delivers the bytes at each replay). Other
 * asynchronous copies with a host side fail with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and a log line saying why) instead
 * of capturing a copy from a staging buffer of the session: a replay must
 * read the client's memory as it is then. Device-to-device copies capture
 * as usual. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bulk.h"
#include "capture.h"
#include "coherence.h"
#include "context.h"
#include "copy.h"
#include "cross_server.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

/* A source in mirrored memory (coherence.h) is read through its alias. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream st, int mode)
{
    if (n && !src) return CUDA_ERROR_INVALID_VALUE;
    CUresult cr;
    if (mode == COPY_ASYNC) {
        /* captured: the graph reads src at each launch (graph_launch.c) */
        CUstreamCaptureStatus cs;
        if ((cr = capture_status(st, &cs)) != CUDA_SUCCESS) return cr;
        if (cs != CU_STREAM_CAPTURE_STATUS_NONE) return capture_htod(dst, src, n, st);
    }
    const void *from = coherence_host_view(src, n, 0, &cr);
    if (!from) return cr;
    cr = copy_to_device(dst, from, n, st, mode);
    coherence_device_wrote(dst, n);
    return cr;
}

/* A destination in mirrored memory is written through its alias and
 * becomes dirty there. The copy waited for its stream: the GPU's writes to
 * mirrored memory before it are now due on the host. */
static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream st, int mode)
{
    if (n && !dst) return CUDA_ERROR_INVALID_VALUE;
    if (mode == COPY_ASYNC) {
        CUstreamCaptureStatus cs;
        CUresult cr = capture_status(st, &cs);
        if (cr != CUDA_SUCCESS) return cr;
        if (cs != CU_STREAM_CAPTURE_STATUS_NONE) return capture_dtoh(dst, src, n, st);
    }
    CUresult r;
    void *to = coherence_host_view(dst, n, 1, &r);
    if (!to) return r;
    r = copy_from_device(to, src, n, st, mode);
    if (to != dst) coherence_host_wrote(dst, n);
    if (r == CUDA_SUCCESS) stream_synced(mode == COPY_ASYNC ? st : NULL, 0);
    return rpc_report_deferred(r); /* a copy to the host observes earlier work */
}

/* The end of a copy at device address p of server s, in context ctx
 * there (0: the thread's there, conn_ctx_on). */
static struct peer_end end_at(struct server *s, CUdeviceptr p, uint32_t ctx)
{
    return (struct peer_end){.srv = s, .ptr = p, .ctx = ctx ? ctx : conn_ctx_on(s)};
}

/* A copy between memory of two servers, server to server. */
static CUresult dtod_across(struct peer_end to, struct peer_end from, size_t n, CUstream st, int mode)
{
    CUresult r = cross_server_copy(&to, &from, n, st, mode);
    coherence_device_wrote(to.ptr, n);
    return r;
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st, int mode)
{
    struct server *ds = server_window_of(dst), *ss = server_window_of(src);
    if (ds && ss && ds != ss) return dtod_across(end_at(ds, dst, 0), end_at(ss, src, 0), n, st, mode);
    struct server *srv = ds ? ds : ss ? ss : server_current();
    struct msg_scuda_memcpy_dtod_req m = {dst, src, n, handle_wire_id(st), (uint8_t)mode};
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_memcpy_dtod, srv);
    msg_scuda_memcpy_dtod_req_put(&c.req, &m);
    CUresult r = rpc_async(&c);
    coherence_device_wrote(dst, n);
    return r;
}

/* Which side of a unified-address copy is device memory? Only the server's
 * driver knows; client host memory is unknown to it (type 0). An address
 * in a server's device windows (several servers) is device memory: the
 * server asked is the one whose windows hold the first. */
static CUresult pointer_kinds(const uint64_t *ptrs, unsigned n, unsigned *types)
{
    struct msg_scuda_pointer_kind_req m = {.ptrs = ptrs, .ptrs_count = n};
    struct msg_scuda_pointer_kind_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_pointer_kind, server_of_ptr(ptrs[0]));
    msg_scuda_pointer_kind_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && (msg_scuda_pointer_kind_rep_get(&c.out, &c.arena, &rep) != 0 || rep.types_count != n))
        r = CUDA_ERROR_UNKNOWN;
    for (unsigned i = 0; i < n; i++) types[i] = r == CUDA_SUCCESS ? rep.types[i] : 0;
    for (unsigned i = 0; i < n && r == CUDA_SUCCESS; i++)
        if (server_window_of(ptrs[i])) types[i] = CU_MEMORYTYPE_DEVICE;
    rpc_end(&c);
    return r;
}

static int on_device(unsigned type) { return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED; }

static CUresult unified_copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st, int mode)
{
    uint64_t ptrs[2] = {dst, src};
    unsigned types[2];
    CUresult r = pointer_kinds(ptrs, 2, types);
    if (r != CUDA_SUCCESS) return r;
    int dd = on_device(types[0]), sd = on_device(types[1]);
    if (dd && sd) return dtod(dst, src, n, st, mode);
    if (dd) return htod(dst, (const void *)(uintptr_t)src, n, st, mode);
    if (sd) return dtoh((void *)(uintptr_t)dst, src, n, st, mode);
    /* Host to host: both sides are ours. Order it after queued work on the
     * stream, as the driver would. */
    if (mode == COPY_ASYNC && (r = capture_refuse(st, "a host-to-host copy")) != CUDA_SUCCESS) return r;
    if (mode == COPY_ASYNC && (r = stream_wait(st)) != CUDA_SUCCESS) return r;
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return rpc_report_deferred(CUDA_SUCCESS);
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    SHIM_ENTER(cuMemcpyHtoD_v2, (dst, src, n));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return htod(dst, src, n, NULL, COPY_SYNC);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream st)
{
    SHIM_ENTER(cuMemcpyHtoDAsync_v2, (dst, src, n, st));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return htod(dst, src, n, st, COPY_ASYNC);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    SHIM_ENTER(cuMemcpyDtoH_v2, (dst, src, n));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return dtoh(dst, src, n, NULL, COPY_SYNC);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream st)
{
    SHIM_ENTER(cuMemcpyDtoHAsync_v2, (dst, src, n, st));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return dtoh(dst, src, n, st, COPY_ASYNC);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SHIM_ENTER(cuMemcpyDtoD_v2, (dst, src, n));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return dtod(dst, src, n, NULL, COPY_SYNC);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    SHIM_ENTER(cuMemcpyDtoDAsync_v2, (dst, src, n, st));
    CUresult lr = context_v2_allowed();
    if (lr != CUDA_SUCCESS) return lr;
    return dtod(dst, src, n, st, COPY_ASYNC);
}

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    SHIM_ENTER(cuMemcpy, (dst, src, n));
    return unified_copy(dst, src, n, NULL, COPY_SYNC);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream st)
{
    SHIM_ENTER(cuMemcpyAsync, (dst, src, n, st));
    return unified_copy(dst, src, n, st, COPY_ASYNC);
}

/* The server of one side of a peer copy: the one whose windows hold its
 * pointer, else its context's; the context's id when it is on that
 * server (0: the thread's there). */
static struct peer_end peer_side(CUdeviceptr p, CUcontext ctx)
{
    struct server *s = server_window_of(p), *cs = server_of_handle(ctx);
    if (!s) s = cs;
    return end_at(s, p, s == cs ? (uint32_t)handle_wire_id(ctx) : 0);
}

static CUresult peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream st,
                     int mode)
{
    struct peer_end to = peer_side(dst, dctx), from = peer_side(src, sctx);
    if (to.srv != from.srv) return dtod_across(to, from, n, st, mode);
    struct server *srv = to.srv;
    struct msg_scuda_memcpy_peer_req m = {
        dst, handle_wire_id(dctx), src, handle_wire_id(sctx), n, handle_wire_id(st), (uint8_t)mode,
    };
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_memcpy_peer, srv);
    msg_scuda_memcpy_peer_req_put(&c.req, &m);
    return rpc_async(&c);
}

EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    SHIM_ENTER(cuMemcpyPeer, (dst, dctx, src, sctx, n));
    return peer(dst, dctx, src, sctx, n, NULL, COPY_SYNC);
}

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n,
                                  CUstream st)
{
    SHIM_ENTER(cuMemcpyPeerAsync, (dst, dctx, src, sctx, n, st));
    return peer(dst, dctx, src, sctx, n, st, COPY_ASYNC);
}

/* ---- 2D and 3D ---------------------------------------------------------- */

/* One side of a 2D/3D copy in the client's terms. */
struct side {
    CUmemorytype type;
    size_t x, y, z, lod;
    const void *host;
    CUdeviceptr dev;
    CUarray array;
    size_t pitch, height;
};

/* A unified side is host or device memory; ask the server which. */
static CUresult resolve_unified(struct side *sd)
{
    if (sd->type != CU_MEMORYTYPE_UNIFIED) return CUDA_SUCCESS;
    unsigned type;
    uint64_t ptr = sd->dev;
    CUresult r = pointer_kinds(&ptr, 1, &type);
    if (r != CUDA_SUCCESS) return r;
    if (on_device(type)) {
        sd->type = CU_MEMORYTYPE_DEVICE;
    } else {
        sd->type = CU_MEMORYTYPE_HOST;
        sd->host = (const void *)(uintptr_t)sd->dev;
    }
    return CUDA_SUCCESS;
}

/* A side as it travels (record copy_side of the spec). */
static struct msg_copy_side wire_side(const struct side *sd)
{
    return (struct msg_copy_side){
        .type = (uint32_t)sd->type, .x = sd->x, .y = sd->y, .z = sd->z, .lod = sd->lod,
        .ptr = sd->dev, .array = handle_wire_id(sd->array), .pitch = sd->pitch, .height = sd->height,
    };
}

/* Address of row (y, z) of a host side. */
static char *host_row(const struct side *sd, size_t y, size_t z)
{
    size_t height = sd->height ? sd->height : 1;
    return (char *)sd->host + ((sd->z + z) * height + sd->y + y) * sd->pitch + sd->x;
}

static void pack(const struct side *sd, char *out, size_t w, size_t h, size_t d)
{
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++) memcpy(out + (z * h + y) * w, host_row(sd, y, z), w);
}

static void unpack(const struct side *sd, const char *in, size_t w, size_t h, size_t d)
{
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++) memcpy(host_row(sd, y, z), in + (z * h + y) * w, w);
}

/* The reply of a copy to the host: its bytes are in the sink already. */
static int copy_nd_reply_ok(int dims, rpc_call *c)
{
    if (dims == 2) {
        struct msg_scuda_memcpy_2d_rep rep;
        return msg_scuda_memcpy_2d_rep_get(&c->out, &c->arena, &rep) == 0;
    }
    struct msg_scuda_memcpy_3d_rep rep;
    return msg_scuda_memcpy_3d_rep_get(&c->out, &c->arena, &rep) == 0;
}

/* Send one 2D/3D copy of resolved sides. `buf` holds a host side packed:
 * the source's bytes, which go from it without a copy into the request,
 * or room for the destination's, which the reply fills. */
static CUresult copy_nd_rpc(int dims, const struct msg_copy_nd *nd, char *buf, size_t packed)
{
    const void *bytes = nd->src.type == CU_MEMORYTYPE_HOST ? buf : NULL;
    size_t n = bytes ? packed : 0;
    /* Device sides say their server (arrays go where the thread's calls go). */
    uint64_t dp = nd->dst.type == CU_MEMORYTYPE_DEVICE ? nd->dst.ptr : 0;
    uint64_t sp = nd->src.type == CU_MEMORYTYPE_DEVICE ? nd->src.ptr : 0;
    struct server *srv = servers_of_copy(dp, sp);
    if (!srv) return CUDA_ERROR_NOT_SUPPORTED;
    rpc_call c;
    rpc_begin_on(&c, dims == 2 ? OP_scuda_memcpy_2d : OP_scuda_memcpy_3d, srv);
    if (dims == 2)
        msg_scuda_memcpy_2d_req_put(&c.req, &(struct msg_scuda_memcpy_2d_req){*nd, bytes, n});
    else
        msg_scuda_memcpy_3d_req_put(&c.req, &(struct msg_scuda_memcpy_3d_req){*nd, bytes, n});
    c.bulk = bytes;
    c.bulk_len = n;
    if (nd->dst.type != CU_MEMORYTYPE_HOST) return rpc_async(&c); /* the bytes are on their way: buf may go */
    c.sink = buf;
    c.sink_len = packed;
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && !copy_nd_reply_ok(dims, &c)) r = CUDA_ERROR_UNKNOWN;
    rpc_end(&c);
    return r;
}

static CUresult copy_nd(int dims, struct side *src, struct side *dst, size_t w, size_t h, size_t d, CUstream st,
                        int mode);

/* Device address of row (y, z) of a device side. */
static CUdeviceptr device_row(const struct side *sd, size_t y, size_t z)
{
    size_t height = sd->height ? sd->height : 1;
    return sd->dev + ((sd->z + z) * height + sd->y + y) * sd->pitch + sd->x;
}

/* Whether the copy's rows follow each other without a gap on side sd. */
static int rows_packed(const struct side *sd, size_t w, size_t h, size_t d)
{
    return (h == 1 || sd->pitch == w) && (d == 1 || (sd->pitch == w && sd->height == h));
}

/* A 2D/3D copy between device memory of two servers (cuMemcpy3DPeer's
 * use): server to server, one 1D copy when the rows are packed on both
 * sides, else one per row (correct, not fast). */
static CUresult copy_nd_across(const struct side *src, const struct side *dst, size_t w, size_t h, size_t d,
                               CUstream st, int mode)
{
    struct server *ds = server_window_of(dst->dev), *ss = server_window_of(src->dev);
    if (!w || !h || !d) return CUDA_SUCCESS;
    if (h > SIZE_MAX / w || d > SIZE_MAX / (w * h)) return CUDA_ERROR_INVALID_VALUE;
    if (rows_packed(src, w, h, d) && rows_packed(dst, w, h, d)) {
        struct peer_end to = end_at(ds, device_row(dst, 0, 0), 0), from = end_at(ss, device_row(src, 0, 0), 0);
        return cross_server_copy(&to, &from, w * h * d, st, mode);
    }
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++) {
            struct peer_end to = end_at(ds, device_row(dst, y, z), 0), from = end_at(ss, device_row(src, y, z), 0);
            CUresult r = cross_server_copy(&to, &from, w, st, mode);
            if (r != CUDA_SUCCESS) return r;
        }
    return CUDA_SUCCESS;
}

/* Both sides in device memory of two servers. */
static int sides_apart(const struct side *src, const struct side *dst)
{
    if (src->type != CU_MEMORYTYPE_DEVICE || dst->type != CU_MEMORYTYPE_DEVICE) return 0;
    struct server *ds = server_window_of(dst->dev), *ss = server_window_of(src->dev);
    return ds && ss && ds != ss;
}

/* A host side larger than one frame: copy it in bands of rows (2D) or of
 * slices (3D), each small enough to travel in one frame. */
static CUresult copy_nd_split(int dims, struct side *src, struct side *dst, size_t w, size_t h, size_t d,
                              CUstream st, int mode)
{
    size_t limit = SCUDA_MAX_FRAME - SCUDA_REQUEST_MARGIN;
    if (w > limit) return CUDA_ERROR_NOT_SUPPORTED; /* a single row over 64 MiB */
    if (d > 1) {
        if (w * h > limit) return CUDA_ERROR_NOT_SUPPORTED;
        size_t band = limit / (w * h);
        for (size_t z = 0; z < d; z += band) {
            struct side s2 = *src, d2 = *dst;
            s2.z += z;
            d2.z += z;
            CUresult r = copy_nd(dims, &s2, &d2, w, h, d - z < band ? d - z : band, st, mode);
            if (r != CUDA_SUCCESS) return r;
        }
        return CUDA_SUCCESS;
    }
    size_t band = limit / w;
    for (size_t y = 0; y < h; y += band) {
        struct side s2 = *src, d2 = *dst;
        s2.y += y;
        d2.y += y;
        CUresult r = copy_nd(dims, &s2, &d2, w, h - y < band ? h - y : band, 1, st, mode);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

static CUresult copy_nd(int dims, struct side *src, struct side *dst, size_t w, size_t h, size_t d, CUstream st,
                        int mode)
{
    CUresult r;
    if ((r = resolve_unified(src)) != CUDA_SUCCESS || (r = resolve_unified(dst)) != CUDA_SUCCESS) return r;
    if (sides_apart(src, dst)) return copy_nd_across(src, dst, w, h, d, st, mode);
    if (mode == COPY_ASYNC && (src->type == CU_MEMORYTYPE_HOST || dst->type == CU_MEMORYTYPE_HOST) &&
        (r = capture_refuse(st, "a 2D/3D copy with a side in client memory")) != CUDA_SUCCESS)
        return r;
    size_t packed = w * h * d;
    if (src->type == CU_MEMORYTYPE_HOST && dst->type == CU_MEMORYTYPE_HOST) {
        if (mode == COPY_ASYNC && (r = stream_wait(st)) != CUDA_SUCCESS) return r;
        for (size_t z = 0; z < d; z++)
            for (size_t y = 0; y < h; y++) memmove(host_row(dst, y, z), host_row(src, y, z), w);
        return CUDA_SUCCESS;
    }
    if (packed > SCUDA_MAX_FRAME - SCUDA_REQUEST_MARGIN && (src->type == CU_MEMORYTYPE_HOST || dst->type == CU_MEMORYTYPE_HOST))
        return copy_nd_split(dims, src, dst, w, h, d, st, mode);
    char *buf = NULL;
    if ((src->type == CU_MEMORYTYPE_HOST || dst->type == CU_MEMORYTYPE_HOST) && !(buf = malloc(packed ? packed : 1)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct msg_copy_nd nd = {
        .mode = (uint8_t)mode, .stream = handle_wire_id(st), .src = wire_side(src), .dst = wire_side(dst),
        .width = w, .height = h, .depth = d,
    };
    if (src->type == CU_MEMORYTYPE_HOST) pack(src, buf, w, h, d);
    r = copy_nd_rpc(dims, &nd, buf, packed);
    if (r == CUDA_SUCCESS && dst->type == CU_MEMORYTYPE_HOST) unpack(dst, buf, w, h, d);
    free(buf);
    return r;
}

/* A copy into device memory that is mirrored here (managed or zero-copy
 * memory, coherence.h) leaves the host's copy of those rows stale: the
 * span from the first byte written to the last is invalidated, as a 1D
 * copy's is, so the host's next read fetches the copy's bytes. */
static void device_side_written(const struct side *dst, size_t w, size_t h, size_t d)
{
    if (dst->type != CU_MEMORYTYPE_DEVICE || !w || !h || !d) return;
    size_t height = dst->height ? dst->height : 1;
    uint64_t first = dst->dev + (dst->z * height + dst->y) * dst->pitch + dst->x;
    uint64_t last = dst->dev + ((dst->z + d - 1) * height + dst->y + h - 1) * dst->pitch + dst->x + w;
    coherence_device_wrote(first, last - first);
}

/* A 2D/3D copy as the application asked for it. One that ends in host
 * memory observes earlier work (rpc.h): it reports an earlier one-way
 * call's error after all its bands (copy_nd_split) have arrived. */
static CUresult copy_nd_call(int dims, struct side *src, struct side *dst, size_t w, size_t h, size_t d, CUstream st,
                             int mode)
{
    CUresult r = copy_nd(dims, src, dst, w, h, d, st, mode);
    device_side_written(dst, w, h, d);
    return dst->type == CU_MEMORYTYPE_HOST ? rpc_report_deferred(r) : r; /* unified sides are resolved now */
}

static void side_2d(struct side *sd, CUmemorytype type, size_t x, size_t y, const void *host, CUdeviceptr dev,
                    CUarray arr, size_t pitch)
{
    *sd = (struct side){.type = type, .x = x, .y = y, .host = host, .dev = dev, .array = arr, .pitch = pitch};
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream st, int mode)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct side s, d;
    side_2d(&s, p->srcMemoryType, p->srcXInBytes, p->srcY, p->srcHost, p->srcDevice, p->srcArray, p->srcPitch);
    side_2d(&d, p->dstMemoryType, p->dstXInBytes, p->dstY, p->dstHost, p->dstDevice, p->dstArray, p->dstPitch);
    return copy_nd_call(2, &s, &d, p->WidthInBytes, p->Height, 1, st, mode);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream st, int mode)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct side s = {p->srcMemoryType, p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD, p->srcHost,
                     p->srcDevice, p->srcArray, p->srcPitch, p->srcHeight};
    struct side d = {p->dstMemoryType, p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD, p->dstHost,
                     p->dstDevice, p->dstArray, p->dstPitch, p->dstHeight};
    return copy_nd_call(3, &s, &d, p->WidthInBytes, p->Height, p->Depth, st, mode);
}

/* The _v2 2D/3D forms, refused in a legacy context like the driver does. */
static CUresult copy_2d_v2(const CUDA_MEMCPY2D *p, CUstream st, int mode)
{
    CUresult r = context_v2_allowed();
    return r != CUDA_SUCCESS ? r : copy_2d(p, st, mode);
}

static CUresult copy_3d_v2(const CUDA_MEMCPY3D *p, CUstream st, int mode)
{
    CUresult r = context_v2_allowed();
    return r != CUDA_SUCCESS ? r : copy_3d(p, st, mode);
}

EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { SHIM_ENTER(cuMemcpy2D_v2, (p)); return copy_2d_v2(p, NULL, COPY_SYNC); }
EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { SHIM_ENTER(cuMemcpy2DUnaligned_v2, (p)); return copy_2d_v2(p, NULL, COPY_SYNC); }
EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream st) { SHIM_ENTER(cuMemcpy2DAsync_v2, (p, st)); return copy_2d_v2(p, st, COPY_ASYNC); }
EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) { SHIM_ENTER(cuMemcpy3D_v2, (p)); return copy_3d_v2(p, NULL, COPY_SYNC); }
EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream st) { SHIM_ENTER(cuMemcpy3DAsync_v2, (p, st)); return copy_3d_v2(p, st, COPY_ASYNC); }

/* Peer 3D copies on one server: the contexts name devices of the same
 * session, and unified addressing makes the plain 3D copy correct. */
static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *p, CUstream st, int mode)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct side s = {p->srcMemoryType, p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD, p->srcHost,
                     p->srcDevice, p->srcArray, p->srcPitch, p->srcHeight};
    struct side d = {p->dstMemoryType, p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD, p->dstHost,
                     p->dstDevice, p->dstArray, p->dstPitch, p->dstHeight};
    return copy_nd_call(3, &s, &d, p->WidthInBytes, p->Height, p->Depth, st, mode);
}

EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) { SHIM_ENTER(cuMemcpy3DPeer, (p)); return copy_3d_peer(p, NULL, COPY_SYNC); }
EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream st) { SHIM_ENTER(cuMemcpy3DPeerAsync, (p, st)); return copy_3d_peer(p, st, COPY_ASYNC); }
