/* SCUDA CPU stand-in driver: contexts (primary and created), the per-thread
 * context stack, limits. The sticky error is process-wide (si_g.sticky). */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct si_tls_ent {
    si_ctx *c;
    uint64_t id;
} si_tls_ent;

static __thread si_tls_ent si_tls_stack[SI_MAX_CTX_STACK];
static __thread int si_tls_depth;

#define SI_CTX_FLAGS_ALL 0xFFu
#define SI_LEAST_PRIO 0
#define SI_GREATEST_PRIO (-5)

static const size_t si_default_limits[SI_N_LIMITS] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 8650752,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 0,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
    [CU_LIMIT_SHMEM_SIZE] = SI_MAX_DYN_SHMEM_OPTIN,
    [CU_LIMIT_CIG_ENABLED] = 0,
    [CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 0,
};

bool si_ctx_valid(const si_ctx *c)
{
    return c && si_hset_has(&si_g.ctxs, c) && c->active;
}

/* top of this thread's stack, whether or not it is still alive */
static si_tls_ent *si_tls_top(void)
{
    return si_tls_depth > 0 ? &si_tls_stack[si_tls_depth - 1] : NULL;
}

/* A binding to a created context dies with it. A binding to a primary
 * context lives on: it works again once the primary is retained again
 * (driver 580 behaves so). */
si_ctx *si_current(void)
{
    si_tls_ent *t = si_tls_top();
    if (!t || !si_ctx_valid(t->c) || (t->c->id != t->id && !t->c->primary))
        return NULL;
    return t->c;
}

static CUresult si_get_ctx_nosticky(si_ctx **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    si_tls_ent *t = si_tls_top();
    if (!t)
        return CUDA_ERROR_INVALID_CONTEXT;
    si_ctx *c = si_current();
    if (!c)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult si_get_ctx(si_ctx **out)
{
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (rc)
        return rc;
    if (si_g.sticky)
        return si_g.sticky;
    *out = c;
    return CUDA_SUCCESS;
}

/* a context handle argument, NULL meaning the current context */
static CUresult si_ctx_arg(CUcontext h, si_ctx **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!h)
        return si_get_ctx_nosticky(out);
    if (!si_ctx_valid((si_ctx *)h))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = (si_ctx *)h;
    return CUDA_SUCCESS;
}

void si_set_sticky(CUresult err)
{
    if (!si_g.sticky)
        si_g.sticky = err;
}

void si_flush_printf(si_ctx *c)
{
    if (!c || !c->printf_buf.len)
        return;
    fwrite(c->printf_buf.data, 1, c->printf_buf.len, stdout);
    fflush(stdout);
    c->printf_buf.len = 0;
}

void si_ctx_wait_idle(si_ctx *c)
{
    for (;;) {
        bool busy = false;
        for (si_stream *s = si_g.stream_list; s; s = s->next_all)
            if (s->ctx == c && !si_stream_idle(s)) {
                busy = true;
                break;
            }
        if (!busy)
            return;
        si_wait_done();
    }
}

void si_dev_wait_idle(int dev)
{
    for (;;) {
        bool busy = false;
        for (si_stream *s = si_g.stream_list; s; s = s->next_all)
            if ((dev < 0 || s->ctx->dev == dev) && !si_stream_idle(s)) {
                busy = true;
                break;
            }
        if (!busy)
            return;
        si_wait_done();
    }
}

static bool si_flags_ok(unsigned flags)
{
    if (flags & ~SI_CTX_FLAGS_ALL)
        return false;
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    return sched == CU_CTX_SCHED_AUTO || sched == CU_CTX_SCHED_SPIN ||
           sched == CU_CTX_SCHED_YIELD || sched == CU_CTX_SCHED_BLOCKING_SYNC;
}

static void si_ctx_activate(si_ctx *c, unsigned flags)
{
    c->id = si_next_id();
    c->flags = flags;
    c->active = true;
    memcpy(c->limits, si_default_limits, sizeof(c->limits));
    c->cache_config = CU_FUNC_CACHE_PREFER_NONE;
    c->shmem_config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    c->n_peers = 0;
    si_hset_add(&si_g.ctxs, c);
    c->legacy = si_stream_new(c, SI_SK_LEGACY, 0, 0);
}

/* destroys everything the context owns; waits for its work first */
static void si_ctx_teardown(si_ctx *c)
{
    si_ctx_wait_idle(c);
    si_flush_printf(c);
    si_destroy_ctx_modules(c);
    si_destroy_ctx_streams_events(c);
    si_free_ctx_allocs(c);
    si_hset_del(&si_g.ctxs, c);
    si_strbuf_free(&c->printf_buf);
    c->active = false;
}

static CUresult si_tls_push(si_ctx *c)
{
    if (si_tls_depth >= SI_MAX_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    si_tls_stack[si_tls_depth].c = c;
    si_tls_stack[si_tls_depth].id = c->id;
    si_tls_depth++;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* primary contexts                                                    */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && !pctx)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && si_g.sticky)
        rc = si_g.sticky;
    if (!rc) {
        si_ctx *c = si_g.dev[dev].primary;
        if (!c->active)
            si_ctx_activate(c, c->primary_flags);
        c->refcount++;
        *pctx = (CUcontext)c;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        si_ctx *c = si_g.dev[dev].primary;
        if (c->refcount <= 0)
            rc = CUDA_ERROR_INVALID_CONTEXT;
        else if (--c->refcount == 0 && c->active)
            si_ctx_teardown(c);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && !si_flags_ok(flags))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_ctx *c = si_g.dev[dev].primary;
        c->primary_flags = flags;
        if (c->active)
            c->flags = flags;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && (!flags || !active))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_ctx *c = si_g.dev[dev].primary;
        *flags = c->primary_flags;
        *active = c->active ? 1 : 0;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        /* destroys the context; the retain count stays (driver 580) */
        si_ctx *c = si_g.dev[dev].primary;
        if (c->active)
            si_ctx_teardown(c);
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* created contexts                                                    */

static CUresult si_ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!pctx || !si_flags_ok(flags))
        return CUDA_ERROR_INVALID_VALUE;
    if (si_g.sticky)
        return si_g.sticky;
    if (si_tls_depth >= SI_MAX_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    si_ctx *c = si_xcalloc(1, sizeof(*c));
    c->dev = dev;
    si_ctx_activate(c, flags);
    si_tls_push(c);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

static CUresult si_affinity_ok(const CUexecAffinityParam *p, int n)
{
    if (n < 0 || (n > 0 && !p))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++) {
        if (p[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT)
            return CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY;
        if (p[i].param.smCount.val == 0 || p[i].param.smCount.val > SI_SM_COUNT)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
    si_enter();
    CUresult rc = CUDA_SUCCESS;
    if (ctxCreateParams) {
        if (ctxCreateParams->cigParams && ctxCreateParams->numExecAffinityParams > 0)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (ctxCreateParams->cigParams)
            rc = CUDA_ERROR_NOT_SUPPORTED;
        else
            rc = si_affinity_ok(ctxCreateParams->execAffinityParams,
                                ctxCreateParams->numExecAffinityParams);
    }
    if (!rc)
        rc = si_check_init();
    if (!rc)
        rc = si_ctx_create(pctx, flags, dev);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                       int numParams, unsigned int flags, CUdevice dev)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc)
        rc = si_affinity_ok(paramsArray, numParams);
    if (!rc)
        rc = si_ctx_create(pctx, flags, dev);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    si_enter();
    CUresult rc = si_ctx_create(pctx, flags, dev);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    si_enter();
    CUresult rc = si_check_init();
    si_ctx *c = (si_ctx *)ctx;
    if (!rc && !ctx)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && (!si_ctx_valid(c) || c->primary))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        uint64_t id = c->id;
        si_ctx_teardown(c);
        /* drop it from this thread's stack */
        int j = 0;
        for (int i = 0; i < si_tls_depth; i++)
            if (!(si_tls_stack[i].c == c && si_tls_stack[i].id == id))
                si_tls_stack[j++] = si_tls_stack[i];
        si_tls_depth = j;
        free(c);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !ctx)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_ctx_valid((si_ctx *)ctx))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (!rc)
        rc = si_tls_push((si_ctx *)ctx);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && si_tls_depth == 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (!rc) {
        si_tls_depth--;
        if (pctx)
            *pctx = (CUcontext)si_tls_stack[si_tls_depth].c;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc) {
        if (!ctx) {
            if (si_tls_depth > 0)
                si_tls_depth--;
        } else if (!si_ctx_valid((si_ctx *)ctx)) {
            rc = CUDA_ERROR_INVALID_CONTEXT;
        } else if (si_tls_depth == 0) {
            rc = si_tls_push((si_ctx *)ctx);
        } else {
            si_tls_stack[si_tls_depth - 1].c = (si_ctx *)ctx;
            si_tls_stack[si_tls_depth - 1].id = ((si_ctx *)ctx)->id;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !pctx)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_tls_ent *t = si_tls_top();
        *pctx = t ? (CUcontext)t->c : NULL;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc && !device)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *device = c->dev;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_ctx_arg(ctx, &c);
    if (!rc && !device)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *device = c->dev;
    si_leave();
    return rc;
}

static CUresult si_ctx_sync(si_ctx *c)
{
    if (si_in_callback)
        return CUDA_ERROR_NOT_PERMITTED;
    si_ctx_wait_idle(c);
    si_flush_printf(c);
    return si_g.sticky;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc)
        rc = si_ctx_sync(c);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_ctx_arg(ctx, &c);
    if (!rc)
        rc = si_ctx_sync(c);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc && (!pvalue || (unsigned)limit >= SI_N_LIMITS))
        rc = CUDA_ERROR_INVALID_VALUE;
    /* as driver 580: no device-runtime sync depth (CDP2), no CIG fallback */
    if (!rc && (limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH ||
                limit == CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED))
        rc = CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (!rc)
        *pvalue = c->limits[limit];
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (unsigned)limit >= SI_N_LIMITS)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        switch (limit) {
        case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
        case CU_LIMIT_SHMEM_SIZE:
        case CU_LIMIT_CIG_ENABLED:
        case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
            rc = CUDA_ERROR_UNSUPPORTED_LIMIT;
            break;
        case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:
            if (value > 128)
                rc = CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
            if (value > 32505856)
                rc = CUDA_ERROR_INVALID_VALUE;
            break;
        default:
            break;
        }
    }
    if (!rc)
        c->limits[limit] = value;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_ctx_arg(ctx, &c);
    if (!rc && !version)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *version = 3020;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc && !flags)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *flags = c->flags | CU_CTX_MAP_HOST; /* always on, reported as the driver does */
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && !si_flags_ok(flags))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        c->flags = flags;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_ctx_arg(ctx, &c);
    if (!rc && !ctxId)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *ctxId = c->id;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc) {
        if (leastPriority)
            *leastPriority = SI_LEAST_PRIO;
        if (greatestPriority)
            *greatestPriority = SI_GREATEST_PRIO;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc && !pconfig)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pconfig = c->cache_config;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        c->cache_config = config;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx_nosticky(&c);
    if (!rc && !pConfig)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pConfig = c->shmem_config;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (unsigned)config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        c->shmem_config = config;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxResetPersistingL2Cache(void)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    si_leave();
    return rc;
}

static int si_peer_index(const si_ctx *c, const si_ctx *peer)
{
    for (int i = 0; i < c->n_peers; i++)
        if (c->peers[i] == peer->id)
            return i;
    return -1;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    si_enter();
    si_ctx *c = NULL;
    si_ctx *p = (si_ctx *)peerContext;
    CUresult rc = si_get_ctx(&c);
    if (!rc && Flags != 0)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_ctx_valid(p))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (!rc && p->dev == c->dev)
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (!rc && si_peer_index(c, p) >= 0)
        rc = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    if (!rc) {
        if (c->n_peers >= SI_MAX_DEVICES)
            rc = CUDA_ERROR_TOO_MANY_PEERS;
        else
            c->peers[c->n_peers++] = p->id;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext)
{
    si_enter();
    si_ctx *c = NULL;
    si_ctx *p = (si_ctx *)peerContext;
    CUresult rc = si_get_ctx(&c);
    if (!rc && !si_ctx_valid(p))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    int i = -1;
    if (!rc && (i = si_peer_index(c, p)) < 0)
        rc = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    if (!rc) {
        c->peers[i] = c->peers[--c->n_peers];
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* test hook: back to just after cuInit (standin_api.h)                */

SI_API void standin_reset(void)
{
    si_enter();
    si_in_callback = 0;
    /* Created contexts are freed; primary ones go inactive, unretained. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < si_g.ctxs.cap; i++) {
            si_ctx *c = si_g.ctxs.slots[i];
            if (!c || !si_hset_has(&si_g.ctxs, c) || c->primary != (pass == 1))
                continue;
            si_ctx_teardown(c);
            if (!c->primary)
                free(c);
        }
    }
    for (int d = 0; d < si_g.ndev; d++)
        si_g.dev[d].primary->refcount = 0;
    si_tls_depth = 0;
    si_g.sticky = CUDA_SUCCESS;
    si_leave();
}
