/* SCUDA CPU stand-in driver: device and host allocations, pointer queries.
 *
 * Device memory lives in one PROT_NONE address reservation per device.
 * An allocation gets whole pages of it, made readable and writable; freeing
 * drops the pages and makes them inaccessible again. So a device pointer is
 * an ordinary host address (the server can memcpy through it), every device
 * pointer is recognisable as such, and nothing ever reads or writes device
 * memory outside a live allocation: every copy, memset and kernel checks
 * its range against the allocation table first. Fresh allocations read as
 * zero. */
#include "standin_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static size_t si_round_up(size_t x, size_t a, bool *ovf)
{
    size_t r = x + (a - 1);
    if (r < x) {
        *ovf = true;
        return 0;
    }
    return r & ~(a - 1);
}

/* Where a device's range is asked for: the same place in every process,
 * as a real driver places module globals alike in two fresh processes, so
 * that a migrated session's globals keep their addresses (a hint only:
 * elsewhere when taken). Clear of the session's device windows and of
 * the ranges the sanitizers keep (ThreadSanitizer leaves programs only a
 * few; server/device_window.h). */
static void *si_va_hint(int ordinal)
{
#if defined(__SANITIZE_THREAD__)
    uintptr_t base = 0x7ec000000000u;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    uintptr_t base = 0x7ec000000000u;
#else
    uintptr_t base = 0x300000000000u;
#endif
#else
    uintptr_t base = 0x300000000000u;
#endif
    return (void *)(base + (uintptr_t)ordinal * (64ull << 30));
}

/* STANDIN_PLAIN_MMAP=1: the driver's own ranges (this one, managed
 * memory) are taken as the real driver takes them, with plain
 * mmap(NULL, ...), so they land wherever the process's mmap area puts them
 * (ASLR): two servers place them differently unless the session places
 * the driver's mappings itself (server/driver_va.h). STANDIN_MMAP_PAD=N
 * makes one more such mapping of N bytes first, as a driver that reserved
 * something more would: what shifts everything after it. */
bool si_plain_mmap(void)
{
    static _Atomic int plain = -1; /* read by cuInit and by managed allocations, on any thread */
    int v = atomic_load(&plain);
    if (v < 0) {
        const char *e = getenv("STANDIN_PLAIN_MMAP");
        v = e && strcmp(e, "1") == 0;
        atomic_store(&plain, v);
    }
    return v;
}

static void si_mmap_pad(void)
{
    const char *pad = getenv("STANDIN_MMAP_PAD");
    size_t n = pad ? (size_t)strtoull(pad, NULL, 0) : 0;
    if (n && mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
        fprintf(stderr, "stand-in: STANDIN_MMAP_PAD=%s: %s\n", pad, strerror(errno));
}

CUresult si_va_init(si_device *d)
{
    bool ovf = false;
    size_t va = d->total;
    if (va > (SIZE_MAX - (256u << 20)) / 4)
        return CUDA_ERROR_OUT_OF_MEMORY;
    va = si_round_up(va * 4 + (256u << 20), SI_PAGE, &ovf);
    /* STANDIN_LOW_VA=1: below 4 GiB, where 32-bit (pre-3.2) device pointers
     * reach, as the real driver places a legacy context's memory; else at
     * the device's fixed hint, so two processes place alike */
    const char *low = getenv("STANDIN_LOW_VA");
    int low_va = low && strcmp(low, "1") == 0;
    int plain = !low_va && si_plain_mmap();
    if (plain && d->ordinal == 0)
        si_mmap_pad();
    void *p = mmap(low_va || plain ? NULL : si_va_hint(d->ordinal), va, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | (low_va ? MAP_32BIT : 0), -1, 0);
    if (p == MAP_FAILED || ovf)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (low_va && (uintptr_t)p + va > 0xffffffffu) {
        munmap(p, va);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    d->va_base = p;
    d->va_size = va;
    d->cap_free = 16;
    d->free_ext = si_xcalloc(d->cap_free, sizeof(si_extent));
    d->free_ext[0].off = 0;
    d->free_ext[0].len = va;
    d->n_free = 1;
    /* STANDIN_VA_SKEW=N: the range's first N bytes stay unused, so that
     * what the driver places (module globals) lands elsewhere than in
     * another process: a server whose driver places memory differently. */
    const char *skew = getenv("STANDIN_VA_SKEW");
    size_t sk = skew ? si_round_up((size_t)strtoull(skew, NULL, 0), SI_PAGE, &ovf) : 0;
    if (sk && sk < va) {
        d->free_ext[0].off = sk;
        d->free_ext[0].len = va - sk;
    }
    return CUDA_SUCCESS;
}

bool si_in_device_range(uintptr_t p)
{
    for (int i = 0; i < si_g.ndev; i++) {
        uintptr_t b = (uintptr_t)si_g.dev[i].va_base;
        if (p >= b && p - b < si_g.dev[i].va_size)
            return true;
    }
    return si_vmm_fixed_holds(p);
}

/* ---- extents (first fit, coalescing) ---- */

static bool si_extent_take(si_device *d, size_t len, size_t *off)
{
    for (size_t i = 0; i < d->n_free; i++) {
        si_extent *e = &d->free_ext[i];
        if (e->len < len)
            continue;
        *off = e->off;
        e->off += len;
        e->len -= len;
        if (e->len == 0) {
            memmove(e, e + 1, (d->n_free - i - 1) * sizeof(*e));
            d->n_free--;
        }
        return true;
    }
    return false;
}

static void si_extent_give(si_device *d, size_t off, size_t len)
{
    size_t i = 0;
    while (i < d->n_free && d->free_ext[i].off < off)
        i++;
    /* merge with the previous and/or next extent */
    bool prev = i > 0 && d->free_ext[i - 1].off + d->free_ext[i - 1].len == off;
    bool next = i < d->n_free && off + len == d->free_ext[i].off;
    if (prev && next) {
        d->free_ext[i - 1].len += len + d->free_ext[i].len;
        memmove(&d->free_ext[i], &d->free_ext[i + 1], (d->n_free - i - 1) * sizeof(si_extent));
        d->n_free--;
    } else if (prev) {
        d->free_ext[i - 1].len += len;
    } else if (next) {
        d->free_ext[i].off = off;
        d->free_ext[i].len += len;
    } else {
        if (d->n_free == d->cap_free) {
            d->cap_free *= 2;
            si_extent *n = realloc(d->free_ext, d->cap_free * sizeof(si_extent));
            if (!n)
                abort();
            d->free_ext = n;
        }
        memmove(&d->free_ext[i + 1], &d->free_ext[i], (d->n_free - i) * sizeof(si_extent));
        d->free_ext[i].off = off;
        d->free_ext[i].len = len;
        d->n_free++;
    }
}

/* [off, off+len) exactly, when one free extent holds all of it */
static bool si_extent_take_at(si_device *d, size_t off, size_t len)
{
    for (size_t i = 0; i < d->n_free; i++) {
        si_extent e = d->free_ext[i];
        if (off < e.off || len > e.len || off - e.off > e.len - len)
            continue;
        memmove(&d->free_ext[i], &d->free_ext[i + 1], (d->n_free - i - 1) * sizeof(si_extent));
        d->n_free--;
        if (off > e.off)
            si_extent_give(d, e.off, off - e.off);
        if (off + len < e.off + e.len)
            si_extent_give(d, off + len, e.off + e.len - off - len);
        return true;
    }
    return false;
}

/* for VMM address reservations (standin_vmm.c) */
bool si_va_take(si_device *d, size_t len, size_t *off) { return si_extent_take(d, len, off); }
bool si_va_take_at(si_device *d, size_t off, size_t len) { return si_extent_take_at(d, off, len); }
void si_va_give(si_device *d, size_t off, size_t len) { si_extent_give(d, off, len); }

/* Not counted in cuMemGetInfo and never readable: the driver's own. A
 * full range leaves the object without one (nothing placed moves). */
void si_book_take(si_ctx *c, si_bookkeeping *b)
{
    b->dev = c->dev;
    b->held = si_extent_take(&si_g.dev[c->dev], SI_PAGE, &b->off);
}

void si_book_give(si_bookkeeping *b)
{
    if (b->held)
        si_extent_give(&si_g.dev[b->dev], b->off, SI_PAGE);
    b->held = false;
}

/* ---- the allocation table, sorted by base ---- */

static size_t si_alloc_lower(uintptr_t p)
{
    /* first index whose base > p */
    size_t lo = 0, hi = si_g.n_allocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (si_g.allocs[mid]->base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

si_alloc *si_alloc_find(uintptr_t p)
{
    size_t i = si_alloc_lower(p);
    if (i == 0)
        return NULL;
    si_alloc *a = si_g.allocs[i - 1];
    return p - a->base < a->size ? a : NULL;
}

si_alloc *si_range(uintptr_t p, size_t n)
{
    si_alloc *a = si_alloc_find(p);
    if (!a)
        return NULL;
    if (n > a->size - (p - a->base))
        return NULL;
    return a;
}

static void si_alloc_insert(si_alloc *a)
{
    if (si_g.n_allocs == si_g.cap_allocs) {
        si_g.cap_allocs = si_g.cap_allocs ? si_g.cap_allocs * 2 : 64;
        si_alloc **n = realloc(si_g.allocs, si_g.cap_allocs * sizeof(*n));
        if (!n)
            abort();
        si_g.allocs = n;
    }
    size_t i = si_alloc_lower(a->base);
    memmove(&si_g.allocs[i + 1], &si_g.allocs[i], (si_g.n_allocs - i) * sizeof(si_alloc *));
    si_g.allocs[i] = a;
    si_g.n_allocs++;
}

static void si_alloc_remove(si_alloc *a)
{
    size_t i = si_alloc_lower(a->base);
    if (i == 0 || si_g.allocs[i - 1] != a)
        return;
    i--;
    memmove(&si_g.allocs[i], &si_g.allocs[i + 1], (si_g.n_allocs - i - 1) * sizeof(si_alloc *));
    si_g.n_allocs--;
}

si_alloc *si_alloc_add_range(uintptr_t base, size_t size, int kind, int dev, si_ctx *c)
{
    si_alloc *a = si_xcalloc(1, sizeof(*a));
    a->base = base;
    a->size = size;
    a->kind = kind;
    a->dev = dev;
    a->ctx = c;
    a->id = si_next_id();
    si_alloc_insert(a);
    return a;
}

CUresult si_dev_alloc(si_ctx *c, size_t size, int kind, si_module *owner, si_alloc **out)
{
    si_device *d = &si_g.dev[c->dev];
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > d->total - d->used)
        return CUDA_ERROR_OUT_OF_MEMORY;
    bool ovf = false;
    size_t map = si_round_up(size, SI_PAGE, &ovf);
    size_t off = 0;
    if (ovf || !si_extent_take(d, map, &off))
        return CUDA_ERROR_OUT_OF_MEMORY;
    char *addr = d->va_base + off;
    if (mprotect(addr, map, PROT_READ | PROT_WRITE) != 0) {
        si_extent_give(d, off, map);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    si_alloc *a = si_xcalloc(1, sizeof(*a));
    a->base = (uintptr_t)addr;
    a->size = size;
    a->map_size = map;
    a->kind = kind;
    a->dev = c->dev;
    a->ctx = c;
    a->id = si_next_id();
    a->owner = owner;
    si_alloc_insert(a);
    d->used += size;
    si_budget_check(c->dev);
    *out = a;
    return CUDA_SUCCESS;
}

void si_alloc_release(si_alloc *a)
{
    si_alloc_remove(a);
    if (a->pool)
        si_pool_forget_alloc(a);
    switch (a->kind) {
    case SI_AK_DEVICE:
    case SI_AK_GLOBAL: {
        si_device *d = &si_g.dev[a->dev];
        madvise((void *)a->base, a->map_size, MADV_DONTNEED);
        mprotect((void *)a->base, a->map_size, PROT_NONE);
        si_extent_give(d, (size_t)((char *)a->base - d->va_base), a->map_size);
        d->used -= a->size;
        break;
    }
    case SI_AK_HOST:
        free((void *)a->base);
        break;
    case SI_AK_MANAGED:
        if (a->map_size) /* 0: part of a shared block */
            munmap((void *)a->base, a->map_size);
        si_g.dev[a->dev].used -= a->size;
        break;
    default:
        break;
    }
    free(a);
}

void si_free_ctx_allocs(si_ctx *c)
{
    size_t i = 0;
    while (i < si_g.n_allocs) {
        si_alloc *a = si_g.allocs[i];
        if (a->ctx == c && a->kind != SI_AK_VMM) /* VMM mappings are the process's, as on the driver */
            si_alloc_release(a); /* shifts the table down */
        else
            i++;
    }
}

/* ------------------------------------------------------------------ */
/* device allocations                                                  */

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!dptr || bytesize == 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_alloc *a = NULL;
    if (!rc)
        rc = si_dev_alloc(c, bytesize, SI_AK_DEVICE, NULL, &a);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) /* the driver logs why, as here */
        si_log_add("[stand-in] cuMemAlloc: out of memory: %zu bytes requested", bytesize);
    if (!rc)
        *dptr = (CUdeviceptr)a->base;
    si_leave();
    return rc;
}

#define SI_PITCH_ALIGN 512u

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
                (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)))
        rc = CUDA_ERROR_INVALID_VALUE;
    bool ovf = false;
    size_t pitch = 0, bytes = 0;
    if (!rc) {
        pitch = si_round_up(WidthInBytes, SI_PITCH_ALIGN, &ovf);
        if (ovf || __builtin_mul_overflow(pitch, Height, &bytes))
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    si_alloc *a = NULL;
    if (!rc)
        rc = si_dev_alloc(c, bytes, SI_AK_DEVICE, NULL, &a);
    if (!rc) {
        *dptr = (CUdeviceptr)a->base;
        *pPitch = pitch;
    }
    si_leave();
    return rc;
}

/* frees a's memory after the device has finished all queued work (like
 * the real driver, freeing synchronizes); a is looked up again by id */
static void si_free_after_idle(si_alloc *a, int dev)
{
    uintptr_t base = a->base;
    uint64_t id = a->id;
    si_dev_wait_idle(dev);
    si_alloc *b = si_alloc_find(base);
    if (b && b->id == id)
        si_alloc_release(b);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && dptr != 0) {
        si_alloc *a = si_alloc_find((uintptr_t)dptr);
        if (!a || a->base != (uintptr_t)dptr || (a->kind != SI_AK_DEVICE && a->kind != SI_AK_MANAGED))
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (si_in_callback)
            rc = CUDA_ERROR_NOT_PERMITTED;
        else
            si_free_after_idle(a, a->dev);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!free || !total))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_device *d = &si_g.dev[c->dev];
        *free = d->total - d->used;
        *total = d->total;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)dptr);
        if (!a)
            rc = CUDA_ERROR_NOT_FOUND;
        else {
            if (pbase)
                *pbase = (CUdeviceptr)a->base;
            if (psize)
                *psize = a->size;
        }
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* host allocations                                                    */

#define SI_HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | \
                             CU_MEMHOSTALLOC_WRITECOMBINED)

static CUresult si_host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (rc)
        return rc;
    if (!pp || (flags & ~SI_HOST_ALLOC_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize == 0) {
        *pp = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *p = NULL;
    if (posix_memalign(&p, 256, bytesize) != 0 || !p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0, bytesize);
    si_alloc *a = si_xcalloc(1, sizeof(*a));
    a->base = (uintptr_t)p;
    a->size = bytesize;
    a->kind = SI_AK_HOST;
    a->dev = c->dev;
    a->ctx = c;
    a->flags = flags;
    a->id = si_next_id();
    si_alloc_insert(a);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    si_enter();
    CUresult rc = si_host_alloc(pp, bytesize, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    si_enter();
    CUresult rc = si_host_alloc(pp, bytesize, Flags);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)p);
        if (!p || !a || a->base != (uintptr_t)p || a->kind != SI_AK_HOST)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (si_in_callback)
            rc = CUDA_ERROR_NOT_PERMITTED;
        else
            si_free_after_idle(a, -1);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!pdptr || Flags != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)p);
        if (!a || (a->kind != SI_AK_HOST && a->kind != SI_AK_HOST_REG))
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *pdptr = (CUdeviceptr)(uintptr_t)p;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && !pFlags)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)p);
        if (!a || (a->kind != SI_AK_HOST && a->kind != SI_AK_HOST_REG))
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            *pFlags = a->flags;
    }
    si_leave();
    return rc;
}

#define SI_HOST_REG_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | \
                           CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!p || bytesize == 0 || (Flags & ~SI_HOST_REG_FLAGS)))
        rc = CUDA_ERROR_INVALID_VALUE;
    uintptr_t b = (uintptr_t)p;
    if (!rc && (b + bytesize < b || si_in_device_range(b)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        /* any overlap with a known range? */
        size_t i = si_alloc_lower(b + bytesize - 1);
        if (i > 0) {
            si_alloc *a = si_g.allocs[i - 1];
            if (a->base + a->size > b)
                rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    if (!rc) {
        si_alloc *a = si_xcalloc(1, sizeof(*a));
        a->base = b;
        a->size = bytesize;
        a->kind = SI_AK_HOST_REG;
        a->dev = c->dev;
        a->ctx = c;
        a->flags = Flags;
        a->id = si_next_id();
        si_alloc_insert(a);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)p);
        if (!p || !a || a->base != (uintptr_t)p || a->kind != SI_AK_HOST_REG)
            rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        else if (si_in_callback)
            rc = CUDA_ERROR_NOT_PERMITTED;
        else
            si_free_after_idle(a, -1);
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* pointer attributes                                                  */

static bool si_is_host_kind(const si_alloc *a)
{
    return a->kind == SI_AK_HOST || a->kind == SI_AK_HOST_REG;
}

/* writes one attribute of a (NULL: not a CUDA pointer, default values) */
static CUresult si_ptr_attr(const si_alloc *a, CUpointer_attribute attr, void *data,
                            CUdeviceptr ptr)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a && si_ctx_valid(a->ctx) ? (CUcontext)a->ctx : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !a ? 0u : si_is_host_kind(a) ? CU_MEMORYTYPE_HOST
                                                               : CU_MEMORYTYPE_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = a ? ptr : 0;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && !si_is_host_kind(a))
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = a ? (void *)(uintptr_t)ptr : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(bool *)data = a ? a->sync_memops : false;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = a ? a->id : 0;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(bool *)data = a && a->kind == SI_AK_MANAGED;
        break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(bool *)data = false;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = a ? a->dev : -2;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(bool *)data = a && a->kind == SI_AK_DEVICE;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = a ? (CUdeviceptr)a->base : 0;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a ? a->size : 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = a ? (a->map_size ? a->map_size : a->size) : 0;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(bool *)data = a != NULL;
        break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = a ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                  : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = NULL;
        break;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !data)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)ptr);
        if (!a)
            rc = CUDA_ERROR_INVALID_VALUE;
        else
            rc = si_ptr_attr(a, attribute, data, ptr);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (numAttributes == 0 || !attributes || !data))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)ptr);
        for (unsigned i = 0; i < numAttributes && !rc; i++) {
            if (!data[i])
                continue;
            CUresult r = si_ptr_attr(a, attributes[i], data[i], ptr);
            /* a host pointer asked for on device memory reads as NULL here */
            if (r == CUDA_ERROR_INVALID_VALUE && attributes[i] == CU_POINTER_ATTRIBUTE_HOST_POINTER)
                *(void **)data[i] = NULL;
            else if (r == CUDA_ERROR_NOT_SUPPORTED)
                continue;
            else
                rc = r;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute attribute,
                                       CUdeviceptr ptr)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!value || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)ptr);
        if (!a)
            rc = CUDA_ERROR_INVALID_VALUE;
        else if (a->kind == SI_AK_VMM)
            rc = CUDA_ERROR_NOT_SUPPORTED; /* driver 580 on a VMM mapping */
        else
            a->sync_memops = *(const unsigned int *)value != 0; /* documented as an unsigned int */
    }
    si_leave();
    return rc;
}
