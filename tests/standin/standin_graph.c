/* SCUDA CPU stand-in driver: memory pools (stream-ordered allocation),
 * stream capture, and graphs. Enough of them for CI tests of SCUDA's
 * forwarding; see README.md ("Pools, capture and graphs") for the model.
 *
 * Pools: every device has a default pool, which is also its current pool
 * until cuDeviceSetMemPool. cuMemAllocAsync allocates at once (stricter
 * than stream order); cuMemFreeAsync frees when the stream reaches it. A
 * pool counts the bytes in use, and keeps freed bytes reserved up to its
 * release threshold (cuMemPoolTrimTo trims them).
 *
 * Capture: work submitted to a capturing stream becomes nodes of the
 * capture's graph, each depending on the one before (kernels, memsets,
 * copies and host functions); stream callbacks invalidate the capture,
 * events recorded in it are dropped. A graph's nodes run in the order they were
 * added, which respects every dependency. */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct si_graph si_graph;
typedef struct si_gnode si_gnode;
typedef struct si_gexec si_gexec;

struct si_capture {
    uint64_t id;
    si_graph *graph;
    bool invalidated;
    si_gnode *last;              /* what the next captured node depends on */
    CUgraphEdgeData edge;        /* cuStreamGetCaptureInfo_v3's edge data (default) */
};

/* ------------------------------------------------------------------ */
/* memory pools                                                        */

struct si_pool {
    uint64_t id;
    int dev;
    bool is_default;
    bool destroyed;         /* by the user; freed with its last allocation */
    CUmemPoolProps props;
    int reuse[3];           /* CU_MEMPOOL_ATTR_REUSE_* */
    uint64_t threshold, used, used_high, reserved, reserved_high;
    size_t n_allocs;
};

static si_pool *si_default_pools[SI_MAX_DEVICES];
static si_pool *si_current_pools[SI_MAX_DEVICES];

static si_pool *si_pool_new(int dev, const CUmemPoolProps *props, bool is_default)
{
    si_pool *p = si_xcalloc(1, sizeof(*p));
    p->id = si_next_id();
    p->dev = dev;
    p->is_default = is_default;
    if (props)
        p->props = *props;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->props.location.id = dev;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1; /* the driver's defaults */
    si_hset_add(&si_g.pools, p);
    return p;
}

static si_pool *si_default_pool(int dev)
{
    if (!si_default_pools[dev])
        si_default_pools[dev] = si_pool_new(dev, NULL, true);
    return si_default_pools[dev];
}

static si_pool *si_current_pool(int dev)
{
    return si_current_pools[dev] ? si_current_pools[dev] : si_default_pool(dev);
}

static bool si_pool_valid(const si_pool *p)
{
    return p && si_hset_has(&si_g.pools, p) && !p->destroyed;
}

/* freed bytes above the release threshold go back to the device */
static void si_pool_release(si_pool *p)
{
    uint64_t keep = p->used > p->threshold ? p->used : p->threshold;
    if (p->reserved > keep)
        p->reserved = keep;
}

void si_pool_forget_alloc(si_alloc *a)
{
    si_pool *p = a->pool;
    a->pool = NULL;
    p->used -= a->size;
    p->n_allocs--;
    si_pool_release(p);
    if (p->destroyed && p->n_allocs == 0)
        free(p);
}

void si_pool_free_exec(uintptr_t base, uint64_t alloc_id)
{
    si_alloc *a = si_alloc_find(base);
    if (a && a->base == base && a->id == alloc_id)
        si_alloc_release(a);
}

static CUresult si_pool_alloc(si_pool *p, si_stream *s, size_t size, CUdeviceptr *dptr)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->dev != s->ctx->dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->capture) {
        s->capture->invalidated = true; /* allocation nodes: not modelled */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    si_alloc *a = NULL;
    CUresult rc = si_dev_alloc(s->ctx, size, SI_AK_DEVICE, NULL, &a);
    if (rc)
        return rc;
    a->pool = p;
    p->n_allocs++;
    p->used += size;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->used > p->reserved)
        p->reserved = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *dptr = (CUdeviceptr)a->base;
    return CUDA_SUCCESS;
}

static CUresult si_alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h, bool ptsz)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    si_pool *p = (si_pool *)pool;
    if (!rc && pool && !si_pool_valid(p))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_pool_alloc(pool ? p : si_current_pool(s->ctx->dev), s, size, dptr);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return si_alloc_async(dptr, bytesize, NULL, hStream, false);
}
SI_API CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return si_alloc_async(dptr, bytesize, NULL, hStream, true);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    return pool ? si_alloc_async(dptr, bytesize, pool, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}
SI_API CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                     CUmemoryPool pool, CUstream hStream)
{
    return pool ? si_alloc_async(dptr, bytesize, pool, hStream, true) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult si_free_async(CUdeviceptr dptr, CUstream h, bool ptsz)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    si_alloc *a = NULL;
    if (!rc) {
        a = si_alloc_find((uintptr_t)dptr);
        if (!a || a->base != (uintptr_t)dptr || a->kind != SI_AK_DEVICE)
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc && s->capture) {
        s->capture->invalidated = true;
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (!rc) {
        si_op *op = si_op_new(SI_OP_FREE);
        op->u.free.base = a->base;
        op->u.free.alloc_id = a->id;
        si_submit(s, op);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return si_free_async(dptr, hStream, false);
}
SI_API CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return si_free_async(dptr, hStream, true);
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && !pool_out)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool_out = (CUmemoryPool)si_default_pool(dev);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    if (!rc && !pool)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pool = (CUmemoryPool)si_current_pool(dev);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    si_enter();
    CUresult rc = si_device_check(dev);
    si_pool *p = (si_pool *)pool;
    if (!rc && (!si_pool_valid(p) || p->dev != dev))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_current_pools[dev] = p;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!pool || !props))
        rc = CUDA_ERROR_INVALID_VALUE;
    /* "In all other cases, this field is required to be zero." */
    if (!rc && (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
                props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->win32SecurityAttributes ||
                (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE &&
                 props->handleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && si_device_check(props->location.id) != CUDA_SUCCESS)
        rc = CUDA_ERROR_INVALID_DEVICE;
    if (!rc)
        *pool = (CUmemoryPool)si_pool_new(props->location.id, props, false);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    si_enter();
    CUresult rc = si_check_init();
    si_pool *p = (si_pool *)pool;
    if (!rc && (!si_pool_valid(p) || p->is_default))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        if (si_current_pools[p->dev] == p)
            si_current_pools[p->dev] = NULL;
        si_hset_del(&si_g.pools, p);
        p->destroyed = true;
        if (p->n_allocs == 0)
            free(p);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    si_enter();
    CUresult rc = si_check_init();
    si_pool *p = (si_pool *)pool;
    if (!rc && !si_pool_valid(p))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        uint64_t keep = p->used > minBytesToKeep ? p->used : minBytesToKeep;
        if (p->reserved > keep)
            p->reserved = keep;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    si_enter();
    CUresult rc = si_check_init();
    si_pool *p = (si_pool *)pool;
    if (!rc && (!si_pool_valid(p) || !value))
        rc = CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v64 = 0;
    if (!rc) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            memcpy(&p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES], value, sizeof(int));
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            memcpy(&p->threshold, value, sizeof(cuuint64_t));
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            memcpy(&v64, value, sizeof(v64));
            if (v64 != 0) {
                rc = CUDA_ERROR_INVALID_VALUE; /* only a reset to 0 */
                break;
            }
            if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH)
                p->used_high = p->used;
            else
                p->reserved_high = p->reserved;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    si_enter();
    CUresult rc = si_check_init();
    si_pool *p = (si_pool *)pool;
    if (!rc && (!si_pool_valid(p) || !value))
        rc = CUDA_ERROR_INVALID_VALUE;
    cuuint64_t v = 0;
    if (!rc) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            memcpy(value, &p->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES], sizeof(int));
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p->used_high; break;
        default: rc = CUDA_ERROR_INVALID_VALUE; break;
        }
        if (!rc && attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
            memcpy(value, &v, sizeof(v));
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* graphs                                                              */

struct si_gnode {
    uint64_t id;
    si_graph *graph;
    CUgraphNodeType type;
    si_kcall k;                  /* KERNEL */
    si_op *op;                   /* MEMSET / MEMCPY: the operation each launch submits */
    CUDA_MEMCPY3D copy;          /* MEMCPY: as given (cuGraphMemcpyNodeGetParams) */
    void **arg_ptrs;             /* kernelParams handed out by cuGraphKernelNodeGetParams */
    CUkernelNodeAttrValue attrs[17]; /* KERNEL: attribute values as set (zero until then) */
    CUDA_MEM_ALLOC_NODE_PARAMS alloc;  /* MEM_ALLOC: as given, with the address (accessDescs not kept) */
    CUDA_BATCH_MEM_OP_NODE_PARAMS memop; /* BATCH_MEM_OP: as given, paramArray its own copy */
    si_graph **bodies;           /* GRAPH: the child graph; CONDITIONAL: the bodies (the node's own) */
    si_event *event;             /* EVENT_RECORD / WAIT_EVENT (validated by event_id) */
    uint64_t event_id;
    unsigned n_bodies;
    struct si_cond *cond;        /* CONDITIONAL */
    CUgraphConditionalNodeType ctype;
    si_gnode **deps;
    size_t n_deps;
    si_gnode *next;
};

/* User objects: a reference count; the destructor runs when it reaches
 * zero (at once, under the stand-in's lock: it must not call CUDA, as
 * CU_USER_OBJECT_NO_DESTRUCTOR_SYNC says). Graphs, their clones and
 * executable graphs hold references (si_urefs). */
typedef struct si_uobj {
    void *ptr;
    CUhostFn destroy;
    unsigned refs;
} si_uobj;

typedef struct si_urefs {
    si_uobj **obj;
    unsigned *count;
    size_t n;
} si_urefs;

/* A conditional handle: its value is the default at creation and, with
 * CU_GRAPH_COND_ASSIGN_DEFAULT, at each launch. Kernels cannot set it
 * here (no device code), so a WHILE node whose value is not 0 at launch
 * would never end: that launch is CUDA_ERROR_NOT_SUPPORTED. */
typedef struct si_cond {
    unsigned dflt, value;
    bool assign;
    struct si_cond *next;
} si_cond;

struct si_graph {
    uint64_t id;
    si_gnode *head, *tail;
    size_t n;
    si_urefs urefs;
    si_cond *conds;              /* the handles made for it */
};

/* an executable graph: its own copy of each node's work */
typedef struct si_enode {
    const si_gnode *orig; /* the graph node it came from (by address; never dereferenced) */
    CUgraphNodeType type;
    si_kcall k;
    si_op *op;
    CUDA_BATCH_MEM_OP_NODE_PARAMS memop; /* BATCH_MEM_OP: its own copy */
    struct si_gexec **subs;      /* GRAPH: the child's; CONDITIONAL: the bodies' */
    unsigned n_subs;
    si_cond *cond;
    CUgraphConditionalNodeType ctype;
    si_event *event;             /* EVENT_RECORD / WAIT_EVENT */
    uint64_t event_id;
    bool disabled;               /* cuGraphNodeSetEnabled(..., 0) */
} si_enode;

struct si_gexec {
    uint64_t id;
    si_urefs urefs;
    si_enode *nodes;
    size_t n;
};

static void si_uobj_release(si_uobj *o, unsigned count)
{
    o->refs -= count;
    if (o->refs == 0) {
        o->destroy(o->ptr);
        free(o);
    }
}

/* count more references of o held by u (new ones unless moved in) */
static void si_urefs_add(si_urefs *u, si_uobj *o, unsigned count, bool move)
{
    if (!move)
        o->refs += count;
    for (size_t i = 0; i < u->n; i++)
        if (u->obj[i] == o) {
            u->count[i] += count;
            return;
        }
    u->obj = realloc(u->obj, (u->n + 1) * sizeof(*u->obj));
    u->count = realloc(u->count, (u->n + 1) * sizeof(*u->count));
    if (!u->obj || !u->count)
        abort();
    u->obj[u->n] = o;
    u->count[u->n++] = count;
}

static void si_urefs_copy(si_urefs *dst, const si_urefs *src)
{
    for (size_t i = 0; i < src->n; i++)
        if (src->count[i])
            si_urefs_add(dst, src->obj[i], src->count[i], false);
}

static void si_urefs_free(si_urefs *u)
{
    for (size_t i = 0; i < u->n; i++)
        if (u->count[i]) /* else released already: maybe gone */
            si_uobj_release(u->obj[i], u->count[i]);
    free(u->obj);
    free(u->count);
    memset(u, 0, sizeof(*u));
}

static si_op *si_op_clone(const si_op *op)
{
    si_op *c = si_op_new(op->kind);
    c->u = op->u;
    if (op->kind == SI_OP_COPY && op->u.copy.staging) {
        size_t n = op->u.copy.c.width * op->u.copy.c.height * op->u.copy.c.depth;
        c->u.copy.staging = si_xcalloc(n ? n : 1, 1);
        memcpy(c->u.copy.staging, op->u.copy.staging, n);
        c->u.copy.c.src = (uintptr_t)c->u.copy.staging;
    }
    return c;
}

/* Batch memory operations: writes of 32 and 64 bits (memsets at each
 * launch), flushes and barriers (nothing to do on the CPU). Waits are not
 * modelled. */
static CUresult si_memop_check(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    if (!p || !p->count || !p->paramArray || p->flags)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < p->count; i++) {
        const CUstreamBatchMemOpParams *o = &p->paramArray[i];
        switch (o->operation) {
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
            if (!si_range((uintptr_t)o->writeValue.address, 4) || o->writeValue.address % 4)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            if (!si_range((uintptr_t)o->writeValue.address, 8) || o->writeValue.address % 8)
                return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        case CU_STREAM_MEM_OP_BARRIER:
            break;
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            return CUDA_ERROR_NOT_SUPPORTED;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return CUDA_SUCCESS;
}

static CUDA_BATCH_MEM_OP_NODE_PARAMS si_memop_copy(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    CUDA_BATCH_MEM_OP_NODE_PARAMS c = *p;
    if (p->count) {
        c.paramArray = si_xcalloc(p->count, sizeof(*c.paramArray));
        memcpy(c.paramArray, p->paramArray, p->count * sizeof(*c.paramArray));
    }
    return c;
}

static void si_memop_write32(si_stream *s, uintptr_t dst, uint32_t v)
{
    si_op *op = si_op_new(SI_OP_MEMSET);
    op->u.memset.dst = dst;
    op->u.memset.pitch = 4;
    op->u.memset.width = 1;
    op->u.memset.height = 1;
    op->u.memset.elem = 4;
    op->u.memset.value = v;
    si_submit(s, op);
}

static void si_memop_submit(si_stream *s, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    for (unsigned i = 0; i < p->count; i++) {
        const CUstreamBatchMemOpParams *o = &p->paramArray[i];
        uintptr_t a = (uintptr_t)o->writeValue.address;
        if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32) {
            si_memop_write32(s, a, o->writeValue.value);
        } else if (o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64) {
            si_memop_write32(s, a, (uint32_t)o->writeValue.value64); /* little-endian */
            si_memop_write32(s, a + 4, (uint32_t)(o->writeValue.value64 >> 32));
        }
    }
}

static si_graph *si_graph_new(void)
{
    si_graph *g = si_xcalloc(1, sizeof(*g));
    g->id = si_next_id();
    si_hset_add(&si_g.graphs, g);
    return g;
}

static void si_graph_free(si_graph *g);

static void si_gnode_free(si_gnode *n)
{
    si_hset_del(&si_g.graph_nodes, n);
    for (unsigned i = 0; i < n->n_bodies; i++)
        si_graph_free(n->bodies[i]);
    free(n->bodies);
    si_kcall_free(&n->k);
    si_op_free(n->op);
    free(n->memop.paramArray);
    free(n->arg_ptrs);
    free(n->deps);
    free(n);
}

static void si_graph_free(si_graph *g)
{
    si_hset_del(&si_g.graphs, g);
    si_urefs_free(&g->urefs);
    while (g->head) {
        si_gnode *n = g->head;
        g->head = n->next;
        si_gnode_free(n);
    }
    while (g->conds) {
        si_cond *c = g->conds;
        g->conds = c->next;
        free(c);
    }
    free(g);
}

static si_gnode *si_gnode_add(si_graph *g, CUgraphNodeType type, si_gnode *const *deps, size_t n_deps)
{
    si_gnode *n = si_xcalloc(1, sizeof(*n));
    n->id = si_next_id();
    n->graph = g;
    n->type = type;
    if (n_deps) {
        n->deps = si_xcalloc(n_deps, sizeof(*n->deps));
        memcpy(n->deps, deps, n_deps * sizeof(*deps));
        n->n_deps = n_deps;
    }
    if (g->tail)
        g->tail->next = n;
    else
        g->head = n;
    g->tail = n;
    g->n++;
    si_hset_add(&si_g.graph_nodes, n);
    return n;
}

static bool si_graph_valid(const si_graph *g) { return g && si_hset_has(&si_g.graphs, g); }
/* a kernel node's function is still loaded */
static bool si_kcall_live(const si_kcall *k) { return si_hset_has(&si_g.funcs, k->func) && k->func->id == k->func_id; }
static bool si_gnode_valid(const si_gnode *n) { return n && si_hset_has(&si_g.graph_nodes, n); }
static bool si_gexec_valid(const si_gexec *e) { return e && si_hset_has(&si_g.graph_execs, e); }

/* the dependencies of a new node: live nodes of the same graph */
static CUresult si_deps_check(const si_graph *g, const CUgraphNode *deps, size_t n)
{
    if (n && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        if (!si_gnode_valid((const si_gnode *)deps[i]) || ((const si_gnode *)deps[i])->graph != g)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* stream capture                                                      */

static __thread CUstreamCaptureMode si_thread_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

CUstreamCaptureStatus si_capture_status(const si_stream *s)
{
    if (!s->capture)
        return CU_STREAM_CAPTURE_STATUS_NONE;
    return s->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static si_gnode *si_capture_node(si_stream *s, CUgraphNodeType type)
{
    si_capture *cap = s->capture;
    si_gnode *last = cap->last;
    si_gnode *n = si_gnode_add(cap->graph, type, last ? &last : NULL, last ? 1 : 0);
    cap->last = n;
    return n;
}

void si_capture_op(si_stream *s, si_op *op)
{
    switch (op->kind) {
    case SI_OP_MEMSET:
        si_capture_node(s, CU_GRAPH_NODE_TYPE_MEMSET)->op = op;
        return;
    case SI_OP_COPY:
        si_capture_node(s, CU_GRAPH_NODE_TYPE_MEMCPY)->op = op;
        return;
    case SI_OP_HOSTFN:
        si_capture_node(s, CU_GRAPH_NODE_TYPE_HOST)->op = op; /* runs on the callback thread at each launch */
        return;
    case SI_OP_EVENT:
        break; /* an event recorded in a capture: only ordering, kept linear here */
    default:
        s->capture->invalidated = true; /* stream callbacks, waits: not allowed / not modelled */
        break;
    }
    si_op_free(op);
}

void si_capture_kernel(si_stream *s, si_kcall *k)
{
    si_capture_node(s, CU_GRAPH_NODE_TYPE_KERNEL)->k = *k;
    memset(k, 0, sizeof(*k));
}

static CUresult si_begin_capture(CUstream h, CUstreamCaptureMode mode, bool ptsz)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (!rc && s->kind == SI_SK_LEGACY)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!rc && mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && s->capture)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (!rc) {
        si_capture *cap = si_xcalloc(1, sizeof(*cap));
        cap->id = si_next_id();
        cap->graph = si_graph_new();
        s->capture = cap;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return si_begin_capture(hStream, mode, false);
}
SI_API CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return si_begin_capture(hStream, mode, true);
}

static CUresult si_end_capture(CUstream h, CUgraph *phGraph, bool ptsz)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (!rc && !phGraph)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !s->capture)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    if (!rc) {
        si_capture *cap = s->capture;
        s->capture = NULL;
        if (cap->invalidated) {
            si_graph_free(cap->graph);
            *phGraph = NULL;
            rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            *phGraph = (CUgraph)cap->graph;
        }
        free(cap);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return si_end_capture(hStream, phGraph, false);
}
SI_API CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return si_end_capture(hStream, phGraph, true);
}

static CUresult si_capture_info(CUstream h, bool ptsz, CUstreamCaptureStatus *status, cuuint64_t *id,
                                CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges,
                                size_t *n)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (!rc && !status)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && ((deps && !n) || (edges && !deps)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_capture *cap = s->capture;
        *status = si_capture_status(s);
        if (cap && !cap->invalidated) {
            if (id)
                *id = cap->id;
            if (graph)
                *graph = (CUgraph)cap->graph;
            if (deps)
                *deps = cap->last ? (const CUgraphNode *)&cap->last : NULL;
            if (edges)
                *edges = cap->last ? &cap->edge : NULL;
            if (n)
                *n = cap->last ? 1 : 0;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out,
                                           const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return si_capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                           numDependencies_out);
}
SI_API CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                       cuuint64_t *id_out, CUgraph *graph_out,
                                                       const CUgraphNode **dependencies_out,
                                                       const CUgraphEdgeData **edgeData_out,
                                                       size_t *numDependencies_out)
{
    return si_capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                           numDependencies_out);
}
SI_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                  cuuint64_t *id_out, CUgraph *graph_out,
                                                  const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return si_capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                           numDependencies_out);
}
SI_API CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                       cuuint64_t *id_out, CUgraph *graph_out,
                                                       const CUgraphNode **dependencies_out,
                                                       size_t *numDependencies_out)
{
    return si_capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                           numDependencies_out);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = si_thread_capture_mode;
    si_thread_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* building graphs                                                     */

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!phGraph || flags != 0))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *phGraph = (CUgraph)si_graph_new();
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !si_graph_valid((si_graph *)hGraph))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_graph_free((si_graph *)hGraph);
    si_leave();
    return rc;
}

/* a copy of every node, dependencies mapped to the copies; child graphs
 * are copied too, conditional nodes are not modelled (the caller holds
 * the lock) */
static CUresult si_graph_clone(si_graph *g, si_graph **out)
{
    for (si_gnode *n = g->head; n; n = n->next) {
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && !si_kcall_live(&n->k))
            return CUDA_ERROR_INVALID_HANDLE; /* its module was unloaded */
        if (n->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            return CUDA_ERROR_NOT_SUPPORTED;
    }
    si_graph *c = si_graph_new();
    si_gnode **map = si_xcalloc(g->n ? g->n : 1, sizeof(*map));
    size_t i = 0;
    CUresult rc = CUDA_SUCCESS;
    for (si_gnode *n = g->head; n; n = n->next, i++) {
        si_gnode *deps[64];
        size_t nd = 0;
        for (size_t d = 0; d < n->n_deps && nd < 64; d++) {
            size_t j = 0;
            for (si_gnode *m = g->head; m && m != n->deps[d]; m = m->next) j++;
            if (j < i)
                deps[nd++] = map[j];
        }
        si_gnode *x = si_gnode_add(c, n->type, deps, nd);
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            size_t pb = n->k.func->entry->param_bytes;
            x->k = n->k;
            x->k.params = si_xcalloc(pb ? pb : 1, 1);
            memcpy(x->k.params, n->k.params, pb);
        }
        if (n->op)
            x->op = si_op_clone(n->op);
        x->copy = n->copy;
        x->event = n->event, x->event_id = n->event_id;
        if (n->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
            x->memop = si_memop_copy(&n->memop);
        if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            x->bodies = si_xcalloc(1, sizeof(*x->bodies));
            if ((rc = si_graph_clone(n->bodies[0], &x->bodies[0])) == CUDA_SUCCESS)
                x->n_bodies = 1;
        }
        map[i] = x;
    }
    free(map);
    if (rc) {
        si_graph_free(c);
        return rc;
    }
    si_urefs_copy(&c->urefs, &g->urefs);
    *out = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)originalGraph;
    if (!rc && (!phGraphClone || !si_graph_valid(g)))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_graph *c = NULL;
    if (!rc)
        rc = si_graph_clone(g, &c);
    if (!rc)
        *phGraphClone = (CUgraph)c;
    si_leave();
    return rc;
}

static CUresult si_kernel_node_call(const CUDA_KERNEL_NODE_PARAMS *p, si_kcall *out)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    si_ctx *c = si_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;
    const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
    const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
    return si_kcall_make(c, f, grid, block, p->sharedMemBytes, p->kernelParams, p->extra, out);
}

/* What adding any node checks first (called between si_enter and si_leave). */
static CUresult si_node_add_check(CUgraphNode *ph, si_graph *g, const CUgraphNode *deps, size_t n)
{
    CUresult rc = si_check_init();
    if (!rc && (!ph || !si_graph_valid(g)))
        rc = CUDA_ERROR_INVALID_VALUE;
    return rc ? rc : si_deps_check(g, deps, n);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    si_kcall k;
    if (!rc)
        rc = si_kernel_node_call(nodeParams, &k);
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_KERNEL, (si_gnode *const *)dependencies, numDependencies);
        n->k = k;
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !nodeParams))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_kcall_live(&n->k))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        const si_entry *e = n->k.func->entry;
        free(n->arg_ptrs);
        n->arg_ptrs = si_xcalloc(e->n_params ? e->n_params : 1, sizeof(void *));
        for (size_t i = 0; i < e->n_params; i++)
            n->arg_ptrs[i] = n->k.params + e->params[i].offset;
        memset(nodeParams, 0, sizeof(*nodeParams));
        nodeParams->func = n->k.handle;
        nodeParams->gridDimX = n->k.grid[0];
        nodeParams->gridDimY = n->k.grid[1];
        nodeParams->gridDimZ = n->k.grid[2];
        nodeParams->blockDimX = n->k.block[0];
        nodeParams->blockDimY = n->k.block[1];
        nodeParams->blockDimZ = n->k.block[2];
        nodeParams->sharedMemBytes = n->k.shmem;
        nodeParams->kernelParams = n->arg_ptrs;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_KERNEL))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_kcall k;
    if (!rc)
        rc = si_kernel_node_call(nodeParams, &k);
    if (!rc) {
        si_kcall_free(&n->k);
        n->k = k;
    }
    si_leave();
    return rc;
}

/* Memset node parameters into an op (validated by the caller). */
static void si_memset_op(si_op *op, const CUDA_MEMSET_NODE_PARAMS *p)
{
    size_t row = p->width * p->elementSize;
    op->u.memset.dst = (uintptr_t)p->dst;
    op->u.memset.pitch = p->height > 1 ? p->pitch : row;
    op->u.memset.width = p->width;
    op->u.memset.height = p->height;
    op->u.memset.elem = p->elementSize;
    op->u.memset.value = p->value;
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!phGraphNode || !si_graph_valid(g) || !p || p->height == 0 ||
                (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_deps_check(g, dependencies, numDependencies);
    size_t row = p ? p->width * p->elementSize : 0;
    if (!rc && p->height > 1 && p->pitch < row)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !si_range((uintptr_t)p->dst, p->height > 1 ? (p->height - 1) * p->pitch + row : row))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_MEMSET, (si_gnode *const *)dependencies, numDependencies);
        n->op = si_op_new(SI_OP_MEMSET);
        si_memset_op(n->op, p);
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS *p)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!n || !p || !n->op || n->op->kind != SI_OP_MEMSET || p->height == 0 ||
                (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)))
        rc = CUDA_ERROR_INVALID_VALUE;
    size_t row = p ? p->width * p->elementSize : 0;
    if (!rc && !si_range((uintptr_t)p->dst, p->height > 1 ? (p->height - 1) * p->pitch + row : row))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_memset_op(n->op, p);
    si_leave();
    return rc;
}

/* An empty node: nothing to run, only dependencies. */
CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    if (!rc)
        *phGraphNode = (CUgraphNode)si_gnode_add(g, CU_GRAPH_NODE_TYPE_EMPTY, (si_gnode *const *)dependencies,
                                                 numDependencies);
    si_leave();
    return rc;
}

/* Host nodes: the function runs on the callback thread at each launch, in
 * the graph's order, like a captured cuLaunchHostFunc. */
static bool si_host_params_ok(const CUDA_HOST_NODE_PARAMS *p) { return p && p->fn; }

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                    size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    if (!rc && !si_host_params_ok(nodeParams))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_HOST, (si_gnode *const *)dependencies, numDependencies);
        n->op = si_op_new(SI_OP_HOSTFN);
        n->op->u.hostfn.fn = nodeParams->fn;
        n->op->u.hostfn.user = nodeParams->userData;
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

static si_gnode *si_host_node(CUgraphNode h)
{
    si_gnode *n = (si_gnode *)h;
    return si_gnode_valid(n) && n->type == CU_GRAPH_NODE_TYPE_HOST && n->op ? n : NULL;
}

CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = rc ? NULL : si_host_node(hNode);
    if (!rc && (!n || !nodeParams))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        nodeParams->fn = n->op->u.hostfn.fn;
        nodeParams->userData = n->op->u.hostfn.user;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = rc ? NULL : si_host_node(hNode);
    if (!rc && (!n || !si_host_params_ok(nodeParams)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        n->op->u.hostfn.fn = nodeParams->fn;
        n->op->u.hostfn.user = nodeParams->userData;
    }
    si_leave();
    return rc;
}

/* Kernel node attributes: the ids the driver accepts for a graph node
 * keep the value set (zero until then); others are INVALID_VALUE. */
static bool si_node_attr_ok(CUkernelNodeAttrID a)
{
    switch ((int)a) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return true;
    default:
        return false;
    }
}

static CUresult si_kernel_node_attr(CUgraphNode hNode, CUkernelNodeAttrID attr, CUkernelNodeAttrValue *get,
                                    const CUkernelNodeAttrValue *set)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_KERNEL || !si_node_attr_ok(attr) ||
                !(get || set)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && get)
        *get = n->attrs[attr];
    if (!rc && set)
        n->attrs[attr] = *set;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                               CUkernelNodeAttrValue *value_out)
{
    return si_kernel_node_attr(hNode, attr, value_out, NULL);
}

CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                               const CUkernelNodeAttrValue *value)
{
    return value ? si_kernel_node_attr(hNode, attr, NULL, value) : CUDA_ERROR_INVALID_VALUE;
}

/* Allocation nodes: the memory is allocated when the node is added, in
 * the current context, and lives as long as the process (the stand-in
 * does not model graph memory reuse); the node itself does nothing. */
CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    si_ctx *c = rc ? NULL : si_current();
    if (!rc && (!nodeParams || !nodeParams->bytesize ||
                nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && !c)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    si_alloc *a = NULL;
    if (!rc)
        rc = si_dev_alloc(c, nodeParams->bytesize, SI_AK_DEVICE, NULL, &a);
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, (si_gnode *const *)dependencies,
                                   numDependencies);
        nodeParams->dptr = (CUdeviceptr)a->base;
        n->alloc = *nodeParams;
        n->alloc.accessDescs = NULL;
        n->alloc.accessDescCount = 0;
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!params_out || !si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *params_out = n->alloc;
    si_leave();
    return rc;
}

/* Batch memory-operation nodes (see si_memop_check for what they do). */
CUresult CUDAAPI cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    if (!rc)
        rc = si_memop_check(nodeParams);
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, (si_gnode *const *)dependencies,
                                   numDependencies);
        n->memop = si_memop_copy(nodeParams);
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

static si_gnode *si_memop_node(CUgraphNode h)
{
    si_gnode *n = (si_gnode *)h;
    return si_gnode_valid(n) && n->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP ? n : NULL;
}

CUresult CUDAAPI cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = rc ? NULL : si_memop_node(hNode);
    if (!rc && (!n || !nodeParams_out))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *nodeParams_out = n->memop; /* the array stays the node's */
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphBatchMemOpNodeSetParams(CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = rc ? NULL : si_memop_node(hNode);
    if (!rc && !n)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_memop_check(nodeParams);
    if (!rc) {
        free(n->memop.paramArray);
        n->memop = si_memop_copy(nodeParams);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gexec *e = (si_gexec *)hGraphExec;
    si_enode *x = NULL;
    if (!rc && (!si_gexec_valid(e) || !si_memop_node(hNode)))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !rc && i < e->n && !x; i++)
        if (e->nodes[i].orig == (si_gnode *)hNode)
            x = &e->nodes[i];
    if (!rc && !x)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_memop_check(nodeParams);
    if (!rc) {
        free(x->memop.paramArray);
        x->memop = si_memop_copy(nodeParams);
    }
    si_leave();
    return rc;
}

/* a device, unified or host side of a memcpy node (host memory is read or
 * written when the node runs, as by the driver) */
static bool si_node_side(CUmemorytype type, CUdeviceptr dev, const void *host, size_t x, size_t y, size_t z,
                         size_t pitch, size_t height, uintptr_t *out)
{
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED && type != CU_MEMORYTYPE_HOST)
        return false;
    uintptr_t base = type == CU_MEMORYTYPE_HOST ? (uintptr_t)host : (uintptr_t)dev;
    *out = base + x + (z * height + y) * pitch;
    return true;
}

CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!phGraphNode || !si_graph_valid(g) || !p))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_deps_check(g, dependencies, numDependencies);
    si_copy c;
    memset(&c, 0, sizeof(c));
    if (!rc) {
        size_t h = p->Height ? p->Height : 1, d = p->Depth ? p->Depth : 1;
        c.spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes;
        c.dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
        c.sheight = p->srcHeight ? p->srcHeight : h;
        c.dheight = p->dstHeight ? p->dstHeight : h;
        c.width = p->WidthInBytes;
        c.height = h;
        c.depth = d;
        if (!si_node_side(p->srcMemoryType, p->srcDevice, p->srcHost, p->srcXInBytes, p->srcY, p->srcZ, c.spitch,
                          c.sheight, &c.src) ||
            !si_node_side(p->dstMemoryType, p->dstDevice, p->dstHost, p->dstXInBytes, p->dstY, p->dstZ, c.dpitch,
                          c.dheight, &c.dst))
            rc = CUDA_ERROR_NOT_SUPPORTED; /* array sides: not modelled */
        else if (si_copy_validate(&c) != CUDA_SUCCESS)
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc) {
        si_gnode *n = si_gnode_add(g, CU_GRAPH_NODE_TYPE_MEMCPY, (si_gnode *const *)dependencies, numDependencies);
        n->op = si_op_new(SI_OP_COPY);
        n->op->u.copy.c = c;
        n->copy = *p;
        *phGraphNode = (CUgraphNode)n;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_MEMCPY || !nodeParams))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *nodeParams = n->copy;
    si_leave();
    return rc;
}

/* A memset node's parameters, from the op each launch submits (built
 * from cuGraphAddMemsetNode's parameters or a captured memset). */
CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *p)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_MEMSET || !n->op || !p))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        memset(p, 0, sizeof(*p));
        p->dst = (CUdeviceptr)n->op->u.memset.dst;
        p->pitch = n->op->u.memset.pitch;
        p->value = n->op->u.memset.value;
        p->elementSize = n->op->u.memset.elem;
        p->width = n->op->u.memset.width;
        p->height = n->op->u.memset.height;
    }
    si_leave();
    return rc;
}

/* The nodes a node depends on, in the order they were given; every edge
 * is a default one. (cuda.h names the 12.3 version.) */
CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *deps, CUgraphEdgeData *edges, size_t *num)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || !num))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && deps) {
        for (size_t i = 0; i < *num; i++)
            deps[i] = i < n->n_deps ? (CUgraphNode)n->deps[i] : NULL;
        if (edges)
            memset(edges, 0, *num * sizeof(*edges));
        if (*num > n->n_deps)
            *num = n->n_deps;
    } else if (!rc) {
        *num = n->n_deps;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || !type))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *type = n->type;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy, unsigned int initialRefcount,
                                    unsigned int flags)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!object_out || !destroy || !initialRefcount || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_uobj *o = si_xcalloc(1, sizeof(*o));
        o->ptr = ptr;
        o->destroy = destroy;
        o->refs = initialRefcount;
        *object_out = (CUuserObject)o;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && (!object || !count))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        ((si_uobj *)object)->refs += count;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count)
{
    si_enter();
    CUresult rc = si_check_init();
    si_uobj *o = (si_uobj *)object;
    if (!rc && (!o || !count || count > o->refs))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_uobj_release(o, count);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags)
{
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)graph;
    if (!rc && (!si_graph_valid(g) || !object || !count || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_urefs_add(&g->urefs, (si_uobj *)object, count, flags & CU_GRAPH_USER_OBJECT_MOVE);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph, CUuserObject object, unsigned int count)
{
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)graph;
    size_t i = 0;
    if (!rc && (!si_graph_valid(g) || !count))
        rc = CUDA_ERROR_INVALID_VALUE;
    while (!rc && i < g->urefs.n && g->urefs.obj[i] != (si_uobj *)object)
        i++;
    if (!rc && (i == g->urefs.n || g->urefs.count[i] < count))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        g->urefs.count[i] -= count;
        si_uobj_release((si_uobj *)object, count);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out, CUgraph hGraph, CUcontext ctx,
                                                unsigned int defaultLaunchValue, unsigned int flags)
{
    (void)ctx;
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!pHandle_out || !si_graph_valid(g) || (flags & ~(unsigned)CU_GRAPH_COND_ASSIGN_DEFAULT)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_cond *c = si_xcalloc(1, sizeof(*c));
        c->dflt = c->value = defaultLaunchValue;
        c->assign = flags & CU_GRAPH_COND_ASSIGN_DEFAULT;
        c->next = g->conds;
        g->conds = c;
        *pHandle_out = (CUgraphConditionalHandle)(uintptr_t)c;
    }
    si_leave();
    return rc;
}

/* the handle, made for g */
static si_cond *si_cond_of(const si_graph *g, CUgraphConditionalHandle h)
{
    for (si_cond *c = g->conds; c; c = c->next)
        if ((CUgraphConditionalHandle)(uintptr_t)c == h)
            return c;
    return NULL;
}

static CUresult si_add_conditional(si_graph *g, si_gnode *const *deps, size_t n, CUDA_CONDITIONAL_NODE_PARAMS *p,
                                   si_gnode **out)
{
    si_cond *c = si_cond_of(g, p->handle);
    unsigned max = p->type == CU_GRAPH_COND_TYPE_IF ? 2 : p->type == CU_GRAPH_COND_TYPE_WHILE ? 1 : 1u << 16;
    if (!c || p->type > CU_GRAPH_COND_TYPE_SWITCH || p->size == 0 || p->size > max)
        return CUDA_ERROR_INVALID_VALUE;
    si_gnode *x = si_gnode_add(g, CU_GRAPH_NODE_TYPE_CONDITIONAL, deps, n);
    x->cond = c;
    x->ctype = p->type;
    x->bodies = si_xcalloc(p->size, sizeof(*x->bodies));
    for (unsigned i = 0; i < p->size; i++)
        x->bodies[i] = si_graph_new();
    x->n_bodies = p->size;
    p->phGraph_out = (CUgraph *)x->bodies; /* the node's own array */
    *out = x;
    return CUDA_SUCCESS;
}

/* A child graph node: a copy of child, or child itself when moved in. */
static CUresult si_add_child(si_graph *g, si_gnode *const *deps, size_t n, si_graph *child, bool move, si_gnode **out)
{
    if (!si_graph_valid(child) || child == g)
        return CUDA_ERROR_INVALID_VALUE;
    si_graph *body = child;
    CUresult rc = move ? CUDA_SUCCESS : si_graph_clone(child, &body);
    if (rc)
        return rc;
    si_gnode *x = si_gnode_add(g, CU_GRAPH_NODE_TYPE_GRAPH, deps, n);
    x->bodies = si_xcalloc(1, sizeof(*x->bodies));
    x->bodies[0] = body;
    x->n_bodies = 1;
    *out = x;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUgraph childGraph)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    si_gnode *x = NULL;
    if (!rc)
        rc = si_add_child(g, (si_gnode *const *)dependencies, numDependencies, (si_graph *)childGraph, false, &x);
    if (!rc)
        *phGraphNode = (CUgraphNode)x;
    si_leave();
    return rc;
}

/* The generic add: conditional and child graph nodes (the only types
 * SCUDA's client sends through it); edge data must be plain. */
CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
    static const CUgraphEdgeData plain;
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    CUresult rc = si_node_add_check(phGraphNode, g, dependencies, numDependencies);
    if (!rc && !nodeParams)
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !rc && dependencyData && i < numDependencies; i++)
        if (memcmp(&dependencyData[i], &plain, sizeof plain) != 0)
            rc = CUDA_ERROR_NOT_SUPPORTED;
    si_gnode *x = NULL;
    si_gnode *const *deps = (si_gnode *const *)dependencies;
    if (!rc && nodeParams->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
        rc = si_add_conditional(g, deps, numDependencies, &nodeParams->conditional, &x);
    else if (!rc && nodeParams->type == CU_GRAPH_NODE_TYPE_GRAPH)
        rc = si_add_child(g, deps, numDependencies, (si_graph *)nodeParams->graph.graph,
                          nodeParams->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE, &x);
    else if (!rc)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (!rc)
        *phGraphNode = (CUgraphNode)x;
    si_leave();
    return rc;
}

/* The dot text: one line per node (its id and type number), one per edge. */
CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    (void)flags;
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!si_graph_valid(g) || !path))
        rc = CUDA_ERROR_INVALID_VALUE;
    FILE *f = rc ? NULL : fopen(path, "w");
    if (!rc && !f)
        rc = CUDA_ERROR_OPERATING_SYSTEM;
    if (f) {
        fprintf(f, "digraph standin_graph_%llu {\n", (unsigned long long)g->id);
        for (si_gnode *n = g->head; n; n = n->next) {
            fprintf(f, "  n%llu [label=\"type %d\"];\n", (unsigned long long)n->id, (int)n->type);
            for (size_t d = 0; d < n->n_deps; d++)
                fprintf(f, "  n%llu -> n%llu;\n", (unsigned long long)n->deps[d]->id, (unsigned long long)n->id);
        }
        fputs("}\n", f);
        if (fclose(f) != 0)
            rc = CUDA_ERROR_OPERATING_SYSTEM;
    }
    si_leave();
    return rc;
}

static CUresult si_list_nodes(CUgraph hGraph, CUgraphNode *nodes, size_t *num, bool roots)
{
    si_enter();
    CUresult rc = si_check_init();
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!si_graph_valid(g) || !num))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        size_t count = 0, cap = *num;
        for (si_gnode *n = g->head; n; n = n->next) {
            if (roots && n->n_deps)
                continue;
            if (nodes && count < cap)
                nodes[count] = (CUgraphNode)n;
            count++;
        }
        if (nodes) {
            for (size_t i = count; i < cap; i++)
                nodes[i] = NULL;
            *num = count < cap ? count : cap;
        } else {
            *num = count;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    return si_list_nodes(hGraph, nodes, numNodes, false);
}

CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
    return si_list_nodes(hGraph, rootNodes, numRootNodes, true);
}

/* ------------------------------------------------------------------ */
/* executable graphs                                                   */

static void si_gexec_free(si_gexec *e)
{
    si_hset_del(&si_g.graph_execs, e);
    si_urefs_free(&e->urefs);
    for (size_t i = 0; i < e->n; i++) {
        for (unsigned j = 0; j < e->nodes[i].n_subs; j++)
            si_gexec_free(e->nodes[i].subs[j]);
        free(e->nodes[i].subs);
        si_kcall_free(&e->nodes[i].k);
        si_op_free(e->nodes[i].op);
        free(e->nodes[i].memop.paramArray);
    }
    free(e->nodes);
    free(e);
}

/* every kernel node's function, in g and its child and body graphs, is
 * still loaded */
static bool si_graph_live(const si_graph *g)
{
    for (const si_gnode *n = g->head; n; n = n->next) {
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL && !si_kcall_live(&n->k))
            return false;
        for (unsigned i = 0; i < n->n_bodies; i++)
            if (!si_graph_live(n->bodies[i]))
                return false;
    }
    return true;
}

/* an executable copy of g; child and body graphs get executable copies of
 * their own, which only their node holds */
static si_gexec *si_gexec_build(const si_graph *g)
{
    si_gexec *e = si_xcalloc(1, sizeof(*e));
    e->id = si_next_id();
    e->nodes = si_xcalloc(g->n ? g->n : 1, sizeof(*e->nodes));
    for (si_gnode *n = g->head; n; n = n->next) {
        si_enode *x = &e->nodes[e->n++];
        x->orig = n;
        x->type = n->type;
        x->event = n->event, x->event_id = n->event_id;
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            const si_entry *en = n->k.func->entry;
            x->k = n->k;
            x->k.params = si_xcalloc(en->param_bytes ? en->param_bytes : 1, 1);
            memcpy(x->k.params, n->k.params, en->param_bytes);
        }
        if (n->op)
            x->op = si_op_clone(n->op);
        if (n->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
            x->memop = si_memop_copy(&n->memop);
        if (n->n_bodies) {
            x->subs = si_xcalloc(n->n_bodies, sizeof(*x->subs));
            for (unsigned i = 0; i < n->n_bodies; i++)
                x->subs[i] = si_gexec_build(n->bodies[i]);
            x->n_subs = n->n_bodies;
            x->cond = n->cond;
            x->ctype = n->ctype;
        }
    }
    si_urefs_copy(&e->urefs, &g->urefs);
    return e;
}

static CUresult si_instantiate(CUgraphExec *phGraphExec, CUgraph hGraph)
{
    si_graph *g = (si_graph *)hGraph;
    if (!phGraphExec || !si_graph_valid(g))
        return CUDA_ERROR_INVALID_VALUE;
    if (!si_graph_live(g))
        return CUDA_ERROR_INVALID_HANDLE; /* a kernel's module was unloaded */
    si_gexec *e = si_gexec_build(g);
    si_hset_add(&si_g.graph_execs, e);
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                             CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_instantiate(phGraphExec, hGraph);
    si_leave();
    return rc;
}

static CUresult si_instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                      bool ptsz)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !p)
        rc = CUDA_ERROR_INVALID_VALUE;
    si_stream *s = NULL;
    if (!rc && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        rc = si_resolve_stream(p->hUploadStream, ptsz, &s);
    if (!rc)
        rc = si_instantiate(phGraphExec, hGraph);
    if (p) {
        p->hErrNode_out = NULL;
        p->result_out = rc ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return si_instantiate_params(phGraphExec, hGraph, instantiateParams, false);
}
SI_API CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                          CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return si_instantiate_params(phGraphExec, hGraph, instantiateParams, true);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gexec *e = (si_gexec *)hGraphExec;
    si_enode *x = NULL;
    if (!rc && (!si_gexec_valid(e) || !si_gnode_valid((si_gnode *)hNode)))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !rc && i < e->n && !x; i++)
        if (e->nodes[i].orig == (si_gnode *)hNode)
            x = &e->nodes[i];
    if (!rc && (!x || x->type != CU_GRAPH_NODE_TYPE_KERNEL))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_kcall k;
    if (!rc)
        rc = si_kernel_node_call(nodeParams, &k);
    if (!rc) {
        si_kcall_free(&x->k);
        x->k = k;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gexec *e = (si_gexec *)hGraphExec;
    si_enode *x = NULL;
    if (!rc && (!si_gexec_valid(e) || !si_gnode_valid((si_gnode *)hNode) || !si_host_params_ok(nodeParams)))
        rc = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; !rc && i < e->n && !x; i++)
        if (e->nodes[i].orig == (si_gnode *)hNode)
            x = &e->nodes[i];
    if (!rc && (!x || x->type != CU_GRAPH_NODE_TYPE_HOST || !x->op))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        x->op->u.hostfn.fn = nodeParams->fn;
        x->op->u.hostfn.user = nodeParams->userData;
    }
    si_leave();
    return rc;
}

/* cuGraphExecUpdate: the graph must have the executable graph's nodes,
 * type for type in the order they were added; each node's work is then
 * taken from the graph. Otherwise nothing changes and the first node that
 * differs is named. */
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gexec *e = (si_gexec *)hGraphExec;
    si_graph *g = (si_graph *)hGraph;
    if (!rc && (!resultInfo || !si_gexec_valid(e) || !si_graph_valid(g)))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_gnode *bad = NULL;
    CUgraphExecUpdateResult why = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    size_t i = 0;
    for (si_gnode *n = rc ? NULL : g->head; n && !bad; n = n->next, i++) {
        if (i < e->n && e->nodes[i].type != n->type)
            why = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (i >= e->n || e->nodes[i].type != n->type || (n->type == CU_GRAPH_NODE_TYPE_KERNEL && !si_kcall_live(&n->k)))
            bad = n;
    }
    if (!rc && (bad || i != e->n)) {
        resultInfo->result = why;
        resultInfo->errorNode = (CUgraphNode)bad;
        resultInfo->errorFromNode = NULL;
        rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    i = 0;
    for (si_gnode *n = rc ? NULL : g->head; n; n = n->next, i++) {
        si_enode *x = &e->nodes[i];
        x->event = n->event, x->event_id = n->event_id;
        if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            const si_entry *en = n->k.func->entry;
            si_kcall_free(&x->k);
            x->k = n->k;
            x->k.params = si_xcalloc(en->param_bytes ? en->param_bytes : 1, 1);
            memcpy(x->k.params, n->k.params, en->param_bytes);
        }
        if (n->op) {
            si_op_free(x->op);
            x->op = si_op_clone(n->op);
        }
        if (n->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
            free(x->memop.paramArray);
            x->memop = si_memop_copy(&n->memop);
        }
    }
    if (!rc) {
        resultInfo->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
        resultInfo->errorNode = resultInfo->errorFromNode = NULL;
    }
    si_leave();
    return rc;
}

/* Conditional values at the start of a launch; NOT_SUPPORTED for a
 * WHILE node that would never end here (si_cond). */
static CUresult si_gexec_prepare(const si_gexec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        const si_enode *x = &e->nodes[i];
        if (x->cond && x->cond->assign)
            x->cond->value = x->cond->dflt;
        if (x->cond && x->ctype == CU_GRAPH_COND_TYPE_WHILE && x->cond->value)
            return CUDA_ERROR_NOT_SUPPORTED;
        for (unsigned j = 0; j < x->n_subs; j++) {
            CUresult rc = si_gexec_prepare(x->subs[j]);
            if (rc)
                return rc;
        }
    }
    return CUDA_SUCCESS;
}

/* which body a conditional node runs, or -1: none */
static int si_cond_body(const si_enode *x)
{
    unsigned v = x->cond->value;
    switch (x->ctype) {
    case CU_GRAPH_COND_TYPE_IF:
        return v ? 0 : x->n_subs == 2 ? 1 : -1;
    case CU_GRAPH_COND_TYPE_SWITCH:
        return v < x->n_subs ? (int)v : -1;
    default:
        return -1; /* WHILE: 0 at launch (si_gexec_prepare) */
    }
}

static void si_gexec_submit(si_stream *s, const si_gexec *e)
{
    for (size_t i = 0; i < e->n; i++) {
        const si_enode *x = &e->nodes[i];
        if (x->disabled)
            continue;
        if (x->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            si_kcall_submit(s, &x->k);
        } else if (x->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
            si_event_record_on(s, x->event, x->event_id);
        } else if (x->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT) {
            si_event_wait_on(s, x->event, x->event_id);
        } else if (x->type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) {
            si_memop_submit(s, &x->memop);
        } else if (x->type == CU_GRAPH_NODE_TYPE_GRAPH) {
            si_gexec_submit(s, x->subs[0]);
        } else if (x->type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
            int b = si_cond_body(x);
            if (b >= 0)
                si_gexec_submit(s, x->subs[b]);
        } else if (x->op) {
            si_submit(s, si_op_clone(x->op));
        }
    }
}

static CUresult si_graph_launch(CUgraphExec hGraphExec, CUstream h, bool ptsz, bool upload)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    si_gexec *e = (si_gexec *)hGraphExec;
    if (!rc && !si_gexec_valid(e))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && s->capture)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* child graphs: not modelled */
    if (!rc && !upload)
        rc = si_gexec_prepare(e);
    if (!rc && !upload)
        si_gexec_submit(s, e);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return si_graph_launch(hGraphExec, hStream, false, false);
}
SI_API CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return si_graph_launch(hGraphExec, hStream, true, false);
}
CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    return si_graph_launch(hGraphExec, hStream, false, true);
}
SI_API CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return si_graph_launch(hGraphExec, hStream, true, true);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !si_gexec_valid((si_gexec *)hGraphExec))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        si_gexec_free((si_gexec *)hGraphExec);
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* event nodes, a child graph node's graph, the executable graph's
 * memset, memcpy, child graph and enable settings                     */

static CUresult si_add_event_node(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps, size_t n, CUevent ev,
                                  CUgraphNodeType type)
{
    si_enter();
    si_graph *g = (si_graph *)hGraph;
    si_event *e = (si_event *)ev;
    CUresult rc = si_node_add_check(ph, g, deps, n);
    if (!rc && !si_hset_has(&si_g.events, e))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        si_gnode *x = si_gnode_add(g, type, (si_gnode *const *)deps, n);
        x->event = e, x->event_id = e->id;
        *ph = (CUgraphNode)x;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                           size_t numDependencies, CUevent event)
{
    return si_add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, CUevent event)
{
    return si_add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

static CUresult si_event_node_get(CUgraphNode hNode, CUevent *out, CUgraphNodeType type)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != type || !out))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *out = (CUevent)n->event;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    return si_event_node_get(hNode, event_out, CU_GRAPH_NODE_TYPE_EVENT_RECORD);
}

CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out)
{
    return si_event_node_get(hNode, event_out, CU_GRAPH_NODE_TYPE_WAIT_EVENT);
}

/* The child graph node's own graph (a handle to it, not a copy). */
CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
    si_enter();
    CUresult rc = si_check_init();
    si_gnode *n = (si_gnode *)hNode;
    if (!rc && (!si_gnode_valid(n) || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !n->n_bodies || !phGraph))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *phGraph = (CUgraph)n->bodies[0];
    si_leave();
    return rc;
}

/* The executable graph's copy of node hNode of type `type` (-1: any),
 * or NULL. */
static si_enode *si_exec_node(CUgraphExec hGraphExec, CUgraphNode hNode, int type)
{
    si_gexec *e = (si_gexec *)hGraphExec;
    if (!si_gexec_valid(e) || !si_gnode_valid((si_gnode *)hNode))
        return NULL;
    for (size_t i = 0; i < e->n; i++)
        if (e->nodes[i].orig == (si_gnode *)hNode)
            return type < 0 || (int)e->nodes[i].type == type ? &e->nodes[i] : NULL;
    return NULL;
}

/* The executable graph's memset and memcpy: the parameters are checked
 * and turned into an operation by adding them to a scratch graph, whose
 * node's operation then replaces the executable graph's copy. */
static CUresult si_exec_take_op(CUgraphExec hGraphExec, CUgraphNode hNode, int type, CUgraph tmp, CUgraphNode made)
{
    si_enter();
    si_enode *x = si_exec_node(hGraphExec, hNode, type);
    CUresult rc = x && x->op ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_op_free(x->op);
        x->op = ((si_gnode *)made)->op;
        ((si_gnode *)made)->op = NULL;
    }
    si_leave();
    cuGraphDestroy(tmp);
    return rc;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *memsetParams, CUcontext ctx)
{
    CUgraph tmp = NULL;
    CUgraphNode n = NULL;
    CUresult rc = cuGraphCreate(&tmp, 0);
    if (rc)
        return rc;
    if ((rc = cuGraphAddMemsetNode(&n, tmp, NULL, 0, memsetParams, ctx)) != CUDA_SUCCESS) {
        cuGraphDestroy(tmp);
        return rc;
    }
    return si_exec_take_op(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMSET, tmp, n);
}

CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    CUgraph tmp = NULL;
    CUgraphNode n = NULL;
    CUresult rc = cuGraphCreate(&tmp, 0);
    if (rc)
        return rc;
    if ((rc = cuGraphAddMemcpyNode(&n, tmp, NULL, 0, copyParams, ctx)) != CUDA_SUCCESS) {
        cuGraphDestroy(tmp);
        return rc;
    }
    return si_exec_take_op(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_MEMCPY, tmp, n);
}

/* The child's executable copy is made again from childGraph, which must
 * have the same node types in the same order. */
CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraph childGraph)
{
    si_enter();
    CUresult rc = si_check_init();
    si_enode *x = rc ? NULL : si_exec_node(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_GRAPH);
    si_graph *g = (si_graph *)childGraph;
    if (!rc && (!x || !si_graph_valid(g) || !x->n_subs || g->n != x->subs[0]->n || !si_graph_live(g)))
        rc = CUDA_ERROR_INVALID_VALUE;
    size_t i = 0;
    for (si_gnode *n = rc ? NULL : g->head; n; n = n->next, i++)
        if (n->type != x->subs[0]->nodes[i].type)
            rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_gexec_free(x->subs[0]);
        x->subs[0] = si_gexec_build(g);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int isEnabled)
{
    si_enter();
    CUresult rc = si_check_init();
    si_enode *x = rc ? NULL : si_exec_node(hGraphExec, hNode, -1);
    if (!rc && (!x || (x->type != CU_GRAPH_NODE_TYPE_KERNEL && x->type != CU_GRAPH_NODE_TYPE_MEMSET &&
                       x->type != CU_GRAPH_NODE_TYPE_MEMCPY)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        x->disabled = !isEnabled;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int *isEnabled)
{
    si_enter();
    CUresult rc = si_check_init();
    si_enode *x = rc ? NULL : si_exec_node(hGraphExec, hNode, -1);
    if (!rc && (!x || !isEnabled))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *isEnabled = !x->disabled;
    si_leave();
    return rc;
}
