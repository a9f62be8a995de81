/* quota.c - see quota.h. An allocation that would pass the quota fails
 * with CUDA_ERROR_OUT_OF_MEMORY, as a full GPU would, and says why in the
 * server log. */
#include "quota.h"

#include <pthread.h>
#include <stdatomic.h>

#include "../common/idmap.h"
#include "../common/log.h"

static struct driver_table orig;
static uint64_t limit;
static _Atomic uint64_t used;
static struct idmap sizes = IDMAP_INIT; /* device pointer or VMM handle -> bytes */

static CUresult reserve(uint64_t bytes)
{
    uint64_t now = atomic_fetch_add(&used, bytes);
    if (now + bytes <= limit && now + bytes >= now) return CUDA_SUCCESS;
    atomic_fetch_sub(&used, bytes);
    LOG_WARN("session memory quota: refused %llu bytes (%llu of %llu in use); raise the server's --mem-quota",
             (unsigned long long)bytes, (unsigned long long)now, (unsigned long long)limit);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void unreserve(uint64_t bytes) { atomic_fetch_sub(&used, bytes); }

static void remember(uint64_t key, uint64_t bytes)
{
    if (idmap_put(&sizes, key, 0, (void *)(uintptr_t)bytes) != 0) unreserve(bytes);
}

static void forget(uint64_t key) { unreserve((uint64_t)(uintptr_t)idmap_del(&sizes, key)); }

/* Reserve, allocate, and keep the reservation only if the driver agreed. */
#define ALLOC_WRAPPER(name, params, args, bytes, key)                         \
    static CUresult quota_##name params                                      \
    {                                                                        \
        CUresult r = reserve(bytes);                                         \
        if (r != CUDA_SUCCESS) return r;                                     \
        r = orig.name args;                                                  \
        if (r == CUDA_SUCCESS) remember(key, bytes);                         \
        else unreserve(bytes);                                               \
        return r;                                                            \
    }

ALLOC_WRAPPER(cuMemAlloc_v2, (CUdeviceptr *p, size_t n), (p, n), n, *p)
ALLOC_WRAPPER(cuMemAllocAsync, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s), n, *p)
ALLOC_WRAPPER(cuMemAllocFromPoolAsync, (CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s),
              (p, n, pool, s), n, *p)
ALLOC_WRAPPER(cuMemAllocManaged, (CUdeviceptr *p, size_t n, unsigned flags), (p, n, flags), n, *p)
ALLOC_WRAPPER(cuMemCreate, (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags), (h, n, prop, flags), n, *h)

/* The pitch is known only after the call: reserve the rows' minimum, then
 * settle the difference. */
static CUresult quota_cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height,
                                         unsigned elem)
{
    uint64_t least;
    if (__builtin_mul_overflow((uint64_t)width, (uint64_t)height, &least)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = reserve(least);
    if (r != CUDA_SUCCESS) return r;
    r = orig.cuMemAllocPitch_v2(p, pitch, width, height, elem);
    if (r != CUDA_SUCCESS) {
        unreserve(least);
        return r;
    }
    uint64_t bytes = (uint64_t)*pitch * height;
    if (bytes > least && reserve(bytes - least) != CUDA_SUCCESS) {
        orig.cuMemFree_v2(*p);
        unreserve(least);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember(*p, bytes);
    return CUDA_SUCCESS;
}

static CUresult quota_cuMemFree_v2(CUdeviceptr p)
{
    CUresult r = orig.cuMemFree_v2(p);
    if (r == CUDA_SUCCESS) forget(p);
    return r;
}

static CUresult quota_cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    CUresult r = orig.cuMemFreeAsync(p, s);
    if (r == CUDA_SUCCESS) forget(p);
    return r;
}

static CUresult quota_cuMemRelease(CUmemGenericAllocationHandle h)
{
    CUresult r = orig.cuMemRelease(h);
    if (r == CUDA_SUCCESS) forget(h);
    return r;
}

#define WRAP(name) \
    if (t->name) t->name = quota_##name

void quota_install(struct driver_table *t, uint64_t quota)
{
    /* Wrapped without a quota too: the bytes held are counted for the
     * server's /metrics and `scuda ps` (session_stats.h). */
    orig = *t;
    limit = quota ? quota : UINT64_MAX;
    WRAP(cuMemAlloc_v2);
    WRAP(cuMemAllocPitch_v2);
    WRAP(cuMemAllocAsync);
    WRAP(cuMemAllocFromPoolAsync);
    WRAP(cuMemAllocManaged);
    WRAP(cuMemCreate);
    WRAP(cuMemFree_v2);
    WRAP(cuMemFreeAsync);
    WRAP(cuMemRelease);
}

uint64_t quota_used(void) { return atomic_load(&used); }

void quota_forget_all(void)
{
    idmap_clear(&sizes);
    atomic_store(&used, 0);
}
