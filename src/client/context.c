/* context.c - contexts in the client.
 *
 * The context stack is per thread and lives here: cuCtxGetCurrent,
 * cuCtxSetCurrent, push/pop and cuCtxGetDevice never touch the network
 * (they are ~90% of the calls a PyTorch training step makes). Every frame
 * carries the caller's current context id, and the session makes that
 * context current before it runs the call. Creation, destruction and the
 * primary context's retain/release go to the server. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "conn.h"
#include "servers.h"
#include "context.h"
#include "hooks.h"
#include "memo.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

#define MAX_CONTEXTS 256
#define STACK_DEPTH 32

struct client_ctx {
    uint64_t id; /* tagged with its server (handle_tag.h) */
    struct server *srv; /* its device's server: every call in it goes there */
    unsigned long long uid; /* cuCtxGetId: unique per process, 1 for the first */
    CUdevice dev;
    unsigned flags;
    int primary;
    int live;
    int legacy; /* made by cuCtxCreate's pre-3.2 export: the 32-bit entry points work in it */
};

static struct client_ctx contexts[MAX_CONTEXTS];
static unsigned long long next_ctx_uid = 1;
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;

struct primary_state {
    struct client_ctx *ctx; /* NULL until first retained */
    int refcount;
    unsigned flags;
};
static struct primary_state primaries[SCUDA_MAX_GLOBAL_DEVICES];

static __thread struct client_ctx *ctx_stack[STACK_DEPTH];
static __thread int ctx_depth;

static struct client_ctx *current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

/* Who learns that a context went away (export_tables.c: the storage
 * cudart attached to it); set at cuInit. */
static void (*destroy_hook)(CUcontext ctx);

void context_set_destroy_hook(void (*hook)(CUcontext ctx)) { destroy_hook = hook; }

static void context_destroyed(CUcontext ctx)
{
    if (destroy_hook) destroy_hook(ctx);
}

/* After every change of the stack: the connection stamps each frame with
 * the current context's id. */
static void stack_changed(void)
{
    struct client_ctx *c = current();
    servers_thread_server = c ? c->srv : NULL; /* the thread's calls go to its context's server */
    conn_set_thread_ctx(c ? (uint32_t)c->id : 0);
}

uint32_t shim_current_ctx_id(void)
{
    struct client_ctx *c = current();
    return c ? (uint32_t)c->id : 0;
}

static struct client_ctx *lookup(CUcontext h)
{
    uint64_t id = (uint64_t)(uintptr_t)h;
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (contexts[i].live && contexts[i].id == id) return &contexts[i];
    return NULL;
}

/* A new context record on server srv (its device's). */
static struct client_ctx *ctx_new_on(struct server *srv, CUdevice dev, unsigned flags, int primary)
{
    pthread_mutex_lock(&ctx_lock);
    struct client_ctx *c = NULL;
    for (int i = 0; i < MAX_CONTEXTS && !c; i++) {
        if (!contexts[i].live) {
            c = &contexts[i];
            c->id = handle_tag(handle_new_id(), (unsigned)srv->index);
            c->srv = srv;
            c->uid = next_ctx_uid++;
            c->dev = dev;
            c->flags = flags;
            c->primary = primary;
            c->legacy = 0; /* a reused slot: ctx_create says when it is legacy */
            c->live = 1;
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    return c;
}

static struct client_ctx *ctx_new(CUdevice dev, unsigned flags, int primary)
{
    return ctx_new_on(server_of_device(dev), dev, flags, primary);
}

/* The server's fallback context (servers.h, any_ctx): c, once made there. */
static void ctx_made(struct client_ctx *c)
{
    uint32_t none = 0;
    atomic_compare_exchange_strong(&c->srv->any_ctx, &none, (uint32_t)c->id);
}

/* c is gone on its server: no longer its fallback. */
static void ctx_gone(struct client_ctx *c)
{
    uint32_t mine = (uint32_t)c->id;
    atomic_compare_exchange_strong(&c->srv->any_ctx, &mine, 0);
}

static void ctx_free(struct client_ctx *c)
{
    ctx_gone(c);
    pthread_mutex_lock(&ctx_lock);
    c->live = 0;
    pthread_mutex_unlock(&ctx_lock);
}

/* A destroyed context must not stay current in this thread. Other threads
 * that still have it current get INVALID_CONTEXT from the server. */
static void unbind_everywhere_in_thread(struct client_ctx *c)
{
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] == c) ctx_stack[i] = NULL;
    while (ctx_depth && ctx_stack[ctx_depth - 1] == NULL) ctx_depth--;
    stack_changed();
}

static int valid_device(CUdevice dev) { return gdev_get(&gdevs, dev) != NULL; }

/* ---- current context ------------------------------------------------- */

int context_current(CUcontext *ctx, CUdevice *dev)
{
    struct client_ctx *c = current();
    if (!c) return 0;
    if (ctx) *ctx = (CUcontext)handle_from_id(c->id);
    if (dev) *dev = c->dev;
    return 1;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SHIM_ENTER(cuCtxGetCurrent, (pctx));
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!context_current(pctx, NULL)) *pctx = NULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SHIM_ENTER(cuCtxSetCurrent, (ctx));
    struct client_ctx *c = NULL;
    if (ctx && !(c = lookup(ctx))) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0) {
        if (c) ctx_stack[ctx_depth++] = c;
    } else if (c) {
        ctx_stack[ctx_depth - 1] = c;
    } else {
        ctx_depth--;
    }
    stack_changed();
    return CUDA_SUCCESS;
}

static CUresult push(CUcontext ctx)
{
    struct client_ctx *c = lookup(ctx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == STACK_DEPTH) return CUDA_ERROR_OUT_OF_MEMORY;
    ctx_stack[ctx_depth++] = c;
    stack_changed();
    return CUDA_SUCCESS;
}

static CUresult pop(CUcontext *pctx)
{
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct client_ctx *c = ctx_stack[--ctx_depth];
    stack_changed();
    if (pctx) *pctx = (CUcontext)handle_from_id(c->id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { SHIM_ENTER(cuCtxPushCurrent_v2, (ctx)); return push(ctx); }
EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { SHIM_ENTER(cuCtxPushCurrent, (ctx)); return push(ctx); }
EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) { SHIM_ENTER(cuCtxPopCurrent_v2, (pctx)); return pop(pctx); }
EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { SHIM_ENTER(cuCtxPopCurrent, (pctx)); return pop(pctx); }

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    SHIM_ENTER(cuCtxGetDevice, (device));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    return context_current(NULL, device) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SHIM_ENTER(cuCtxGetDevice_v2, (device, ctx));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    struct client_ctx *c = ctx ? lookup(ctx) : current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->dev;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
    SHIM_ENTER(cuCtxGetFlags, (flags));
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    struct client_ctx *c = current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *flags = c->primary ? primaries[c->dev].flags : c->flags;
    return CUDA_SUCCESS;
}

CUresult hook_cuCtxSetFlags(CUresult r, unsigned int flags)
{
    struct client_ctx *c = current();
    if (r != CUDA_SUCCESS || !c) return r;
    pthread_mutex_lock(&ctx_lock);
    if (c->primary) primaries[c->dev].flags = flags;
    else c->flags = flags;
    pthread_mutex_unlock(&ctx_lock);
    return r;
}

/* cuBLAS asks for this (through an export table) about 30 times a
 * training step: answered here. */
EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    SHIM_ENTER(cuCtxGetId, (ctx, ctxId));
    if (!ctxId) return CUDA_ERROR_INVALID_VALUE;
    struct client_ctx *c = ctx ? lookup(ctx) : current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *ctxId = c->uid;
    return CUDA_SUCCESS;
}

/* ---- synchronize ------------------------------------------------------ */

static CUresult ctx_sync(CUcontext ctx)
{
    struct client_ctx *c = ctx ? lookup(ctx) : current();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    rpc_call call;
    struct msg_scuda_ctx_synchronize_req m = {handle_untag(c->id)};
    rpc_begin_on(&call, OP_scuda_ctx_synchronize, c->srv);
    msg_scuda_ctx_synchronize_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r == CUDA_SUCCESS) stream_synced(NULL, 1);
    return rpc_report_deferred(r);
}

EXPORT CUresult cuCtxSynchronize(void) { SHIM_ENTER(cuCtxSynchronize, ()); return ctx_sync(NULL); }
EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) { SHIM_ENTER(cuCtxSynchronize_v2, (ctx)); return ctx_sync(ctx); }

/* ---- contexts the session made from other objects ---------------------- */

CUresult context_derived_new(CUcontext *pctx, struct server *srv)
{
    struct client_ctx *c = ctx_new_on(srv, 0, 0, 0);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *pctx = (CUcontext)handle_from_id(c->id);
    return CUDA_SUCCESS;
}

void context_derived_set_device(CUcontext ctx, CUdevice dev)
{
    pthread_mutex_lock(&ctx_lock);
    struct client_ctx *c = lookup(ctx);
    if (c) c->dev = dev;
    pthread_mutex_unlock(&ctx_lock);
}

void context_derived_forget(CUcontext ctx)
{
    struct client_ctx *c = lookup(ctx);
    if (!c) return;
    unbind_everywhere_in_thread(c);
    context_destroyed(ctx);
    ctx_free(c);
}

/* ---- regular contexts ------------------------------------------------- */

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev, int legacy)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct client_ctx *c = ctx_new(dev, flags, 0);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    rpc_call call;
    c->legacy = legacy;
    struct msg_scuda_ctx_create_req m = {
        .ctx = handle_untag(c->id), .flags = flags, .dev = device_local(dev), .legacy = (uint8_t)legacy};
    rpc_begin_on(&call, OP_scuda_ctx_create, c->srv);
    msg_scuda_ctx_create_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r != CUDA_SUCCESS) {
        ctx_free(c);
        return r;
    }
    ctx_made(c);
    if (ctx_depth == STACK_DEPTH) ctx_depth--;
    ctx_stack[ctx_depth++] = c; /* a new context becomes current */
    stack_changed();
    *pctx = (CUcontext)handle_from_id(c->id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SHIM_ENTER(cuCtxCreate, (pctx, flags, dev));
    return ctx_create(pctx, flags, dev, 1);
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SHIM_ENTER(cuCtxCreate_v2, (pctx, flags, dev));
    return ctx_create(pctx, flags, dev, 0);
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                               unsigned int flags, CUdevice dev)
{
    SHIM_ENTER(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
    if (numParams != 0) return CUDA_ERROR_NOT_SUPPORTED; /* execution affinity: not forwarded yet */
    return ctx_create(pctx, flags, dev, 0);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                               CUdevice dev)
{
    SHIM_ENTER(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
    if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED; /* affinity and CIG need host resources we don't forward */
    return ctx_create(pctx, flags, dev, 0);
}

int context_current_is_legacy(void)
{
    struct client_ctx *c = current();
    return c && c->legacy;
}

static __thread int v1_depth; /* inside a 32-bit form (legacy.c) */

void context_v1_enter(void) { v1_depth++; }
void context_v1_leave(void) { v1_depth--; }

CUresult context_v2_allowed(void)
{
    return v1_depth == 0 && context_current_is_legacy() ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

static CUresult ctx_destroy(CUcontext ctx)
{
    struct client_ctx *c = lookup(ctx);
    if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    rpc_call call;
    struct msg_scuda_ctx_destroy_req m = {handle_untag(c->id)};
    rpc_begin_on(&call, OP_scuda_ctx_destroy, c->srv);
    msg_scuda_ctx_destroy_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r == CUDA_SUCCESS) {
        context_destroyed(ctx);
        memo_forget_settings(); /* memo entries are keyed by context id */
        per_thread_streams_stale();
        unbind_everywhere_in_thread(c);
        ctx_free(c);
    }
    return r;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { SHIM_ENTER(cuCtxDestroy_v2, (ctx)); return ctx_destroy(ctx); }
EXPORT CUresult cuCtxDestroy(CUcontext ctx) { SHIM_ENTER(cuCtxDestroy, (ctx)); return ctx_destroy(ctx); }

/* ---- primary contexts ------------------------------------------------- */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SHIM_ENTER(cuDevicePrimaryCtxRetain, (pctx, dev));
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct primary_state *p = &primaries[dev];
    pthread_mutex_lock(&ctx_lock);
    int first = p->refcount == 0;
    pthread_mutex_unlock(&ctx_lock);
    if (first) {
        /* The server holds one retain for all of ours; the id stays the same
         * for the life of the process, as the real primary context does. */
        if (!p->ctx && !(p->ctx = ctx_new(dev, 0, 1))) return CUDA_ERROR_OUT_OF_MEMORY;
        rpc_call call;
        struct msg_scuda_primary_ctx_retain_req m = {.dev = device_local(dev), .ctx = handle_untag(p->ctx->id)};
        rpc_begin_on(&call, OP_scuda_primary_ctx_retain, p->ctx->srv);
        msg_scuda_primary_ctx_retain_req_put(&call.req, &m);
        CUresult r = rpc_sync(&call);
        rpc_end(&call);
        if (r != CUDA_SUCCESS) return r;
        ctx_made(p->ctx);
    }
    pthread_mutex_lock(&ctx_lock);
    p->refcount++;
    pthread_mutex_unlock(&ctx_lock);
    *pctx = (CUcontext)handle_from_id(p->ctx->id);
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct primary_state *p = &primaries[dev];
    pthread_mutex_lock(&ctx_lock);
    int last = p->refcount == 1;
    int none = p->refcount == 0;
    if (!none) p->refcount--;
    pthread_mutex_unlock(&ctx_lock);
    if (none) return CUDA_ERROR_INVALID_CONTEXT;
    if (!last) return CUDA_SUCCESS;
    context_destroyed((CUcontext)handle_from_id(p->ctx->id));
    memo_forget_settings(); /* the context's state goes with it */
    rpc_call call;
    struct msg_scuda_primary_ctx_release_req m = {device_local(dev)};
    rpc_begin_on(&call, OP_scuda_primary_ctx_release, server_of_device(dev));
    msg_scuda_primary_ctx_release_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r == CUDA_SUCCESS) ctx_gone(p->ctx);
    return r;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { SHIM_ENTER(cuDevicePrimaryCtxRelease_v2, (dev)); return primary_release(dev); }
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { SHIM_ENTER(cuDevicePrimaryCtxRelease, (dev)); return primary_release(dev); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SHIM_ENTER(cuDevicePrimaryCtxGetState, (dev, flags, active));
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = primaries[dev].flags;
    *active = primaries[dev].refcount > 0;
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    rpc_call call;
    struct msg_scuda_primary_ctx_set_flags_req m = {.dev = device_local(dev), .flags = flags};
    rpc_begin_on(&call, OP_scuda_primary_ctx_set_flags, server_of_device(dev));
    msg_scuda_primary_ctx_set_flags_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r == CUDA_SUCCESS) primaries[dev].flags = flags;
    return r;
}

EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) { SHIM_ENTER(cuDevicePrimaryCtxSetFlags_v2, (dev, flags)); return primary_set_flags(dev, flags); }
EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) { SHIM_ENTER(cuDevicePrimaryCtxSetFlags, (dev, flags)); return primary_set_flags(dev, flags); }

static CUresult primary_reset(CUdevice dev)
{
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (primaries[dev].ctx) context_destroyed((CUcontext)handle_from_id(primaries[dev].ctx->id));
    rpc_call call;
    struct msg_scuda_primary_ctx_reset_req m = {device_local(dev)};
    rpc_begin_on(&call, OP_scuda_primary_ctx_reset, server_of_device(dev));
    msg_scuda_primary_ctx_reset_req_put(&call.req, &m);
    CUresult r = rpc_sync(&call);
    rpc_end(&call);
    if (r == CUDA_SUCCESS) {
        if (primaries[dev].ctx) ctx_gone(primaries[dev].ctx);
        memo_forget_settings();
        per_thread_streams_stale();
        pthread_mutex_lock(&ctx_lock);
        primaries[dev].refcount = 0;
        primaries[dev].flags = 0;
        pthread_mutex_unlock(&ctx_lock);
    }
    return r;
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { SHIM_ENTER(cuDevicePrimaryCtxReset_v2, (dev)); return primary_reset(dev); }
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { SHIM_ENTER(cuDevicePrimaryCtxReset, (dev)); return primary_reset(dev); }

/* For cudart's interface table: the primary context without a reference.
 * It exists (as an id) from the first retain on; before that, create it. */
CUresult scuda_primary_ctx_lookup(CUdevice dev, CUcontext *pctx)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct primary_state *p = &primaries[dev];
    if (p->refcount == 0) {
        CUresult r = cuDevicePrimaryCtxRetain(pctx, dev);
        if (r != CUDA_SUCCESS) return r;
    }
    *pctx = (CUcontext)handle_from_id(p->ctx->id);
    return CUDA_SUCCESS;
}

/* Legacy attach/detach (CUDA 2.x): not forwarded. */
EXPORT CUresult cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    static int once;
    SHIM_ENTER(cuCtxAttach, (pctx, flags));
    scuda_log_unsupported_once(&once, "cuCtxAttach");
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult cuCtxDetach(CUcontext ctx)
{
    static int once;
    SHIM_ENTER(cuCtxDetach, (ctx));
    scuda_log_unsupported_once(&once, "cuCtxDetach");
    return CUDA_ERROR_NOT_SUPPORTED;
}
