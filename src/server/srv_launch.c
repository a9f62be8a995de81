/* srv_launch.c - kernel launches.
 *
 * The client packs the arguments into one buffer, laid out as
 * cuFuncGetParamInfo describes it, and sends the layout along; the session
 * rebuilds the kernelParams array of pointers into that buffer, so it needs
 * no per-kernel state. (Passing the buffer itself as `extra` fails for
 * kernels whose parameter size is not a multiple of 8.) Every launch goes
 * through cuLaunchKernelEx, which also carries the attributes of
 * cuLaunchKernelEx and cooperative launches. */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "session.h"
#include "../common/log.h"

#define MAX_LAUNCH_ATTRS 32
#define MAX_PARAMS 4096
#define RAW_PARAMS 0xffffffffu

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

/* Request: u64 function id, u32 grid[3], u32 block[3], u32 shared bytes,
 * u64 stream id, u32 attribute count, per attribute { u32 id, raw value },
 * blob of packed parameters. */
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
    uint32_t nparams = wr_u32(&c->in);
    if (nparams != RAW_PARAMS && nparams > MAX_PARAMS) return CUDA_ERROR_INVALID_VALUE;
    uint32_t layout_n = nparams == RAW_PARAMS ? 0 : nparams;
    const uint8_t *layout = wr_view(&c->in, (size_t)layout_n * 8);
    size_t plen;
    const void *params = wr_blob(&c->in, &plen);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    for (uint32_t i = 0; i < layout_n; i++) {
        uint32_t off, size;
        memcpy(&off, layout + 8 * i, 4);
        memcpy(&size, layout + 8 * i + 4, 4);
        if ((uint64_t)off + size > plen) return CUDA_ERROR_INVALID_VALUE;
    }

    void *f, *stream;
    CUresult r = handle_get(c->s, fid, HK_FUNCTION, &f);
    if (r != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, stream_id, HK_STREAM, &stream)) != CUDA_SUCCESS) return r;
    for (uint32_t i = 0; i < nattrs; i++)
        if ((r = map_attr(c->s, &attrs[i])) != CUDA_SUCCESS) return r;
    cfg.hStream = (CUstream)stream;
    cfg.attrs = nattrs ? attrs : NULL;
    cfg.numAttrs = nattrs;

    /* Parameters hold doubles and pointers: give the driver an aligned copy. */
    uint64_t small[512];
    void *small_ptrs[64];
    void *buf = plen <= sizeof small ? small : malloc(plen);
    void **ptrs = layout_n <= 64 ? small_ptrs : malloc(layout_n * sizeof *ptrs);
    if (!buf || !ptrs) {
        if (buf != small) free(buf);
        if (ptrs != small_ptrs) free(ptrs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (plen) memcpy(buf, params, plen);
    if (nparams == RAW_PARAMS) {
        size_t size = plen;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
        r = real.cuLaunchKernelEx(&cfg, (CUfunction)f, NULL, plen ? extra : NULL);
    } else {
        for (uint32_t i = 0; i < layout_n; i++) {
            uint32_t off;
            memcpy(&off, layout + 8 * i, 4);
            ptrs[i] = (char *)buf + off;
        }
        r = real.cuLaunchKernelEx(&cfg, (CUfunction)f, layout_n ? ptrs : NULL, NULL);
    }
    if (r != CUDA_SUCCESS)
        LOG_INFO("launch failed (%d): grid %ux%ux%u block %ux%ux%u smem %u, %u attrs, %u params in %zu bytes", r,
                 cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ,
                 cfg.sharedMemBytes, nattrs, nparams, plen);
    if (buf != small) free(buf);
    if (ptrs != small_ptrs) free(ptrs);
    return r;
}
