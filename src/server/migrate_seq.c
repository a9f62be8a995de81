/* migrate_seq.c - the driver-placing events of a session, in the order
 * they happened (docs/architecture.md, 9.17 Live migration).
 *
 * The driver places some memory itself: a module's globals when it is
 * loaded, a library's globals in a context when that context first needs
 * the library (lazy loading: a global looked up, a kernel's function
 * asked for, the library's module asked for), managed memory. Where it
 * places each depends on what it placed before, so a second server lands
 * on the same addresses only if it is asked the same things in the same
 * order. This file keeps that order: one array of notes, appended as the
 * session's handlers (srv_module.c) and the driver table's wrappers
 * (below, for what the session asks by itself, such as the parameter
 * layout's cuKernelGetFunction) see each event; the importer replays the
 * array in order and checks every address. Unloads mark notes gone
 * rather than remove them only when nothing placed can depend on them
 * (a module's own notes); a freed managed allocation stays, followed by
 * its free, since the allocator's later choices depended on it.
 *
 * Streams and events are in the sequence too: the driver allocates memory
 * of its own for each (seen on driver 580: a static-cudart program that
 * made its streams and events before loading its code had its module
 * globals elsewhere on a server that made them after). Every one is
 * noted, the client's and the session's own (a staging event), and a
 * destroyed one stays, followed by its destroy, as a freed managed
 * allocation does. Only a run at the end of the sequence of streams and
 * events all destroyed again is dropped: the driver is back where it was
 * before it, so a program that makes and destroys an event per step does
 * not grow the sequence.
 *
 * Function attributes (cuFuncSetAttribute and the like) place nothing but
 * must follow the function: a kernel that needs more shared memory than
 * the default fails to launch on a server that was not told. They are kept
 * apart, one per function and attribute, the latest value. */
#define _GNU_SOURCE
#include "migrate_seq.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "host_quota.h"
#include "../common/idmap.h"

/* A runaway loop of managed allocations must not eat the session. */
#define SEQ_MAX (1u << 20)
#define ATTRS_MAX 65536

struct seq_note {
    struct msg_migrate_item it; /* name (malloc) and data (host_quota) owned here */
    const void *real;           /* MIG_KERNEL_FUNCTION: the CUkernel, for "seen in this context";
                                 * MIG_STREAM, MIG_EVENT: the handle while it lives */
    bool gone;                  /* unloaded, or its context destroyed: not replayed */
    bool freed;                 /* MIG_MANAGED, MIG_STREAM, MIG_EVENT: its free follows in the sequence */
};

struct attr_note {
    const void *real; /* the function or kernel, resolved to its id when sent */
    uint32_t call, attrib;
    int64_t value;
    int dev;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct seq_note *seq;
static size_t nseq, capseq, managed_live;
static struct attr_note *attrs;
static size_t nattrs, capattrs;
static int lost;
static int images_pinned; /* migrate_seq_pin_images */
static uint64_t last_serial; /* of streams and events */
/* The context each kernel's function was first asked for in (key: the
 * CUkernel), so that the common case, one context, needs no scan. */
static struct idmap first_ctx = IDMAP_INIT;

static struct driver_table orig;

/* ---- notes (under the lock) ---------------------------------------------------- */

static struct seq_note *append(struct msg_migrate_item it)
{
    if (nseq == capseq) {
        size_t cap = capseq ? capseq * 2 : 256;
        struct seq_note *v = nseq < SEQ_MAX ? realloc(seq, cap * sizeof *v) : NULL;
        if (!v) {
            lost = 1;
            return NULL;
        }
        seq = v, capseq = cap;
    }
    char *name = it.name ? strdup(it.name) : NULL;
    if (it.name && !name) {
        lost = 1;
        return NULL;
    }
    it.name = name;
    seq[nseq] = (struct seq_note){.it = it};
    return &seq[nseq++];
}

static void note(struct msg_migrate_item it)
{
    pthread_mutex_lock(&lock);
    append(it);
    pthread_mutex_unlock(&lock);
}

/* An image is copied (charged to --host-mem-quota): the driver cannot
 * give it back, and B needs it. */
static void note_image(uint8_t kind, uint64_t id, const void *image, size_t len)
{
    void *copy = host_quota_alloc(len ? len : 1, "an image kept for a migration");
    pthread_mutex_lock(&lock);
    struct seq_note *n = copy ? append((struct msg_migrate_item){.kind = kind, .id = id,
                                                                 .parent = migrate_current_ctx_id()}) : NULL;
    if (n) {
        n->it.data = memcpy(copy, image, len);
        n->it.data_len = len;
    } else {
        host_quota_free(copy);
        lost = 1;
    }
    pthread_mutex_unlock(&lock);
}

void migrate_note_module(uint64_t id, const void *image, size_t len) { note_image(MIG_MODULE, id, image, len); }
void migrate_note_library(uint64_t id, const void *image, size_t len) { note_image(MIG_LIBRARY, id, image, len); }

void migrate_note_function(uint64_t id, uint64_t module_id, const char *name)
{
    note((struct msg_migrate_item){.kind = MIG_FUNCTION, .id = id, .parent = module_id, .name = name});
}

void migrate_note_kernel(uint64_t id, uint64_t library_id, const char *name)
{
    note((struct msg_migrate_item){.kind = MIG_KERNEL, .id = id, .parent = library_id, .name = name});
}

void migrate_note_kernel_function(uint64_t id, uint64_t kernel_id)
{
    note((struct msg_migrate_item){.kind = MIG_KERNEL_FUNCTION, .id = id, .parent = kernel_id,
                                   .c = migrate_current_ctx_id()});
}

void migrate_note_library_module(uint64_t id, uint64_t library_id)
{
    note((struct msg_migrate_item){.kind = MIG_LIBRARY_MODULE, .id = id, .parent = library_id,
                                   .c = migrate_current_ctx_id()});
}

/* A global looked up again adds nothing: its place is known. */
static void note_global(struct msg_migrate_item it)
{
    pthread_mutex_lock(&lock);
    bool known = false;
    for (size_t i = 0; i < nseq && !known; i++)
        known = !seq[i].gone && seq[i].it.kind == it.kind && seq[i].it.a == it.a;
    if (!known) append(it);
    pthread_mutex_unlock(&lock);
}

void migrate_note_global(uint64_t module_id, const char *name, uint64_t addr, uint64_t size)
{
    note_global((struct msg_migrate_item){.kind = MIG_GLOBAL, .parent = module_id, .name = name, .a = addr, .b = size});
}

void migrate_note_library_global(uint64_t library_id, const char *name, uint64_t addr, uint64_t size)
{
    note_global((struct msg_migrate_item){.kind = MIG_LIBRARY_GLOBAL, .parent = library_id, .name = name,
                                          .a = addr, .b = size, .c = migrate_current_ctx_id()});
}

void migrate_note_library_managed(uint64_t library_id, const char *name, uint64_t addr, uint64_t size)
{
    note_global((struct msg_migrate_item){.kind = MIG_LIBRARY_MANAGED, .parent = library_id, .name = name,
                                          .a = addr, .b = size, .c = migrate_current_ctx_id()});
}

/* Everything bound through `id`, transitively: notes name their parent
 * after it, so one pass in order finds them all. */
void migrate_forget_module(uint64_t id)
{
    pthread_mutex_lock(&lock);
    uint64_t *gone_ids = malloc(sizeof *gone_ids * (nseq + 1));
    size_t ngone = 0;
    if (gone_ids) gone_ids[ngone++] = id;
    for (size_t i = 0; gone_ids && i < nseq; i++) {
        struct seq_note *n = &seq[i];
        bool hit = n->it.id == id && (n->it.kind == MIG_MODULE || n->it.kind == MIG_LIBRARY);
        for (size_t j = 0; j < ngone && !hit; j++) hit = n->it.parent == gone_ids[j] && n->it.kind != MIG_MANAGED;
        if (!hit || n->gone) continue;
        n->gone = true;
        if (n->it.kind == MIG_KERNEL_FUNCTION && n->real) idmap_del(&first_ctx, (uint64_t)(uintptr_t)n->real);
        if (n->it.id && n->it.id != id) gone_ids[ngone++] = n->it.id;
        if (images_pinned) continue; /* a move being loaded ahead still sends it: freed at the unpin */
        host_quota_free((void *)n->it.data);
        n->it.data = NULL, n->it.data_len = 0;
    }
    if (!gone_ids) lost = 1;
    free(gone_ids);
    pthread_mutex_unlock(&lock);
}

/* While a move loads ahead (migrate_preload.c), its thread sends images
 * it took from the notes without the lock: an unload meanwhile must not
 * free them under it. */
void migrate_seq_pin_images(int pin)
{
    pthread_mutex_lock(&lock);
    images_pinned = pin;
    for (size_t i = 0; !pin && i < nseq; i++) {
        if (!seq[i].gone || !seq[i].it.data) continue;
        host_quota_free((void *)seq[i].it.data);
        seq[i].it.data = NULL, seq[i].it.data_len = 0;
    }
    pthread_mutex_unlock(&lock);
}

int migrate_seq_has_images(void)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nseq && (seq[i].gone || !seq[i].it.data)) i++;
    pthread_mutex_unlock(&lock);
    return i < nseq;
}

/* ---- what the driver table's wrappers see ---------------------------------------- */

/* The first time a kernel's function is asked for in a context, the
 * driver may load the library there: noted, whoever asked. */
static CUresult seq_cuKernelGetFunction(CUfunction *f, CUkernel k)
{
    CUresult r = orig.cuKernelGetFunction(f, k);
    if (r != CUDA_SUCCESS) return r;
    uint64_t ctx = migrate_current_ctx_id(), kid = handle_find_id(NULL, HK_KERNEL, k);
    uint32_t tag;
    void *first = NULL;
    pthread_mutex_lock(&lock); /* the check and the note in one step: two threads note once */
    bool known = idmap_get(&first_ctx, (uint64_t)(uintptr_t)k, &tag, &first);
    bool seen = known && first == (void *)(uintptr_t)ctx;
    for (size_t i = nseq; known && i-- > 0 && !seen;)
        seen = seq[i].it.kind == MIG_KERNEL_FUNCTION && seq[i].real == k && seq[i].it.c == ctx && !seq[i].gone;
    struct seq_note *n = seen ? NULL
                              : append((struct msg_migrate_item){.kind = MIG_KERNEL_FUNCTION, .parent = kid, .c = ctx});
    if (n) n->real = k;
    if (n && !known && idmap_put(&first_ctx, (uint64_t)(uintptr_t)k, 0, (void *)(uintptr_t)ctx) != 0) lost = 1;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult seq_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags)
{
    CUresult r = orig.cuMemAllocManaged(p, n, flags);
    if (r != CUDA_SUCCESS || !p) return r;
    pthread_mutex_lock(&lock);
    if (append((struct msg_migrate_item){.kind = MIG_MANAGED, .parent = migrate_current_ctx_id(), .a = *p, .b = n,
                                         .c = flags}))
        managed_live++;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult seq_cuMemFree_v2(CUdeviceptr p)
{
    CUresult r = orig.cuMemFree_v2(p);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    for (size_t i = nseq; managed_live && i-- > 0;) {
        struct seq_note *n = &seq[i];
        if (n->it.kind != MIG_MANAGED || n->it.a != p || n->freed) continue;
        n->freed = true;
        managed_live--;
        append((struct msg_migrate_item){.kind = MIG_MANAGED_FREE, .a = p});
        break;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

static void note_attr(const void *real, enum migrate_attr_call call, uint32_t attrib, int64_t value, int dev)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nattrs && !(attrs[i].real == real && attrs[i].call == call && attrs[i].attrib == attrib &&
                           attrs[i].dev == dev))
        i++;
    if (i == nattrs && nattrs == capattrs) {
        size_t cap = capattrs ? capattrs * 2 : 32;
        struct attr_note *v = nattrs < ATTRS_MAX ? realloc(attrs, cap * sizeof *v) : NULL;
        if (v) attrs = v, capattrs = cap;
        else lost = 1;
    }
    if (i < capattrs) {
        attrs[i] = (struct attr_note){real, call, attrib, value, dev};
        if (i == nattrs) nattrs++;
    }
    pthread_mutex_unlock(&lock);
}

static CUresult seq_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
    CUresult r = orig.cuFuncSetAttribute(f, a, v);
    if (r == CUDA_SUCCESS) note_attr(f, ATTR_FUNC, (uint32_t)a, v, 0);
    return r;
}

static CUresult seq_cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice dev)
{
    CUresult r = orig.cuKernelSetAttribute(a, v, k, dev);
    if (r == CUDA_SUCCESS) note_attr(k, ATTR_KERNEL, (uint32_t)a, v, dev);
    return r;
}

static CUresult seq_cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c)
{
    CUresult r = orig.cuFuncSetCacheConfig(f, c);
    if (r == CUDA_SUCCESS) note_attr(f, ATTR_FUNC_CACHE, 0, c, 0);
    return r;
}

static CUresult seq_cuKernelSetCacheConfig(CUkernel k, CUfunc_cache c, CUdevice dev)
{
    CUresult r = orig.cuKernelSetCacheConfig(k, c, dev);
    if (r == CUDA_SUCCESS) note_attr(k, ATTR_KERNEL_CACHE, 0, c, dev);
    return r;
}

static CUresult seq_cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig c)
{
    CUresult r = orig.cuFuncSetSharedMemConfig(f, c);
    if (r == CUDA_SUCCESS) note_attr(f, ATTR_FUNC_SHMEM, 0, c, 0);
    return r;
}

/* ---- streams and events ------------------------------------------------------------ */

static bool is_creation(uint8_t kind) { return kind == MIG_STREAM || kind == MIG_EVENT; }
static bool is_destruction(uint8_t kind) { return kind == MIG_STREAM_DESTROY || kind == MIG_EVENT_DESTROY; }

static void note_creation(uint8_t kind, const void *real, uint64_t flags, int64_t prio)
{
    uint64_t ctx = migrate_current_ctx_id();
    pthread_mutex_lock(&lock);
    struct seq_note *n = append((struct msg_migrate_item){.kind = kind, .parent = ctx, .a = flags,
                                                          .b = (uint64_t)prio, .c = ++last_serial});
    if (n) n->real = real;
    pthread_mutex_unlock(&lock);
}

static void release_note(struct seq_note *n)
{
    free((void *)n->it.name);
    host_quota_free((void *)n->it.data);
}

/* Drop the longest run at the end of streams and events that were all
 * destroyed within it: each destroy in it names a creation in it. */
static void drop_closed_tail(void)
{
    size_t cut = nseq;
    long open = 0;
    for (size_t i = nseq; i-- > 0;) {
        const struct seq_note *n = &seq[i];
        if (n->gone) continue; /* not replayed: it goes with the run */
        if (is_destruction(n->it.kind)) open++;
        else if (is_creation(n->it.kind) && n->freed) open--;
        else break;
        if (open == 0) cut = i;
    }
    for (size_t i = cut; i < nseq; i++) release_note(&seq[i]);
    nseq = cut;
}

static void note_destruction(uint8_t kind, const void *real)
{
    uint8_t destroy = kind == MIG_STREAM ? MIG_STREAM_DESTROY : MIG_EVENT_DESTROY;
    pthread_mutex_lock(&lock);
    for (size_t i = nseq; i-- > 0;) {
        struct seq_note *n = &seq[i];
        if (n->it.kind != kind || n->real != real || n->freed || n->gone) continue;
        n->freed = true, n->real = NULL; /* the driver may hand the value out again */
        if (append((struct msg_migrate_item){.kind = destroy, .parent = n->it.parent, .c = n->it.c}))
            drop_closed_tail();
        break;
    }
    pthread_mutex_unlock(&lock);
}

static CUresult seq_cuStreamCreateWithPriority(CUstream *st, unsigned flags, int prio)
{
    CUresult r = orig.cuStreamCreateWithPriority(st, flags, prio);
    /* The driver clamps the priority: B must be given what A's has. */
    if (r == CUDA_SUCCESS && st && (!orig.cuStreamGetPriority || orig.cuStreamGetPriority(*st, &prio) != CUDA_SUCCESS))
        prio = 0;
    if (r == CUDA_SUCCESS && st) note_creation(MIG_STREAM, *st, flags, prio);
    return r;
}

static CUresult seq_cuStreamCreate(CUstream *st, unsigned flags)
{
    CUresult r = orig.cuStreamCreate(st, flags);
    if (r == CUDA_SUCCESS && st) note_creation(MIG_STREAM, *st, flags, 0);
    return r;
}

static CUresult seq_cuEventCreate(CUevent *e, unsigned flags)
{
    CUresult r = orig.cuEventCreate(e, flags);
    if (r == CUDA_SUCCESS && e) note_creation(MIG_EVENT, *e, flags, 0);
    return r;
}

/* The driver's answer to a destroy: when it destroyed, so ends the
 * creation's note. */
static CUresult noted_destruction(CUresult r, uint8_t kind, const void *real)
{
    if (r == CUDA_SUCCESS) note_destruction(kind, real);
    return r;
}

static CUresult seq_cuStreamDestroy_v2(CUstream st)
{
    return noted_destruction(orig.cuStreamDestroy_v2(st), MIG_STREAM, st);
}

static CUresult seq_cuStreamDestroy(CUstream st) { return noted_destruction(orig.cuStreamDestroy(st), MIG_STREAM, st); }

static CUresult seq_cuEventDestroy_v2(CUevent e) { return noted_destruction(orig.cuEventDestroy_v2(e), MIG_EVENT, e); }

static CUresult seq_cuEventDestroy(CUevent e) { return noted_destruction(orig.cuEventDestroy(e), MIG_EVENT, e); }

/* A destroyed context takes its streams and events with it: no other
 * server has that context to make them in, and their handle values are
 * the driver's to reuse. */
static CUresult seq_cuCtxDestroy_v2(CUcontext ctx)
{
    uint64_t id = handle_find_id(NULL, HK_CONTEXT, ctx);
    CUresult r = orig.cuCtxDestroy_v2(ctx);
    if (r != CUDA_SUCCESS || !id) return r;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nseq; i++) {
        struct seq_note *n = &seq[i];
        if ((is_creation(n->it.kind) || is_destruction(n->it.kind)) && n->it.parent == id)
            n->gone = true, n->real = NULL;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

#define WRAP(name) \
    if (t->name) t->name = seq_##name

void migrate_seq_install(struct driver_table *t)
{
    static bool installed;
    if (installed) return;
    installed = true;
    orig = *t;
    WRAP(cuKernelGetFunction);
    WRAP(cuMemAllocManaged);
    WRAP(cuMemFree_v2);
    WRAP(cuFuncSetAttribute);
    WRAP(cuKernelSetAttribute);
    WRAP(cuFuncSetCacheConfig);
    WRAP(cuKernelSetCacheConfig);
    WRAP(cuFuncSetSharedMemConfig);
    WRAP(cuStreamCreate);
    WRAP(cuStreamCreateWithPriority);
    WRAP(cuEventCreate);
    WRAP(cuStreamDestroy);
    WRAP(cuStreamDestroy_v2);
    WRAP(cuEventDestroy);
    WRAP(cuEventDestroy_v2);
    WRAP(cuCtxDestroy_v2);
}

/* ---- leaving, and the check ------------------------------------------------------- */

/* A note's item as sent: handles resolved to the client's ids (0 for a
 * stream or event the session made itself, or one destroyed since). */
static struct msg_migrate_item resolved(const struct seq_note *n)
{
    struct msg_migrate_item it = n->it;
    if (it.kind == MIG_KERNEL_FUNCTION && !it.parent) it.parent = handle_find_id(NULL, HK_KERNEL, n->real);
    if (is_creation(it.kind) && n->real)
        it.id = handle_find_id(NULL, it.kind == MIG_STREAM ? HK_STREAM : HK_EVENT, n->real);
    return it;
}

static uint64_t attr_target(const struct attr_note *a)
{
    bool kernel_call = a->call == ATTR_KERNEL || a->call == ATTR_KERNEL_CACHE;
    uint64_t id = kernel_call ? 0 : handle_find_id(NULL, HK_FUNCTION, a->real);
    return id ? id : handle_find_id(NULL, HK_KERNEL, a->real);
}

static struct msg_migrate_item attr_item(const struct attr_note *a, uint64_t id)
{
    return (struct msg_migrate_item){.kind = MIG_FUNC_ATTR, .id = id, .a = (uint64_t)a->call << 32 | a->attrib,
                                     .b = (uint64_t)a->value, .c = (uint64_t)(int64_t)a->dev};
}

int migrate_seq_items(struct migrate_items *l)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nseq && rc == 0; i++)
        if (!seq[i].gone) rc = migrate_items_push(l, resolved(&seq[i]));
    for (size_t i = 0; i < nattrs && rc == 0; i++) {
        uint64_t id = attr_target(&attrs[i]);
        if (id) rc = migrate_items_push(l, attr_item(&attrs[i], id)); /* a function unloaded since: nothing to set */
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void migrate_seq_digest(struct migrate_digest *d)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nseq; i++) {
        if (seq[i].gone) continue;
        struct msg_migrate_item it = resolved(&seq[i]);
        /* A serial is each side's own numbering: not part of the state. */
        bool serial = is_creation(it.kind) || is_destruction(it.kind);
        migrate_digest_u64(d, it.kind), migrate_digest_u64(d, it.id), migrate_digest_u64(d, it.parent);
        migrate_digest_u64(d, it.a), migrate_digest_u64(d, it.b), migrate_digest_u64(d, serial ? 0 : it.c);
    }
    for (size_t i = 0; i < nattrs; i++) {
        uint64_t id = attr_target(&attrs[i]);
        struct msg_migrate_item it = attr_item(&attrs[i], id);
        if (id) migrate_digest_u64(d, it.id), migrate_digest_u64(d, it.a), migrate_digest_u64(d, it.b);
    }
    pthread_mutex_unlock(&lock);
}

int migrate_seq_ranges(struct migrate_ranges *r)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nseq && rc == 0; i++) {
        const struct seq_note *n = &seq[i];
        bool global = n->it.kind == MIG_GLOBAL || n->it.kind == MIG_LIBRARY_GLOBAL || n->it.kind == MIG_LIBRARY_MANAGED;
        bool managed = n->it.kind == MIG_MANAGED && !n->freed;
        if (!n->gone && (global || managed)) rc = migrate_ranges_push(r, n->it.a, n->it.b);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- where code may have run (for the hold's listing of globals) -------------- */

static int by_library_then_ctx(const void *x, const void *y)
{
    const uint64_t *a = x, *b = y;
    return a[0] != b[0] ? (a[0] < b[0] ? -1 : 1) : a[1] != b[1] ? (a[1] < b[1] ? -1 : 1) : 0;
}

static int push_unit(struct migrate_unit **v, size_t *n, size_t *cap, struct migrate_unit u)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 32;
        struct migrate_unit *w = realloc(*v, c * sizeof *w);
        if (!w) return -1;
        *v = w, *cap = c;
    }
    (*v)[(*n)++] = u;
    return 0;
}

/* (library, context) for every kernel function and library module noted,
 * sorted; modules with a function bound marked in `ran`. */
static int code_places(uint64_t **pairs, size_t *npairs, struct idmap *ran)
{
    struct idmap lib_of = IDMAP_INIT;
    uint64_t *v = malloc(2 * sizeof *v * (nseq + 1));
    size_t n = 0;
    int rc = v ? 0 : -1;
    for (size_t i = 0; i < nseq && rc == 0; i++)
        if (!seq[i].gone && seq[i].it.kind == MIG_KERNEL)
            rc = idmap_put(&lib_of, seq[i].it.id, 0, (void *)(uintptr_t)seq[i].it.parent) == -2 ? -1 : 0;
    for (size_t i = 0; i < nseq && rc == 0; i++) {
        if (seq[i].gone) continue;
        struct msg_migrate_item it = resolved(&seq[i]);
        uint32_t tag;
        void *lib = NULL;
        if (it.kind == MIG_FUNCTION) rc = idmap_put(ran, it.parent, 0, NULL) == -2 ? -1 : 0; /* -1: known */
        else if (it.kind == MIG_LIBRARY_MODULE) v[2 * n] = it.parent, v[2 * n + 1] = it.c, n++;
        else if (it.kind == MIG_KERNEL_FUNCTION && idmap_get(&lib_of, it.parent, &tag, &lib))
            v[2 * n] = (uint64_t)(uintptr_t)lib, v[2 * n + 1] = it.c, n++;
    }
    idmap_clear(&lib_of);
    if (rc != 0) {
        free(v);
        return -1;
    }
    qsort(v, n, 2 * sizeof *v, by_library_then_ctx);
    *pairs = v, *npairs = n;
    return 0;
}

int migrate_seq_units(struct migrate_unit **out, size_t *nout)
{
    struct idmap ran = IDMAP_INIT;
    uint64_t *pairs = NULL;
    size_t npairs = 0, n = 0, cap = 0;
    struct migrate_unit *v = NULL;
    pthread_mutex_lock(&lock);
    int rc = code_places(&pairs, &npairs, &ran);
    for (size_t i = 0; i < nseq && rc == 0; i++) {
        const struct seq_note *note = &seq[i];
        uint32_t tag;
        void *unused;
        if (note->gone) continue;
        struct migrate_unit u = {.kind = note->it.kind, .id = note->it.id, .ctx = note->it.parent,
                                 .image = note->it.data, .len = (size_t)note->it.data_len};
        if (u.kind == MIG_MODULE && idmap_get(&ran, u.id, &tag, &unused)) rc = push_unit(&v, &n, &cap, u);
        for (size_t j = 0; u.kind == MIG_LIBRARY && j < npairs && rc == 0; j++) {
            if (pairs[2 * j] != u.id || (j && pairs[2 * j - 2] == u.id && pairs[2 * j - 1] == pairs[2 * j + 1]))
                continue;
            u.ctx = pairs[2 * j + 1];
            rc = push_unit(&v, &n, &cap, u);
        }
    }
    pthread_mutex_unlock(&lock);
    idmap_clear(&ran);
    free(pairs);
    if (rc != 0) {
        free(v);
        return -1;
    }
    *out = v, *nout = n;
    return 0;
}

int migrate_seq_lost(void)
{
    pthread_mutex_lock(&lock);
    int l = lost;
    pthread_mutex_unlock(&lock);
    return l;
}
