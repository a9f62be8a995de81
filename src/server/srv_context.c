/* srv_context.c - contexts on the server: the client keeps the context
 * stack; the session creates, retains and destroys the real contexts. */
#include "dispatch.h"
#include "handlers.gen.h"
#include "session.h"

void session_forget_bound_ctx(void);

static int read_two(srv_call *c, uint64_t *a, uint64_t *b)
{
    *a = wr_u64(&c->in);
    *b = wr_u64(&c->in);
    return wr_ok_end(&c->in);
}

CUresult srv_scuda_primary_ctx_retain(srv_call *c)
{
    uint64_t dev, id;
    if (!read_two(c, &dev, &id)) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult r = REAL(cuDevicePrimaryCtxRetain, &ctx, (CUdevice)dev);
    if (r != CUDA_SUCCESS) return r;
    handle_drop(c->s, id); /* a retain after a full release reuses the id */
    return handle_put(c->s, id, HK_CONTEXT, ctx);
}

CUresult srv_scuda_primary_ctx_release(srv_call *c)
{
    uint64_t dev, unused;
    if (!read_two(c, &dev, &unused)) return CUDA_ERROR_INVALID_VALUE;
    session_forget_bound_ctx();
    REAL(cuCtxSetCurrent, NULL);
    return REAL(cuDevicePrimaryCtxRelease_v2, (CUdevice)dev);
}

CUresult srv_scuda_primary_ctx_reset(srv_call *c)
{
    uint64_t dev, unused;
    if (!read_two(c, &dev, &unused)) return CUDA_ERROR_INVALID_VALUE;
    session_forget_bound_ctx();
    REAL(cuCtxSetCurrent, NULL);
    return REAL(cuDevicePrimaryCtxReset_v2, (CUdevice)dev);
}

CUresult srv_scuda_primary_ctx_set_flags(srv_call *c)
{
    uint64_t dev, flags;
    if (!read_two(c, &dev, &flags)) return CUDA_ERROR_INVALID_VALUE;
    return REAL(cuDevicePrimaryCtxSetFlags_v2, (CUdevice)dev, (unsigned)flags);
}

CUresult srv_scuda_ctx_create(srv_call *c)
{
    uint64_t id = wr_u64(&c->in);
    uint32_t flags = wr_u32(&c->in);
    int32_t dev = wr_i32(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult r = REAL(cuCtxCreate_v4, &ctx, NULL, flags, (CUdevice)dev);
    session_forget_bound_ctx(); /* creation pushed it onto this thread */
    if (r != CUDA_SUCCESS) return r;
    REAL(cuCtxPopCurrent_v2, NULL);
    r = handle_put(c->s, id, HK_CONTEXT, ctx);
    if (r != CUDA_SUCCESS) REAL(cuCtxDestroy_v2, ctx);
    return r;
}

CUresult srv_scuda_ctx_destroy(srv_call *c)
{
    uint64_t id, unused;
    if (!read_two(c, &id, &unused)) return CUDA_ERROR_INVALID_VALUE;
    void *ctx;
    CUresult r = handle_get(c->s, id, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS) return r;
    session_forget_bound_ctx();
    r = REAL(cuCtxDestroy_v2, (CUcontext)ctx);
    if (r == CUDA_SUCCESS) handle_drop(c->s, id);
    return r;
}

CUresult srv_scuda_ctx_synchronize(srv_call *c)
{
    uint64_t id, unused;
    if (!read_two(c, &id, &unused)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = session_bind_ctx(c->s, (uint32_t)id);
    return r != CUDA_SUCCESS ? r : REAL(cuCtxSynchronize, );
}

CUresult srv_scuda_ping(srv_call *c)
{
    (void)c;
    return CUDA_SUCCESS;
}

/* Error strings come from the real driver, so programs print exactly what
 * they print natively. */
CUresult srv_scuda_error_string(srv_call *c)
{
    uint32_t code = wr_u32(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    const char *name = NULL, *text = NULL;
    CUresult r1 = REAL(cuGetErrorName, (CUresult)code, &name);
    CUresult r2 = REAL(cuGetErrorString, (CUresult)code, &text);
    if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    wb_put_str(&c->out, name);
    wb_put_str(&c->out, text);
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
