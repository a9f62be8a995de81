/* migrate_graphs.c - see migrate_graphs.h; the design is in
 * docs/architecture.md, 9.17 Live migration ("Graphs").
 *
 * A graph travels as one item whose data is its nodes in the driver's
 * order (cuGraphGetNodes: creation order, so a node's dependencies come
 * before it), each a fixed record, then its dependencies as indices of
 * earlier nodes, then a kernel's argument bytes placed by the layout the
 * driver reports. Handles inside are ids. Everything in a record is
 * hostile to the importer: every index, length and id is checked, and
 * the driver refuses the rest. */
#define _GNU_SOURCE
#include "migrate_graphs.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handles.h"
#include "migrate_seq.h"
#include "param_layout.h"
#include "session.h"
#include "../common/idmap.h"

/* A kernel reads at most 32764 bytes of parameters. */
#define ARGS_MAX 32768
#define NODES_MAX (1u << 20)

struct node_rec {
    uint32_t type;   /* CUgraphNodeType */
    uint32_t ndeps;  /* u32 indices of earlier nodes follow the record */
    uint32_t args_len, pad;
    uint64_t id;     /* the node's id (the client's or the session's), 0: none */
    uint64_t ctx;    /* context id */
    uint64_t func, kern;
    uint32_t grid[3], block[3];
    uint32_t shared, pad2;
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D copy; /* arrays as ids; no host side */
};

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

static const char *type_name(unsigned t)
{
    static const char *const n[] = {"kernel", "memcpy", "memset", "host", "child graph", "empty", "event wait",
                                    "event record", "external semaphore signal", "external semaphore wait",
                                    "memory allocation", "memory free", "batch memory operation", "conditional"};
    return t < sizeof n / sizeof *n ? n[t] : "unknown";
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

/* A kernel node: its handles as ids, its arguments by the layout. */
static int describe_kernel(CUgraphNode node, struct node_rec *rec, struct blob *args, char *why, size_t wl)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    CUresult r = REAL(cuGraphKernelNodeGetParams_v2, node, &p);
    if (r != CUDA_SUCCESS) return snprintf(why, wl, "asking a kernel node's parameters failed (CUresult %d)", (int)r), -1;
    int as_kernel = p.func && !handle_find_id(NULL, HK_FUNCTION, p.func);
    rec->func = p.func ? handle_find_id(NULL, as_kernel ? HK_KERNEL : HK_FUNCTION, p.func) : 0;
    rec->kern = p.kern ? handle_find_id(NULL, HK_KERNEL, p.kern) : 0;
    rec->ctx = p.ctx ? handle_find_id(NULL, HK_CONTEXT, p.ctx) : 0;
    if ((p.func && !rec->func) || (p.kern && !rec->kern))
        return snprintf(why, wl, "a kernel node runs a function the session has no id for"), -1;
    rec->grid[0] = p.gridDimX, rec->grid[1] = p.gridDimY, rec->grid[2] = p.gridDimZ;
    rec->block[0] = p.blockDimX, rec->block[1] = p.blockDimY, rec->block[2] = p.blockDimZ;
    rec->shared = p.sharedMemBytes;
    struct param_layout *lay = param_layout_dup(p.func ? (void *)p.func : (void *)p.kern, p.func ? as_kernel : 1);
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

/* One side of a memcpy node: device memory or an array, never the
 * client's memory (a host side is a staging buffer of this session). */
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

static int describe_node(CUgraphNode node, struct node_rec *rec, struct blob *args, int with_ids, char *why, size_t wl)
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
        if (copy_side(&rec->copy.srcMemoryType, &rec->copy.srcDevice, &rec->copy.srcArray, &rec->copy.srcHost, why, wl) ||
            copy_side(&rec->copy.dstMemoryType, &rec->copy.dstDevice, &rec->copy.dstArray, (const void **)&rec->copy.dstHost,
                      why, wl))
            return -1;
        rec->copy.reserved0 = rec->copy.reserved1 = NULL;
        rec->ctx = ctx_id_of(rec->copy.dstMemoryType == CU_MEMORYTYPE_ARRAY ? rec->copy.srcDevice : rec->copy.dstDevice);
        return 0;
    default:
        return snprintf(why, wl, "%s nodes are not carried yet", type_name(t)), -1;
    }
    return snprintf(why, wl, "asking a %s node's parameters failed (CUresult %d)", type_name(t), (int)r), -1;
}

/* Append g's description to b: per node its record, its dependencies'
 * indices, its argument bytes; with_ids, each node's id (a snapshot has
 * none: the client may name a captured graph's nodes only later). */
static int describe_graph(CUgraph g, struct blob *b, int with_ids, char *why, size_t wl)
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
        rc = describe_node(nodes[i], &rec, &args, with_ids, why, wl);
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

/* ---- executable graphs: the snapshot at instantiation -------------------- */

struct exec_note {
    CUgraphExec exec;
    CUgraph graph;
    uint64_t flags, ctx;
    struct blob snap;
    char why[160];        /* why the snapshot failed, "" when it did not */
    const char *changed;  /* the first call that changed it after instantiation */
    struct exec_note *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct exec_note *execs;

static void note_exec(CUgraphExec e, CUgraph g, uint64_t flags)
{
    struct exec_note *x = calloc(1, sizeof *x);
    if (!x) {
        migrate_block(MIGRATE_BLOCK_LOST_NOTE);
        return;
    }
    x->exec = e, x->graph = g, x->flags = flags, x->ctx = migrate_current_ctx_id();
    if (describe_graph(g, &x->snap, 0, x->why, sizeof x->why) != 0 && !x->why[0]) snprintf(x->why, sizeof x->why, "?");
    pthread_mutex_lock(&lock);
    x->next = execs;
    execs = x;
    pthread_mutex_unlock(&lock);
}

static void exec_changed(CUgraphExec e, const char *call)
{
    pthread_mutex_lock(&lock);
    for (struct exec_note *x = execs; x; x = x->next)
        if (x->exec == e && !x->changed) x->changed = call;
    pthread_mutex_unlock(&lock);
}

static CUresult (*orig_instantiate)(CUgraphExec *, CUgraph, unsigned long long);
static CUresult (*orig_instantiate_params)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
static CUresult (*orig_exec_destroy)(CUgraphExec);

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
            free(x);
        } else {
            p = &x->next;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Every call that changes an executable graph after its instantiation. */
#define CHANGES(name, params, args)                                                                                   \
    static CUresult(*orig_##name) params;                                                                             \
    static CUresult noting_##name params                                                                              \
    {                                                                                                                 \
        CUresult r = orig_##name args;                                                                                \
        if (r == CUDA_SUCCESS) exec_changed(e, #name);                                                                \
        return r;                                                                                                     \
    }
CHANGES(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec e, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS *p), (e, n, p))
CHANGES(cuGraphExecMemcpyNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_MEMCPY3D *p, CUcontext c), (e, n, p, c))
CHANGES(cuGraphExecMemsetNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext c),
        (e, n, p, c))
CHANGES(cuGraphExecHostNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_HOST_NODE_PARAMS *p), (e, n, p))
CHANGES(cuGraphExecChildGraphNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraph g), (e, n, g))
CHANGES(cuGraphExecEventRecordNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev), (e, n, ev))
CHANGES(cuGraphExecEventWaitNodeSetEvent, (CUgraphExec e, CUgraphNode n, CUevent ev), (e, n, ev))
CHANGES(cuGraphExecBatchMemOpNodeSetParams, (CUgraphExec e, CUgraphNode n, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p),
        (e, n, p))
CHANGES(cuGraphExecNodeSetParams, (CUgraphExec e, CUgraphNode n, CUgraphNodeParams *p), (e, n, p))
CHANGES(cuGraphNodeSetEnabled, (CUgraphExec e, CUgraphNode n, unsigned on), (e, n, on))
CHANGES(cuGraphExecUpdate_v2, (CUgraphExec e, CUgraph g, CUgraphExecUpdateResultInfo *i), (e, g, i))

#define WRAP(name)                                                                                                    \
    if (t->name) orig_##name = t->name, t->name = noting_##name

void migrate_graphs_install(struct driver_table *t)
{
    if (orig_exec_destroy || !t->cuGraphExecDestroy) return;
    orig_exec_destroy = t->cuGraphExecDestroy, t->cuGraphExecDestroy = noting_exec_destroy;
    if (t->cuGraphInstantiateWithFlags) orig_instantiate = t->cuGraphInstantiateWithFlags, t->cuGraphInstantiateWithFlags = noting_instantiate;
    if (t->cuGraphInstantiateWithParams)
        orig_instantiate_params = t->cuGraphInstantiateWithParams, t->cuGraphInstantiateWithParams = noting_instantiate_params;
    WRAP(cuGraphExecKernelNodeSetParams_v2);
    WRAP(cuGraphExecMemcpyNodeSetParams);
    WRAP(cuGraphExecMemsetNodeSetParams);
    WRAP(cuGraphExecHostNodeSetParams);
    WRAP(cuGraphExecChildGraphNodeSetParams);
    WRAP(cuGraphExecEventRecordNodeSetEvent);
    WRAP(cuGraphExecEventWaitNodeSetEvent);
    WRAP(cuGraphExecBatchMemOpNodeSetParams);
    WRAP(cuGraphExecNodeSetParams);
    WRAP(cuGraphNodeSetEnabled);
    WRAP(cuGraphExecUpdate_v2);
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

static int exec_item(const struct handle_ref *h, struct msg_migrate_item *it, char *why, size_t wl)
{
    pthread_mutex_lock(&lock);
    struct exec_note *x = execs;
    while (x && x->exec != (CUgraphExec)h->real) x = x->next;
    int rc = 0;
    if (!x) rc = -1, snprintf(why, wl, "executable graph %#llx was not noted", (unsigned long long)h->id);
    else if (x->changed)
        rc = -1, snprintf(why, wl, "executable graph %#llx was changed after its instantiation (%s)",
                          (unsigned long long)h->id, x->changed);
    else if (x->why[0])
        rc = -1, snprintf(why, wl, "executable graph %#llx: %s", (unsigned long long)h->id, x->why);
    struct blob now = {0}, *snap = NULL;
    char ignored[160] = "";
    uint64_t graph_id = rc == 0 ? handle_find_id(NULL, HK_GRAPH, x->graph) : 0;
    /* Unchanged since: instantiate from the rebuilt graph, so that the
     * client's node handles work with this executable graph there too. */
    if (graph_id && handle_is_server_id(graph_id)) graph_id = 0;
    if (graph_id && (describe_graph(x->graph, &now, 0, ignored, sizeof ignored) != 0 || now.n != x->snap.n ||
                     memcmp(now.p, x->snap.p, now.n) != 0))
        graph_id = 0;
    free(now.p);
    if (rc == 0 && !graph_id && (snap = new_blob()) && !(snap->p = malloc(x->snap.n ? x->snap.n : 1))) snap = NULL;
    if (rc == 0 && !graph_id && !snap) rc = -1, snprintf(why, wl, "out of host memory");
    if (snap) memcpy(snap->p, x->snap.p, snap->n = x->snap.n);
    if (rc == 0)
        *it = (struct msg_migrate_item){.kind = MIG_GRAPH_EXEC, .id = h->id, .parent = graph_id, .a = x->flags,
                                        .c = x->ctx, .data = snap ? snap->p : NULL, .data_len = snap ? snap->n : 0};
    pthread_mutex_unlock(&lock);
    return rc;
}

static int graph_item(const struct handle_ref *h, struct msg_migrate_item *it, char *why, size_t wl)
{
    struct blob *b = new_blob();
    if (!b) return snprintf(why, wl, "out of host memory"), -1;
    char w[256] = "";
    if (describe_graph((CUgraph)h->real, b, 1, w, sizeof w) != 0)
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

/* ---- arriving ---------------------------------------------------------------- */

static CUresult add_kernel(struct session *s, CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                           const struct node_rec *rec, const uint8_t *args)
{
    void *f = NULL, *kern = NULL, *ctx = NULL;
    int is_kernel = 0;
    CUresult r = rec->func ? handle_get_function(s, rec->func, &f, &is_kernel) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = handle_get(s, rec->kern, HK_KERNEL, &kern);
    if (r == CUDA_SUCCESS) r = handle_get(s, rec->ctx, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS || (!f && !kern)) return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_HANDLE;
    struct param_layout *lay = param_layout_dup(f ? f : kern, f ? is_kernel : 1);
    void **ptrs = lay ? calloc(lay->n + 1, sizeof *ptrs) : NULL;
    if (!ptrs || lay->bytes != rec->args_len) r = CUDA_ERROR_INVALID_VALUE; /* not the kernel A described */
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < lay->n; i++) ptrs[i] = (void *)(args + lay->p[i].offset);
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = (CUfunction)f, p.kern = (CUkernel)kern, p.ctx = (CUcontext)ctx;
    p.gridDimX = rec->grid[0], p.gridDimY = rec->grid[1], p.gridDimZ = rec->grid[2];
    p.blockDimX = rec->block[0], p.blockDimY = rec->block[1], p.blockDimZ = rec->block[2];
    p.sharedMemBytes = rec->shared;
    p.kernelParams = ptrs;
    if (r == CUDA_SUCCESS) r = REAL(cuGraphAddKernelNode_v2, out, g, deps, nd, &p);
    free(ptrs);
    free(lay);
    return r;
}

static CUresult array_of(struct session *s, CUmemorytype type, CUarray *a)
{
    void *h = NULL;
    if (type != CU_MEMORYTYPE_ARRAY) return CUDA_SUCCESS;
    CUresult r = handle_get(s, (uint64_t)(uintptr_t)*a, HK_ARRAY, &h);
    *a = (CUarray)h;
    return r;
}

static CUresult add_node(struct session *s, CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                         struct node_rec *rec, const uint8_t *args)
{
    void *ctx = NULL;
    CUresult r = rec->type == CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_SUCCESS : handle_get(s, rec->ctx, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS) return r;
    switch (rec->type) {
    case CU_GRAPH_NODE_TYPE_EMPTY: return REAL(cuGraphAddEmptyNode, out, g, deps, nd);
    case CU_GRAPH_NODE_TYPE_KERNEL: return add_kernel(s, out, g, deps, nd, rec, args);
    case CU_GRAPH_NODE_TYPE_MEMSET: return REAL(cuGraphAddMemsetNode, out, g, deps, nd, &rec->memset, (CUcontext)ctx);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (rec->copy.srcMemoryType == CU_MEMORYTYPE_HOST || rec->copy.dstMemoryType == CU_MEMORYTYPE_HOST)
            return CUDA_ERROR_INVALID_VALUE;
        rec->copy.srcHost = rec->copy.dstHost = rec->copy.reserved0 = rec->copy.reserved1 = NULL;
        if ((r = array_of(s, rec->copy.srcMemoryType, &rec->copy.srcArray)) != CUDA_SUCCESS ||
            (r = array_of(s, rec->copy.dstMemoryType, &rec->copy.dstArray)) != CUDA_SUCCESS)
            return r;
        return REAL(cuGraphAddMemcpyNode, out, g, deps, nd, &rec->copy, (CUcontext)ctx);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* Add the described nodes to g; with_ids, under the ids they had. */
static CUresult build_graph(struct session *s, CUgraph g, const uint8_t *p, size_t len, int with_ids, char *why,
                            size_t wl)
{
    size_t max = len / sizeof(struct node_rec), n = 0, off = 0;
    CUgraphNode *nodes = calloc(max + 1, sizeof *nodes), deps[64], *dv = deps;
    CUresult r = nodes ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    while (r == CUDA_SUCCESS && off < len) {
        struct node_rec rec;
        if (len - off < sizeof rec) break;
        memcpy(&rec, p + off, sizeof rec);
        off += sizeof rec;
        size_t need = (size_t)rec.ndeps * 4 + rec.args_len;
        if (rec.ndeps > n || rec.args_len > ARGS_MAX || len - off < need) break;
        dv = rec.ndeps <= 64 ? deps : malloc(rec.ndeps * sizeof *dv);
        if (!dv) return free(nodes), CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t j = 0; j < rec.ndeps && r == CUDA_SUCCESS; j++) {
            uint32_t k;
            memcpy(&k, p + off + 4 * (size_t)j, 4);
            if (k >= n) r = CUDA_ERROR_INVALID_VALUE;
            else dv[j] = nodes[k];
        }
        if (r == CUDA_SUCCESS) r = add_node(s, &nodes[n], g, dv, rec.ndeps, &rec, p + off + 4 * (size_t)rec.ndeps);
        if (r != CUDA_SUCCESS) snprintf(why, wl, "rebuilding a %s node failed with CUresult %d", type_name(rec.type), (int)r);
        if (r == CUDA_SUCCESS && with_ids && rec.id)
            r = handle_is_server_id(rec.id) ? handle_put_server(rec.id, HK_GRAPH_NODE, nodes[n])
                                            : handle_put(s, rec.id, HK_GRAPH_NODE, nodes[n]);
        if (dv != deps) free(dv);
        off += need;
        n++;
    }
    if (r == CUDA_SUCCESS && off != len) r = CUDA_ERROR_INVALID_VALUE, snprintf(why, wl, "a malformed graph description");
    free(nodes);
    return r;
}

static CUresult replay_graph(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUgraph g = NULL;
    CUresult r = REAL(cuGraphCreate, &g, 0);
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_GRAPH, g)) != CUDA_SUCCESS) REAL(cuGraphDestroy, g);
    if (r == CUDA_SUCCESS) r = build_graph(s, g, it->data, (size_t)it->data_len, 1, why, wl);
    return r;
}

static CUresult replay_exec(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    void *g = NULL;
    CUgraph own = NULL;
    CUgraphExec e = NULL;
    CUresult r = it->c ? session_bind_ctx(s, (uint32_t)it->c) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && it->parent) r = handle_get(s, it->parent, HK_GRAPH, &g);
    else if (r == CUDA_SUCCESS && (r = REAL(cuGraphCreate, &own, 0)) == CUDA_SUCCESS)
        r = build_graph(s, own, it->data, (size_t)it->data_len, 0, why, wl), g = own;
    /* an upload needs a stream; the executable graph is uploaded at its first launch instead */
    if (r == CUDA_SUCCESS)
        r = REAL(cuGraphInstantiateWithFlags, &e, (CUgraph)g, it->a & ~(uint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
    if (own) REAL(cuGraphDestroy, own);
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_GRAPH_EXEC, e)) != CUDA_SUCCESS) REAL(cuGraphExecDestroy, e);
    return r;
}

CUresult migrate_graphs_replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (it->kind == MIG_GRAPH && it->data) return replay_graph(s, it, why, wl);
    if (it->kind == MIG_GRAPH_EXEC) return replay_exec(s, it, why, wl);
    return CUDA_ERROR_INVALID_VALUE;
}
