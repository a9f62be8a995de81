/* launch.c - kernel launches: one-way messages (docs/architecture.md, 3.3 Call
 * classes: `async`). The arguments are packed into one buffer with the
 * function's parameter layout, which the session reports at the function's
 * first launch (func_layout, module.h). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "coherence.h"
#include "hooks.h"
#include "launch.h"
#include "module.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/config.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

/* The packed parameters, as they travel: see launch.h. A buffer the caller
 * passed through `extra` is handed to the driver as it came. */
CUresult launch_pack_params(const struct func_desc *d, void **kernelParams, void **extra, struct launch_pack *pk)
{
    pk->heap = NULL;
    pk->params = (struct msg_launch_params){0};
    if (extra) {
        const void *buf = NULL;
        size_t size = 0;
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(size_t *)extra[i + 1];
            else return CUDA_ERROR_INVALID_VALUE;
        }
        if (size && !buf) return CUDA_ERROR_INVALID_VALUE;
        pk->params = (struct msg_launch_params){.raw = 1, .data = buf, .data_len = size};
        return host_pinned_touch_words(buf, size); /* unified addressing: hooks.h */
    }
    if (d->nparams && !kernelParams) return CUDA_ERROR_INVALID_VALUE;
    uint8_t *dst = (uint8_t *)pk->small;
    if (d->param_bytes > sizeof pk->small && !(dst = pk->heap = malloc(d->param_bytes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(dst, 0, d->param_bytes);
    for (uint32_t i = 0; i < d->nparams; i++) memcpy(dst + d->offset[i], kernelParams[i], d->size[i]);
    pk->params = (struct msg_launch_params){.raw = 0, .data = dst, .data_len = d->param_bytes};
    CUresult r = host_pinned_touch_words(dst, d->param_bytes);
    if (r != CUDA_SUCCESS) launch_pack_free(pk);
    return r;
}

void launch_pack_free(struct launch_pack *pk)
{
    free(pk->heap);
    pk->heap = NULL;
}

/* A function attribute, from the memo cache after the first query. */
static int func_attr(CUfunction f, int is_kernel, CUfunction_attribute a, int *v)
{
    if (!is_kernel) return cuFuncGetAttribute(v, a, f) == CUDA_SUCCESS;
    CUdevice dev;
    return cuCtxGetDevice(&dev) == CUDA_SUCCESS && cuKernelGetAttribute(v, a, (CUkernel)f, dev) == CUDA_SUCCESS;
}

/* What a launch is checked against that never changes for a device, read
 * once per device: a launch asked nine attributes of the shim before. */
struct device_launch_limits {
    unsigned block[3], grid[3];
    unsigned regs_per_block, threads_per_block, smem_per_block, sm_count;
};
#define LIMITS_DEVICES 64

static int read_device_limits(CUdevice dev, struct device_launch_limits *l)
{
    static const CUdevice_attribute attr[] = {
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,         CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,         CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,          CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
        CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT};
    unsigned *field[] = {&l->block[0], &l->block[1], &l->block[2], &l->grid[0], &l->grid[1], &l->grid[2],
                         &l->regs_per_block, &l->threads_per_block, &l->smem_per_block, &l->sm_count};
    _Static_assert(sizeof attr / sizeof attr[0] == sizeof field / sizeof field[0], "one field per attribute");
    int ok = 1;
    for (size_t i = 0; i < sizeof attr / sizeof attr[0]; i++) {
        int v = 0;
        ok &= cuDeviceGetAttribute(&v, attr[i], dev) == CUDA_SUCCESS && v >= 0;
        *field[i] = (unsigned)v;
    }
    return ok;
}

/* The current device's limits: cached once read whole (one thread fills a
 * device's entry; a thread that finds it being filled reads its own). */
static const struct device_launch_limits *device_limits(struct device_launch_limits *scratch)
{
    static struct device_launch_limits cache[LIMITS_DEVICES];
    static _Atomic int state[LIMITS_DEVICES]; /* 0 empty, 1 being filled, 2 ready */
    CUdevice dev = 0;
    cuCtxGetDevice(&dev);
    if (dev < 0 || dev >= LIMITS_DEVICES) return read_device_limits(dev, scratch), scratch;
    if (atomic_load_explicit(&state[dev], memory_order_acquire) == 2) return &cache[dev];
    int empty = 0;
    if (!atomic_compare_exchange_strong(&state[dev], &empty, 1)) return read_device_limits(dev, scratch), scratch;
    if (!read_device_limits(dev, scratch)) { /* not kept: a later launch reads them again */
        atomic_store_explicit(&state[dev], 0, memory_order_release);
        return scratch;
    }
    cache[dev] = *scratch;
    atomic_store_explicit(&state[dev], 2, memory_order_release);
    return &cache[dev];
}

/* The driver rejects a bad launch configuration at the launch itself, and
 * programs check for it there (cudaGetLastError after <<<>>>). Launches
 * are one-way messages, so the client makes the same checks first, from
 * cached device and function attributes. */
/* A cooperative grid must fit on the device at once. */
static CUresult check_cooperative(const struct device_launch_limits *lim, CUfunction f, const unsigned grid[3],
                                  unsigned long long threads, unsigned shmem)
{
    int per_sm = 0;
    if (cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, (int)threads, shmem) != CUDA_SUCCESS)
        return CUDA_SUCCESS; /* the session's driver decides */
    unsigned long long blocks = (unsigned long long)grid[0] * grid[1] * grid[2];
    unsigned long long fit = (unsigned long long)per_sm * lim->sm_count;
    return blocks > fit ? CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE : CUDA_SUCCESS;
}

static int is_cooperative(const CUlaunchAttribute *attrs, unsigned nattrs)
{
    for (unsigned i = 0; i < nattrs; i++)
        if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && attrs[i].value.cooperative) return 1;
    return 0;
}

/* The most threads a block of the kernel certainly may have, from the
 * limits read from its image (0: nothing is certain). The driver's limit
 * is the least of the device's, __launch_bounds__' and what the register
 * file holds: registers go to a warp 256 at a time, so a kernel of r
 * registers fits (registers per block) / (32 r rounded up to 256) warps;
 * without a REGCOUNT record r is taken as 255, the most there is. */
static unsigned threads_surely_allowed(const struct device_launch_limits *lim, const struct kernel_limits *k)
{
    if (!k->known || k->regs > 255) return 0;
    unsigned regs = k->regs ? k->regs : 255;
    unsigned per_warp = (regs * 32 + 255) / 256 * 256;
    unsigned t = lim->regs_per_block / per_warp * 32;
    if (t > lim->threads_per_block) t = lim->threads_per_block;
    if (k->max_threads && k->max_threads < t) t = k->max_threads;
    return t;
}

/* The most dynamic shared memory a launch certainly may ask for: until
 * the program sets an attribute of the kernel, its limit is the driver's
 * default, the device's shared memory per block less the kernel's static
 * (0: nothing is certain). */
static unsigned dyn_smem_surely_allowed(const struct device_launch_limits *lim, const struct func_desc *d)
{
    int64_t set = __atomic_load_n(&d->dyn_smem_set, __ATOMIC_ACQUIRE);
    if (set > 0) return (unsigned)(set - 1); /* the program set it, to a value the driver surely took */
    if (!d->limits.known || __atomic_load_n(&d->attribute_set, __ATOMIC_ACQUIRE)) return 0;
    unsigned per_block = lim->smem_per_block;
    return d->limits.shared_bytes < per_block ? per_block - d->limits.shared_bytes : 0;
}

/* SCUDA_CHECK_LAUNCH_LIMITS=1: every launch the image's limits let pass
 * is checked against the driver's attributes as well, and a launch they
 * let pass wrongly is logged (an error): the check of those limits
 * (tests/gpu). */
static int check_limits_too(void)
{
    static _Atomic int on = -1;
    if (atomic_load(&on) < 0) atomic_store(&on, scuda_env_on("SCUDA_CHECK_LAUNCH_LIMITS"));
    return atomic_load(&on);
}

static void check_surely(CUfunction f, int is_kernel, const struct func_desc *d, unsigned long long threads,
                         unsigned shmem)
{
    int max_threads = 0, max_dyn_smem = 0;
    if (func_attr(f, is_kernel, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads) &&
        func_attr(f, is_kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &max_dyn_smem) &&
        (threads > (unsigned long long)max_threads || shmem > (unsigned)max_dyn_smem))
        LOG_ERROR("the limits read from the image of %s let a launch of %llu threads and %u bytes of dynamic "
                  "shared memory pass; the driver allows %d and %d (registers %u, bound %u, static shared %u)",
                  d->name, threads, shmem, max_threads, max_dyn_smem, d->limits.regs, d->limits.max_threads,
                  d->limits.shared_bytes);
}

static CUresult check_config(CUfunction f, int is_kernel, const struct func_desc *d, const unsigned grid[3],
                             const unsigned block[3], unsigned shmem, int cooperative)
{
    struct device_launch_limits scratch;
    const struct device_launch_limits *lim = device_limits(&scratch);
    for (int i = 0; i < 3; i++) {
        if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
        if (block[i] > lim->block[i] || grid[i] > lim->grid[i]) return CUDA_ERROR_INVALID_VALUE;
    }
    int max_threads, max_dyn_smem;
    unsigned long long threads = (unsigned long long)block[0] * block[1] * block[2];
    /* Within what the image's limits allow for certain, no question is
     * asked (a kernel's first launch would wait for one). */
    int surely = threads <= threads_surely_allowed(lim, &d->limits) && shmem <= dyn_smem_surely_allowed(lim, d);
    if (surely && check_limits_too()) check_surely(f, is_kernel, d, threads, shmem);
    if (!surely && func_attr(f, is_kernel, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads) &&
        threads > (unsigned long long)max_threads)
        return CUDA_ERROR_INVALID_VALUE;
    if (!surely && func_attr(f, is_kernel, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &max_dyn_smem) &&
        shmem > (unsigned)max_dyn_smem)
        return CUDA_ERROR_INVALID_VALUE;
    return cooperative ? check_cooperative(lim, f, grid, threads, shmem) : CUDA_SUCCESS;
}

/* A launch the client refuses: SCUDA_LOG=debug says why, since the program
 * only sees the error code. */
static CUresult refuse(CUresult r, CUfunction f, const char *why)
{
    LOG_DEBUG("launch of function %p refused (%d): %s", (void *)f, (int)r, why);
    return r;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem, CUstream st,
                       const CUlaunchAttribute *attrs, unsigned nattrs, void **kernelParams, void **extra)
{
    int is_kernel = 0;
    struct func_desc *d = func_lookup_kind(f, &is_kernel);
    if (!d) return refuse(CUDA_ERROR_INVALID_HANDLE, f, "not a function or kernel of this process");
    if (!d->layout_known && !extra) {
        CUresult lr = func_layout(f, d);
        if (lr != CUDA_SUCCESS) return refuse(lr, f, "its parameter layout is unknown");
    }
    if (kernelParams && extra) return refuse(CUDA_ERROR_INVALID_VALUE, f, "both kernelParams and extra");
    CUresult r = check_config(f, is_kernel, d, grid, block, shmem, is_cooperative(attrs, nattrs));
    if (r != CUDA_SUCCESS) return refuse(r, f, "grid, block or shared memory out of the device's limits");
    if (nattrs > LAUNCH_MAX_ATTRS) return refuse(CUDA_ERROR_INVALID_VALUE, f, "more launch attributes than SCUDA carries");
    struct msg_launch_attr wire_attrs[LAUNCH_MAX_ATTRS];
    for (unsigned i = 0; i < nattrs; i++) wire_attrs[i] = (struct msg_launch_attr){attrs[i].id, attrs[i].value};
    struct msg_scuda_launch_req m = {
        .func = handle_wire_id(f),
        .grid = {grid[0], grid[1], grid[2]},
        .block = {block[0], block[1], block[2]},
        .shared_bytes = shmem,
        .stream = handle_wire_id(st),
        .attrs = wire_attrs,
        .attrs_count = nattrs,
    };
    struct launch_pack pk;
    r = launch_pack_params(d, kernelParams, extra, &pk);
    if (r != CUDA_SUCCESS) return refuse(r, f, "its parameters (kernelParams or extra) cannot be packed");
    m.params = pk.params;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_launch, server_of_handle(f)); /* the function's server (servers.h) */
    msg_scuda_launch_req_put(&c.req, &m);
    launch_pack_free(&pk);
    r = rpc_async(&c);
    coherence_kernel_sent();
    return r;
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
 * the real driver would return at once. On a capturing stream the
 * function becomes a host node of the graph, which has the client run it
 * at each replay (graph.c). */
EXPORT CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    SHIM_ENTER(cuLaunchHostFunc, (hStream, fn, userData));
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureStatus cs;
    CUresult r = capture_status(hStream, &cs);
    if (r != CUDA_SUCCESS) return r;
    if (cs != CU_STREAM_CAPTURE_STATUS_NONE) return capture_hostfn(hStream, fn, userData);
    r = stream_wait(hStream);
    if (r != CUDA_SUCCESS) return r;
    fn(userData);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    SHIM_ENTER(cuStreamAddCallback, (hStream, callback, userData, flags));
    if (!callback || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = capture_refuse(hStream, "a stream callback (cuStreamAddCallback)");
    if (r != CUDA_SUCCESS) return r;
    CUresult status = stream_wait(hStream);
    callback(hStream, status, userData);
    return CUDA_SUCCESS;
}
