/* srv_context.c - contexts on the server: the client keeps the context
 * stack; the session creates, retains and destroys the real contexts. */
#include "dispatch.h"
#include "handlers.gen.h"
#include "legacy_ctx.h"
#include "session.h"

void session_forget_bound_ctx(void);

CUresult srv_scuda_primary_ctx_retain(srv_call *c)
{
    struct msg_scuda_primary_ctx_retain_req m;
    if (msg_scuda_primary_ctx_retain_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult r = REAL(cuDevicePrimaryCtxRetain, &ctx, (CUdevice)m.dev);
    if (r != CUDA_SUCCESS) return r;
    handle_drop(c->s, m.ctx); /* a retain after a full release reuses the id */
    return handle_put(c->s, m.ctx, HK_CONTEXT, ctx);
}

CUresult srv_scuda_primary_ctx_release(srv_call *c)
{
    struct msg_scuda_primary_ctx_release_req m;
    if (msg_scuda_primary_ctx_release_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    session_forget_bound_ctx();
    REAL(cuCtxSetCurrent, NULL);
    return REAL(cuDevicePrimaryCtxRelease_v2, (CUdevice)m.dev);
}

CUresult srv_scuda_primary_ctx_reset(srv_call *c)
{
    struct msg_scuda_primary_ctx_reset_req m;
    if (msg_scuda_primary_ctx_reset_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    session_forget_bound_ctx();
    REAL(cuCtxSetCurrent, NULL);
    return REAL(cuDevicePrimaryCtxReset_v2, (CUdevice)m.dev);
}

CUresult srv_scuda_primary_ctx_set_flags(srv_call *c)
{
    struct msg_scuda_primary_ctx_set_flags_req m;
    if (msg_scuda_primary_ctx_set_flags_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    return REAL(cuDevicePrimaryCtxSetFlags_v2, (CUdevice)m.dev, m.flags);
}

CUresult srv_scuda_ctx_create(srv_call *c)
{
    struct msg_scuda_ctx_create_req m;
    if (msg_scuda_ctx_create_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    /* a legacy context is the driver's own pre-3.2 kind: its addresses fit
     * the 32-bit entry points */
    CUresult r = m.legacy ? REAL(cuCtxCreate, &ctx, m.flags, (CUdevice)m.dev)
                          : REAL(cuCtxCreate_v4, &ctx, NULL, m.flags, (CUdevice)m.dev);
    session_forget_bound_ctx(); /* creation pushed it onto this thread */
    if (r != CUDA_SUCCESS) return r;
    REAL(cuCtxPopCurrent_v2, NULL);
    r = handle_put(c->s, m.ctx, HK_CONTEXT, ctx);
    if (r != CUDA_SUCCESS) REAL(cuCtxDestroy_v2, ctx);
    else if (m.legacy) legacy_ctx_add(ctx);
    return r;
}

CUresult srv_scuda_ctx_destroy(srv_call *c)
{
    struct msg_scuda_ctx_destroy_req m;
    if (msg_scuda_ctx_destroy_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *ctx;
    CUresult r = handle_get(c->s, m.ctx, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS) return r;
    session_forget_bound_ctx();
    r = REAL(cuCtxDestroy_v2, (CUcontext)ctx);
    if (r == CUDA_SUCCESS) {
        handle_drop(c->s, m.ctx);
        legacy_ctx_remove((CUcontext)ctx);
    }
    return r;
}

CUresult srv_scuda_ctx_synchronize(srv_call *c)
{
    struct msg_scuda_ctx_synchronize_req m;
    if (msg_scuda_ctx_synchronize_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = session_bind_ctx(c->s, (uint32_t)m.ctx);
    return r != CUDA_SUCCESS ? r : REAL(cuCtxSynchronize, );
}

CUresult srv_scuda_ping(srv_call *c)
{
    struct msg_scuda_ping_req m;
    return msg_scuda_ping_req_get(&c->in, &c->arena, &m) != 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* Error strings come from the real driver, so programs print exactly what
 * they print natively. */
CUresult srv_scuda_error_string(srv_call *c)
{
    struct msg_scuda_error_string_req m;
    if (msg_scuda_error_string_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_error_string_rep rep = {NULL, NULL};
    CUresult r1 = REAL(cuGetErrorName, (CUresult)m.code, &rep.name);
    CUresult r2 = REAL(cuGetErrorString, (CUresult)m.code, &rep.text);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    msg_scuda_error_string_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuStreamSynchronize(srv_call *c)
{
    struct msg_cuStreamSynchronize_req m;
    if (msg_cuStreamSynchronize_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.stream, HK_STREAM, &st);
    return r != CUDA_SUCCESS ? r : REAL(cuStreamSynchronize, (CUstream)st);
}

/* cuCtxFromGreenCtx: the client keeps contexts, so it names the green
 * context's context with an id of its own; the session records the
 * driver's context under that id and tells its device. */
CUresult srv_scuda_ctx_from_green(srv_call *c)
{
    struct msg_scuda_ctx_from_green_req m;
    if (msg_scuda_ctx_from_green_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *green;
    CUresult r = handle_get(c->s, m.green, HK_GREEN_CTX, &green);
    if (r != CUDA_SUCCESS) return r;
    CUcontext ctx;
    if ((r = REAL(cuCtxFromGreenCtx, &ctx, (CUgreenCtx)green)) != CUDA_SUCCESS) return r;
    CUdevice dev = 0;
    session_forget_bound_ctx(); /* the push below changes this thread's context */
    if ((r = REAL(cuCtxPushCurrent_v2, ctx)) != CUDA_SUCCESS) return r;
    r = REAL(cuCtxGetDevice, &dev);
    REAL(cuCtxPopCurrent_v2, NULL);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_put(c->s, m.ctx, HK_CONTEXT, ctx)) != CUDA_SUCCESS) return r;
    struct msg_scuda_ctx_from_green_rep rep = {.dev = dev};
    msg_scuda_ctx_from_green_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
