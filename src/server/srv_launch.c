/* srv_launch.c - kernel launches.
 *
 * The client packs the arguments into one buffer, laid out as
 * cuFuncGetParamInfo describes it, and sends the layout along; the session
 * rebuilds the kernelParams array of pointers into that buffer. (Passing
 * the buffer itself as `extra` fails for kernels whose parameter size is
 * not a multiple of 8.) The layout sent must be the one the driver reports
 * for the function (param_layout.h): the driver reads the kernel's own
 * parameters, whatever the request says. Every launch goes through
 * cuLaunchKernelEx, which also carries the attributes of cuLaunchKernelEx
 * and cooperative launches. */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "launch_params.h"
#include "param_layout.h"
#include "session.h"
#include "../common/log.h"

#define MAX_LAUNCH_ATTRS 32

/* Attributes that carry an event handle need it translated. */
static CUresult map_attr(struct session *s, CUlaunchAttribute *a)
{
    void *ev;
    CUresult r;
    switch (a->id) {
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        r = handle_get(s, (uint64_t)(uintptr_t)a->value.programmaticEvent.event, HK_EVENT, &ev);
        a->value.programmaticEvent.event = (CUevent)ev;
        return r;
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
        r = handle_get(s, (uint64_t)(uintptr_t)a->value.launchCompletionEvent.event, HK_EVENT, &ev);
        a->value.launchCompletionEvent.event = (CUevent)ev;
        return r;
    default:
        return CUDA_SUCCESS;
    }
}

/* ---- launch_params.h ------------------------------------------------------ */

int launch_params_read(wire_reader *in, struct launch_params *lp)
{
    lp->nparams = wr_u32(in);
    lp->kernel_params = NULL;
    lp->extra = NULL;
    lp->buf = NULL;
    if (lp->nparams != LAUNCH_RAW_PARAMS && lp->nparams > LAUNCH_MAX_PARAMS) return -1;
    uint32_t n = lp->nparams == LAUNCH_RAW_PARAMS ? 0 : lp->nparams;
    lp->layout = wr_view(in, (size_t)n * 8);
    lp->blob = wr_blob(in, &lp->len);
    if (n && !lp->layout) return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off, size;
        memcpy(&off, lp->layout + 8 * i, 4);
        memcpy(&size, lp->layout + 8 * i + 4, 4);
        if ((uint64_t)off + size > lp->len) return -1;
    }
    return 0;
}

CUresult launch_params_build(struct launch_params *lp)
{
    uint32_t n = lp->nparams == LAUNCH_RAW_PARAMS ? 0 : lp->nparams;
    lp->buf = lp->len <= sizeof lp->small ? lp->small : malloc(lp->len);
    void **ptrs = n <= 64 ? lp->small_ptrs : malloc(n * sizeof *ptrs);
    if (!lp->buf || !ptrs) {
        if (ptrs != lp->small_ptrs) free(ptrs);
        launch_params_free(lp);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (lp->len) memcpy(lp->buf, lp->blob, lp->len);
    lp->kernel_params = ptrs;
    if (lp->nparams == LAUNCH_RAW_PARAMS) {
        lp->size = lp->len;
        lp->extra_words[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        lp->extra_words[1] = lp->buf;
        lp->extra_words[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        lp->extra_words[3] = &lp->size;
        lp->extra_words[4] = CU_LAUNCH_PARAM_END;
        lp->extra = lp->len ? lp->extra_words : NULL;
        return CUDA_SUCCESS;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t off;
        memcpy(&off, lp->layout + 8 * i, 4);
        ptrs[i] = (char *)lp->buf + off;
    }
    return CUDA_SUCCESS;
}

void launch_params_free(struct launch_params *lp)
{
    if (lp->buf != lp->small) free(lp->buf);
    if (lp->kernel_params != lp->small_ptrs) free(lp->kernel_params);
    lp->buf = NULL;
    lp->kernel_params = NULL;
    lp->extra = NULL;
}

/* ---- the launch --------------------------------------------------------------- */

/* Request: u64 function id, u32 grid[3], u32 block[3], u32 shared bytes,
 * u64 stream id, u32 attribute count, per attribute { u32 id, raw value },
 * packed parameters (launch_params.h). */
CUresult srv_scuda_launch(srv_call *c)
{
    uint64_t fid = wr_u64(&c->in);
    CUlaunchConfig cfg = {0};
    cfg.gridDimX = wr_u32(&c->in);
    cfg.gridDimY = wr_u32(&c->in);
    cfg.gridDimZ = wr_u32(&c->in);
    cfg.blockDimX = wr_u32(&c->in);
    cfg.blockDimY = wr_u32(&c->in);
    cfg.blockDimZ = wr_u32(&c->in);
    cfg.sharedMemBytes = wr_u32(&c->in);
    uint64_t stream_id = wr_u64(&c->in);
    uint32_t nattrs = wr_u32(&c->in);
    if (nattrs > MAX_LAUNCH_ATTRS) return CUDA_ERROR_INVALID_VALUE;
    CUlaunchAttribute attrs[MAX_LAUNCH_ATTRS];
    memset(attrs, 0, sizeof attrs);
    for (uint32_t i = 0; i < nattrs; i++) {
        attrs[i].id = (CUlaunchAttributeID)wr_u32(&c->in);
        wr_raw(&c->in, &attrs[i].value, sizeof attrs[i].value);
    }
    struct launch_params lp;
    if (launch_params_read(&c->in, &lp) != 0 || !wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;

    void *f, *stream;
    int is_kernel;
    CUresult r = handle_get_function(c->s, fid, &f, &is_kernel);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, stream_id, HK_STREAM, &stream)) != CUDA_SUCCESS) return r;
    if ((r = param_layout_check(f, is_kernel, &lp)) != CUDA_SUCCESS) return r;
    for (uint32_t i = 0; i < nattrs; i++)
        if ((r = map_attr(c->s, &attrs[i])) != CUDA_SUCCESS) return r;
    cfg.hStream = (CUstream)stream;
    cfg.attrs = nattrs ? attrs : NULL;
    cfg.numAttrs = nattrs;

    if ((r = launch_params_build(&lp)) != CUDA_SUCCESS) return r;
    r = REAL(cuLaunchKernelEx, &cfg, (CUfunction)f, launch_params_kernel_params(&lp), lp.extra);
    if (r != CUDA_SUCCESS)
        LOG_INFO("launch failed (%d): grid %ux%ux%u block %ux%ux%u smem %u, %u attrs, %u params in %zu bytes", r,
                 cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ,
                 cfg.sharedMemBytes, nattrs, lp.nparams, lp.len);
    launch_params_free(&lp);
    return r;
}
