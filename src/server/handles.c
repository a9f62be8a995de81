/* handles.c - the session's map from ids to real driver handles
 * (docs/architecture.md, 3.5 Virtual handles). An id the session does not know is
 * CUDA_ERROR_INVALID_HANDLE, never a dereference.
 *
 * Two id ranges that never meet (see dispatch.h):
 *   client ids  picked by the client (handle_new_id: 0x10000 upward in
 *               steps of 16) for handles it creates; handle_put() records
 *               them and refuses any id in the server range;
 *   server ids  picked here by handle_export() for handles the driver
 *               returns that the client never created (a device's default
 *               memory pool, the nodes of a captured graph): bit 62 set,
 *               upward in steps of 16.
 *
 * Besides the id map, a reverse index (kind, real handle) -> id answers
 * handle_find_id() and handle_export() without a scan: a captured graph
 * can have thousands of nodes. It holds one id per real handle; when one
 * real handle has several ids (a function bound twice), it holds the
 * latest, and handle_find_id() falls back to a scan of the id map.
 *
 * VMM allocation handles (HK_MEM_ALLOC) are reference counted, as in the
 * driver: cuMemRetainAllocationHandle hands out the id that cuMemCreate
 * returned again, and each cuMemRelease drops one reference. The id goes
 * when the last reference does. */
#include <pthread.h>
#include <stdlib.h>

#include "dispatch.h"
#include "handles.h"
#include "session.h"
#include "../common/idmap.h"
#include "../common/log.h"

static struct idmap handles = IDMAP_INIT; /* one session per process */

/* ---- the limit (--max-handles) ---------------------------------------- */

/* Ids in the map, and the most there may be; both under rev.lock. Each id
 * costs the session a slot in two tables and usually a driver object, so
 * a client creating events in a loop must meet a bound. */
static uint64_t live, max_live;

void handles_set_limit(uint64_t max) { max_live = max; }

static int at_limit(void)
{
    if (max_live == 0 || live < max_live) return 0;
    LOG_WARN("the session holds %llu handles, its limit: a new one fails with CUDA_ERROR_OUT_OF_MEMORY; "
             "the client should destroy what it no longer uses, or raise the server's --max-handles",
             (unsigned long long)live);
    return 1;
}

/* The driver made a handle that cannot get an id: destroy it, so that a
 * refused creation holds nothing. Kinds owned by another handle (a
 * module's functions, a graph's nodes) go with their owner. */
static void destroy_real(enum handle_kind kind, void *h)
{
    switch (kind) {
    case HK_STREAM: REAL(cuStreamDestroy_v2, (CUstream)h); break;
    case HK_EVENT: REAL(cuEventDestroy_v2, (CUevent)h); break;
    case HK_MODULE: REAL(cuModuleUnload, (CUmodule)h); break;
    case HK_LIBRARY: REAL(cuLibraryUnload, (CUlibrary)h); break;
    case HK_GRAPH: REAL(cuGraphDestroy, (CUgraph)h); break;
    case HK_GRAPH_EXEC: REAL(cuGraphExecDestroy, (CUgraphExec)h); break;
    case HK_ARRAY: REAL(cuArrayDestroy, (CUarray)h); break;
    case HK_MIPMAPPED_ARRAY: REAL(cuMipmappedArrayDestroy, (CUmipmappedArray)h); break;
    case HK_TEXREF: REAL(cuTexRefDestroy, (CUtexref)h); break;
    case HK_MEMPOOL: REAL(cuMemPoolDestroy, (CUmemoryPool)h); break;
    case HK_LINK_STATE: REAL(cuLinkDestroy, (CUlinkState)h); break;
    default: break;
    }
}

/* ---- reverse index: (kind, real handle) -> id ------------------------- */

struct rev_slot {
    const void *real;
    uint64_t id;    /* 0: empty; REV_TOMBSTONE: deleted */
    uint32_t kind;
    uint32_t refs;  /* references handed out (HK_MEM_ALLOC only) */
};

#define REV_TOMBSTONE UINT64_MAX

static struct {
    pthread_mutex_t lock; /* guards the index, next_server_id, and keeps
                           * id map + index changes together */
    struct rev_slot *slots;
    size_t cap;           /* power of two, or 0 */
    size_t used;          /* live + tombstones */
    uint64_t next_server_id;
} rev = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, HANDLE_SERVER_ID_BASE};

static size_t rev_hash(uint32_t kind, const void *real)
{
    uint64_t x = (uint64_t)(uintptr_t)real ^ ((uint64_t)kind << 57) ^ kind;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static struct rev_slot *rev_find(uint32_t kind, const void *real)
{
    if (rev.cap == 0) return NULL;
    for (size_t i = rev_hash(kind, real) & (rev.cap - 1);; i = (i + 1) & (rev.cap - 1)) {
        struct rev_slot *e = &rev.slots[i];
        if (e->id == 0) return NULL;
        if (e->id != REV_TOMBSTONE && e->kind == kind && e->real == real) return e;
    }
}

static int rev_grow(void)
{
    size_t cap = rev.cap ? rev.cap * 2 : 64;
    struct rev_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    size_t live = 0;
    for (size_t i = 0; i < rev.cap; i++) {
        struct rev_slot *o = &rev.slots[i];
        if (o->id == 0 || o->id == REV_TOMBSTONE) continue;
        size_t j = rev_hash(o->kind, o->real) & (cap - 1);
        while (slots[j].id) j = (j + 1) & (cap - 1);
        slots[j] = *o;
        live++;
    }
    free(rev.slots);
    rev.slots = slots;
    rev.cap = cap;
    rev.used = live;
    return 0;
}

/* Point (kind, real) at id with one reference, replacing what was there. */
static int rev_set(uint32_t kind, const void *real, uint64_t id)
{
    struct rev_slot *e = rev_find(kind, real);
    if (!e) {
        if ((rev.used + 1) * 4 > rev.cap * 3 && rev_grow() != 0) return -1;
        size_t i = rev_hash(kind, real) & (rev.cap - 1);
        while (rev.slots[i].id != 0 && rev.slots[i].id != REV_TOMBSTONE) i = (i + 1) & (rev.cap - 1);
        if (rev.slots[i].id == 0) rev.used++;
        e = &rev.slots[i];
    }
    *e = (struct rev_slot){.real = real, .id = id, .kind = kind, .refs = 1};
    return 0;
}

static int refcounted(uint32_t kind) { return kind == HK_MEM_ALLOC; }

/* ---- dispatch.h ----------------------------------------------------------- */

static int is_special_stream(uint64_t id)
{
    return id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY || id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD;
}

CUresult handle_get(struct session *s, uint64_t id, enum handle_kind kind, void **real_handle)
{
    (void)s;
    *real_handle = NULL;
    if (id == 0) return CUDA_SUCCESS;
    if (kind == HK_STREAM && is_special_stream(id)) {
        *real_handle = (void *)(uintptr_t)id;
        return CUDA_SUCCESS;
    }
    uint32_t tag;
    void *v;
    if (idmap_get(&handles, id, &tag, &v) && (tag == kind || (kind == HK_FUNCTION && tag == HK_KERNEL))) {
        *real_handle = v;
        return CUDA_SUCCESS;
    }
    return kind == HK_CONTEXT ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
}

CUresult handle_get_function(struct session *s, uint64_t id, void **real_handle, int *is_kernel)
{
    (void)s;
    uint32_t tag;
    void *v;
    *real_handle = NULL;
    *is_kernel = 0;
    if (id == 0) return CUDA_SUCCESS;
    if (!idmap_get(&handles, id, &tag, &v) || (tag != HK_FUNCTION && tag != HK_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    *real_handle = v;
    *is_kernel = tag == HK_KERNEL;
    return CUDA_SUCCESS;
}

CUresult handle_put(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle)
{
    (void)s;
    if (is_special_stream(id) || handle_is_server_id(id)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&rev.lock);
    int rc = at_limit() ? -3 : idmap_put(&handles, id, (uint32_t)kind, real_handle);
    if (rc == 0 && real_handle != NULL && rev_set((uint32_t)kind, real_handle, id) != 0) {
        idmap_del(&handles, id);
        rc = -2;
    }
    if (rc == 0) live++;
    pthread_mutex_unlock(&rev.lock);
    if (rc == -3 && real_handle) destroy_real(kind, real_handle);
    return rc == 0 ? CUDA_SUCCESS : rc == -2 || rc == -3 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
}

/* A migration's replay: a session id the exporter gave keeps its value,
 * and later exports start past it. */
CUresult handle_put_server(uint64_t id, enum handle_kind kind, void *real_handle)
{
    if (!handle_is_server_id(id) || !real_handle) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&rev.lock);
    int rc = at_limit() ? -3 : idmap_put(&handles, id, (uint32_t)kind, real_handle);
    if (rc == 0 && rev_set((uint32_t)kind, real_handle, id) != 0) {
        idmap_del(&handles, id);
        rc = -2;
    }
    if (rc == 0) {
        live++;
        if (rev.next_server_id <= id) rev.next_server_id = id + 16;
    }
    pthread_mutex_unlock(&rev.lock);
    return rc == 0 ? CUDA_SUCCESS : rc == -2 || rc == -3 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
}

void handle_drop(struct session *s, uint64_t id)
{
    (void)s;
    pthread_mutex_lock(&rev.lock);
    uint32_t tag;
    void *v;
    if (idmap_get(&handles, id, &tag, &v)) {
        struct rev_slot *e = v ? rev_find(tag, v) : NULL;
        if (e && e->id == id && refcounted(tag) && e->refs > 1) {
            e->refs--; /* another reference still holds the id */
        } else {
            idmap_del(&handles, id);
            live--;
            if (e && e->id == id) {
                e->id = REV_TOMBSTONE;
                e->real = NULL;
            }
        }
    }
    pthread_mutex_unlock(&rev.lock);
}

uint64_t handle_find_id(struct session *s, enum handle_kind kind, const void *real_handle)
{
    (void)s;
    pthread_mutex_lock(&rev.lock);
    struct rev_slot *e = real_handle ? rev_find((uint32_t)kind, real_handle) : NULL;
    uint64_t id = e ? e->id : 0;
    pthread_mutex_unlock(&rev.lock);
    /* an alias whose latest sibling was dropped */
    return id ? id : idmap_find_value(&handles, (uint32_t)kind, real_handle);
}

uint64_t handle_export(struct session *s, enum handle_kind kind, void *real_handle)
{
    (void)s;
    if (real_handle == NULL) return 0;
    if (kind == HK_STREAM && is_special_stream((uint64_t)(uintptr_t)real_handle))
        return (uint64_t)(uintptr_t)real_handle;
    pthread_mutex_lock(&rev.lock);
    uint64_t id = 0;
    struct rev_slot *e = rev_find((uint32_t)kind, real_handle);
    if (e) {
        id = e->id;
        if (refcounted(kind)) e->refs++;
    } else if (kind != HK_CONTEXT && kind != HK_GREEN_CTX) {
        /* Contexts come only from the client: it keeps the context stack,
         * and frames carry the current context's id in 32 bits. */
        uint64_t cand = rev.next_server_id;
        if (handle_is_server_id(cand) && !at_limit() && idmap_put(&handles, cand, (uint32_t)kind, real_handle) == 0) {
            if (rev_set((uint32_t)kind, real_handle, cand) == 0) {
                id = cand;
                live++;
                rev.next_server_id += 16;
            } else {
                idmap_del(&handles, cand);
            }
        }
    }
    pthread_mutex_unlock(&rev.lock);
    return id;
}

void handle_forget_all(void)
{
    pthread_mutex_lock(&rev.lock);
    idmap_clear(&handles);
    free(rev.slots);
    rev.slots = NULL;
    rev.cap = rev.used = 0;
    rev.next_server_id = HANDLE_SERVER_ID_BASE;
    pthread_mutex_unlock(&rev.lock);
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const struct handle_ref *)a)->id, y = ((const struct handle_ref *)b)->id;
    return x < y ? -1 : x > y;
}

long handle_list(struct handle_ref **out)
{
    pthread_mutex_lock(&handles.lock);
    size_t n = 0;
    struct handle_ref *v = malloc((handles.cap ? handles.cap : 1) * sizeof *v);
    for (size_t i = 0; v && i < handles.cap; i++) {
        const struct idmap_slot *e = &handles.slots[i];
        if (e->id != 0 && e->id != UINT64_MAX) v[n++] = (struct handle_ref){e->id, e->tag, e->value};
    }
    pthread_mutex_unlock(&handles.lock);
    if (!v) return -1;
    qsort(v, n, sizeof *v, by_id);
    *out = v;
    return (long)n;
}
