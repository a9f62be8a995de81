/* SCUDA CPU stand-in driver: virtual memory management (cuMemCreate,
 * cuMemAddressReserve, cuMemMap, cuMemSetAccess, ...). See README.md.
 *
 * A physical allocation is a memfd of its size. An address reservation is
 * a range of the device's PROT_NONE reservation, or, asked for at a free
 * address outside it, a PROT_NONE mapping of its own there (an address
 * that is taken is not honoured: the reservation goes elsewhere, as with
 * the driver); cuMemMap maps the memfd
 * there (still PROT_NONE), and cuMemSetAccess makes the range readable
 * and writable and enters it in the allocation table as one allocation,
 * so copies and kernels may span several physical allocations mapped side
 * by side. cuMemUnmap puts PROT_NONE anonymous memory back. A physical
 * allocation lives while handles (cuMemCreate, cuMemRetainAllocationHandle)
 * or mappings refer to it. */
#include "standin_internal.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SI_VMM_GRANULARITY (2u << 20)

typedef struct si_phys {
    int fd;
    int dev;
    size_t size;
    int refs;    /* handles */
    int maps;    /* mappings */
    CUmemAllocationProp prop;
    struct si_phys *next;
} si_phys;

typedef struct si_resv {
    uintptr_t base;
    size_t size;
    int dev;
    size_t take_off, take_len; /* what was taken from the device range */
    bool fixed;                /* at a fixed address outside every device range: its own mapping */
    struct si_resv *next;
} si_resv;

typedef struct si_mapping {
    uintptr_t va;
    size_t size;
    si_phys *phys;
    struct si_mapping *next;
} si_mapping;

static si_phys *si_physes;
static si_resv *si_resvs;
static si_mapping *si_mappings;

static si_phys *si_phys_of(CUmemGenericAllocationHandle h)
{
    for (si_phys *p = si_physes; p; p = p->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)p == h && p->refs > 0)
            return p;
    return NULL;
}

static void si_phys_maybe_free(si_phys *p)
{
    if (p->refs > 0 || p->maps > 0)
        return;
    for (si_phys **pp = &si_physes; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    close(p->fd);
    si_g.dev[p->dev].used -= p->size;
    free(p);
}

static CUresult si_prop_check(const CUmemAllocationProp *prop)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->win32HandleMetaData ||
        (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
         prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    return si_device_check(prop->location.id) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                 option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_prop_check(prop);
    if (!rc)
        *granularity = SI_VMM_GRANULARITY;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!handle || size == 0 || size % SI_VMM_GRANULARITY || flags))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_prop_check(prop);
    si_device *d = rc ? NULL : &si_g.dev[prop->location.id];
    if (!rc && size > d->total - d->used)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    int fd = -1;
    if (!rc && ((fd = memfd_create("standin-vmm", MFD_CLOEXEC)) < 0 || ftruncate(fd, (off_t)size) != 0)) {
        if (fd >= 0)
            close(fd);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (!rc) {
        si_phys *p = si_xcalloc(1, sizeof(*p));
        p->fd = fd;
        p->dev = prop->location.id;
        p->size = size;
        p->refs = 1;
        p->prop = *prop;
        p->next = si_physes;
        si_physes = p;
        d->used += size;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
        si_budget_check(prop->location.id);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    si_enter();
    CUresult rc = si_check_init();
    si_phys *p = rc ? NULL : si_phys_of(handle);
    if (!rc && !p)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        p->refs--;
        si_phys_maybe_free(p);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    si_enter();
    CUresult rc = si_check_init();
    si_phys *p = rc ? NULL : si_phys_of(handle);
    if (!rc && (!p || !prop))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *prop = p->prop;
    si_leave();
    return rc;
}

static si_mapping *si_mapping_at(uintptr_t va)
{
    for (si_mapping *m = si_mappings; m; m = m->next)
        if (va >= m->va && va - m->va < m->size)
            return m;
    return NULL;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    si_enter();
    CUresult rc = si_check_init();
    si_mapping *m = rc ? NULL : si_mapping_at((uintptr_t)addr);
    if (!rc && (!handle || !m))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        m->phys->refs++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->phys; /* the same handle, as the driver */
    }
    si_leave();
    return rc;
}

static bool si_resv_overlaps(uintptr_t va, size_t size)
{
    for (si_resv *r = si_resvs; r; r = r->next)
        if (va < r->base + r->size && r->base < va + size)
            return true;
    return false;
}

bool si_vmm_fixed_holds(uintptr_t p)
{
    for (si_resv *r = si_resvs; r; r = r->next)
        if (r->fixed && p >= r->base && p - r->base < r->size)
            return true;
    return false;
}

/* A reservation exactly at `addr`, as the driver grants a free fixed
 * address: inside a device range when that part of it is free, else a
 * fresh PROT_NONE mapping there that replaces nothing. Returns false when
 * any of it is taken (another reservation, an allocation, any mapping of
 * the process): the caller then places it elsewhere, as the driver does
 * with an address it cannot honour (it never fails for that). */
static bool si_reserve_at(uintptr_t addr, size_t size, si_resv *r)
{
    if (addr % SI_VMM_GRANULARITY || addr + size < addr || si_resv_overlaps(addr, size))
        return false;
    for (int i = 0; i < si_g.ndev; i++) {
        si_device *d = &si_g.dev[i];
        uintptr_t b = (uintptr_t)d->va_base;
        if (addr + size <= b || addr >= b + d->va_size)
            continue;
        if (addr < b || addr + size > b + d->va_size || !si_va_take_at(d, addr - b, size))
            return false;
        r->dev = i;
        r->take_off = addr - b;
        r->take_len = size;
        return true;
    }
    void *p = mmap((void *)addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p == MAP_FAILED)
        return false;
    if ((uintptr_t)p != addr) { /* a kernel older than 4.17 takes the flag as a hint */
        munmap(p, size);
        return false;
    }
    r->fixed = true;
    return true;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!ptr || size == 0 || size % SI_VMM_GRANULARITY || flags || (alignment & (alignment - 1))))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_ctx *c = rc ? NULL : si_current();
    int dev = c ? c->dev : 0;
    si_resv *r = rc ? NULL : si_xcalloc(1, sizeof(*r));
    if (r && addr && si_reserve_at((uintptr_t)addr, size, r)) {
        r->base = (uintptr_t)addr;
        if (r->fixed)
            r->dev = dev;
    } else if (r) {
        size_t align = alignment > SI_VMM_GRANULARITY ? alignment : SI_VMM_GRANULARITY;
        size_t off = 0, len = size + align;
        if (!si_va_take(&si_g.dev[dev], len, &off)) {
            free(r);
            r = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            uintptr_t start = (uintptr_t)si_g.dev[dev].va_base + off;
            r->base = (start + align - 1) & ~(uintptr_t)(align - 1);
            r->dev = dev;
            r->take_off = off;
            r->take_len = len;
        }
    }
    if (r) {
        r->size = size;
        r->next = si_resvs;
        si_resvs = r;
        *ptr = (CUdeviceptr)r->base;
    }
    si_leave();
    return rc;
}

static si_resv *si_resv_holding(uintptr_t va, size_t size)
{
    for (si_resv *r = si_resvs; r; r = r->next)
        if (va >= r->base && size <= r->size && va - r->base <= r->size - size)
            return r;
    return NULL;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    si_enter();
    CUresult rc = si_check_init();
    si_resv **pp = &si_resvs;
    while (!rc && *pp && !((*pp)->base == (uintptr_t)ptr && (*pp)->size == size))
        pp = &(*pp)->next;
    if (!rc && !*pp)
        rc = CUDA_ERROR_INVALID_VALUE;
    for (si_mapping *m = si_mappings; !rc && m; m = m->next)
        if (m->va >= (uintptr_t)ptr && m->va - (uintptr_t)ptr < size)
            rc = CUDA_ERROR_INVALID_VALUE; /* still mapped */
    if (!rc) {
        si_resv *r = *pp;
        *pp = r->next;
        if (r->fixed)
            munmap((void *)r->base, r->size);
        else
            si_va_give(&si_g.dev[r->dev], r->take_off, r->take_len);
        free(r);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    si_enter();
    CUresult rc = si_check_init();
    si_phys *p = rc ? NULL : si_phys_of(handle);
    uintptr_t va = (uintptr_t)ptr;
    if (!rc && (!p || flags || size == 0 || size % SI_VMM_GRANULARITY || offset % SI_VMM_GRANULARITY ||
                offset > p->size || size > p->size - offset || va % SI_VMM_GRANULARITY || !si_resv_holding(va, size)))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (si_mapping *m = si_mappings; !rc && m; m = m->next)
        if (va < m->va + m->size && m->va < va + size)
            rc = CUDA_ERROR_INVALID_VALUE; /* overlaps a mapping */
    if (!rc && mmap((void *)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset) == MAP_FAILED)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc) {
        si_mapping *m = si_xcalloc(1, sizeof(*m));
        m->va = va;
        m->size = size;
        m->phys = p;
        m->next = si_mappings;
        si_mappings = m;
        p->maps++;
    }
    si_leave();
    return rc;
}

/* the accessible ranges (allocation-table entries) overlapping [va, va+size) go */
static void si_access_drop(uintptr_t va, size_t size)
{
    for (size_t i = 0; i < si_g.n_allocs;) {
        si_alloc *a = si_g.allocs[i];
        if (a->kind == SI_AK_VMM && a->base < va + size && va < a->base + a->size) {
            mprotect((void *)a->base, a->size, PROT_NONE);
            si_alloc_release(a); /* shifts the table down */
        } else {
            i++;
        }
    }
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    si_enter();
    CUresult rc = si_check_init();
    uintptr_t va = (uintptr_t)ptr;
    if (!rc && (size == 0 || !si_resv_holding(va, size)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_dev_wait_idle(si_resv_holding(va, size)->dev); /* as the driver: unmapping synchronizes */
        si_access_drop(va, size);
        si_mapping **pp = &si_mappings;
        while (*pp) {
            si_mapping *m = *pp;
            if (m->va >= va && m->va + m->size <= va + size) {
                mmap((void *)m->va, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                     0);
                *pp = m->next;
                m->phys->maps--;
                si_phys_maybe_free(m->phys);
                free(m);
            } else {
                pp = &m->next;
            }
        }
    }
    si_leave();
    return rc;
}

/* every page of [va, va+size) is mapped */
static bool si_fully_mapped(uintptr_t va, size_t size)
{
    for (uintptr_t p = va; p < va + size;) {
        si_mapping *m = si_mapping_at(p);
        if (!m)
            return false;
        p = m->va + m->size;
    }
    return true;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    si_enter();
    CUresult rc = si_check_init();
    uintptr_t va = (uintptr_t)ptr;
    if (!rc && (!desc || count == 0 || size == 0 || !si_fully_mapped(va, size)))
        rc = CUDA_ERROR_INVALID_VALUE;
    unsigned long long flags = 0;
    for (size_t i = 0; !rc && i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || si_device_check(desc[i].location.id))
            rc = CUDA_ERROR_INVALID_DEVICE;
        flags = desc[i].flags;
    }
    if (!rc) {
        si_access_drop(va, size);
        if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || flags == CU_MEM_ACCESS_FLAGS_PROT_READ) {
            mprotect((void *)va, size, PROT_READ | PROT_WRITE);
            si_alloc_add_range(va, size, SI_AK_VMM, si_mapping_at(va)->phys->dev, si_current());
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_mapping_at((uintptr_t)ptr))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_alloc *a = si_alloc_find((uintptr_t)ptr);
        *flags = a && a->kind == SI_AK_VMM ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    }
    si_leave();
    return rc;
}

/* Sharing (cuMemExportToShareableHandle): the handle is a duplicate of the
 * physical allocation's memfd, so another process that imports it and
 * maps it sees the same bytes, as two processes sharing GPU memory do. */
CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags)
{
    si_enter();
    CUresult rc = si_check_init();
    si_phys *p = rc ? NULL : si_phys_of(handle);
    if (!rc && (!p || !shareableHandle || flags || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && p->prop.requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        rc = CUDA_ERROR_NOT_PERMITTED; /* not created exportable */
    int fd = rc ? -1 : fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
    if (!rc && fd < 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc)
        *(int *)shareableHandle = fd;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    si_enter();
    CUresult rc = si_check_init();
    struct stat st;
    int given = (int)(intptr_t)osHandle;
    if (!rc && (!handle || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || fstat(given, &st) != 0 ||
                st.st_size <= 0 || st.st_size % SI_VMM_GRANULARITY))
        rc = CUDA_ERROR_INVALID_VALUE;
    int fd = rc ? -1 : fcntl(given, F_DUPFD_CLOEXEC, 0);
    if (!rc && fd < 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (!rc) {
        si_phys *p = si_xcalloc(1, sizeof(*p));
        p->fd = fd;
        p->size = (size_t)st.st_size;
        p->refs = 1;
        p->prop = (CUmemAllocationProp){.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                        .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
                                        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
        p->next = si_physes;
        si_physes = p;
        si_g.dev[0].used += p->size; /* given back by si_phys_maybe_free */
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
    }
    si_leave();
    return rc;
}
