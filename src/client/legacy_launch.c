/* legacy_launch.c - the pre-CUDA-4 execution control API, emulated in the
 * client: cuFuncSetBlockShape, cuFuncSetSharedSize and cuParamSet* keep
 * per-function state here, and cuLaunch / cuLaunchGrid / cuLaunchGridAsync
 * launch through cuLaunchKernel with the parameter buffer as `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE), so the session sees an ordinary
 * launch.
 *
 * What driver 580 does, and this file with it (measured on an H200): the
 * block shape starts at 1x1x1 and a dimension below 1 or above the device's
 * limit is INVALID_VALUE; a shared size above the device's limit is
 * INVALID_VALUE; cuParamSetSize takes any size, and a launch whose size is
 * larger than the kernel's parameters fails with
 * CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, while a smaller one launches with the
 * kernel reading zeros past it; a NULL function is INVALID_HANDLE. Where the
 * driver writes past its own buffer (cuParamSet* at an offset beyond it, a
 * negative one crashes it) SCUDA answers INVALID_VALUE instead: the buffer
 * holds PARAM_BUFFER_MAX bytes, the largest parameter space a kernel has. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "module.h"
#include "shim.h"

#define PARAM_BUFFER_MAX 32764 /* CUDA 12.1's kernel parameter limit */

struct old_launch {
    CUfunction f;
    int block[3];
    unsigned shared;
    unsigned size;       /* cuParamSetSize */
    unsigned char *buf;  /* PARAM_BUFFER_MAX bytes, zeroed */
    struct old_launch *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct old_launch *states;

/* With the lock held: f's state, made at its first use. */
static struct old_launch *state_locked(CUfunction f)
{
    for (struct old_launch *s = states; s; s = s->next)
        if (s->f == f) return s;
    struct old_launch *s = malloc(sizeof *s);
    unsigned char *buf = calloc(1, PARAM_BUFFER_MAX);
    if (!s || !buf) {
        free(s);
        free(buf);
        return NULL;
    }
    *s = (struct old_launch){.f = f, .block = {1, 1, 1}, .buf = buf, .next = states};
    states = s;
    return s;
}

static int device_attr(CUdevice_attribute a)
{
    CUdevice dev = 0;
    int v = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS || cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) return -1;
    return v;
}

static CUresult check_function(CUfunction f)
{
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    return func_lookup(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult set_block_shape(CUfunction f, int x, int y, int z)
{
    CUresult r = check_function(f);
    if (r != CUDA_SUCCESS) return r;
    static const CUdevice_attribute max_dim[3] = {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                                                  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                                                  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z};
    int dims[3] = {x, y, z};
    for (int i = 0; i < 3; i++)
        if (dims[i] < 1 || dims[i] > device_attr(max_dim[i])) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct old_launch *s = state_locked(f);
    if (s) memcpy(s->block, dims, sizeof dims);
    pthread_mutex_unlock(&lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult set_shared_size(CUfunction f, unsigned bytes)
{
    CUresult r = check_function(f);
    if (r != CUDA_SUCCESS) return r;
    int max = device_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    if (max < 0 || bytes > (unsigned)max) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct old_launch *s = state_locked(f);
    if (s) s->shared = bytes;
    pthread_mutex_unlock(&lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult set_size(CUfunction f, unsigned size)
{
    CUresult r = check_function(f);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    struct old_launch *s = state_locked(f);
    if (s) s->size = size;
    pthread_mutex_unlock(&lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* n bytes at `offset` of f's parameter buffer. */
static CUresult set_bytes(CUfunction f, int offset, const void *p, unsigned n)
{
    CUresult r = check_function(f);
    if (r != CUDA_SUCCESS) return r;
    if (!p || offset < 0 || (size_t)offset + n > PARAM_BUFFER_MAX) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    struct old_launch *s = state_locked(f);
    if (s) memcpy(s->buf + offset, p, n);
    pthread_mutex_unlock(&lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Launch f's state on a w x h grid. The buffer travels at least as long as
 * the kernel's parameters, zero past the size the program set, as the
 * kernel reads it from the driver. */
static CUresult launch_grid(CUfunction f, int w, int h, CUstream st)
{
    CUresult r = check_function(f);
    if (r != CUDA_SUCCESS) return r;
    if (w < 1 || h < 1) return CUDA_ERROR_INVALID_VALUE;
    struct func_desc *d = func_lookup(f);
    if (!d->layout_known && (r = func_layout(f, d)) != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    struct old_launch *s = state_locked(f);
    if (!s) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct old_launch now = *s;
    size_t send = now.size > d->param_bytes ? now.size : d->param_bytes;
    unsigned char *buf = now.size > d->param_bytes || send > PARAM_BUFFER_MAX ? NULL : malloc(send ? send : 1);
    if (buf) {
        memcpy(buf, s->buf, now.size);
        memset(buf + now.size, 0, send - now.size);
    }
    pthread_mutex_unlock(&lock);
    if (now.size > d->param_bytes) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; /* more than the kernel takes */
    if (!buf) return CUDA_ERROR_OUT_OF_MEMORY;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &send, CU_LAUNCH_PARAM_END};
    r = cuLaunchKernel(f, (unsigned)w, (unsigned)h, 1, (unsigned)now.block[0], (unsigned)now.block[1],
                       (unsigned)now.block[2], now.shared, st, NULL, extra);
    free(buf);
    return r;
}

EXPORT CUresult cuFuncSetBlockShape(CUfunction hfunc, int x, int y, int z)
{
    SHIM_ENTER(cuFuncSetBlockShape, (hfunc, x, y, z));
    return set_block_shape(hfunc, x, y, z);
}

EXPORT CUresult cuFuncSetSharedSize(CUfunction hfunc, unsigned int bytes)
{
    SHIM_ENTER(cuFuncSetSharedSize, (hfunc, bytes));
    return set_shared_size(hfunc, bytes);
}

EXPORT CUresult cuParamSetSize(CUfunction hfunc, unsigned int numbytes)
{
    SHIM_ENTER(cuParamSetSize, (hfunc, numbytes));
    return set_size(hfunc, numbytes);
}

EXPORT CUresult cuParamSeti(CUfunction hfunc, int offset, unsigned int value)
{
    SHIM_ENTER(cuParamSeti, (hfunc, offset, value));
    return set_bytes(hfunc, offset, &value, sizeof value);
}

EXPORT CUresult cuParamSetf(CUfunction hfunc, int offset, float value)
{
    SHIM_ENTER(cuParamSetf, (hfunc, offset, value));
    return set_bytes(hfunc, offset, &value, sizeof value);
}

EXPORT CUresult cuParamSetv(CUfunction hfunc, int offset, void *ptr, unsigned int numbytes)
{
    SHIM_ENTER(cuParamSetv, (hfunc, offset, ptr, numbytes));
    return set_bytes(hfunc, offset, ptr, numbytes);
}

EXPORT CUresult cuLaunch(CUfunction f)
{
    SHIM_ENTER(cuLaunch, (f));
    return launch_grid(f, 1, 1, NULL);
}

EXPORT CUresult cuLaunchGrid(CUfunction f, int grid_width, int grid_height)
{
    SHIM_ENTER(cuLaunchGrid, (f, grid_width, grid_height));
    return launch_grid(f, grid_width, grid_height, NULL);
}

EXPORT CUresult cuLaunchGridAsync(CUfunction f, int grid_width, int grid_height, CUstream hStream)
{
    SHIM_ENTER(cuLaunchGridAsync, (f, grid_width, grid_height, hStream));
    return launch_grid(f, grid_width, grid_height, hStream);
}
