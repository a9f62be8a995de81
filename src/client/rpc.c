/* rpc.c - see rpc.h: calls as the rest of the client makes them, above the
 * connection (conn.c): one-way and waiting calls, and what the client
 * keeps of their errors (sticky errors after a fault, one-way calls'
 * errors held for the next observing call). docs/architecture.md, 3.4
 * The error model, describes it. */
#define _GNU_SOURCE
#include "rpc.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "conn.h"
#include "servers.h"
#include "stats.h"
#include "../common/config.h"
#include "../common/log.h"

void rpc_begin(rpc_call *c, uint16_t op) { rpc_begin_on(c, op, server_current()); }

void rpc_begin_on(rpc_call *c, uint16_t op, struct server *srv)
{
    c->op = op;
    c->srv = srv;
    c->stats_t0 = 0;
    wb_init(&c->req);
    wr_init(&c->out, NULL, 0);
    msg_arena_init(&c->arena);
    c->reply = NULL;
    c->bulk = NULL;
    c->bulk_len = 0;
    c->bulk_owned = NULL;
    c->wire_op = 0;
    c->sink = NULL;
    c->sink_len = 0;
    c->pushed = 0;
    c->ctx = 0;
}

/* ---- sticky errors ---------------------------------------------------- */

/* After a kernel fault, driver 580 fails every later call that does work,
 * in every context of the process, with the same error (measured: not even
 * a reset clears it). One-way calls never see the session's answer, so the
 * client remembers the fault and fails them itself. */
static _Atomic int sticky_error;

static int is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return 1;
    default:
        return 0;
    }
}

static void sticky_note(CUresult r)
{
    int none = 0;
    if (is_sticky(r)) atomic_compare_exchange_strong(&sticky_error, &none, (int)r);
}

/* ---- errors of one-way calls ------------------------------------------ */

/* The session reports a one-way call's error with the reply of a call that
 * observes earlier work (FRAME_DEFERRED, protocol.h). The call itself
 * succeeded and gets its own result, so this library's own waits and
 * fetches (the synchronize before a host function, a mirror's page fetch)
 * keep their outputs and do not swallow the error: it waits here for the
 * application's next observing call (rpc_report_deferred). The first one
 * is kept, as in the session. */
static _Atomic int deferred_error;

static void deferred_note(CUresult r)
{
    int none = 0;
    atomic_compare_exchange_strong(&deferred_error, &none, (int)r);
    sticky_note(r);
}

void rpc_defer_error(CUresult r) { deferred_note(r); }

CUresult rpc_report_deferred(CUresult r)
{
    if (r != CUDA_SUCCESS || atomic_load_explicit(&deferred_error, memory_order_relaxed) == 0) return r;
    return (CUresult)atomic_exchange(&deferred_error, 0);
}

/* Mirrored memory (coherence.c) pushes the host's writes before any call
 * reaches the server; it registers at cuInit. The NVML shim shares this
 * file and registers nothing. */
static void (*push_hook)(void);

void rpc_set_push_hook(void (*hook)(void)) { push_hook = hook; }

void rpc_push_mirrors(void)
{
    if (push_hook) push_hook();
}

static _Atomic uint64_t sync_sent; /* calls that waited for a reply: rpc_wait_count() */

uint64_t rpc_wait_count(void) { return atomic_load_explicit(&sync_sent, memory_order_relaxed); }

CUresult rpc_start(rpc_call *c)
{
    if (!c->pushed) rpc_push_mirrors();
    atomic_fetch_add_explicit(&sync_sent, 1, memory_order_relaxed);
    stats_count(c->op, 0);
    c->stats_t0 = stats_enabled() ? stats_now_ns() : 0;
    return conn_send(c, 0);
}

CUresult rpc_finish(rpc_call *c)
{
    int deferred = 0;
    CUresult r = conn_wait(c, &deferred);
    if (c->stats_t0) stats_waited(c->op, stats_now_ns() - c->stats_t0);
    if (deferred) {
        deferred_note(r);
        return CUDA_SUCCESS;
    }
    if (r != CUDA_SUCCESS) sticky_note(r);
    return r;
}

CUresult rpc_sync(rpc_call *c)
{
    CUresult r = rpc_start(c);
    return r == CUDA_SUCCESS ? rpc_finish(c) : r;
}

/* SCUDA_SYNC=1 makes every one-way call wait for its reply, so an error
 * comes back from the call that caused it: a debugging aid. */
int rpc_sync_every_call(void)
{
    /* Read at the first call; threads that race to read it settle the
     * same value, so a relaxed atomic (a plain load) is enough. */
    static _Atomic int v = -1;
    int on = atomic_load_explicit(&v, memory_order_relaxed);
    if (on < 0) {
        on = scuda_env_on("SCUDA_SYNC");
        atomic_store_explicit(&v, on, memory_order_relaxed);
    }
    return on;
}

/* One-way calls sent so far. A synchronizing reply proves a stream idle
 * only if no one-way call could have been queued behind it meanwhile. */
static _Atomic uint64_t async_sent;
static __thread uint64_t async_sent_here; /* by the calling thread */

uint64_t rpc_async_count(void) { return atomic_load(&async_sent); }

uint64_t rpc_async_count_here(void) { return async_sent_here; }

CUresult rpc_async(rpc_call *c)
{
    if (!c->pushed) rpc_push_mirrors();
    atomic_fetch_add(&async_sent, 1);
    async_sent_here++;
    if (rpc_sync_every_call()) {
        CUresult r = rpc_sync(c);
        if (r != CUDA_SUCCESS) LOG_WARN("SCUDA_SYNC: op %u failed with %d", c->op, r);
        rpc_end(c);
        return r;
    }
    stats_count(c->op, 1);
    CUresult r = (CUresult)atomic_load(&sticky_error);
    if (r == CUDA_SUCCESS) r = conn_send(c, 1);
    rpc_end(c);
    return r;
}

void rpc_end(rpc_call *c)
{
    wb_free(&c->req);
    free(c->bulk_owned);
    c->bulk_owned = NULL;
    free(c->reply);
    c->reply = NULL;
    msg_arena_free(&c->arena);
}
