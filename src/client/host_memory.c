/* host_memory.c - page-locked host memory and pointer attributes.
 *
 * On the client, "pinned" host memory is ordinary memory (docs/architecture.md, 4 Memory kinds):
 * copies carry its bytes. The client remembers these ranges so that flags
 * and pointer attributes are answered as the real driver would.
 *
 * Zero-copy: when the application asks for the device address of memory
 * from cuMemHostAlloc (cuMemHostGetDevicePointer), the session maps pinned
 * memory of its own at the same address if it can, and the range becomes
 * a mirror of it (coherence.h): kernels read and write the session's copy,
 * the host's writes are pushed before the next call, and the kernels'
 * writes are fetched after a synchronize. That is why cuMemHostAlloc
 * memory is a mapping that coherence.c can mirror. Registered memory
 * (cuMemHostRegister) belongs to the application and is not mirrored. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coherence.h"
#include "conn.h"
#include "context.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

struct host_range {
    char *base;
    char *alias;       /* cuMemHostAlloc memory: the same pages (coherence_map) */
    size_t size;
    unsigned flags;
    int owned;         /* allocated by us (cuMemHostAlloc) rather than registered */
    uint64_t mirror;   /* the session's device address once zero-copy is asked for */
    struct host_range *next;
};

static struct host_range *ranges;
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
/* cuMemHostAlloc ranges the session has no copy of yet, and the span of
 * addresses they cover: host_pinned_touch() rejects most values with two
 * loads. Updated under ranges_lock. */
static _Atomic unsigned unmirrored;
static _Atomic uint64_t unmirrored_lo = UINT64_MAX, unmirrored_hi;
/* cuMemHostRegister ranges: the session has no copy of them, ever, so a
 * launch that hands one to the GPU is refused (host_pinned_touch) rather
 * than left to fault on the GPU. Their span widens the one above. */
static _Atomic unsigned registered;

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

static CUresult add_range(void *base, void *alias, size_t size, unsigned flags, int owned)
{
    struct host_range *r = malloc(sizeof *r);
    if (!r) return CUDA_ERROR_OUT_OF_MEMORY;
    *r = (struct host_range){.base = base, .alias = alias, .size = size, .flags = flags, .owned = owned};
    pthread_mutex_lock(&ranges_lock);
    r->next = ranges;
    ranges = r;
    {
        uint64_t lo = (uint64_t)(uintptr_t)base, hi = lo + size;
        atomic_fetch_add(owned ? &unmirrored : &registered, 1);
        if (lo < atomic_load(&unmirrored_lo)) atomic_store(&unmirrored_lo, lo);
        if (hi > atomic_load(&unmirrored_hi)) atomic_store(&unmirrored_hi, hi);
    }
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
            if (owned && !found->mirror) atomic_fetch_sub(&unmirrored, 1);
            if (!owned) atomic_fetch_sub(&registered, 1);
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
    char *view, *alias;
    if (coherence_map(0, bytesize, &view, &alias) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    /* Under unified addressing the driver maps every allocation and reports
     * CU_MEMHOSTALLOC_DEVICEMAP in its flags; so do we. */
    CUresult r = add_range(view, alias, bytesize, flags | CU_MEMHOSTALLOC_DEVICEMAP, 1);
    if (r != CUDA_SUCCESS) {
        coherence_unmap(view, alias, bytesize);
        return r;
    }
    *pp = view;
    LOG_DEBUG("pinned host memory: %p, %zu bytes, flags %#x", (void *)view, bytesize, flags);
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

static void mirror_release(uint64_t dev)
{
    struct msg_scuda_host_mirror_free_req m = {dev};
    rpc_call c;
    rpc_begin(&c, OP_scuda_host_mirror_free);
    msg_scuda_host_mirror_free_req_put(&c.req, &m);
    rpc_async(&c);
}

int host_memory_pinned(const void *p, size_t n)
{
    struct host_range hr;
    return host_range_of(p, &hr) && (size_t)(hr.base + hr.size - (const char *)p) >= n;
}

EXPORT CUresult cuMemFreeHost(void *p)
{
    SHIM_ENTER(cuMemFreeHost, (p));
    bulk_wait_background(); /* a copy in the background may still read it */
    struct host_range *r = remove_range(p, 1);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    if (r->mirror) {
        coherence_forget(r->base);
        mirror_release(r->mirror);
    }
    coherence_unmap(r->base, r->alias, r->size);
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
    return add_range(p, NULL, bytesize, Flags, 0);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
    SHIM_ENTER(cuMemHostUnregister, (p));
    bulk_wait_background(); /* a copy in the background may still read it */
    struct host_range *r = remove_range(p, 0);
    if (!r) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    free(r);
    return CUDA_SUCCESS;
}

/* Ask the session for pinned memory of the range's size, mapped for the
 * GPU, at the range's own address if it is free there. */
static CUresult mirror_create(const struct host_range *hr, uint64_t *dev)
{
    struct msg_scuda_host_mirror_create_req m = {(uint64_t)(uintptr_t)hr->base, hr->size};
    struct msg_scuda_host_mirror_create_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_scuda_host_mirror_create);
    msg_scuda_host_mirror_create_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        if (msg_scuda_host_mirror_create_rep_get(&c.out, &c.arena, &rep) == 0) *dev = rep.dev;
        else r = CUDA_ERROR_UNKNOWN;
    }
    rpc_end(&c);
    return r;
}

/* The range becomes a mirror of the session's copy; the host's bytes are
 * the truth, so every page starts dirty (pushed before the next call). */
static CUresult make_mirror(void *base, uint64_t *dev)
{
    pthread_mutex_lock(&ranges_lock);
    struct host_range *hr = NULL;
    for (struct host_range *r = ranges; r && !hr; r = r->next)
        if (r->base == base && r->owned) hr = r;
    CUresult res = CUDA_SUCCESS;
    if (hr && !hr->mirror) {
        res = mirror_create(hr, &hr->mirror);
        if (res == CUDA_SUCCESS) res = coherence_add(hr->base, hr->alias, hr->size, hr->mirror, 1, 0);
        if (res != CUDA_SUCCESS && hr->mirror) {
            mirror_release(hr->mirror);
            hr->mirror = 0;
        }
        if (hr->mirror) atomic_fetch_sub(&unmirrored, 1);
    }
    if (hr && res == CUDA_SUCCESS) *dev = hr->mirror;
    pthread_mutex_unlock(&ranges_lock);
    return hr ? res : CUDA_ERROR_INVALID_VALUE;
}

/* Under unified addressing, cuMemHostAlloc memory is a device address too:
 * a program may memset it or hand it to a kernel without asking for its
 * device pointer (XLA's redzone checker does both with its result word).
 * The first such use makes the range a mirror, placed by the session at the
 * same address when it can, so the address means the same on the GPU.
 * Registered memory cannot be: the GPU would fault on its address (a
 * sticky CUDA_ERROR_ILLEGAL_ADDRESS that ends the context), so it is
 * CUDA_ERROR_NOT_SUPPORTED, with the fix in the log. */
CUresult host_pinned_touch(uint64_t p)
{
    if ((atomic_load_explicit(&unmirrored, memory_order_relaxed) == 0 &&
         atomic_load_explicit(&registered, memory_order_relaxed) == 0) ||
        p < atomic_load_explicit(&unmirrored_lo, memory_order_relaxed) ||
        p >= atomic_load_explicit(&unmirrored_hi, memory_order_relaxed))
        return CUDA_SUCCESS;
    struct host_range hr;
    if (!host_range_of((void *)(uintptr_t)p, &hr) || hr.mirror) return CUDA_SUCCESS;
    if (!hr.owned) {
        LOG_ERROR("the device address %#llx is cuMemHostRegister memory (%p, %zu bytes), which the GPU cannot "
                  "reach through SCUDA; refused with CUDA_ERROR_NOT_SUPPORTED (allocate it with "
                  "cuMemHostAlloc / cudaHostAlloc, or copy it to device memory)",
                  (unsigned long long)p, (void *)hr.base, hr.size);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    uint64_t dev = 0;
    CUresult r = make_mirror(hr.base, &dev);
    if (r != CUDA_SUCCESS)
        LOG_WARN("pinned host memory at %p is used as a device address, but the server could not map it "
                 "(%d); the GPU cannot reach it", (void *)hr.base, (int)r);
    else if (dev != (uint64_t)(uintptr_t)hr.base)
        LOG_WARN("pinned host memory at %p is used as a device address, but the server mapped it at %#llx; "
                 "device code that uses the host address will fault (use cuMemHostGetDevicePointer)",
                 (void *)hr.base, (unsigned long long)dev);
    return CUDA_SUCCESS;
}

CUresult host_pinned_touch_words(const void *words, size_t n)
{
    if (atomic_load_explicit(&unmirrored, memory_order_relaxed) == 0 &&
        atomic_load_explicit(&registered, memory_order_relaxed) == 0)
        return CUDA_SUCCESS; /* a launch's usual case */
    CUresult r = CUDA_SUCCESS;
    for (size_t off = 0; off + 8 <= n; off += 8) {
        uint64_t v;
        memcpy(&v, (const char *)words + off, 8);
        CUresult w = host_pinned_touch(v);
        if (r == CUDA_SUCCESS) r = w;
    }
    return r;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    static int once;
    SHIM_ENTER(cuMemHostGetDevicePointer_v2, (pdptr, p, Flags));
    CUresult lr = context_v2_allowed(); /* refused in a legacy context, as by the driver */
    if (lr != CUDA_SUCCESS) return lr;
    struct host_range hr;
    if (!pdptr || Flags != 0 || !host_range_of(p, &hr)) return CUDA_ERROR_INVALID_VALUE;
    if (!hr.owned) {
        scuda_log_unsupported_once(&once, "cuMemHostGetDevicePointer of registered memory (zero-copy of "
                                          "cuMemHostRegister memory; cuMemHostAlloc memory works)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    uint64_t dev = hr.mirror;
    CUresult r = dev ? CUDA_SUCCESS : make_mirror(hr.base, &dev);
    if (r == CUDA_SUCCESS) *pdptr = dev + (uint64_t)((char *)p - hr.base);
    return r;
}

/* ---- pointer attributes --------------------------------------------------- */

/* Attributes of our own host memory, as the driver reports pinned memory. */
static CUresult host_attribute(void *data, CUpointer_attribute attr, const struct host_range *hr, CUdeviceptr ptr)
{
    CUcontext ctx;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = CU_MEMORYTYPE_HOST; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = (void *)(uintptr_t)ptr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(uint64_t *)data = hr->mirror ? hr->mirror + (ptr - (uintptr_t)hr->base) : ptr;
        return CUDA_SUCCESS;
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

/* An answer in the server's terms made the client's: its device ordinal
 * and context id (a client of several servers; servers.h). */
static void attribute_from_server(void *data, CUpointer_attribute attr, const struct server *srv)
{
    if (attr == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
        int local;
        memcpy(&local, data, sizeof local);
        CUdevice g = device_global(srv, local);
        if (g >= 0) memcpy(data, &g, sizeof g);
    } else if (attr == CU_POINTER_ATTRIBUTE_CONTEXT) {
        void *ctx;
        memcpy(&ctx, data, sizeof ctx);
        if (ctx) ctx = handle_from_server(srv, (uint64_t)(uintptr_t)ctx);
        memcpy(data, &ctx, sizeof ctx);
    }
}

/* The server returns exactly the bytes the driver wrote for attr. */
static CUresult remote_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    struct msg_scuda_pointer_get_attributes_req m = {(uint32_t)attr, ptr};
    struct msg_scuda_pointer_get_attributes_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_pointer_get_attributes, server_of_ptr(ptr));
    msg_scuda_pointer_get_attributes_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        if (msg_scuda_pointer_get_attributes_rep_get(&c.out, &c.arena, &rep) != 0 ||
            rep.value_len > POINTER_ATTR_MAX)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (rep.value_len)
            memcpy(data, rep.value, rep.value_len);
        if (r == CUDA_SUCCESS && servers_used > 1) attribute_from_server(data, attr, c.srv);
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SHIM_ENTER(cuPointerGetAttribute, (data, attribute, ptr));
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct host_range hr;
    if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_POINTER) host_pinned_touch(ptr);
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
