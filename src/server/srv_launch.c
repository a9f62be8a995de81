/* srv_launch.c - kernel launches.
 *
 * The client packs the arguments into one buffer, laid out as
 * cuFuncGetParamInfo describes it; the session rebuilds the kernelParams
 * array of pointers into that buffer with the layout the driver reports
 * (launch_params.h). (Passing the buffer itself as `extra` fails for
 * kernels whose parameter size is not a multiple of 8.) Every launch goes through
 * cuLaunchKernelEx, which also carries the attributes of cuLaunchKernelEx
 * and cooperative launches. */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "launch_params.h"
#include "session.h"
#include "../common/log.h"

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

/* ---- the launch --------------------------------------------------------------- */

CUresult srv_scuda_launch(srv_call *c)
{
    struct msg_scuda_launch_req m;
    if (msg_scuda_launch_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUlaunchAttribute attrs[LAUNCH_MAX_ATTRS];
    for (uint32_t i = 0; i < m.attrs_count; i++) {
        memset(&attrs[i], 0, sizeof attrs[i]);
        attrs[i].id = (CUlaunchAttributeID)m.attrs[i].id;
        attrs[i].value = m.attrs[i].value;
    }
    void *f, *stream;
    int is_kernel;
    CUresult r = handle_get_function(c->s, m.func, &f, &is_kernel);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, m.stream, HK_STREAM, &stream)) != CUDA_SUCCESS) return r;
    for (uint32_t i = 0; i < m.attrs_count; i++)
        if ((r = map_attr(c->s, &attrs[i])) != CUDA_SUCCESS) return r;
    CUlaunchConfig cfg = {
        .gridDimX = m.grid[0], .gridDimY = m.grid[1], .gridDimZ = m.grid[2],
        .blockDimX = m.block[0], .blockDimY = m.block[1], .blockDimZ = m.block[2],
        .sharedMemBytes = m.shared_bytes, .hStream = (CUstream)stream,
        .attrs = m.attrs_count ? attrs : NULL, .numAttrs = m.attrs_count,
    };
    struct launch_params lp;
    if ((r = launch_params_build(f, is_kernel, &m.params, &lp)) != CUDA_SUCCESS) return r;
    r = REAL(cuLaunchKernelEx, &cfg, (CUfunction)f, lp.kernel_params, lp.extra);
    if (r != CUDA_SUCCESS)
        LOG_INFO("launch failed (%d): grid %ux%ux%u block %ux%ux%u smem %u, %u attrs, %zu parameter bytes", r,
                 cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ,
                 cfg.sharedMemBytes, m.attrs_count, lp.size);
    launch_params_free(&lp);
    return r;
}
