/* SCUDA CPU stand-in driver: managed memory and its hints.
 *
 * Managed memory is host memory here like everything else. It is mapped
 * far from the device range (near MANAGED_VA_HINT) because a SCUDA client
 * maps its mirror at the same address in its own process, where the
 * device range's neighbourhood (shared libraries) is often taken. Like
 * the real driver, small allocations share 2 MiB blocks (256-byte
 * aligned), so an allocation need not start on a page of its own.
 * Advice, prefetches and stream attachment are checked and accepted:
 * they change no results, only what cuMemRangeGetAttribute reports. (Only the current _v2 forms: the stand-in is
 * built against cuda.h's default names.) */
#include "standin_internal.h"

#include <sys/mman.h>

/* ThreadSanitizer refuses mappings in the gap where the hint lies, and the
 * kernel then places them anywhere; two sessions must place alike (a
 * migration checks it), so its builds use the range it leaves to modules,
 * above the device window (device_window.h) and the stand-in's device ranges. */
#if defined(__SANITIZE_THREAD__)
#define MANAGED_VA_HINT 0x7ef000000000ull
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MANAGED_VA_HINT 0x7ef000000000ull
#endif
#endif
#ifndef MANAGED_VA_HINT
#define MANAGED_VA_HINT 0x5a0000000000ull
#endif
#define BLOCK (2u << 20)
#define SMALL (64u << 10) /* allocations up to this share blocks */

static uintptr_t si_managed_next = MANAGED_VA_HINT;
static uintptr_t si_small_next, si_small_end; /* the current shared block */

/* Fresh 2 MiB-aligned memory for len bytes (len a multiple of BLOCK). */
/* STANDIN_PLAIN_MMAP=1 (standin_memory.c): as the real driver does, with
 * no address in mind: reserve a block more and trim to 2 MiB alignment. */
static void *si_managed_map_plain(size_t len)
{
    void *r = mmap(NULL, len + BLOCK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)r + BLOCK - 1) & ~(uintptr_t)(BLOCK - 1), end = (uintptr_t)r + len + BLOCK;
    if (start > (uintptr_t)r)
        munmap(r, start - (uintptr_t)r);
    if (end > start + len)
        munmap((void *)(start + len), end - (start + len));
    return (void *)start;
}

static void *si_managed_map(size_t len)
{
    if (si_plain_mmap())
        return si_managed_map_plain(len);
    /* Exactly at the next address when it is free (a sanitizer's mmap may
     * not honour a mere hint), else wherever the kernel puts it. */
    void *p = mmap((void *)si_managed_next, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
        p = mmap((void *)si_managed_next, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    si_managed_next = (uintptr_t)p + len + BLOCK; /* a gap: no two blocks touch */
    return p;
}

static void *si_managed_carve(size_t bytesize, size_t *map)
{
    if (bytesize > SMALL) {
        *map = (bytesize + BLOCK - 1) & ~(size_t)(BLOCK - 1);
        return si_managed_map(*map);
    }
    size_t need = (bytesize + 255) & ~(size_t)255;
    if (si_small_next + need > si_small_end) {
        void *b = si_managed_map(BLOCK);
        if (!b)
            return NULL;
        si_small_next = (uintptr_t)b;
        si_small_end = si_small_next + BLOCK;
    }
    void *p = (void *)si_small_next;
    si_small_next += need;
    *map = 0; /* part of a shared block: never unmapped */
    return p;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_device *d = rc ? NULL : &si_g.dev[c->dev];
    if (d && bytesize > d->total - d->used)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc) {
        size_t map = 0;
        void *p = si_managed_carve(bytesize, &map);
        if (!p) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            si_alloc *a = si_alloc_add_range((uintptr_t)p, bytesize, SI_AK_MANAGED, c->dev, c);
            a->map_size = map;
            a->flags = flags;
            a->preferred = a->last_prefetch = CU_DEVICE_INVALID;
            d->used += bytesize;
            *dptr = (CUdeviceptr)p;
        }
    }
    si_leave();
    return rc;
}

/* The range must lie in one managed allocation. */
static CUresult si_managed_range(CUdeviceptr p, size_t n)
{
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (rc) return rc;
    si_alloc *a = n ? si_range((uintptr_t)p, n) : NULL;
    return a && a->kind == SI_AK_MANAGED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A location as the range attributes report it: a device or the CPU. */
static int si_location_id(CUmemLocation loc)
{
    return loc.type == CU_MEM_LOCATION_TYPE_HOST ? CU_DEVICE_CPU : loc.id;
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    si_enter();
    CUresult rc = si_managed_range(devPtr, count);
    si_alloc *a = rc ? NULL : si_range((uintptr_t)devPtr, count);
    if (a && advice == CU_MEM_ADVISE_SET_READ_MOSTLY)
        a->read_mostly = true;
    else if (a && advice == CU_MEM_ADVISE_UNSET_READ_MOSTLY)
        a->read_mostly = false;
    else if (a && advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION)
        a->preferred = si_location_id(location);
    else if (a && advice == CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION)
        a->preferred = CU_DEVICE_INVALID;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
                                       CUstream hStream)
{
    (void)flags;
    (void)hStream;
    si_enter();
    CUresult rc = si_managed_range(devPtr, count);
    si_alloc *a = rc ? NULL : si_range((uintptr_t)devPtr, count);
    if (a)
        a->last_prefetch = si_location_id(location);
    si_leave();
    return rc;
}

/* The hints of a managed range (the int attributes; ACCESSED_BY as an
 * empty list: dataSize / 4 entries of CU_DEVICE_INVALID). */
CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                        CUdeviceptr devPtr, size_t count)
{
    si_enter();
    CUresult rc = si_managed_range(devPtr, count);
    si_alloc *a = rc ? NULL : si_range((uintptr_t)devPtr, count);
    if (a && (!data || dataSize < 4 || dataSize % 4))
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (a && attribute == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
        for (size_t i = 0; i < dataSize / 4; i++)
            ((int *)data)[i] = CU_DEVICE_INVALID;
    } else if (a && dataSize != 4)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (a && attribute == CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY)
        *(int *)data = a->read_mostly;
    else if (a && attribute == CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION)
        *(int *)data = a->preferred;
    else if (a && attribute == CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION)
        *(int *)data = a->last_prefetch;
    else if (a)
        rc = CUDA_ERROR_INVALID_VALUE;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
    (void)hStream;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST && flags != CU_MEM_ATTACH_SINGLE)
        return CUDA_ERROR_INVALID_VALUE;
    si_enter();
    CUresult rc = si_managed_range(dptr, length ? length : 1);
    si_leave();
    return rc;
}
