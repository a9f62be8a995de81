/* migrate_vmm.c - the application's own virtual memory management, as a
 * migration replays it (docs/architecture.md, 9.17 Live migration).
 *
 * PyTorch's expandable segments (and JAX) reserve a range of addresses,
 * create physical allocations, map them into the range and set their
 * access. The window places the reservation (device_window.c), so the
 * same address is free on another server; the rest the driver cannot tell
 * later (an allocation's properties, which allocation is mapped where, at
 * which offset), so the wrappers below note it as the handlers call the
 * driver. The window's own chunks never pass here: the window calls the
 * driver table it copied before these wrappers were installed.
 *
 * An allocation is keyed by its handle value on this server; a migration
 * sends the key with each item, and the importer maps keys to its own
 * handles. An allocation the client released while it is still mapped has
 * no id (the driver keeps it for the mapping): it is made, mapped, and
 * released again. */
#define _GNU_SOURCE
#include "migrate_seq.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_window.h"
#include "dispatch.h"

#define ACCESS_MAX 16 /* access descriptors kept per mapping: one per device */

struct reserve_note {
    uint64_t addr, size, ctx_id;
};

struct create_note {
    CUmemGenericAllocationHandle key;
    uint64_t size, flags;
    CUmemAllocationProp prop;
    unsigned refs; /* the client's references; the driver keeps a mapped one alive at 0 */
};

struct map_note {
    uint64_t addr, size, offset;
    CUmemGenericAllocationHandle key;
    unsigned naccess;
    CUmemAccessDesc access[ACCESS_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct reserve_note *reserves;
static struct create_note *creates;
static struct map_note *maps;
static size_t nreserves, ncreates, nmaps;
static int lost;
static struct driver_table orig;

/* Append one element of `size` bytes to *v (n elements). */
static void *grow(void *v, size_t n, size_t size)
{
    void *w = realloc(v, (n + 1) * size);
    if (!w) lost = 1;
    return w;
}

static void cut(void *v, size_t *n, size_t i, size_t size)
{
    memmove((char *)v + i * size, (char *)v + (i + 1) * size, (*n - i - 1) * size);
    (*n)--;
}

static bool mapped(CUmemGenericAllocationHandle key)
{
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].key == key) return true;
    return false;
}

/* A released allocation goes once nothing maps it. */
static void drop_unused(void)
{
    for (size_t i = ncreates; i-- > 0;)
        if (creates[i].refs == 0 && !mapped(creates[i].key)) cut(creates, &ncreates, i, sizeof *creates);
}

/* ---- the wrappers ------------------------------------------------------------------ */

static CUresult vmm_cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                        unsigned long long flags)
{
    CUresult r = orig.cuMemAddressReserve(p, size, align, addr, flags);
    if (r != CUDA_SUCCESS || !p) return r;
    uint64_t ctx = migrate_current_ctx_id();
    pthread_mutex_lock(&lock);
    struct reserve_note *v = grow(reserves, nreserves, sizeof *v);
    if (v) reserves = v, reserves[nreserves++] = (struct reserve_note){*p, size, ctx};
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult vmm_cuMemAddressFree(CUdeviceptr p, size_t size)
{
    CUresult r = orig.cuMemAddressFree(p, size);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nreserves; i++)
        if (reserves[i].addr == p) {
            cut(reserves, &nreserves, i, sizeof *reserves);
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult vmm_cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop,
                                unsigned long long flags)
{
    CUresult r = orig.cuMemCreate(h, size, prop, flags);
    if (r != CUDA_SUCCESS || !h || !prop) return r;
    pthread_mutex_lock(&lock);
    struct create_note *v = grow(creates, ncreates, sizeof *v);
    if (v) {
        creates = v;
        creates[ncreates] = (struct create_note){.key = *h, .size = size, .flags = flags, .prop = *prop, .refs = 1};
        creates[ncreates++].prop.win32HandleMetaData = NULL; /* a pointer: never sent */
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static struct create_note *create_of(CUmemGenericAllocationHandle key)
{
    for (size_t i = 0; i < ncreates; i++)
        if (creates[i].key == key) return &creates[i];
    return NULL;
}

static CUresult vmm_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr)
{
    CUresult r = orig.cuMemRetainAllocationHandle(h, addr);
    if (r != CUDA_SUCCESS || !h) return r;
    pthread_mutex_lock(&lock);
    struct create_note *c = create_of(*h);
    if (c) c->refs++;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult vmm_cuMemRelease(CUmemGenericAllocationHandle h)
{
    CUresult r = orig.cuMemRelease(h);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    struct create_note *c = create_of(h);
    if (c && c->refs) c->refs--;
    drop_unused();
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult vmm_cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h,
                             unsigned long long flags)
{
    CUresult r = orig.cuMemMap(p, size, offset, h, flags);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    struct map_note *v = grow(maps, nmaps, sizeof *v);
    if (v) maps = v, maps[nmaps++] = (struct map_note){.addr = p, .size = size, .offset = offset, .key = h};
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult vmm_cuMemUnmap(CUdeviceptr p, size_t size)
{
    CUresult r = orig.cuMemUnmap(p, size);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    for (size_t i = nmaps; i-- > 0;)
        if (maps[i].addr >= p && maps[i].addr - p < size) cut(maps, &nmaps, i, sizeof *maps);
    drop_unused();
    pthread_mutex_unlock(&lock);
    return r;
}

/* Access is set on whole mappings; each mapping in the range keeps the
 * descriptors (the latest for each device). */
static void note_access(struct map_note *m, const CUmemAccessDesc *d)
{
    unsigned i = 0;
    while (i < m->naccess && !(m->access[i].location.type == d->location.type &&
                               m->access[i].location.id == d->location.id))
        i++;
    if (i == ACCESS_MAX) {
        lost = 1;
        return;
    }
    m->access[i] = *d;
    if (i == m->naccess) m->naccess++;
}

static CUresult vmm_cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    CUresult r = orig.cuMemSetAccess(p, size, desc, count);
    if (r != CUDA_SUCCESS || !desc) return r;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].addr >= p && maps[i].addr - p < size)
            for (size_t j = 0; j < count; j++) note_access(&maps[i], &desc[j]);
    pthread_mutex_unlock(&lock);
    return r;
}

#define WRAP(name) \
    if (t->name) t->name = vmm_##name

void migrate_vmm_install(struct driver_table *t)
{
    static bool installed;
    if (installed || !t->cuMemAddressReserve || !t->cuMemAddressFree || !t->cuMemCreate || !t->cuMemRelease ||
        !t->cuMemMap || !t->cuMemUnmap || !t->cuMemSetAccess || !t->cuMemRetainAllocationHandle)
        return;
    installed = true;
    orig = *t;
    WRAP(cuMemAddressReserve);
    WRAP(cuMemAddressFree);
    WRAP(cuMemCreate);
    WRAP(cuMemRetainAllocationHandle);
    WRAP(cuMemRelease);
    WRAP(cuMemMap);
    WRAP(cuMemUnmap);
    WRAP(cuMemSetAccess);
}

/* ---- leaving, and the check --------------------------------------------------------- */

static uint64_t id_of(const struct create_note *c)
{
    return c->refs ? handle_find_id(NULL, HK_MEM_ALLOC, (void *)(uintptr_t)c->key) : 0;
}

static bool noted_reservation(uint64_t addr)
{
    for (size_t i = 0; i < nreserves; i++)
        if (reserves[i].addr == addr) return true;
    return false;
}

/* Reservations the session holds that the application did not make
 * (another session's memory imported through IPC), and mappings of
 * allocations not made here: nothing can rebuild those. */
static void explain_locked(char *why, size_t whylen)
{
    const char *reason = NULL;
    for (struct window_entry e = {0}; !reason && window_entry_from(e.addr + 1, &e);)
        if (e.kind == WINDOW_RESERVE && !noted_reservation(e.addr))
            reason = "memory imported from another session (cuIpcOpenMemHandle) is mapped into this one";
    for (size_t i = 0; !reason && i < nmaps; i++)
        if (!create_of(maps[i].key)) reason = "a VMM mapping of an allocation this session did not create";
    if (!reason && lost) reason = "the session ran out of host memory noting its VMM mappings";
    size_t n = strlen(why);
    if (reason && n < whylen) snprintf(why + n, whylen - n, "%s%s", n ? "; " : "", reason);
}

void migrate_vmm_explain(char *why, size_t whylen)
{
    pthread_mutex_lock(&lock);
    explain_locked(why, whylen);
    pthread_mutex_unlock(&lock);
}

static int push_all(struct migrate_items *l)
{
    int rc = 0;
    for (size_t i = 0; i < nreserves && rc == 0; i++)
        rc = migrate_items_push(l, (struct msg_migrate_item){.kind = MIG_RESERVE, .parent = reserves[i].ctx_id,
                                                             .a = reserves[i].addr, .b = reserves[i].size});
    for (size_t i = 0; i < ncreates && rc == 0; i++)
        rc = migrate_items_push(l, (struct msg_migrate_item){.kind = MIG_VMM_CREATE, .id = id_of(&creates[i]),
                                                             .a = creates[i].size, .b = creates[i].flags,
                                                             .c = creates[i].key, .data = &creates[i].prop,
                                                             .data_len = sizeof creates[i].prop});
    for (size_t i = 0; i < nmaps && rc == 0; i++) {
        const struct map_note *m = &maps[i];
        rc = migrate_items_push(l, (struct msg_migrate_item){.kind = MIG_VMM_MAP, .parent = m->offset, .a = m->addr,
                                                             .b = m->size, .c = m->key});
        if (rc == 0 && m->naccess)
            rc = migrate_items_push(l, (struct msg_migrate_item){.kind = MIG_VMM_ACCESS, .a = m->addr, .b = m->size,
                                                                 .data = m->access,
                                                                 .data_len = m->naccess * sizeof *m->access});
    }
    for (size_t i = 0; i < ncreates && rc == 0; i++)
        if (!id_of(&creates[i]))
            rc = migrate_items_push(l, (struct msg_migrate_item){.kind = MIG_VMM_RELEASE, .c = creates[i].key});
    return rc;
}

int migrate_vmm_items(struct migrate_items *l, char *why, size_t whylen)
{
    pthread_mutex_lock(&lock);
    why[0] = '\0';
    explain_locked(why, whylen);
    int rc = why[0] ? 1 : push_all(l);
    if (rc < 0) snprintf(why, whylen, "out of host memory listing the VMM mappings");
    pthread_mutex_unlock(&lock);
    return rc;
}

/* Keys differ between servers: a mapping is digested by its allocation's
 * place in the list instead. */
void migrate_vmm_digest(struct migrate_digest *d)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nreserves; i++) migrate_digest_u64(d, reserves[i].addr), migrate_digest_u64(d, reserves[i].size);
    for (size_t i = 0; i < ncreates; i++)
        migrate_digest_u64(d, id_of(&creates[i])), migrate_digest_u64(d, creates[i].size),
            migrate_digest_u64(d, creates[i].prop.location.id);
    for (size_t i = 0; i < nmaps; i++) {
        const struct map_note *m = &maps[i];
        const struct create_note *c = create_of(m->key);
        uint64_t which = c ? (uint64_t)(c - creates) : UINT64_MAX;
        migrate_digest_u64(d, m->addr), migrate_digest_u64(d, m->size), migrate_digest_u64(d, m->offset);
        migrate_digest_u64(d, which), migrate_digest_u64(d, m->naccess);
        for (unsigned j = 0; j < m->naccess; j++)
            migrate_digest_u64(d, (uint64_t)m->access[j].location.id << 8 | m->access[j].flags);
    }
    pthread_mutex_unlock(&lock);
}

int migrate_vmm_ranges(struct migrate_ranges *r)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nmaps && rc == 0; i++) {
        bool readable = false;
        for (unsigned j = 0; j < maps[i].naccess; j++) readable |= maps[i].access[j].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
        if (readable) rc = migrate_ranges_push(r, maps[i].addr, maps[i].size);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}
