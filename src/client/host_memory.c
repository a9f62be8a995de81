/* host_memory.c - page-locked host memory and pointer attributes.
 *
 * On the client, "pinned" host memory is ordinary page-aligned memory
 * (DESIGN §4): the GPU never reads it directly, copies carry its bytes.
 * The client remembers these ranges so that flags and pointer attributes
 * are answered as the real driver would. Mapped (zero-copy) access from
 * kernels is not available yet: cuMemHostGetDevicePointer says so. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

#define EXPORT __attribute__((visibility("default")))

struct host_range {
    char *base;
    size_t size;
    unsigned flags;
    int owned; /* allocated by us (cuMemHostAlloc) rather than registered */
    struct host_range *next;
};

static struct host_range *ranges;
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returns a copy of the range holding p, or 0 when p is not ours. */
static int host_range_of(const void *p, struct host_range *out)
{
    int found = 0;
    pthread_mutex_lock(&ranges_lock);
    for (struct host_range *r = ranges; r && !found; r = r->next) {
        if ((const char *)p >= r->base && (const char *)p < r->base + (r->size ? r->size : 1)) {
            *out = *r;
            found = 1;
        }
    }
    pthread_mutex_unlock(&ranges_lock);
    return found;
}

static CUresult add_range(void *base, size_t size, unsigned flags, int owned)
{
    struct host_range *r = malloc(sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    *r = (struct host_range){.base = base, .size = size, .flags = flags, .owned = owned};
    pthread_mutex_lock(&ranges_lock);
    r->next = ranges;
    ranges = r;
    pthread_mutex_unlock(&ranges_lock);
    return CUDA_SUCCESS;
}

/* Unlinks the range starting at base; returns it (caller frees) or NULL. */
static struct host_range *remove_range(void *base, int owned)
{
    pthread_mutex_lock(&ranges_lock);
    struct host_range *found = NULL;
    for (struct host_range **pp = &ranges; *pp; pp = &(*pp)->next) {
        if ((*pp)->base == base && (*pp)->owned == owned) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&ranges_lock);
    return found;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    if (!pp) return CUDA_ERROR_INVALID_VALUE;
    if (shim_current_ctx_id() == 0) return CUDA_ERROR_INVALID_CONTEXT;
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytesize ? bytesize : 1) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Under unified addressing the driver maps every allocation and reports
     * CU_MEMHOSTALLOC_DEVICEMAP in its flags; so do we. */
    CUresult r = add_range(p, bytesize, flags | CU_MEMHOSTALLOC_DEVICEMAP, 1);
    if (r != CUDA_SUCCESS) {
        free(p);
        return r;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SHIM_ENTER(cuMemAllocHost_v2, (pp, bytesize));
    return host_alloc(pp, bytesize, 0);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SHIM_ENTER(cuMemHostAlloc, (pp, bytesize, Flags));
    return host_alloc(pp, bytesize, Flags);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    SHIM_ENTER(cuMemFreeHost, (p));
    struct host_range *r = remove_range(p, 1);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    free(r->base);
    free(r);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    SHIM_ENTER(cuMemHostGetFlags, (pFlags, p));
    struct host_range r;
    if (!pFlags || !host_range_of(p, &r)) return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    SHIM_ENTER(cuMemHostRegister_v2, (p, bytesize, Flags));
    struct host_range r;
    if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (host_range_of(p, &r)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    return add_range(p, bytesize, Flags, 0);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    SHIM_ENTER(cuMemHostUnregister, (p));
    struct host_range *r = remove_range(p, 0);
    if (!r) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(r);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    static int once;
    SHIM_ENTER(cuMemHostGetDevicePointer_v2, (pdptr, p, Flags));
    scuda_log_unsupported_once(&once, "cuMemHostGetDevicePointer (zero-copy host memory)");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- pointer attributes --------------------------------------------------- */

/* Attributes of our own host memory, as the driver reports pinned memory. */
static CUresult host_attribute(void *data, CUpointer_attribute attr, const struct host_range *hr, CUdeviceptr ptr)
{
    CUcontext ctx;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_HOST; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(void **)data = (void *)(uintptr_t)ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(void **)data = hr->base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = hr->size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return cuCtxGetDevice((CUdevice *)data);
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        cuCtxGetCurrent(&ctx);
        *(CUcontext *)data = ctx;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The server returns exactly the bytes the driver wrote for attr. */
static CUresult remote_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    rpc_call c;
    rpc_begin(&c, OP_scuda_pointer_get_attributes);
    wb_put_u32(&c.req, (uint32_t)attr);
    wb_put_u64(&c.req, ptr);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        size_t n;
        const void *v = wr_blob(&c.out, &n);
        if (c.out.bad || n > 64) r = CUDA_ERROR_INVALID_VALUE;
        else if (n) memcpy(data, v, n);
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SHIM_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct host_range hr;
    if (host_range_of((void *)(uintptr_t)ptr, &hr)) return host_attribute(data, attribute, &hr, ptr);
    return remote_attribute(data, attribute, ptr);
}

/* Unlike the singular call, this one succeeds for memory the driver does
 * not know, reporting memory type 0 ("unregistered" to cudart). */
EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                       CUdeviceptr ptr)
{
    SHIM_ENTER(cuPointerGetAttributes, (numAttributes, attributes, data, ptr));
    if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    struct host_range hr;
    int host = host_range_of((void *)(uintptr_t)ptr, &hr);
    unsigned type = 0;
    int known = host || remote_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) == CUDA_SUCCESS;
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i]) continue;
        CUresult r = CUDA_ERROR_INVALID_VALUE;
        if (host) r = host_attribute(data[i], attributes[i], &hr, ptr);
        else if (known) r = remote_attribute(data[i], attributes[i], ptr);
        if (r != CUDA_SUCCESS) {
            /* Unknown memory: zeroes, with ordinal -2 as the driver reports. */
            memset(data[i], 0, attributes[i] == CU_POINTER_ATTRIBUTE_P2P_TOKENS ? 16 : 4);
            if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) *(int *)data[i] = -2;
            else if (attributes[i] == CU_POINTER_ATTRIBUTE_CONTEXT ||
                     attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER ||
                     attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_POINTER ||
                     attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ||
                     attributes[i] == CU_POINTER_ATTRIBUTE_RANGE_SIZE)
                memset(data[i], 0, 8);
        }
    }
    return CUDA_SUCCESS;
}
