/* cross_server.c - calls that name objects of two servers, for a client
 * of several (servers.h; docs/architecture.md, 9.25 and 9.26). A copy
 * between two servers' device memory goes server to server over a peer
 * link (peer.c); a stream waits for another server's event by the client
 * waiting for the event; devices of two servers are not peers. With one
 * server every guard lets the call through. */
#include "cross_server.h"

#include "capture.h"
#include "conn.h"
#include "hooks.h"
#include "rpc.h"
#include "servers.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

/* ---- copies between servers ------------------------------------------- */

/* Every earlier call in context ctx of server s is done. 0: the thread
 * has no context there, so it queued nothing there. */
static CUresult settle(struct server *s, uint32_t ctx)
{
    if (!ctx) return CUDA_SUCCESS;
    rpc_call c;
    struct msg_scuda_ctx_synchronize_req m = {ctx};
    rpc_begin_on(&c, OP_scuda_ctx_synchronize, s);
    c.ctx = ctx;
    msg_scuda_ctx_synchronize_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

/* The stream an end's half of the copy runs on. The end on st's server
 * runs on st itself, so its server orders the copy after st's earlier
 * work. The other end has no stream of the application's: its earlier
 * work is waited for (its context synchronized), and its half runs on its
 * legacy stream. */
static CUresult place_end(struct peer_end *e, CUstream st, const struct server *stream_srv)
{
    if (e->srv == stream_srv) {
        e->stream = handle_wire_id(st); /* a per-thread stream: the thread's, in its current context */
        return CUDA_SUCCESS;
    }
    e->stream = 0;
    return settle(e->srv, e->ctx);
}

/* A copy between servers cannot be captured: a replay would need the
 * client to announce it to both servers again. */
static CUresult not_capturing(CUstream st)
{
    CUstreamCaptureStatus cs;
    CUresult r = capture_status(st, &cs);
    if (r != CUDA_SUCCESS || cs == CU_STREAM_CAPTURE_STATUS_NONE) return r;
    static int once;
    if (!once++)
        LOG_WARN("stream capture: a copy between devices of two servers cannot be captured (a replay runs on one "
                 "server); returning CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult cross_server_copy(struct peer_end *to, struct peer_end *from, size_t n, CUstream st, int mode)
{
    CUresult r;
    if (mode == COPY_ASYNC && (r = not_capturing(st)) != CUDA_SUCCESS) return r;
    if (n == 0) return CUDA_SUCCESS;
    /* st's server; a stream of neither end's server is waited for here,
     * and both ends then run after their contexts' earlier work. */
    struct server *stream_srv = server_of_handle(st);
    if (stream_srv != to->srv && stream_srv != from->srv) {
        if ((r = stream_wait(st)) != CUDA_SUCCESS) return r;
        stream_srv = NULL;
    }
    if ((r = place_end(from, st, stream_srv)) != CUDA_SUCCESS) return r;
    if ((r = place_end(to, st, stream_srv)) != CUDA_SUCCESS) return r;
    static int told;
    if (!told++)
        LOG_INFO("copies between devices of two servers go server to server over a peer link (first: %s to %s)",
                 conn_addr(from->srv), conn_addr(to->srv));
    return peer_copy(from, to, n);
}

/* ---- guards -------------------------------------------------------------- */

/* The driver orders the stream after the event; here the client waits
 * for the event on its server, and every later call on the stream is
 * sent after that. Correct, if not fast: the wait blocks the caller. */
int hook_guard_cuStreamWaitEvent(CUresult *r, CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    (void)Flags;
    if (!hEvent || server_of_handle(hEvent) == server_of_handle(hStream)) return 0;
    *r = cuEventSynchronize(hEvent);
    return 1;
}

int hook_guard_cuCtxEnablePeerAccess(CUresult *r, CUcontext peerContext, unsigned int Flags)
{
    (void)Flags;
    if (!peerContext || server_of_handle(peerContext) == server_current()) return 0;
    *r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    return 1;
}

int hook_guard_cuDeviceCanAccessPeer(CUresult *r, int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    if (!canAccessPeer || !devices_apart(dev, peerDev)) return 0;
    *canAccessPeer = 0;
    *r = CUDA_SUCCESS;
    return 1;
}

int hook_guard_cuDeviceGetP2PAttribute(CUresult *r, int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                       CUdevice dstDevice)
{
    (void)attrib;
    if (!value || !devices_apart(srcDevice, dstDevice)) return 0;
    *value = 0; /* no access, no atomics, no rank */
    *r = CUDA_SUCCESS;
    return 1;
}
