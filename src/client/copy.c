/* copy.c - see copy.h: host-to-device bytes go from the caller's buffer
 * straight to the socket as one-way frames, device-to-host bytes are
 * received straight into the caller's buffer; large copies are striped
 * over the bulk connections when there are any (bulk.c). */
#include "copy.h"

#include "bulk.h"
#include "servers.h"
#include "rpc.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

CUresult copy_to_device(CUdeviceptr dst, const void *src, size_t n, CUstream st, int mode)
{
    CUresult cr;
    struct server *srv = server_of_ptr(dst);
    if (bulk_htod(srv, dst, src, n, handle_wire_id(st), mode, &cr)) return cr;
    for (size_t off = 0; off < n || (n == 0 && off == 0); off += SCUDA_CHUNK) {
        size_t len = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        struct msg_scuda_memcpy_htod_req m = {
            .dst = dst + off, .stream = handle_wire_id(st), .mode = (uint8_t)mode,
            .data = (const char *)src + off, .data_len = len,
        };
        rpc_call c;
        rpc_begin_on(&c, OP_scuda_memcpy_htod, srv);
        msg_scuda_memcpy_htod_req_put(&c.req, &m);
        c.bulk = m.data; /* from the caller's buffer, no staging copy */
        c.bulk_len = len;
        CUresult r = rpc_async(&c);
        if (r != CUDA_SUCCESS || n == 0) return r;
    }
    return CUDA_SUCCESS;
}

CUresult copy_from_device(void *dst, CUdeviceptr src, size_t n, CUstream st, int mode)
{
    uint64_t async_before = rpc_async_count();
    CUresult br;
    struct server *srv = server_of_ptr(src);
    if (bulk_dtoh(srv, dst, src, n, handle_wire_id(st), mode, &br)) {
        if (br != CUDA_SUCCESS) return br;
        if (mode == COPY_ASYNC) stream_note_idle(st, async_before);
        return CUDA_SUCCESS;
    }
    for (size_t off = 0; off < n || (n == 0 && off == 0); off += SCUDA_CHUNK) {
        size_t len = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        struct msg_scuda_memcpy_dtoh_req m = {src + off, len, handle_wire_id(st), (uint8_t)mode};
        struct msg_scuda_memcpy_dtoh_rep rep;
        rpc_call c;
        rpc_begin_on(&c, OP_scuda_memcpy_dtoh, srv);
        msg_scuda_memcpy_dtoh_req_put(&c.req, &m);
        c.sink = (char *)dst + off; /* the bytes land here, not in the reply */
        c.sink_len = len;
        CUresult r = rpc_sync(&c);
        if (r == CUDA_SUCCESS && msg_scuda_memcpy_dtoh_rep_get(&c.out, &c.arena, &rep) != 0) r = CUDA_ERROR_UNKNOWN;
        rpc_end(&c);
        if (r != CUDA_SUCCESS) return r;
        if (n == 0) break;
    }
    /* The session synchronized the stream before replying (async mode), so
     * the stream is idle unless someone queued work since. */
    if (mode == COPY_ASYNC) stream_note_idle(st, async_before);
    return CUDA_SUCCESS;
}
