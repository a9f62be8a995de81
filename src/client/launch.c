/* launch.c - kernel launches: one-way messages (DESIGN §3, call class
 * `async`). The arguments are packed into one buffer using the layout the
 * server reported when the module was loaded. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "module.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

#define EXPORT __attribute__((visibility("default")))

/* Pack kernelParams (an array of pointers to each argument) or take the
 * caller's own buffer from `extra`. */
static CUresult pack_params(const struct func_desc *d, void **kernelParams, void **extra, wire_buf *b)
{
    if (extra) {
        const void *buf = NULL;
        size_t size = 0;
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(size_t *)extra[i + 1];
            else return CUDA_ERROR_INVALID_VALUE;
        }
        if (size && !buf) return CUDA_ERROR_INVALID_VALUE;
        wb_put_blob(b, buf, size);
        return CUDA_SUCCESS;
    }
    if (d->nparams && !kernelParams) return CUDA_ERROR_INVALID_VALUE;
    wb_put_u64(b, d->param_bytes);
    uint8_t *dst = wb_reserve(b, d->param_bytes);
    if (!dst) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(dst, 0, d->param_bytes);
    for (uint32_t i = 0; i < d->nparams; i++) memcpy(dst + d->offset[i], kernelParams[i], d->size[i]);
    return CUDA_SUCCESS;
}

static void put_attr(wire_buf *b, const CUlaunchAttribute *a)
{
    wb_put_u32(b, (uint32_t)a->id);
    wb_put_raw(b, &a->value, sizeof a->value);
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem, CUstream st,
                       const CUlaunchAttribute *attrs, unsigned nattrs, void **kernelParams, void **extra)
{
    const struct func_desc *d = func_lookup(f);
    if (!d) return CUDA_ERROR_INVALID_HANDLE;
    if (kernelParams && extra) return CUDA_ERROR_INVALID_VALUE;
    rpc_call c;
    rpc_begin(&c, OP_scuda_launch);
    rpc_put_handle(&c.req, f);
    for (int i = 0; i < 3; i++) wb_put_u32(&c.req, grid[i]);
    for (int i = 0; i < 3; i++) wb_put_u32(&c.req, block[i]);
    wb_put_u32(&c.req, shmem);
    rpc_put_handle(&c.req, st);
    wb_put_u32(&c.req, nattrs);
    for (unsigned i = 0; i < nattrs; i++) put_attr(&c.req, &attrs[i]);
    CUresult r = pack_params(d, kernelParams, extra, &c.req);
    if (r != CUDA_SUCCESS) {
        rpc_end(&c);
        return r;
    }
    return rpc_async(&c);
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                               unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    SHIM_ENTER(cuLaunchKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                                hStream, kernelParams, extra));
    unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
    return launch(f, grid, block, sharedMemBytes, hStream, NULL, 0, kernelParams, extra);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    SHIM_ENTER(cuLaunchKernelEx, (config, f, kernelParams, extra));
    if (!config || (config->numAttrs && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
    unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, config->attrs, config->numAttrs,
                  kernelParams, extra);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                          unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                          void **kernelParams)
{
    SHIM_ENTER(cuLaunchCooperativeKernel, (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                           sharedMemBytes, hStream, kernelParams));
    unsigned grid[3] = {gridDimX, gridDimY, gridDimZ}, block[3] = {blockDimX, blockDimY, blockDimZ};
    CUlaunchAttribute coop = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE};
    coop.value.cooperative = 1;
    return launch(f, grid, block, sharedMemBytes, hStream, &coop, 1, kernelParams, NULL);
}

/* Host functions run in the client, where their code and data live. The
 * stream is synchronized first, so the function sees every earlier
 * operation complete, and the caller's later operations are issued after
 * it returns. This orders correctly but blocks the calling thread, where
 * the real driver would return at once. */
EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    SHIM_ENTER(cuLaunchHostFunc, (hStream, fn, userData));
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = cuStreamSynchronize(hStream);
    if (r != CUDA_SUCCESS) return r;
    fn(userData);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    SHIM_ENTER(cuStreamAddCallback, (hStream, callback, userData, flags));
    if (!callback || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult status = cuStreamSynchronize(hStream);
    callback(hStream, status, userData);
    return CUDA_SUCCESS;
}
