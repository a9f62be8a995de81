/* graph_host.c - host work in graphs: copies from and into client memory
 * and host functions (see graph_host.h).
 *
 * Capture. The client sends each such operation of a capturing stream as
 * scuda_capture_dtoh or scuda_capture_hostfn with a record id it picked.
 *  - A copy becomes a copy into a pinned staging buffer of its own (a
 *    memcpy node of the graph, as natively).
 *  - A host function becomes a host node running host_fn_node() with the
 *    record: at replay it queues "run record R" for the client, after the
 *    data of the copies captured before it, so the function sees them.
 *  - Copies after the last host function are delivered after each launch
 *    of the graph: the cuGraphLaunch wrapper adds a stream callback. So a
 *    graph has exactly the nodes it would have natively.
 *  - A copy from client memory (scuda_capture_htod, or a memcpy node whose
 *    source is host memory) becomes a copy from a pinned staging buffer:
 *    an upload record. The client sends the bytes of every upload record
 *    of an executable graph before each launch (scuda_graph_stage), read
 *    from its memory at cuGraphLaunch. A stage waits until the launches
 *    that read the buffer before are done (an event recorded after each):
 *    the next launch's bytes must not overwrite what an earlier one has
 *    yet to copy.
 *
 * Delivery. Host nodes and callbacks run on driver threads and must not
 * block: they queue a copy of the bytes. The queue goes to the client as
 * FRAME_HOST_WORK frames before the next reply (output_forward), so the
 * client has the data and has run its functions before any synchronizing
 * call that saw the graph finish returns. Nothing is written to the socket
 * from a driver thread: a client that is busy sending cannot stall the GPU.
 *
 * Lifetimes. A record is held by the graph that captured it, by every
 * clone, child-graph parent and executable graph made from it (the
 * wrappers of the driver table below track them), and by launches in
 * flight. When the last holder goes, the client is told to forget it and
 * its staging buffer is freed at the next capture (cuMemFreeHost may
 * synchronize; it never runs on a driver thread). */
#define _GNU_SOURCE
#include "graph_host.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "host_quota.h"
#include "resume.h"
#include "session.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"

enum { REC_COPY = 1, REC_HOSTFN = 2, REC_UPLOAD = 3 };

struct record {
    uint64_t id;            /* the client's */
    int kind;
    void *staging;          /* REC_COPY, REC_UPLOAD: pinned, n bytes */
    size_t n;
    size_t alloc;           /* the staging's size when it is its own */
    struct record *owner;   /* a chunk of owner's staging (memcpy nodes), or NULL: its own */
    const void *node;       /* the memcpy node (added by hand) whose host side this is */
    CUevent used;           /* REC_UPLOAD: recorded after each launch that reads the staging */
    struct record **flush;  /* REC_HOSTFN: copies delivered before the function runs */
    size_t nflush;
    struct record *heirs;   /* REC_HOSTFN: what its node runs since a set (held by this one) */
    int unmade;             /* a user object's destructor whose object was never handed out: runs nothing */
    struct record *next_heir;
    _Atomic int refs;
    struct record *next_dead;
};

/* The records a graph or an executable graph holds. */
struct holding {
    struct record **all;    /* every record, one reference each */
    size_t n;
    struct record **tail;   /* copies no host function delivers (no extra reference) */
    size_t ntail;
    struct record **uploads; /* upload records, in the order they were made (no extra reference) */
    size_t nuploads;
};

static struct driver_table orig;
/* A driver entry that may be missing (an older driver): its call, or the log and error */
#define ORIG(name, ...) (orig.name ? orig.name(__VA_ARGS__) : driver_lacks(#name))
static struct idmap graphs = IDMAP_INIT; /* real CUgraph -> struct holding */
static struct idmap execs = IDMAP_INIT;  /* real CUgraphExec -> struct holding */
/* The client's record id -> upload record, for scuda_graph_stage. Records
 * are freed only by free_dead(), on the session thread that stages. */
static struct idmap uploads = IDMAP_INIT;
static pthread_mutex_t holdings_lock = PTHREAD_MUTEX_INITIALIZER;
/* Body graphs of conditional nodes -> their parent graph. The driver runs
 * a body inside its parent's launches, where nothing here would stage or
 * deliver its host work: host work in a body is refused. */
static struct idmap bodies = IDMAP_INIT;

/* ---- the queue for the client ------------------------------------------- */

struct work {
    uint8_t kind;           /* HOST_WORK_* */
    uint64_t id;
    void *data;
    size_t n;
    struct work *next;
};

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct work *queue_head, *queue_tail;
static struct record *dead; /* staging buffers to free (guarded by queue_lock) */
static size_t queued_bytes;
static int warned_big;

static void enqueue(uint8_t kind, uint64_t id, const void *data, size_t n)
{
    /* Bytes waiting for the client are the session's (host_quota.h). */
    struct work *w = calloc(1, sizeof *w);
    void *copy = n ? host_quota_alloc(n, "captured host work waiting for the client") : NULL;
    if (!w || (n && !copy)) {
        free(w);
        host_quota_free(copy);
        LOG_ERROR("graph host work: out of memory; the client misses record %llu", (unsigned long long)id);
        return;
    }
    if (n) memcpy(copy, data, n);
    w->kind = kind;
    w->id = id;
    w->data = copy;
    w->n = n;
    pthread_mutex_lock(&queue_lock);
    if (queue_tail)
        queue_tail->next = w;
    else
        queue_head = w;
    queue_tail = w;
    queued_bytes += n;
    int warn = queued_bytes > (256u << 20) && !warned_big;
    if (warn) warned_big = 1;
    pthread_mutex_unlock(&queue_lock);
    if (warn)
        LOG_WARN("graph host work: over 256 MiB of captured device-to-host data wait for the client; it "
                 "receives them at its next synchronizing call");
}

void graph_host_queue(uint8_t kind, uint64_t id, const void *data, size_t n) { enqueue(kind, id, data, n); }

void graph_host_forward(struct session *s)
{
    pthread_mutex_lock(&queue_lock);
    struct work *w = queue_head;
    queue_head = queue_tail = NULL;
    queued_bytes = 0;
    pthread_mutex_unlock(&queue_lock);
    while (w) {
        struct work *next = w->next;
        /* the host_work head (messages.gen.h), then the bytes */
        wire_buf head;
        wb_init(&head);
        msg_put_host_work(&head, &(struct msg_host_work){w->kind, w->id});
        struct frame_header h = {.length = (uint32_t)(head.len + w->n), .flags = FRAME_HOST_WORK};
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_header_encode(&h, hdr);
        struct iovec iov[3] = {{hdr, sizeof hdr}, {head.data, head.len}, {w->data, w->n}};
        resume_write_frame(s, iov, w->n ? 3 : 2, NULL, 0); /* kept until the client has it (resume.h) */
        wb_free(&head);
        host_quota_free(w->data);
        free(w);
        w = next;
    }
}

/* ---- records -------------------------------------------------------------- */

static void record_ref(struct record *r) { atomic_fetch_add(&r->refs, 1); }

/* May run on a driver thread: no CUDA call here. */
static void record_unref(struct record *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1) return;
    if (r->kind == REC_UPLOAD) idmap_del(&uploads, r->id);
    for (size_t i = 0; i < r->nflush; i++) record_unref(r->flush[i]);
    free(r->flush);
    for (struct record *h = r->heirs, *next; h; h = next) {
        next = h->next_heir;
        record_unref(h);
    }
    enqueue(HOST_WORK_FORGET, r->id, NULL, 0);
    pthread_mutex_lock(&queue_lock);
    r->next_dead = dead;
    dead = r;
    pthread_mutex_unlock(&queue_lock);
}

/* Free the staging of records nobody holds (a thread that may call CUDA). */
static void free_dead(void)
{
    pthread_mutex_lock(&queue_lock);
    struct record *r = dead;
    dead = NULL;
    pthread_mutex_unlock(&queue_lock);
    while (r) {
        struct record *next = r->next_dead;
        if (r->used) orig.cuEventDestroy(r->used);
        if (r->owner) {
            record_unref(r->owner); /* freed next time round when this was the last chunk */
        } else if (r->staging) {
            orig.cuMemFreeHost(r->staging);
            host_quota_release(r->alloc ? r->alloc : r->n);
        }
        free(r);
        r = next;
    }
}

/* ---- holdings --------------------------------------------------------------- */

static int push_rec(struct record ***a, size_t *n, struct record *r)
{
    struct record **b = realloc(*a, (*n + 1) * sizeof *b);
    if (!b) return -1;
    b[(*n)++] = r;
    *a = b;
    return 0;
}

static void holding_free(struct holding *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) record_unref(h->all[i]);
    free(h->all);
    free(h->tail);
    free(h->uploads);
    free(h);
}

/* Add src's records to dst (a new reference each). */
static int holding_add(struct holding *dst, const struct holding *src)
{
    for (size_t i = 0; i < src->n; i++) {
        if (push_rec(&dst->all, &dst->n, src->all[i]) != 0) return -1;
        record_ref(src->all[i]);
    }
    for (size_t i = 0; i < src->ntail; i++)
        if (push_rec(&dst->tail, &dst->ntail, src->tail[i]) != 0) return -1;
    for (size_t i = 0; i < src->nuploads; i++)
        if (push_rec(&dst->uploads, &dst->nuploads, src->uploads[i]) != 0) return -1;
    return 0;
}

static struct holding *holding_of(struct idmap *m, const void *h)
{
    void *v = NULL;
    return h && idmap_get(m, (uint64_t)(uintptr_t)h, NULL, &v) ? v : NULL;
}

/* The holding of h in m, made when missing (holdings_lock held). */
static struct holding *holding_get(struct idmap *m, const void *h)
{
    struct holding *x = holding_of(m, h);
    if (x) return x;
    if (!(x = calloc(1, sizeof *x))) return NULL;
    if (idmap_put(m, (uint64_t)(uintptr_t)h, 0, x) != 0) {
        free(x);
        return NULL;
    }
    return x;
}

static void holding_drop(struct idmap *m, const void *h)
{
    if (!h) return;
    pthread_mutex_lock(&holdings_lock);
    struct holding *x = idmap_del(m, (uint64_t)(uintptr_t)h);
    pthread_mutex_unlock(&holdings_lock);
    holding_free(x);
}

/* dst (a new graph or executable graph) holds what src holds. */
static void holding_copy(struct idmap *dm, const void *dst, struct idmap *sm, const void *src)
{
    pthread_mutex_lock(&holdings_lock);
    struct holding *from = holding_of(sm, src);
    struct holding *to = from && from->n ? holding_get(dm, dst) : NULL;
    if (to && holding_add(to, from) != 0)
        LOG_ERROR("graph host work: out of memory; a graph may miss its host work");
    pthread_mutex_unlock(&holdings_lock);
}

/* ---- host nodes and launch callbacks (driver threads) --------------------- */

static void deliver_copy(struct record *r) { enqueue(HOST_WORK_DATA, r->id, r->staging, r->n); }

static void CUDA_CB host_fn_node(void *arg)
{
    struct record *r = arg;
    for (size_t i = 0; i < r->nflush; i++) deliver_copy(r->flush[i]);
    enqueue(HOST_WORK_RUN, r->id, NULL, 0);
}

/* What a launch holds until it is done: every record of the executable
 * graph (its nodes use them), and the copies it delivers at its end. */
struct launch {
    struct record **all, **tail;
    size_t n, ntail;
};

static void launch_free(struct launch *l)
{
    for (size_t i = 0; i < l->n; i++) record_unref(l->all[i]);
    free(l->all);
    free(l->tail);
    free(l);
}

static void CUDA_CB launch_done(void *arg)
{
    struct launch *l = arg;
    for (size_t i = 0; i < l->ntail; i++) deliver_copy(l->tail[i]);
    launch_free(l);
}

/* ---- the driver table's wrappers --------------------------------------------- */

static CUresult wrap_cuGraphLaunch(CUgraphExec e, CUstream st)
{
    CUresult r = orig.cuGraphLaunch(e, st);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&holdings_lock);
    struct holding *x = holding_of(&execs, e);
    int has_work = x && x->n;
    pthread_mutex_unlock(&holdings_lock);
    if (!has_work) return r; /* most graphs: nothing to do */
    /* Launched into a capture, the graph becomes a child graph node of the
     * capture's graph: that graph holds its records (and delivers its
     * trailing copies at each of its own launches). */
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    CUgraph cg = NULL;
    if (orig.cuStreamGetCaptureInfo_v3 &&
        orig.cuStreamGetCaptureInfo_v3(st, &cs, NULL, &cg, NULL, NULL, NULL) == CUDA_SUCCESS &&
        cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        if (cg) holding_copy(&graphs, cg, &execs, e);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    x = holding_of(&execs, e); /* again: the lock was let go */
    struct launch *l = x && x->n ? calloc(1, sizeof *l) : NULL;
    if (l && (l->all = malloc(x->n * sizeof *l->all)) &&
        (!x->ntail || (l->tail = malloc(x->ntail * sizeof *l->tail)))) {
        for (size_t i = 0; i < x->n; i++) record_ref(l->all[l->n++] = x->all[i]);
        for (size_t i = 0; i < x->ntail; i++) l->tail[l->ntail++] = x->tail[i];
    } else if (l) {
        launch_free(l);
        l = NULL;
    }
    if (x && x->n && !l) r = CUDA_ERROR_OUT_OF_MEMORY;
    /* the next stage of these buffers waits for this launch */
    for (size_t i = 0; x && r == CUDA_SUCCESS && i < x->nuploads; i++)
        r = orig.cuEventRecord(x->uploads[i]->used, st);
    pthread_mutex_unlock(&holdings_lock);
    if (r != CUDA_SUCCESS)
        LOG_ERROR("graph host work: out of memory launching a graph; its host work is lost");
    else if (l && (r = orig.cuLaunchHostFunc(st, launch_done, l)) != CUDA_SUCCESS)
        launch_free(l);
    return r;
}

static CUresult wrap_cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags)
{
    CUresult r = orig.cuGraphInstantiateWithFlags(pe, g, flags);
    if (r == CUDA_SUCCESS) holding_copy(&execs, *pe, &graphs, g);
    return r;
}

static CUresult wrap_cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult r = orig.cuGraphInstantiateWithParams(pe, g, p);
    if (r == CUDA_SUCCESS) holding_copy(&execs, *pe, &graphs, g);
    return r;
}

static CUresult wrap_cuGraphInstantiate(CUgraphExec *pe, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
    CUresult r = orig.cuGraphInstantiate(pe, g, err, log, n);
    if (r == CUDA_SUCCESS) holding_copy(&execs, *pe, &graphs, g);
    return r;
}

static CUresult wrap_cuGraphInstantiate_v2(CUgraphExec *pe, CUgraph g, CUgraphNode *err, char *log, size_t n)
{
    CUresult r = orig.cuGraphInstantiate_v2(pe, g, err, log, n);
    if (r == CUDA_SUCCESS) holding_copy(&execs, *pe, &graphs, g);
    return r;
}

static CUresult wrap_cuGraphClone(CUgraph *pc, CUgraph g)
{
    CUresult r = orig.cuGraphClone(pc, g);
    if (r == CUDA_SUCCESS) holding_copy(&graphs, *pc, &graphs, g);
    return r;
}

static CUresult wrap_cuGraphAddChildGraphNode(CUgraphNode *pn, CUgraph parent, const CUgraphNode *deps, size_t n,
                                              CUgraph child)
{
    CUresult r = orig.cuGraphAddChildGraphNode(pn, parent, deps, n, child);
    if (r == CUDA_SUCCESS) holding_copy(&graphs, parent, &graphs, child);
    return r;
}

/* g's body graphs died with it (and theirs with them). */
static void forget_bodies(CUgraph g)
{
    uint64_t ids[64];
    size_t n;
    while ((n = idmap_take_by_value(&bodies, g, ids, 64)) > 0)
        for (size_t i = 0; i < n; i++) forget_bodies((CUgraph)(uintptr_t)ids[i]);
}

static CUresult wrap_cuGraphDestroy(CUgraph g)
{
    CUresult r = orig.cuGraphDestroy(g);
    if (r == CUDA_SUCCESS) {
        holding_drop(&graphs, g);
        forget_bodies(g);
    }
    return r;
}

void graph_host_body_made(CUgraph parent, CUgraph body)
{
    if (idmap_put(&bodies, (uint64_t)(uintptr_t)body, 0, parent) != 0)
        LOG_ERROR("graph host work: out of memory recording a conditional node's body graph");
}

int graph_host_refuse_in_body(CUgraph g, const char *what)
{
    void *v;
    if (!g || !idmap_get(&bodies, (uint64_t)(uintptr_t)g, NULL, &v)) return 0;
    LOG_WARN("%s in a conditional node's body graph is not supported by SCUDA (the body runs inside its parent's "
             "launch, where the client's memory and functions cannot be reached); returning "
             "CUDA_ERROR_NOT_SUPPORTED",
             what);
    return 1;
}

static CUresult wrap_cuGraphExecDestroy(CUgraphExec e)
{
    CUresult r = orig.cuGraphExecDestroy(e);
    if (r == CUDA_SUCCESS) holding_drop(&execs, e);
    return r;
}

void graph_host_child_moved(CUgraph parent, CUgraph child)
{
    holding_copy(&graphs, parent, &graphs, child);
    holding_drop(&graphs, child);
}

/* A capture that ends in failure takes its graph with it. */
static CUresult wrap_cuStreamEndCapture(CUstream st, CUgraph *pg)
{
    CUgraph cg = NULL;
    CUstreamCaptureStatus status;
    if (orig.cuStreamGetCaptureInfo_v3(st, &status, NULL, &cg, NULL, NULL, NULL) != CUDA_SUCCESS) cg = NULL;
    CUresult r = orig.cuStreamEndCapture(st, pg);
    if (r != CUDA_SUCCESS && cg) holding_drop(&graphs, cg);
    return r;
}

#define WRAP(name) \
    if (t->name) t->name = wrap_##name

void graph_host_install(struct driver_table *t)
{
    orig = *t;
    WRAP(cuGraphLaunch);
    WRAP(cuGraphInstantiateWithFlags);
    WRAP(cuGraphInstantiateWithParams);
    WRAP(cuGraphInstantiate);
    WRAP(cuGraphInstantiate_v2);
    WRAP(cuGraphClone);
    WRAP(cuGraphAddChildGraphNode);
    WRAP(cuGraphDestroy);
    WRAP(cuGraphExecDestroy);
    if (t->cuStreamGetCaptureInfo_v3) WRAP(cuStreamEndCapture);
}

/* ---- capture (the client's requests) ------------------------------------------ */

/* The graph the stream is capturing into, or an error. */
static CUresult capture_graph(srv_call *c, uint64_t stream_id, CUstream *st, CUgraph *g)
{
    void *h;
    CUresult r = handle_get(c->s, stream_id, HK_STREAM, &h);
    if (r != CUDA_SUCCESS) return r;
    *st = (CUstream)h;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    *g = NULL;
    if (!orig.cuStreamGetCaptureInfo_v3) return CUDA_ERROR_NOT_SUPPORTED;
    r = orig.cuStreamGetCaptureInfo_v3(*st, &status, NULL, g, NULL, NULL, NULL);
    if (r != CUDA_SUCCESS) return r;
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !*g) return CUDA_ERROR_ILLEGAL_STATE;
    return graph_host_refuse_in_body(*g, "a copy from or into client memory, or a host function, captured")
               ? CUDA_ERROR_NOT_SUPPORTED
               : CUDA_SUCCESS;
}

/* Record a new record in the capture graph's holding (holdings_lock held). */
static int hold(CUgraph g, struct record *r, int tail)
{
    struct holding *x = holding_get(&graphs, g);
    if (!x || push_rec(&x->all, &x->n, r) != 0) return -1;
    if (tail && push_rec(&x->tail, &x->ntail, r) != 0) {
        x->n--;
        return -1;
    }
    return 0;
}

/* The stream is capturing: capture a copy into a staging buffer. */
CUresult srv_scuda_capture_dtoh(srv_call *c)
{
    struct msg_scuda_capture_dtoh_req m;
    if (msg_scuda_capture_dtoh_req_get(&c->in, &c->arena, &m) != 0 || m.n == 0 ||
        m.n > SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN)
        return CUDA_ERROR_INVALID_VALUE;
    size_t n = (size_t)m.n;
    CUstream st;
    CUgraph g;
    CUresult r = capture_graph(c, m.stream, &st, &g);
    if (r != CUDA_SUCCESS) return r;
    /* Allocating pinned memory is not allowed in a global capture: this
     * thread relaxes its mode for the allocation (and the frees). */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (orig.cuThreadExchangeStreamCaptureMode) orig.cuThreadExchangeStreamCaptureMode(&mode);
    free_dead();
    void *buf = NULL;
    /* Pinned for as long as the graph lives: charged until the record goes. */
    int charged = host_quota_charge(n, "a captured copy's buffer") == 0;
    r = charged ? orig.cuMemHostAlloc(&buf, n, 0) : CUDA_ERROR_OUT_OF_MEMORY;
    if (orig.cuThreadExchangeStreamCaptureMode) orig.cuThreadExchangeStreamCaptureMode(&mode);
    if (r != CUDA_SUCCESS) {
        if (charged) host_quota_release(n);
        return r;
    }
    struct record *rec = calloc(1, sizeof *rec);
    if (!rec) {
        orig.cuMemFreeHost(buf);
        host_quota_release(n);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rec->id = m.record;
    rec->kind = REC_COPY;
    rec->staging = buf;
    rec->n = n;
    atomic_init(&rec->refs, 1);
    if ((r = orig.cuMemcpyDtoHAsync_v2(buf, m.src, n, st)) != CUDA_SUCCESS) {
        orig.cuMemFreeHost(buf);
        host_quota_release(n);
        free(rec);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    int rc = hold(g, rec, 1);
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) {
        /* its node stays in the graph: the buffer must too (leaked) */
        LOG_ERROR("graph host work: out of memory recording a captured copy");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* The stream is capturing: capture a host node that has the client run
 * its function (after the copies captured since the last one). */
CUresult srv_scuda_capture_hostfn(srv_call *c)
{
    struct msg_scuda_capture_hostfn_req m;
    if (msg_scuda_capture_hostfn_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUstream st;
    CUgraph g;
    CUresult r = capture_graph(c, m.stream, &st, &g);
    if (r != CUDA_SUCCESS) return r;
    struct record *rec = calloc(1, sizeof *rec);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    rec->id = m.record;
    rec->kind = REC_HOSTFN;
    atomic_init(&rec->refs, 1);
    if ((r = orig.cuLaunchHostFunc(st, host_fn_node, rec)) != CUDA_SUCCESS) {
        free(rec);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    struct holding *x = holding_get(&graphs, g);
    int rc = x ? hold(g, rec, 0) : -1;
    if (rc == 0) {
        /* the copies captured since the last host function: this one delivers them */
        rec->flush = x->tail;
        rec->nflush = x->ntail;
        for (size_t i = 0; i < rec->nflush; i++) record_ref(rec->flush[i]);
        x->tail = NULL;
        x->ntail = 0;
    }
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) {
        LOG_ERROR("graph host work: out of memory recording a captured host function");
        return CUDA_ERROR_OUT_OF_MEMORY; /* its node stays in the graph: the record too (leaked) */
    }
    return CUDA_SUCCESS;
}

/* ---- copies from and into client memory ----------------------------------------- */

/* A record with a pinned staging buffer of n bytes (or a chunk of owner's,
 * at offset off), made on the session thread. An upload record gets its
 * event and becomes known to scuda_graph_stage. */
static CUresult record_new(uint64_t id, int kind, size_t n, struct record *owner, size_t off, struct record **out)
{
    struct record *rec = calloc(1, sizeof *rec);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    rec->id = id;
    rec->kind = kind;
    rec->n = n;
    atomic_init(&rec->refs, 1);
    /* Pinned memory and events are not allowed in a global capture, nor is
     * freeing pinned memory (free_dead: a real driver then invalidates the
     * capture): this thread relaxes its mode for them. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (orig.cuThreadExchangeStreamCaptureMode) orig.cuThreadExchangeStreamCaptureMode(&mode);
    free_dead();
    CUresult r = CUDA_SUCCESS;
    if (owner) {
        rec->owner = owner;
        record_ref(owner);
        rec->staging = (char *)owner->staging + off;
    } else if (host_quota_charge(n, "a graph's host copy buffer") != 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY; /* pinned for as long as a graph holds it */
    } else if ((r = orig.cuMemHostAlloc(&rec->staging, n, 0)) != CUDA_SUCCESS) {
        host_quota_release(n);
        rec->staging = NULL;
    } else {
        rec->alloc = n;
    }
    if (r == CUDA_SUCCESS && kind == REC_UPLOAD) {
        r = orig.cuEventCreate(&rec->used, CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS && idmap_put(&uploads, id, 0, rec) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (orig.cuThreadExchangeStreamCaptureMode) orig.cuThreadExchangeStreamCaptureMode(&mode);
    if (r != CUDA_SUCCESS) {
        record_unref(rec); /* goes to free_dead with what it got */
        return r;
    }
    *out = rec;
    return CUDA_SUCCESS;
}

/* Record rec in holding x: every record; copies to the host also as
 * delivered after each launch; uploads as staged before it. */
static int hold_in(struct holding *x, struct record *rec)
{
    if (!x || push_rec(&x->all, &x->n, rec) != 0) return -1;
    struct record ***list = rec->kind == REC_UPLOAD ? &x->uploads : rec->kind == REC_COPY ? &x->tail : NULL;
    size_t *n = rec->kind == REC_UPLOAD ? &x->nuploads : &x->ntail;
    if (list && push_rec(list, n, rec) != 0) {
        x->n--;
        return -1;
    }
    return 0;
}

/* The stream is capturing: capture a copy from a staging buffer whose
 * bytes the client sends before each launch. */
CUresult srv_scuda_capture_htod(srv_call *c)
{
    struct msg_scuda_capture_htod_req m;
    if (msg_scuda_capture_htod_req_get(&c->in, &c->arena, &m) != 0 || m.n == 0 ||
        m.n > SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN)
        return CUDA_ERROR_INVALID_VALUE;
    CUstream st;
    CUgraph g;
    CUresult r = capture_graph(c, m.stream, &st, &g);
    if (r != CUDA_SUCCESS) return r;
    struct record *rec;
    if ((r = record_new(m.record, REC_UPLOAD, (size_t)m.n, NULL, 0, &rec)) != CUDA_SUCCESS) return r;
    if ((r = orig.cuMemcpyHtoDAsync_v2(m.dst, rec->staging, (size_t)m.n, st)) != CUDA_SUCCESS) {
        record_unref(rec);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    int rc = hold_in(holding_get(&graphs, g), rec);
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) {
        LOG_ERROR("graph host work: out of memory recording a captured copy from client memory");
        return CUDA_ERROR_OUT_OF_MEMORY; /* its node stays in the graph: the record too (leaked) */
    }
    return CUDA_SUCCESS;
}

/* The upload records of an executable graph: the client sends their bytes
 * before each launch. */
CUresult srv_scuda_graph_uploads(srv_call *c)
{
    struct msg_scuda_graph_uploads_req m;
    if (msg_scuda_graph_uploads_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *e;
    CUresult r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &e);
    if (r != CUDA_SUCCESS) return r;
    struct msg_scuda_graph_uploads_rep rep = {0};
    pthread_mutex_lock(&holdings_lock);
    struct holding *x = holding_of(&execs, e);
    size_t n = x ? x->nuploads : 0;
    uint64_t *ids = n && n <= GRAPH_MAX_UPLOADS ? msg_alloc(&c->arena, n * sizeof *ids) : NULL;
    for (size_t i = 0; ids && i < n; i++) ids[i] = x->uploads[i]->id;
    pthread_mutex_unlock(&holdings_lock);
    if (n && !ids) return CUDA_ERROR_OUT_OF_MEMORY;
    rep.records = ids;
    rep.records_count = (uint32_t)n;
    msg_scuda_graph_uploads_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* A launch's bytes for one upload record, read by the client at
 * cuGraphLaunch. The launches that read the buffer before must be done:
 * their GPU work bounds the wait. */
CUresult srv_scuda_graph_stage(srv_call *c)
{
    struct msg_scuda_graph_stage_req m;
    if (msg_scuda_graph_stage_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *v = NULL;
    struct record *rec = idmap_get(&uploads, m.record, NULL, &v) ? v : NULL;
    if (!rec || m.data_len != rec->n) {
        LOG_WARN("graph launch: bytes for unknown upload record %llu (or of the wrong size) refused",
                 (unsigned long long)m.record);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = orig.cuEventSynchronize(rec->used);
    if (r != CUDA_SUCCESS) return r;
    memcpy(rec->staging, m.data, rec->n);
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphLaunch(srv_call *c)
{
    struct msg_cuGraphLaunch_req m;
    if (msg_cuGraphLaunch_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *e, *st;
    CUresult r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &e);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.stream, HK_STREAM, &st);
    return r == CUDA_SUCCESS ? wrap_cuGraphLaunch((CUgraphExec)e, (CUstream)st) : r;
}

/* ---- memcpy nodes with a host side (srv_graph.c) ---------------------------------- */

void graph_host_side_free(struct graph_host_side *hs)
{
    if (!hs) return;
    for (size_t i = 0; i < hs->n; i++) record_unref(hs->recs[i]);
    free(hs->recs);
    hs->recs = NULL;
    hs->n = 0;
}

CUresult graph_host_side_new(int upload, const uint64_t *ids, size_t nids, size_t extent,
                             struct graph_host_side *hs)
{
    memset(hs, 0, sizeof *hs);
    size_t chunks = (extent + SCUDA_CHUNK - 1) / SCUDA_CHUNK;
    if (extent == 0 || nids != chunks) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nids; i++) {
        void *v;
        if (idmap_get(&uploads, ids[i], NULL, &v)) return CUDA_ERROR_INVALID_VALUE; /* ids are fresh */
    }
    if (!(hs->recs = calloc(nids, sizeof *hs->recs))) return CUDA_ERROR_OUT_OF_MEMORY;
    int kind = upload ? REC_UPLOAD : REC_COPY;
    /* the first record owns the whole buffer: the node copies from or into it at once */
    CUresult r = record_new(ids[0], kind, extent, NULL, 0, &hs->recs[0]);
    if (r == CUDA_SUCCESS) {
        hs->n = 1;
        hs->staging = hs->recs[0]->staging;
        hs->recs[0]->n = extent < SCUDA_CHUNK ? extent : SCUDA_CHUNK; /* its own chunk */
    }
    for (size_t i = 1; r == CUDA_SUCCESS && i < nids; i++) {
        size_t off = i * (size_t)SCUDA_CHUNK;
        size_t n = extent - off < SCUDA_CHUNK ? extent - off : SCUDA_CHUNK;
        if ((r = record_new(ids[i], kind, n, hs->recs[0], off, &hs->recs[i])) == CUDA_SUCCESS) hs->n++;
    }
    if (r != CUDA_SUCCESS) graph_host_side_free(hs);
    return r;
}

/* Forget node's records in list: the node copies from or into other
 * memory now (they stay held: a launch in flight may use them). */
static void unlist_node(struct record **list, size_t *n, const void *node)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (list[i]->node != node) list[k++] = list[i];
    *n = k;
}

static int hold_side(struct idmap *m, const void *h, const void *node, struct graph_host_side *hs)
{
    pthread_mutex_lock(&holdings_lock);
    struct holding *x = holding_get(m, h);
    if (x && node) {
        unlist_node(x->uploads, &x->nuploads, node);
        unlist_node(x->tail, &x->ntail, node);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < hs->n; i++) {
        hs->recs[i]->node = node;
        rc = hold_in(x, hs->recs[i]);
    }
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) LOG_ERROR("graph host work: out of memory recording a memcpy node's host side");
    free(hs->recs); /* the holding has the references now (leaked on failure: the node uses them) */
    hs->recs = NULL;
    hs->n = 0;
    return rc;
}

int graph_host_side_hold_graph(struct graph_host_side *hs, CUgraph g, const void *node)
{
    return hold_side(&graphs, g, node, hs);
}

int graph_host_side_hold_exec(struct graph_host_side *hs, CUgraphExec e, const void *node)
{
    return hold_side(&execs, e, node, hs);
}

/* ---- host nodes added by hand ----------------------------------------------------- */

/* A host node's record: the client runs its function at each replay. A
 * node added by hand delivers no copies before it (nflush 0): copies into
 * client memory of its graph arrive after the launch (docs/operate.md). */
static struct record *run_record_new(uint64_t id)
{
    struct record *rec = calloc(1, sizeof *rec);
    if (!rec) return NULL;
    rec->id = id;
    rec->kind = REC_HOSTFN;
    atomic_init(&rec->refs, 1);
    return rec;
}

CUresult srv_scuda_graph_add_host_node(srv_call *c)
{
    struct msg_scuda_graph_add_host_node_req m;
    if (msg_scuda_graph_add_host_node_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *g;
    CUgraphNode *deps = NULL, node = NULL;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &g);
    if (r == CUDA_SUCCESS && graph_host_refuse_in_body(g, "a host node")) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r != CUDA_SUCCESS) return r;
    struct record *rec = run_record_new(m.record);
    if (!rec) {
        free(deps);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUDA_HOST_NODE_PARAMS p = {host_fn_node, rec};
    r = ORIG(cuGraphAddHostNode, &node, (CUgraph)g, deps, m.deps_count, &p);
    free(deps);
    if (r != CUDA_SUCCESS) {
        free(rec);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    int rc = hold(g, rec, 0);
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) {
        LOG_ERROR("graph host work: out of memory recording a host node");
        if (orig.cuGraphDestroyNode) orig.cuGraphDestroyNode(node);
        free(rec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if ((r = handle_put(c->s, m.node, HK_GRAPH_NODE, node)) != CUDA_SUCCESS)
        if (orig.cuGraphDestroyNode) orig.cuGraphDestroyNode(node); /* the record stays held by the graph: harmless */
    return r;
}

/* The record a host node of this session runs; NULL for any other node. */
static struct record *host_node_record(CUgraphNode node)
{
    CUDA_HOST_NODE_PARAMS p;
    if (ORIG(cuGraphHostNodeGetParams, node, &p) != CUDA_SUCCESS || p.fn != host_fn_node) return NULL;
    return p.userData;
}

CUresult srv_scuda_graph_host_node_get(srv_call *c)
{
    struct msg_scuda_graph_host_node_get_req m;
    if (msg_scuda_graph_host_node_get_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_HOST_NODE_PARAMS p;
    if ((r = ORIG(cuGraphHostNodeGetParams, (CUgraphNode)node, &p)) != CUDA_SUCCESS) return r;
    if (p.fn != host_fn_node) return CUDA_ERROR_INVALID_VALUE; /* every host node here is the client's */
    struct record *rec = p.userData;
    msg_scuda_graph_host_node_get_rep_put(&c->out, &(struct msg_scuda_graph_host_node_get_rep){rec->id});
    return CUDA_SUCCESS;
}

/* A new function for a host node. On an executable graph, that graph
 * holds the new record. On a graph's node, the record the node ran before
 * holds it: whichever graphs, clones and executable graphs hold the old
 * one (the session does not know which graph a node is in) keep the new
 * one alive as long. The old record stays: a launch may still run it. */
CUresult srv_scuda_graph_host_node_set(srv_call *c)
{
    struct msg_scuda_graph_host_node_set_req m;
    if (msg_scuda_graph_host_node_set_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node, *e = NULL;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS && m.exec) r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &e);
    if (r != CUDA_SUCCESS) return r;
    struct record *old = host_node_record((CUgraphNode)node);
    if (!old) return CUDA_ERROR_INVALID_VALUE; /* not a host node */
    struct record *rec = run_record_new(m.record);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    CUDA_HOST_NODE_PARAMS p = {host_fn_node, rec};
    r = e ? ORIG(cuGraphExecHostNodeSetParams, (CUgraphExec)e, (CUgraphNode)node, &p)
          : ORIG(cuGraphHostNodeSetParams, (CUgraphNode)node, &p);
    if (r != CUDA_SUCCESS) {
        free(rec);
        return r;
    }
    pthread_mutex_lock(&holdings_lock);
    int rc = 0;
    if (e) {
        rc = hold_in(holding_get(&execs, e), rec);
    } else {
        rec->next_heir = old->heirs;
        old->heirs = rec;
    }
    pthread_mutex_unlock(&holdings_lock);
    if (rc != 0) {
        LOG_ERROR("graph host work: out of memory recording a host node's new function");
        return CUDA_ERROR_OUT_OF_MEMORY; /* the node runs it: the record stays (leaked) */
    }
    return CUDA_SUCCESS;
}

/* ---- user objects ------------------------------------------------------------------ */

/* The driver destroyed the object (on any thread, inside a release or a
 * graph's destruction, or later on one of its own): the client runs the
 * destructor once, then forgets the record. */
static void CUDA_CB user_object_destroyed(void *arg)
{
    struct record *r = arg;
    if (!r->unmade) enqueue(HOST_WORK_RUN, r->id, NULL, 0);
    record_unref(r);
}

CUresult srv_scuda_user_object_create(srv_call *c)
{
    struct msg_scuda_user_object_create_req m;
    if (msg_scuda_user_object_create_req_get(&c->in, &c->arena, &m) != 0 || m.refcount == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct record *rec = run_record_new(m.record);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    CUuserObject obj = NULL;
    CUresult r = ORIG(cuUserObjectCreate, &obj, rec, user_object_destroyed, m.refcount, m.flags);
    if (r != CUDA_SUCCESS) {
        free(rec);
        return r;
    }
    if ((r = handle_put(c->s, m.object, HK_USER_OBJECT, obj)) != CUDA_SUCCESS) {
        /* the client drops the record itself: the destructor must not run */
        rec->unmade = 1;
        if (orig.cuUserObjectRelease) orig.cuUserObjectRelease(obj, m.refcount);
    }
    return r;
}
