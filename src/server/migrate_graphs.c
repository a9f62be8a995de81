/* migrate_graphs.c - see migrate_graphs.h; the design is in
 * docs/architecture.md, 9.17 Live migration ("Graphs").
 *
 * A graph travels as one item whose data is its nodes in the driver's
 * order (cuGraphGetNodes: creation order, so a node's dependencies come
 * before it), each a fixed record, then its dependencies as indices of
 * earlier nodes, then a kernel's argument bytes placed by the layout the
 * driver reports, or a child graph's description (the same, nested).
 * Handles inside are ids. An executable graph travels as its snapshot
 * (or the graph's id) and the changes made to it since, in order.
 * This file describes and notes, on the exporter; migrate_graphs_in.c
 * rebuilds, on the importer, where everything in a record is hostile:
 * every index, length and id is checked, and the driver refuses the rest.
 * The records themselves are in migrate_graphs_wire.h. */
#define _GNU_SOURCE
#include "migrate_graphs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handles.h"
#include "migrate_seq.h"
#include "param_layout.h"
#include "session.h"
#include "../common/idmap.h"
#include "migrate_graphs_wire.h"

struct blob {
    uint8_t *p;
    size_t n, cap;
};

static int blob_add(struct blob *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) return -1;
        b->p = q, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

/* ---- describing, on the exporter ------------------------------------------ */

static uint64_t ctx_id_of(CUdeviceptr p)
{
    CUcontext ctx = NULL;
    uint64_t id = 0;
    if (p && REAL(cuPointerGetAttribute, &ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS)
        id = handle_find_id(NULL, HK_CONTEXT, ctx);
    return id ? id : migrate_current_ctx_id();
}

/* The driver of CUDA 12.3 and later has the _v2 (edge data, which a
 * graph built here never sets); older ones only the first. */
static CUresult node_deps(CUgraphNode n, CUgraphNode *deps, size_t *nd)
{
    if (real.cuGraphNodeGetDependencies_v2) return real.cuGraphNodeGetDependencies_v2(n, deps, NULL, nd);
    return REAL(cuGraphNodeGetDependencies, n, deps, nd);
}

/* A kernel's parameters: its handles as ids, its arguments by the layout. */
static int describe_kernel_params(CUDA_KERNEL_NODE_PARAMS p, struct node_rec *rec, struct blob *args, char *why,
                                  size_t wl)
{
    int as_kernel = p.func && !handle_find_id(NULL, HK_FUNCTION, p.func);
    rec->func = p.func ? handle_find_id(NULL, as_kernel ? HK_KERNEL : HK_FUNCTION, p.func) : 0;
    rec->kern = p.kern ? handle_find_id(NULL, HK_KERNEL, p.kern) : 0;
    rec->ctx = p.ctx ? handle_find_id(NULL, HK_CONTEXT, p.ctx) : 0;
    if ((p.func && !rec->func) || (p.kern && !rec->kern))
        return snprintf(why, wl, "a kernel node runs a function the session has no id for"), -1;
    rec->grid[0] = p.gridDimX, rec->grid[1] = p.gridDimY, rec->grid[2] = p.gridDimZ;
    rec->block[0] = p.blockDimX, rec->block[1] = p.blockDimY, rec->block[2] = p.blockDimZ;
    rec->shared = p.sharedMemBytes;
    struct param_layout *lay = param_layout_dup(p.func ? (void *)p.func : (void *)p.kern, p.func ? as_kernel : 1, NULL);
    if (!lay || lay->bytes > ARGS_MAX)
        return free(lay), snprintf(why, wl, "the driver does not tell a kernel node's parameter layout"), -1;
    uint8_t *buf = calloc(1, lay->bytes ? lay->bytes : 1);
    int rc = buf ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && p.kernelParams && i < lay->n; i++)
        memcpy(buf + lay->p[i].offset, p.kernelParams[i], lay->p[i].size);
    if (rc == 0 && !p.kernelParams && lay->n) {
        /* CU_LAUNCH_PARAM_BUFFER_POINTER, the buffer, ..._SIZE, its size, END */
        void **e = p.extra;
        void *src = NULL;
        size_t size = 0;
        for (int i = 0; e && i < 8 && e[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (e[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) src = e[i + 1];
            if (e[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(size_t *)e[i + 1];
        }
        if (!src) rc = -1, snprintf(why, wl, "a kernel node holds no arguments the session can read");
        else memcpy(buf, src, size < lay->bytes ? size : lay->bytes);
    }
    rec->args_len = lay->bytes;
    if (rc == 0 && blob_add(args, buf, lay->bytes) != 0) rc = -1, snprintf(why, wl, "out of host memory");
    free(buf);
    free(lay);
    return rc;
}

static int describe_kernel(CUgraphNode node, struct node_rec *rec, struct blob *args, char *why, size_t wl)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    CUresult r = REAL(cuGraphKernelNodeGetParams_v2, node, &p);
    if (r != CUDA_SUCCESS) return snprintf(why, wl, "asking a kernel node's parameters failed (CUresult %d)", (int)r), -1;
    return describe_kernel_params(p, rec, args, why, wl);
}

/* One side of a memcpy node: device memory or an array, never the
 * client's memory (a host side is a staging buffer of this session,
 * which no other server has; and the migration carries no pinned host
 * memory for a host side to name). */
static int copy_side(CUmemorytype *type, CUdeviceptr *dev, CUarray *array, const void **host, char *why, size_t wl)
{
    if (*type == CU_MEMORYTYPE_UNIFIED) {
        unsigned mt = 0;
        if (REAL(cuPointerGetAttribute, &mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, *dev) != CUDA_SUCCESS ||
            mt != CU_MEMORYTYPE_DEVICE)
            return snprintf(why, wl, "a memcpy node copies host memory"), -1;
    } else if (*type == CU_MEMORYTYPE_ARRAY) {
        uint64_t id = handle_find_id(NULL, HK_ARRAY, *array);
        if (!id) return snprintf(why, wl, "a memcpy node copies an array the session has no id for"), -1;
        *array = (CUarray)(uintptr_t)id;
    } else if (*type != CU_MEMORYTYPE_DEVICE) {
        return snprintf(why, wl, "a memcpy node has a host side (the client's memory, staged by the session)"), -1;
    }
    *host = NULL;
    return 0;
}

static int describe_graph(CUgraph g, struct blob *b, int with_ids, int depth, char *why, size_t wl);

/* A memcpy's parameters with its arrays as ids, refused with a host side. */
static int describe_copy(struct node_rec *rec, char *why, size_t wl)
{
    if (copy_side(&rec->copy.srcMemoryType, &rec->copy.srcDevice, &rec->copy.srcArray, &rec->copy.srcHost, why, wl) ||
        copy_side(&rec->copy.dstMemoryType, &rec->copy.dstDevice, &rec->copy.dstArray, (const void **)&rec->copy.dstHost,
                  why, wl))
        return -1;
    rec->copy.reserved0 = rec->copy.reserved1 = NULL;
    rec->ctx = ctx_id_of(rec->copy.dstMemoryType == CU_MEMORYTYPE_ARRAY ? rec->copy.srcDevice : rec->copy.dstDevice);
    return 0;
}

/* A child graph node: its graph described after the record, recursively. */
static int describe_child(CUgraphNode node, struct node_rec *rec, struct blob *tail, int with_ids, int depth, char *why,
                          size_t wl)
{
    CUgraph child = NULL;
    CUresult r = REAL(cuGraphChildGraphNodeGetGraph, node, &child);
    if (r != CUDA_SUCCESS) return snprintf(why, wl, "asking a child graph node's graph failed (CUresult %d)", (int)r), -1;
    if (depth + 1 >= DEPTH_MAX) return snprintf(why, wl, "child graphs nest deeper than %d levels", DEPTH_MAX), -1;
    rec->graph_id = with_ids ? handle_find_id(NULL, HK_GRAPH, child) : 0;
    size_t before = tail->n;
    if (describe_graph(child, tail, with_ids, depth + 1, why, wl) != 0) return -1;
    if (tail->n - before > UINT32_MAX) return snprintf(why, wl, "a child graph's description is over 4 GiB"), -1;
    rec->sub_len = (uint32_t)(tail->n - before);
    return 0;
}

/* An event record or wait node: its event as an id (events move first). */
static int describe_event(CUgraphNode node, CUgraphNodeType t, struct node_rec *rec, char *why, size_t wl)
{
    CUevent ev = NULL;
    CUresult r = t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? REAL(cuGraphEventRecordNodeGetEvent, node, &ev)
                                                      : REAL(cuGraphEventWaitNodeGetEvent, node, &ev);
    if (r != CUDA_SUCCESS) return snprintf(why, wl, "asking an %s node's event failed (CUresult %d)", graph_node_type_name(t), (int)r), -1;
    rec->event = handle_find_id(NULL, HK_EVENT, ev);
    if (!rec->event) return snprintf(why, wl, "an %s node names an event the session has no id for", graph_node_type_name(t)), -1;
    return 0;
}

static int describe_node(CUgraphNode node, struct node_rec *rec, struct blob *args, int with_ids, int depth, char *why,
                         size_t wl)
{
    CUgraphNodeType t;
    CUresult r = REAL(cuGraphNodeGetType, node, &t);
    if (r != CUDA_SUCCESS) return snprintf(why, wl, "asking a node's type failed (CUresult %d)", (int)r), -1;
    rec->type = (uint32_t)t;
    rec->id = with_ids ? handle_find_id(NULL, HK_GRAPH_NODE, node) : 0;
    switch (t) {
    case CU_GRAPH_NODE_TYPE_EMPTY: return 0;
    case CU_GRAPH_NODE_TYPE_KERNEL: return describe_kernel(node, rec, args, why, wl);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        if ((r = REAL(cuGraphMemsetNodeGetParams, node, &rec->memset)) != CUDA_SUCCESS) break;
        rec->ctx = ctx_id_of(rec->memset.dst);
        return 0;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((r = REAL(cuGraphMemcpyNodeGetParams, node, &rec->copy)) != CUDA_SUCCESS) break;
        return describe_copy(rec, why, wl);
    case CU_GRAPH_NODE_TYPE_GRAPH: return describe_child(node, rec, args, with_ids, depth, why, wl);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return describe_event(node, t, rec, why, wl);
    default:
        return snprintf(why, wl, "%s nodes are not carried yet", graph_node_type_name(t)), -1;
    }
    return snprintf(why, wl, "asking a %s node's parameters failed (CUresult %d)", graph_node_type_name(t), (int)r), -1;
}

/* Append g's description to b: per node its record, its dependencies'
 * indices, its argument bytes or child graph; with_ids, each node's id (a
 * snapshot has none: the client may name a captured graph's nodes only
 * later). */
static int describe_graph(CUgraph g, struct blob *b, int with_ids, int depth, char *why, size_t wl)
{
    size_t n = 0;
    CUresult r = REAL(cuGraphGetNodes, g, NULL, &n);
    CUgraphNode *nodes = r == CUDA_SUCCESS && n <= NODES_MAX ? calloc(n ? n : 1, sizeof *nodes) : NULL;
    if (!nodes) return snprintf(why, wl, "cannot list a graph's nodes (CUresult %d, %zu nodes)", (int)r, n), -1;
    if (n && (r = REAL(cuGraphGetNodes, g, nodes, &n)) != CUDA_SUCCESS) n = 0;
    struct idmap index = IDMAP_INIT; /* node -> its position + 1 */
    int rc = r == CUDA_SUCCESS ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct node_rec rec;
        struct blob args = {0};
        memset(&rec, 0, sizeof rec);
        size_t nd = 0;
        CUgraphNode *deps = NULL;
        rc = describe_node(nodes[i], &rec, &args, with_ids, depth, why, wl);
        if (rc == 0 && (node_deps(nodes[i], NULL, &nd) != CUDA_SUCCESS || nd > i ||
                        !(deps = calloc(nd + 1, sizeof *deps)) ||
                        (nd && node_deps(nodes[i], deps, &nd) != CUDA_SUCCESS)))
            rc = -1, snprintf(why, wl, "cannot ask a node's dependencies");
        uint32_t *idx = rc == 0 ? calloc(nd + 1, sizeof *idx) : NULL;
        if (rc == 0 && !idx) rc = -1, snprintf(why, wl, "out of host memory");
        for (size_t j = 0; rc == 0 && j < nd; j++) {
            void *pos = NULL;
            if (!idmap_get(&index, (uint64_t)(uintptr_t)deps[j], NULL, &pos))
                rc = -1, snprintf(why, wl, "a node depends on one listed after it");
            idx[j] = (uint32_t)((uintptr_t)pos - 1);
        }
        rec.ndeps = (uint32_t)nd;
        if (rc == 0 && (blob_add(b, &rec, sizeof rec) || blob_add(b, idx, nd * sizeof *idx) ||
                        blob_add(b, args.p, args.n) ||
                        idmap_put(&index, (uint64_t)(uintptr_t)nodes[i], 0, (void *)(uintptr_t)(i + 1))))
            rc = -1, snprintf(why, wl, "out of host memory");
        free(idx);
        free(deps);
        free(args.p);
    }
    if (rc != 0 && !why[0]) snprintf(why, wl, "cannot list a graph's nodes (CUresult %d)", (int)r);
    idmap_clear(&index);
    free(nodes);
    return rc;
}

/* ---- executable graphs: the snapshot at instantiation, then its changes ---- */

struct change {
    struct change_hdr h;
    uint8_t *data;
    struct change *next;
};

struct exec_note {
    CUgraphExec exec;
    CUgraph graph;
    uint64_t flags, ctx;
    struct blob snap;
    CUgraphNode *nodes;    /* the graph's nodes at instantiation (compared, never used) */
    size_t nnodes;
    char why[160];         /* why the snapshot failed, "" when it did not */
    char changed[160];     /* the first change a move cannot carry, "" when none */
    struct change *changes; /* carried changes, oldest first */
    struct exec_note *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct exec_note *execs;

static void free_changes(struct change *c)
{
    while (c) {
        struct change *next = c->next;
        free(c->data);
        free(c);
        c = next;
    }
}

static void note_exec(CUgraphExec e, CUgraph g, uint64_t flags)
{
    struct exec_note *x = calloc(1, sizeof *x);
    size_t n = 0;
    if (x && REAL(cuGraphGetNodes, g, NULL, &n) == CUDA_SUCCESS && n <= NODES_MAX &&
        (x->nodes = calloc(n + 1, sizeof *x->nodes)) && (!n || REAL(cuGraphGetNodes, g, x->nodes, &n) == CUDA_SUCCESS))
        x->nnodes = n;
    if (!x || !x->nodes) {
        if (x) free(x);
        migrate_block(MIGRATE_BLOCK_LOST_NOTE);
        return;
    }
    x->exec = e, x->graph = g, x->flags = flags, x->ctx = migrate_current_ctx_id();
    if (describe_graph(g, &x->snap, 0, 0, x->why, sizeof x->why) != 0 && !x->why[0]) snprintf(x->why, sizeof x->why, "?");
    pthread_mutex_lock(&lock);
    x->next = execs;
    execs = x;
    pthread_mutex_unlock(&lock);
}

/* A later change makes an earlier one moot: a set of the same setting of
 * the same node after the last update; an update, every parameter set and
 * update before it (it takes every node's parameters from its graph;
 * enabling is not a parameter, so those stay, in order). Keeps the list
 * as long as the graph, however often the application changes it. */
static void append_change(struct exec_note *x, struct change *c)
{
    struct change *last_update = NULL, **p = &x->changes;
    for (struct change *o = x->changes; o; o = o->next)
        if (o->h.call == CH_UPDATE) last_update = o;
    int past_update = !last_update;
    while (*p) {
        struct change *o = *p;
        int moot = c->h.call == CH_UPDATE ? o->h.call != CH_ENABLED
                                          : past_update && o->h.call == c->h.call && o->h.node == c->h.node;
        if (o == last_update) past_update = 1;
        if (moot) {
            *p = o->next;
            o->next = NULL;
            free_changes(o);
        } else {
            p = &o->next;
        }
    }
    *p = c;
}

/* Note a change of e that succeeded: carried (data, len) at `node`, or,
 * with data NULL, refused later by `what`. Takes data. */
static void note_change(CUgraphExec e, CUgraphNode node, uint32_t call, uint8_t *data, size_t len, const char *what)
{
    pthread_mutex_lock(&lock);
    struct exec_note *x = execs;
    while (x && x->exec != e) x = x->next;
    uint32_t at = UINT32_MAX;
    for (size_t i = 0; x && node && i < x->nnodes && at == UINT32_MAX; i++)
        if (x->nodes[i] == node) at = (uint32_t)i;
    struct change *c = x && data && len <= UINT32_MAX && (!node || at != UINT32_MAX) ? calloc(1, sizeof *c) : NULL;
    if (c) {
        c->h = (struct change_hdr){.call = call, .node = at, .len = (uint32_t)len};
        c->data = data, data = NULL;
        append_change(x, c);
    } else if (x && !x->changed[0]) {
        snprintf(x->changed, sizeof x->changed, "%s", node && at == UINT32_MAX && data ? "a node it was not instantiated with" : what);
    }
    free(data);
    pthread_mutex_unlock(&lock);
}

static uint8_t *record_bytes(const struct node_rec *rec, const struct blob *tail, size_t *len)
{
    uint8_t *p = malloc(sizeof *rec + tail->n);
    if (p) memcpy(p, rec, sizeof *rec);
    if (p && tail->n) memcpy(p + sizeof *rec, tail->p, tail->n);
    *len = sizeof *rec + tail->n;
    return p;
}

static CUresult (*orig_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*orig_instantiate_params)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
static CUresult (*orig_exec_destroy)(CUgraphExec);
static CUresult (*orig_kernel_set)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS *);
static CUresult (*orig_memset_set)(CUgraphExec, CUgraphNode, const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
static CUresult (*orig_memcpy_set)(CUgraphExec, CUgraphNode, const CUDA_MEMCPY3D *, CUcontext);
static CUresult (*orig_set_enabled)(CUgraphExec, CUgraphNode, unsigned);
static CUresult (*orig_update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);

static CUresult noting_instantiate(CUgraphExec *e, CUgraph g, unsigned long long flags)
{
    CUresult r = orig_instantiate(e, g, flags);
    if (r == CUDA_SUCCESS && e && *e) note_exec(*e, g, flags);
    return r;
}

static CUresult noting_instantiate_params(CUgraphExec *e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    CUresult r = orig_instantiate_params(e, g, p);
    if (r == CUDA_SUCCESS && e && *e) note_exec(*e, g, p ? p->flags : 0);
    return r;
}

static CUresult noting_exec_destroy(CUgraphExec e)
{
    CUresult r = orig_exec_destroy(e);
    pthread_mutex_lock(&lock);
    for (struct exec_note **p = &execs; *p;) {
        struct exec_note *x = *p;
        if (x->exec == e) {
            *p = x->next;
            free(x->snap.p);
            free(x->nodes);
            free_changes(x->changes);
            free(x);
        } else {
            p = &x->next;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Notes an executable graph node's new parameters: rec and tail when
 * described (the node could be described), else that the change cannot
 * move, with why (w, or no memory when w is empty). */
static void note_described_change(CUgraphExec e, CUgraphNode n, uint32_t call, const char *api, bool described,
                                  const struct node_rec *rec, const struct blob *tail, const char *w)
{
    size_t len = 0;
    uint8_t *data = described ? record_bytes(rec, tail, &len) : NULL;
    char what[200];
    snprintf(what, sizeof what, "%s: %s", api, w[0] ? w : "out of host memory");
    note_change(e, n, call, data, len, what);
}

static CUresult noting_kernel_set(CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUresult r = orig_kernel_set(e, n, p);
    if (r != CUDA_SUCCESS) return r;
    struct node_rec rec;
    struct blob args = {0};
    char w[160] = "";
    memset(&rec, 0, sizeof rec);
    rec.type = CU_GRAPH_NODE_TYPE_KERNEL;
    bool described = p && describe_kernel_params(*p, &rec, &args, w, sizeof w) == 0;
    note_described_change(e, n, CH_KERNEL, "cuGraphExecKernelNodeSetParams", described, &rec, &args, w);
    free(args.p);
    return r;
}

static CUresult noting_memset_set(CUgraphExec e, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c)
{
    CUresult r = orig_memset_set(e, n, p, c);
    if (r != CUDA_SUCCESS) return r;
    struct node_rec rec;
    struct blob none = {0};
    size_t len = 0;
    memset(&rec, 0, sizeof rec);
    rec.type = CU_GRAPH_NODE_TYPE_MEMSET;
    if (p) rec.memset = *p;
    /* the context given, else the destination's (the same, for memory of one context) */
    rec.ctx = c ? handle_find_id(NULL, HK_CONTEXT, c) : 0;
    if (!rec.ctx) rec.ctx = ctx_id_of(rec.memset.dst);
    uint8_t *data = p && rec.ctx ? record_bytes(&rec, &none, &len) : NULL;
    note_change(e, n, CH_MEMSET, data, len, "cuGraphExecMemsetNodeSetParams in a context the session has no id for");
    return r;
}

static CUresult noting_memcpy_set(CUgraphExec e, CUgraphNode n, const CUDA_MEMCPY3D *p, CUcontext c)
{
    CUresult r = orig_memcpy_set(e, n, p, c);
    if (r != CUDA_SUCCESS) return r;
    struct node_rec rec;
    struct blob none = {0};
    char w[160] = "";
    memset(&rec, 0, sizeof rec);
    rec.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    if (p) rec.copy = *p;
    bool described = p && describe_copy(&rec, w, sizeof w) == 0;
    note_described_change(e, n, CH_MEMCPY, "cuGraphExecMemcpyNodeSetParams", described, &rec, &none, w);
    return r;
}

static CUresult noting_set_enabled(CUgraphExec e, CUgraphNode n, unsigned on)
{
    CUresult r = orig_set_enabled(e, n, on);
    if (r != CUDA_SUCCESS) return r;
    uint32_t *data = malloc(sizeof *data);
    if (data) *data = on ? 1 : 0;
    note_change(e, n, CH_ENABLED, (uint8_t *)data, sizeof *data, "cuGraphNodeSetEnabled: out of host memory");
    return r;
}

static CUresult noting_update(CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *info)
{
    CUresult r = orig_update(e, g, info);
    if (r != CUDA_SUCCESS) return r;
    struct blob b = {0};
    char w[160] = "", what[256];
    if (describe_graph(g, &b, 0, 0, w, sizeof w) != 0) free(b.p), b.p = NULL;
    else if (!b.p) b.p = malloc(1); /* an empty graph */
    snprintf(what, sizeof what, "cuGraphExecUpdate from a graph that cannot move: %s", w[0] ? w : "out of host memory");
    note_change(e, NULL, CH_UPDATE, b.p, b.n, what);
    return r;
}

/* Every other call that changes an executable graph after its
 * instantiation: the move is refused, naming it. */
#define CHANGES(name, params, args)                                                                                   \
    static CUresult(*orig_##name) params;                                                                             \
    static CUresult noting_##name params                                                                              \
    {                                                                                                                 \
        CUresult r = orig_##name args;                                                                                \
        if (r == CUDA_SUCCESS) note_change(e, NULL, 0, NULL, 0, #name);                                               \
        return r;                                                                                                     \
    }
CHANGES(cuGraphExecHostNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p), (e, n, p))
CHANGES(cuGraphExecChildGraphNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraph g), (e, n, g))
CHANGES(cuGraphExecEventRecordNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev), (e, n, ev))
CHANGES(cuGraphExecEventWaitNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev), (e, n, ev))
CHANGES(cuGraphExecBatchMemOpNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p),
        (e, n, p))
CHANGES(cuGraphExecNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraphNodeParams *p), (e, n, p))

#define WRAP(name)                                                                                                    \
    if (t->name) orig_##name = t->name, t->name = noting_##name
#define WRAP_AS(name, mine)                                                                                           \
    if (t->name) orig_##mine = t->name, t->name = noting_##mine

void migrate_graphs_install(struct driver_table *t)
{
    if (orig_exec_destroy || !t->cuGraphExecDestroy) return;
    orig_exec_destroy = t->cuGraphExecDestroy, t->cuGraphExecDestroy = noting_exec_destroy;
    WRAP_AS(cuGraphInstantiateWithFlags, instantiate);
    WRAP_AS(cuGraphInstantiateWithParams, instantiate_params);
    WRAP_AS(cuGraphExecKernelNodeSetParams_v2, kernel_set);
    WRAP_AS(cuGraphExecMemsetNodeSetParams, memset_set);
    WRAP_AS(cuGraphExecMemcpyNodeSetParams, memcpy_set);
    WRAP_AS(cuGraphNodeSetEnabled, set_enabled);
    WRAP_AS(cuGraphExecUpdate_v2, update);
    WRAP(cuGraphExecHostNodeSetParams);
    WRAP(cuGraphExecChildGraphNodeSetParams);
    WRAP(cuGraphExecEventRecordNodeSetEvent);
    WRAP(cuGraphExecEventWaitNodeSetEvent);
    WRAP(cuGraphExecBatchMemOpNodeSetParams);
    WRAP(cuGraphExecNodeSetParams);
}

/* ---- leaving ----------------------------------------------------------------- */

/* The graphs a migration carries: those the client made (a graph with a
 * session id is a child's or a conditional body, owned by its node). */
static int carried_graph(const struct handle_ref *h) { return h->kind == HK_GRAPH && !handle_is_server_id(h->id); }

static struct blob *blobs; /* the last migrate_graphs_items' data */
static size_t nblobs;

static void free_blobs(void)
{
    for (size_t i = 0; i < nblobs; i++) free(blobs[i].p);
    free(blobs);
    blobs = NULL, nblobs = 0;
}

static struct blob *new_blob(void)
{
    struct blob *v = realloc(blobs, (nblobs + 1) * sizeof *v);
    if (!v) return NULL;
    blobs = v;
    blobs[nblobs] = (struct blob){0};
    return &blobs[nblobs++];
}

/* The executable graph's data: the snapshot's length (u64; 0 when the
 * rebuilt graph serves), the snapshot, then each carried change. */
static int exec_data(const struct exec_note *x, int with_snap, struct blob *b)
{
    uint64_t n = with_snap ? x->snap.n : 0;
    int rc = blob_add(b, &n, sizeof n) || blob_add(b, x->snap.p, n);
    for (const struct change *c = x->changes; rc == 0 && c; c = c->next)
        rc = blob_add(b, &c->h, sizeof c->h) || blob_add(b, c->data, c->h.len);
    return rc;
}

static int exec_item(const struct handle_ref *h, struct msg_migrate_item *it, char *why, size_t wl)
{
    pthread_mutex_lock(&lock);
    struct exec_note *x = execs;
    while (x && x->exec != (CUgraphExec)h->real) x = x->next;
    int rc = 0;
    if (!x) rc = -1, snprintf(why, wl, "executable graph %#llx was not noted", (unsigned long long)h->id);
    else if (x->changed[0])
        rc = -1, snprintf(why, wl, "executable graph %#llx was changed after its instantiation (%s)",
                          (unsigned long long)h->id, x->changed);
    else if (x->why[0])
        rc = -1, snprintf(why, wl, "executable graph %#llx: %s", (unsigned long long)h->id, x->why);
    struct blob now = {0}, *data = NULL;
    char ignored[160] = "";
    uint64_t graph_id = rc == 0 ? handle_find_id(NULL, HK_GRAPH, x->graph) : 0;
    /* Unchanged since: instantiate from the rebuilt graph, so that the
     * client's node handles work with this executable graph there too. */
    if (graph_id && handle_is_server_id(graph_id)) graph_id = 0;
    if (graph_id && (describe_graph(x->graph, &now, 0, 0, ignored, sizeof ignored) != 0 || now.n != x->snap.n ||
                     memcmp(now.p, x->snap.p, now.n) != 0))
        graph_id = 0;
    free(now.p);
    if (rc == 0 && (!(data = new_blob()) || exec_data(x, !graph_id, data) != 0))
        rc = -1, snprintf(why, wl, "out of host memory");
    if (rc == 0)
        *it = (struct msg_migrate_item){.kind = MIG_GRAPH_EXEC, .id = h->id, .parent = graph_id, .a = x->flags,
                                        .c = x->ctx, .data = data->p, .data_len = data->n};
    pthread_mutex_unlock(&lock);
    return rc;
}

static int graph_item(const struct handle_ref *h, struct msg_migrate_item *it, char *why, size_t wl)
{
    struct blob *b = new_blob();
    if (!b) return snprintf(why, wl, "out of host memory"), -1;
    char w[256] = "";
    if (describe_graph((CUgraph)h->real, b, 1, 0, w, sizeof w) != 0)
        return snprintf(why, wl, "graph %#llx: %s", (unsigned long long)h->id, w), -1;
    *it = (struct msg_migrate_item){.kind = MIG_GRAPH, .id = h->id, .data = b->p, .data_len = b->n};
    return 0;
}

int migrate_graphs_items(struct migrate_items *l, char *why, size_t whylen)
{
    free_blobs();
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    int rc = n < 0 ? -1 : 0;
    for (int pass = 0; pass < 2; pass++) /* graphs first: executable graphs name them */
        for (long i = 0; rc == 0 && i < n; i++) {
            struct msg_migrate_item it;
            if (pass == 0 && carried_graph(&h[i])) rc = graph_item(&h[i], &it, why, whylen);
            else if (pass == 1 && h[i].kind == HK_GRAPH_EXEC) rc = exec_item(&h[i], &it, why, whylen);
            else continue;
            if (rc == 0 && migrate_items_push(l, it) != 0) rc = -1, snprintf(why, whylen, "out of host memory");
        }
    free(h);
    return rc;
}

void migrate_graphs_explain(char *why, size_t whylen)
{
    struct migrate_items l = {0};
    char w[256] = "";
    if (migrate_graphs_items(&l, w, sizeof w) != 0) {
        size_t n = strlen(why);
        if (n < whylen) snprintf(why + n, whylen - n, "%s%s", n ? "; " : "", w[0] ? w : "graphs cannot be listed");
    }
    free(l.v);
    free_blobs();
}

void migrate_graphs_digest(struct migrate_digest *d)
{
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    for (long i = 0; i < n; i++) {
        if (!carried_graph(&h[i])) continue;
        size_t nn = 0;
        migrate_digest_u64(d, h[i].id);
        if (REAL(cuGraphGetNodes, (CUgraph)h[i].real, NULL, &nn) != CUDA_SUCCESS) continue;
        CUgraphNode *v = calloc(nn + 1, sizeof *v);
        if (v && REAL(cuGraphGetNodes, (CUgraph)h[i].real, v, &nn) == CUDA_SUCCESS)
            for (size_t j = 0; j < nn; j++) {
                CUgraphNodeType t = 0;
                REAL(cuGraphNodeGetType, v[j], &t);
                migrate_digest_u64(d, handle_find_id(NULL, HK_GRAPH_NODE, v[j]));
                migrate_digest_u64(d, (uint64_t)t);
            }
        migrate_digest_u64(d, nn);
        free(v);
    }
    free(h);
}
