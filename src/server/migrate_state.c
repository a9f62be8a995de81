/* migrate_state.c - see migrate_state.h; the design is in
 * docs/architecture.md, 9.17 Live migration.
 *
 * The notes are small arrays under one lock: module loads run on worker
 * threads, the rest on the dispatch thread, and a migration reads them
 * while the session is held. */
#define _GNU_SOURCE
#include "migrate_state.h"
#include "migrate_seq.h"
#include "migrate_arrays.h"
#include "migrate_graphs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_window.h"
#include "dispatch.h"
#include "handles.h"
#include "host_quota.h"
#include "../common/auth.h"
#include "../common/idmap.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned blockers;

void migrate_block(unsigned why)
{
    pthread_mutex_lock(&lock);
    blockers |= why;
    pthread_mutex_unlock(&lock);
}

/* ---- notes --------------------------------------------------------------- */

uint64_t migrate_current_ctx_id(void)
{
    CUcontext ctx = NULL;
    if (REAL(cuCtxGetCurrent, &ctx) != CUDA_SUCCESS || !ctx) return 0;
    return handle_find_id(NULL, HK_CONTEXT, ctx);
}

void migrate_state_install(struct driver_table *t)
{
    static int installed;
    if (installed) return;
    installed = 1;
    migrate_seq_install(t);
    migrate_vmm_install(t);
    migrate_arrays_install(t);
    migrate_graphs_install(t);
}

/* ---- what cannot move ---------------------------------------------------- */

static const char *kind_name(uint32_t k)
{
    static const char *const n[HK_COUNT] = {
        [HK_LIBRARY] = "libraries", [HK_KERNEL] = "kernels", [HK_GRAPH] = "graphs",
        [HK_GRAPH_EXEC] = "executable graphs", [HK_GRAPH_NODE] = "graph nodes", [HK_MEMPOOL] = "memory pools",
        [HK_ARRAY] = "arrays", [HK_MIPMAPPED_ARRAY] = "mipmapped arrays", [HK_LINK_STATE] = "link states",
        [HK_USER_OBJECT] = "user objects", [HK_GREEN_CTX] = "green contexts",
        [HK_EXTERNAL_MEMORY] = "external memory", [HK_EXTERNAL_SEMAPHORE] = "external semaphores",
        [HK_GRAPHICS_RESOURCE] = "graphics resources", [HK_TEXREF] = "texture references",
        [HK_SURFREF] = "surface references", [HK_MEM_ALLOC] = "VMM allocations (cuMemCreate)",
    };
    return k < HK_COUNT && n[k] ? n[k] : "objects of another kind";
}

static int replayable(uint32_t k)
{
    return k == HK_CONTEXT || k == HK_STREAM || k == HK_EVENT || k == HK_MODULE || k == HK_FUNCTION ||
           k == HK_LIBRARY || k == HK_KERNEL || k == HK_MEM_ALLOC || k == HK_ARRAY || k == HK_GRAPH ||
           k == HK_GRAPH_EXEC || k == HK_GRAPH_NODE;
}

/* Ids the digest names one by one. A graph's nodes are digested with their
 * graph (migrate_graphs.c): a node id the session gave may name a node of
 * a graph since destroyed, which does not move. So may a graph or an
 * array with a session id (a child graph, a mipmap level). */
static int digested(const struct handle_ref *h)
{
    if (h->kind == HK_GRAPH_NODE) return 0;
    if ((h->kind == HK_GRAPH || h->kind == HK_ARRAY) && handle_is_server_id(h->id)) return 0;
    return replayable(h->kind);
}

static void add_reason(char *why, size_t whylen, const char *reason)
{
    size_t n = strlen(why);
    if (n < whylen) snprintf(why + n, whylen - n, "%s%s", n ? "; " : "", reason);
}

static void explain_window(char *why, size_t whylen)
{
    unsigned w = window_blockers();
    if (w & WINDOW_BLOCK_STREAM_ORDERED)
        add_reason(why, whylen, "stream-ordered memory (cuMemAllocAsync, memory pools) is placed by the driver");
    /* WINDOW_BLOCK_MANAGED is not one: managed memory is replayed in its
     * order among the driver's placements, and its address checked. */
    if (w & WINDOW_BLOCK_DRIVER_RESERVE)
        add_reason(why, whylen, "an address reservation outside the window was placed by the driver");
    if (w & WINDOW_BLOCK_NO_WINDOW)
        add_reason(why, whylen, "the memory window was taken, so the driver placed memory (see --window-base)");
    if (w & WINDOW_BLOCK_NO_ROOM)
        add_reason(why, whylen, "an allocation did not fit the memory window, so the driver placed it (see --window-size)");
    if (w & WINDOW_BLOCK_FIRST)
        add_reason(why, whylen, "its client uses several servers, whose memory windows a moved session cannot keep yet");
    migrate_vmm_explain(why, whylen);
}

void migrate_blockers_explain(char *why, size_t whylen)
{
    if (whylen) why[0] = '\0';
    explain_window(why, whylen);
    pthread_mutex_lock(&lock);
    unsigned b = blockers;
    pthread_mutex_unlock(&lock);
    if (b & MIGRATE_BLOCK_HOST_MIRROR) add_reason(why, whylen, "zero-copy host memory is mapped into the session");
    if ((b & MIGRATE_BLOCK_LOST_NOTE) || migrate_seq_lost()) add_reason(why, whylen, "the session ran out of host memory noting its state");
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    unsigned seen = 0;
    for (long i = 0; i < n; i++) {
        if (replayable(h[i].kind) || (seen & (1u << h[i].kind))) continue;
        seen |= 1u << h[i].kind;
        char r[96];
        snprintf(r, sizeof r, "%s are not replayed yet", kind_name(h[i].kind));
        add_reason(why, whylen, r);
    }
    if (n < 0) add_reason(why, whylen, "out of memory listing the session's handles");
    free(h);
    migrate_arrays_explain(why, whylen);
    migrate_graphs_explain(why, whylen);
}

/* ---- the items ------------------------------------------------------------ */

int migrate_items_push(struct migrate_items *l, struct msg_migrate_item it)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct msg_migrate_item *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = it;
    return 0;
}
/* A context: its device, its flags, and whether it is the device's
 * primary one (retaining the primary context gives that same handle). */
static CUresult describe_context(const struct handle_ref *h, struct msg_migrate_item *it)
{
    CUdevice dev = 0;
    unsigned flags = 0;
    unsigned primary_flags = 0;
    int active = 0;
    CUcontext primary = NULL;
    CUresult r = REAL(cuCtxSetCurrent, (CUcontext)h->real);
    if (r == CUDA_SUCCESS) r = REAL(cuCtxGetDevice, &dev);
    if (r == CUDA_SUCCESS) r = REAL(cuCtxGetFlags, &flags);
    if (r == CUDA_SUCCESS) r = REAL(cuDevicePrimaryCtxGetState, dev, &primary_flags, &active);
    /* Only an active primary context can be this one; retaining an
     * inactive one would create it. */
    if (r == CUDA_SUCCESS && active && (r = REAL(cuDevicePrimaryCtxRetain, &primary, dev)) == CUDA_SUCCESS)
        REAL(cuDevicePrimaryCtxRelease_v2, dev);
    *it = (struct msg_migrate_item){.kind = MIG_CONTEXT, .id = h->id, .a = (uint64_t)dev, .b = flags,
                                    .c = primary == (CUcontext)h->real};
    return r;
}

/* Contexts, in id order. */
static CUresult add_contexts(struct migrate_items *l, const struct handle_ref *h, long n)
{
    for (long i = 0; i < n; i++) {
        if (h[i].kind != HK_CONTEXT) continue;
        struct msg_migrate_item it;
        CUresult r = describe_context(&h[i], &it);
        if (r != CUDA_SUCCESS) return r;
        if (migrate_items_push(l, it) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* Every stream and event of the client must be in the sequence: one the
 * driver made otherwise (an event opened from another process's IPC
 * handle) has no creation there to replay. Returns 0, -1 (out of memory)
 * or 1 with why. */
static int every_stream_event_made(const struct migrate_items *l, const struct handle_ref *h, long n, char *why,
                                   size_t whylen)
{
    struct idmap made = IDMAP_INIT;
    int rc = 0;
    for (size_t i = 0; i < l->n && rc == 0; i++)
        if ((l->v[i].kind == MIG_STREAM || l->v[i].kind == MIG_EVENT) && l->v[i].id)
            rc = idmap_put(&made, l->v[i].id, 0, NULL) == -2 ? -1 : 0;
    for (long i = 0; i < n && rc == 0; i++) {
        if ((h[i].kind != HK_STREAM && h[i].kind != HK_EVENT) || idmap_get(&made, h[i].id, NULL, NULL)) continue;
        snprintf(why, whylen, "%s %#llx was not made by %s (an IPC import?): it cannot be made again elsewhere",
                 h[i].kind == HK_STREAM ? "stream" : "event", (unsigned long long)h[i].id,
                 h[i].kind == HK_STREAM ? "cuStreamCreate" : "cuEventCreate");
        rc = 1;
    }
    idmap_clear(&made);
    return rc;
}

static int add_allocations(struct migrate_items *l)
{
    for (struct window_entry e = {0}; window_entry_from(e.addr + 1, &e);) {
        if (e.kind == WINDOW_RESERVE) continue;
        struct msg_migrate_item it = {.kind = MIG_ALLOC, .id = (uint64_t)e.device,
                                      .parent = handle_find_id(NULL, HK_CONTEXT, e.ctx), .a = e.addr, .b = e.size,
                                      .c = e.kind == WINDOW_PITCH ? e.pitch : 0};
        if (migrate_items_push(l, it) != 0) return -1;
    }
    return 0;
}

/* Contexts, then the driver-placing sequence (modules, libraries,
 * kernels, functions, globals, managed memory, streams, events) in the
 * order it happened, window allocations, the application's VMM, arrays
 * with their bytes, graphs, executable graphs, the deferred error. */
long migrate_items(struct msg_migrate_item **out, uint64_t deferred, char *why, size_t whylen)
{
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    struct migrate_items l = {0};
    why[0] = '\0';
    CUresult r = n < 0 ? CUDA_ERROR_OUT_OF_MEMORY : add_contexts(&l, h, n);
    if (r == CUDA_SUCCESS && migrate_seq_items(&l) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    int unmade = r == CUDA_SUCCESS ? every_stream_event_made(&l, h, n, why, whylen) : 0;
    if (unmade) r = unmade < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && add_allocations(&l) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS && migrate_vmm_items(&l, why, whylen) != 0) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && migrate_arrays_items(&l, why, whylen) != 0) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && migrate_graphs_items(&l, why, whylen) != 0) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && deferred &&
        migrate_items_push(&l, (struct msg_migrate_item){.kind = MIG_DEFERRED, .a = deferred}))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    free(h);
    if (r != CUDA_SUCCESS) {
        if (!why[0]) snprintf(why, whylen, "cannot describe the session's objects (CUresult %d)", (int)r);
        free(l.v);
        return -1;
    }
    *out = l.v;
    return (long)l.n;
}

long migrate_items_placing(struct msg_migrate_item **out, char *why, size_t whylen)
{
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    struct migrate_items l = {0};
    CUresult r = n < 0 ? CUDA_ERROR_OUT_OF_MEMORY : add_contexts(&l, h, n);
    if (r == CUDA_SUCCESS && migrate_seq_items(&l) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    while (l.n > 0 && l.v[l.n - 1].kind == MIG_FUNC_ATTR) l.n--; /* they follow the sequence, at the hold */
    free(h);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cannot describe the session's contexts and modules (CUresult %d)", (int)r);
        free(l.v);
        return -1;
    }
    *out = l.v;
    return (long)l.n;
}

/* ---- the digest ------------------------------------------------------------ */

struct migrate_digest {
    auth_sha256 sha;
};

void migrate_digest_u64(struct migrate_digest *d, uint64_t v) { auth_sha256_update(&d->sha, &v, sizeof v); }

/* What both sides must agree on: every replayable id with its kind, every
 * allocation's place and shape, the driver-placing sequence with every
 * address it gave, the application's reservations and mappings. */
struct migrate_digest *migrate_digest_begin(void)
{
    struct migrate_digest *d = malloc(sizeof *d);
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    if (!d || n < 0) {
        free(d);
        free(h);
        return NULL;
    }
    auth_sha256_init(&d->sha);
    for (long i = 0; i < n; i++)
        if (digested(&h[i])) migrate_digest_u64(d, h[i].id), migrate_digest_u64(d, h[i].kind);
    for (struct window_entry e = {0}; window_entry_from(e.addr + 1, &e);)
        migrate_digest_u64(d, e.addr), migrate_digest_u64(d, e.size), migrate_digest_u64(d, e.pitch), migrate_digest_u64(d, e.kind),
            migrate_digest_u64(d, (uint64_t)e.device);
    migrate_seq_digest(d);
    migrate_vmm_digest(d);
    migrate_arrays_digest(d);
    migrate_graphs_digest(d);
    free(h);
    return d;
}

void migrate_digest_chunk(struct migrate_digest *d, const uint8_t sum[32]) { auth_sha256_update(&d->sha, sum, 32); }

void migrate_digest_end(struct migrate_digest *d, uint8_t out[32])
{
    auth_sha256_final(&d->sha, out);
    free(d);
}

int migrate_ranges_push(struct migrate_ranges *r, uint64_t addr, uint64_t size)
{
    if (r->n == r->cap) {
        size_t c = r->cap ? r->cap * 2 : 64;
        struct migrate_range *w = realloc(r->v, c * sizeof *w);
        if (!w) return -1;
        r->v = w, r->cap = c;
    }
    r->v[r->n++] = (struct migrate_range){addr, size};
    return 0;
}

long migrate_memory(struct migrate_range **out)
{
    struct migrate_ranges r = {0};
    int bad = 0;
    for (struct window_entry e = {0}; !bad && window_entry_from(e.addr + 1, &e);)
        if (e.kind != WINDOW_RESERVE) bad = migrate_ranges_push(&r, e.addr, e.size);
    if (!bad) bad = migrate_seq_ranges(&r);
    if (!bad) bad = migrate_vmm_ranges(&r);
    if (bad) {
        free(r.v);
        return -1;
    }
    *out = r.v;
    return (long)r.n;
}
