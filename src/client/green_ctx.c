/* green_ctx.c - the contexts of green contexts (docs/architecture.md,
 * 9.19).
 *
 * Green contexts, resource descriptors and their streams are session
 * handles with client ids, forwarded by generated stubs. The one thing the
 * client must do by hand is cuCtxFromGreenCtx: contexts live in the client
 * (context.c), so the context of a green context is a client record too,
 * one per green context as the driver gives one, forgotten when the green
 * context is destroyed. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "context.h"
#include "hooks.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/ops.gen.h"

struct green_ctx {
    uint64_t green;
    CUcontext ctx;
    struct green_ctx *next;
};

static pthread_mutex_t greens_lock = PTHREAD_MUTEX_INITIALIZER;
static struct green_ctx *greens;

static struct green_ctx *find_locked(uint64_t green)
{
    for (struct green_ctx *g = greens; g; g = g->next)
        if (g->green == green) return g;
    return NULL;
}

static CUresult session_ctx_from_green(uint64_t green, CUcontext ctx, CUdevice *dev)
{
    struct msg_scuda_ctx_from_green_req m = {.green = green, .ctx = (uint64_t)(uintptr_t)ctx};
    struct msg_scuda_ctx_from_green_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_ctx_from_green, server_of_id(green) ? server_of_id(green) : server_current());
    msg_scuda_ctx_from_green_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_ctx_from_green_rep_get(&c.out, &c.arena, &rep) != 0)
        r = CUDA_ERROR_UNKNOWN; /* not what any server sends */
    if (r == CUDA_SUCCESS) *dev = servers_used > 1 ? device_global(c.srv, rep.dev) : rep.dev; /* the client's ordinal */
    rpc_end(&c);
    return r;
}

/* Under the lock, so that two threads asking at once get one context. */
EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
    SHIM_ENTER(cuCtxFromGreenCtx, (pContext, hCtx));
    if (!pContext) return CUDA_ERROR_INVALID_VALUE;
    if (!hCtx) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t green = (uint64_t)(uintptr_t)hCtx;
    pthread_mutex_lock(&greens_lock);
    struct green_ctx *g = find_locked(green);
    CUresult r = CUDA_SUCCESS;
    if (!g) {
        CUcontext ctx = NULL;
        CUdevice dev = 0;
        g = malloc(sizeof *g);
        struct server *srv = server_of_id(green);
        r = g ? context_derived_new(&ctx, srv ? srv : server_current()) : CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS) r = session_ctx_from_green(green, ctx, &dev);
        if (r == CUDA_SUCCESS) {
            context_derived_set_device(ctx, dev);
            *g = (struct green_ctx){.green = green, .ctx = ctx, .next = greens};
            greens = g;
        } else {
            if (ctx) context_derived_forget(ctx);
            free(g);
            g = NULL;
        }
    }
    if (g) *pContext = g->ctx;
    pthread_mutex_unlock(&greens_lock);
    return r;
}

CUresult hook_cuGreenCtxDestroy(CUresult r, CUgreenCtx hCtx)
{
    if (r != CUDA_SUCCESS) return r;
    uint64_t green = (uint64_t)(uintptr_t)hCtx;
    pthread_mutex_lock(&greens_lock);
    for (struct green_ctx **p = &greens; *p; p = &(*p)->next) {
        if ((*p)->green != green) continue;
        struct green_ctx *g = *p;
        *p = g->next;
        context_derived_forget(g->ctx);
        free(g);
        break;
    }
    pthread_mutex_unlock(&greens_lock);
    return r;
}
