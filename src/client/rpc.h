/* rpc.h - how client code (generated stubs and hand-written calls) talks to
 * the session on the server.
 *
 *   rpc_call c;
 *   rpc_begin(&c, OP_cuStreamQuery);
 *   rpc_put_handle(&c.req, hStream);
 *   CUresult r = rpc_sync(&c);      // flushes queued async calls, waits
 *   ... read outputs from c.out when r == CUDA_SUCCESS ...
 *   rpc_end(&c);
 *
 * rpc_async() queues a one-way request and returns at once. Its error, if
 * any, is reported later (CUDA's contract for asynchronous errors), but only
 * by a call that observes earlier work: a synchronize (context, stream,
 * event), a stream or event query, a copy to the host (spec flag
 * `observes`). Such a call reports it when it succeeds itself, and its
 * outputs (a copy's bytes) are delivered all the same. Every other call
 * returns its own result and outputs, and leaves the error pending: an
 * allocation after a failed memset returns its pointer. rpc_sync() always
 * gives the call's own result; an observing export returns
 * rpc_report_deferred(r). */
#ifndef SCUDA_CLIENT_RPC_H
#define SCUDA_CLIENT_RPC_H

#include <cuda.h>
#include <stdint.h>
#include <sys/uio.h>

#include "handles.h"
#include "../common/messages.gen.h"
#include "../common/wire.h"

struct server;

typedef struct rpc_call {
    uint16_t op;
    uint64_t stats_t0; /* SCUDA_STATS: when a call that waits was sent (0: not timed) */
    /* The server the call goes to (servers.h): rpc_begin sets it. */
    struct server *srv;
    wire_buf req;     /* arguments */
    wire_reader out;  /* outputs, positioned after the CUresult */
    void *reply;      /* reply payload, owned until rpc_end */
    /* Optional bulk bytes sent after `req` without a staging copy
     * (writev from the caller's buffer). */
    const void *bulk;
    size_t bulk_len;
    /* Bytes the call made itself and sends (a packed request's compressed
     * payload, request_pack.h); freed by rpc_end. */
    void *bulk_owned;
    /* The op the frame carries when it is not `op` (scuda_packed); 0: op. */
    uint16_t wire_op;
    /* Optional destination for bulk reply bytes: when set, the reply's
     * trailing blob (u64 length + bytes, the last output) is received
     * straight into this buffer instead of into `reply`. */
    void *sink;
    size_t sink_len;
    /* The caller pushed mirrored memory (rpc_push_mirrors) before taking
     * a lock it holds now: send without pushing, which takes the mirrors'
     * lock, whose holder may be waiting for the caller's (bulk.c). */
    int pushed;
    /* Nonzero: the context id the frame carries instead of the thread's
     * (conn_ctx_on): a call made for one end of a copy between two
     * servers runs in that end's context (peer.c). */
    uint32_t ctx;
    /* What decoding the reply allocates (messages.gen.h); freed by rpc_end. */
    struct msg_arena arena;
} rpc_call;

void rpc_begin(rpc_call *c, uint16_t op);
/* rpc_begin for a call that belongs to one server whatever the thread's
 * context: the transport's own calls (bulk.c's setup, copies and pings). */
void rpc_begin_on(rpc_call *c, uint16_t op, struct server *srv);
/* What an observing export returns: r, or when r is CUDA_SUCCESS the
 * pending error of an earlier one-way call (once). */
CUresult rpc_report_deferred(CUresult r);
/* An error this library found itself, reported like a one-way call's:
 * by the application's next observing call (the first one is kept). */
void rpc_defer_error(CUresult r);
/* Push mirrored memory's dirty pages now, as every call does first
 * (through the hook set at cuInit: coherence.c). */
void rpc_push_mirrors(void);
void rpc_set_push_hook(void (*hook)(void));
/* How many calls of this process waited for a reply (always counted: what
 * SCUDA_STATS lists as "sync"; scuda_client_waits()). */
uint64_t rpc_wait_count(void);
/* How many one-way calls this process has sent (see stream_sync.c). */
uint64_t rpc_async_count(void);
/* The same, counting only the calling thread's. */
uint64_t rpc_async_count_here(void);
/* A reply proved that `stream` (as this thread means it: stream_key) was
 * idle when it was sent, and `async_before` one-way calls had been sent by
 * then. */
void stream_note_idle(const void *stream, uint64_t async_before);
/* Work is known complete (a synchronize or a copy to the host returned):
 * on `stream` (NULL: the NULL stream), or with whole_context in every
 * stream of the current context. Mirrored memory (coherence.c, through
 * the hook it sets at cuInit) may then trust the device's bytes. */
void stream_synced(CUstream stream, int whole_context);
void stream_set_synced_hook(void (*hook)(CUstream stream, int whole_context));
/* cuStreamSynchronize for this library's own waits (before a host function,
 * a host-to-host copy): the call's own result, leaving an earlier one-way
 * call's error to the application's next observing call. */
CUresult stream_wait(CUstream stream);
CUresult rpc_sync(rpc_call *c);
/* rpc_sync in two halves, for a caller with work of its own between the
 * request and the reply (a striped copy receives its chunks there): send
 * the request, then wait for its reply. Same thread, nothing sent between. */
CUresult rpc_start(rpc_call *c);
CUresult rpc_finish(rpc_call *c);
CUresult rpc_async(rpc_call *c); /* also ends the call: no rpc_end needed */
/* SCUDA_SYNC=1: rpc_async waits for every reply (a debugging aid). */
int rpc_sync_every_call(void);
void rpc_end(rpc_call *c);

/* A handle argument of a generated stub, as its wire id (handles.h). */
static inline void rpc_put_handle(wire_buf *b, const void *h) { wb_put_u64(b, handle_wire_id(h)); }

#endif
