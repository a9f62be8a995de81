/* migrate_graphs_in.c - graphs and executable graphs rebuilt on the
 * server a session moves to (migrate_graphs.h). Every record comes from
 * the network: each index, length and id is checked before use, and the
 * driver refuses the rest. */
#define _GNU_SOURCE
#include "migrate_graphs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handles.h"
#include "migrate_graphs_wire.h"
#include "param_layout.h"
#include "session.h"

/* A kernel's parameters from its record: ptrs (freed by the caller)
 * point into args, placed by this server's layout of the kernel. */
static CUresult kernel_params(struct session *s, const struct node_rec *rec, const uint8_t *args,
                              CUDA_KERNEL_NODE_PARAMS *p, void ***ptrs)
{
    void *f = NULL, *kern = NULL, *ctx = NULL;
    int is_kernel = 0;
    *ptrs = NULL;
    CUresult r = rec->func ? handle_get_function(s, rec->func, &f, &is_kernel) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) r = handle_get(s, rec->kern, HK_KERNEL, &kern);
    if (r == CUDA_SUCCESS) r = handle_get(s, rec->ctx, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS || (!f && !kern)) return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_HANDLE;
    struct param_layout *lay = param_layout_dup(f ? f : kern, f ? is_kernel : 1, NULL);
    void **v = lay ? calloc(lay->n + 1, sizeof *v) : NULL;
    if (!v || lay->bytes != rec->args_len) r = CUDA_ERROR_INVALID_VALUE; /* not the kernel A described */
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < lay->n; i++) v[i] = (void *)(args + lay->p[i].offset);
    free(lay);
    if (r != CUDA_SUCCESS) return free(v), r;
    memset(p, 0, sizeof *p);
    p->func = (CUfunction)f, p->kern = (CUkernel)kern, p->ctx = (CUcontext)ctx;
    p->gridDimX = rec->grid[0], p->gridDimY = rec->grid[1], p->gridDimZ = rec->grid[2];
    p->blockDimX = rec->block[0], p->blockDimY = rec->block[1], p->blockDimZ = rec->block[2];
    p->sharedMemBytes = rec->shared;
    p->kernelParams = v;
    *ptrs = v;
    return CUDA_SUCCESS;
}

static CUresult array_of(struct session *s, CUmemorytype type, CUarray *a)
{
    void *h = NULL;
    if (type != CU_MEMORYTYPE_ARRAY) return CUDA_SUCCESS;
    CUresult r = handle_get(s, (uint64_t)(uintptr_t)*a, HK_ARRAY, &h);
    *a = (CUarray)h;
    return r;
}

/* A memcpy record's parameters with this server's arrays; never a host side. */
static CUresult copy_params(struct session *s, struct node_rec *rec)
{
    if (rec->copy.srcMemoryType == CU_MEMORYTYPE_HOST || rec->copy.dstMemoryType == CU_MEMORYTYPE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    rec->copy.srcHost = rec->copy.dstHost = rec->copy.reserved0 = rec->copy.reserved1 = NULL;
    CUresult r = array_of(s, rec->copy.srcMemoryType, &rec->copy.srcArray);
    return r == CUDA_SUCCESS ? array_of(s, rec->copy.dstMemoryType, &rec->copy.dstArray) : r;
}

static CUresult build_graph(struct session *s, CUgraph g, const uint8_t *p, size_t len, int depth, char *why, size_t wl);

/* A child graph node: the child built alone, then copied in by the add. */
static CUresult add_child(struct session *s, CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                          const struct node_rec *rec, const uint8_t *sub, int depth, char *why, size_t wl)
{
    CUgraph child = NULL;
    if (depth + 1 >= DEPTH_MAX) return snprintf(why, wl, "child graphs nest deeper than %d levels", DEPTH_MAX), CUDA_ERROR_INVALID_VALUE;
    CUresult r = REAL(cuGraphCreate, &child, 0);
    if (r == CUDA_SUCCESS) r = build_graph(s, child, sub, rec->sub_len, depth + 1, why, wl);
    if (r == CUDA_SUCCESS) r = REAL(cuGraphAddChildGraphNode, out, g, deps, nd, child);
    if (child) REAL(cuGraphDestroy, child);
    return r;
}

static CUresult add_node(struct session *s, CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t nd,
                         struct node_rec *rec, const uint8_t *tail, int depth, char *why, size_t wl)
{
    void *ctx = NULL, *ev = NULL;
    CUDA_KERNEL_NODE_PARAMS kp;
    void **ptrs = NULL;
    CUresult r = CUDA_SUCCESS;
    if (rec->type == CU_GRAPH_NODE_TYPE_MEMSET || rec->type == CU_GRAPH_NODE_TYPE_MEMCPY)
        r = handle_get(s, rec->ctx, HK_CONTEXT, &ctx);
    if (rec->type == CU_GRAPH_NODE_TYPE_EVENT_RECORD || rec->type == CU_GRAPH_NODE_TYPE_WAIT_EVENT)
        r = rec->event ? handle_get(s, rec->event, HK_EVENT, &ev) : CUDA_ERROR_INVALID_HANDLE;
    if (r != CUDA_SUCCESS) return r;
    switch (rec->type) {
    case CU_GRAPH_NODE_TYPE_EMPTY: return REAL(cuGraphAddEmptyNode, out, g, deps, nd);
    case CU_GRAPH_NODE_TYPE_KERNEL:
        if ((r = kernel_params(s, rec, tail, &kp, &ptrs)) == CUDA_SUCCESS)
            r = REAL(cuGraphAddKernelNode_v2, out, g, deps, nd, &kp);
        free(ptrs);
        return r;
    case CU_GRAPH_NODE_TYPE_MEMSET: return REAL(cuGraphAddMemsetNode, out, g, deps, nd, &rec->memset, (CUcontext)ctx);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if ((r = copy_params(s, rec)) != CUDA_SUCCESS) return r;
        return REAL(cuGraphAddMemcpyNode, out, g, deps, nd, &rec->copy, (CUcontext)ctx);
    case CU_GRAPH_NODE_TYPE_GRAPH: return add_child(s, out, g, deps, nd, rec, tail + rec->args_len, depth, why, wl);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return REAL(cuGraphAddEventRecordNode, out, g, deps, nd, (CUevent)ev);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return REAL(cuGraphAddEventWaitNode, out, g, deps, nd, (CUevent)ev);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

/* One node record of a description at *off: checked against len and the
 * n nodes before it; the dependencies' indices and tail follow. */
static int next_record(const uint8_t *p, size_t len, size_t *off, size_t n, struct node_rec *rec)
{
    if (len - *off < sizeof *rec) return -1;
    memcpy(rec, p + *off, sizeof *rec);
    *off += sizeof *rec;
    size_t need = (size_t)rec->ndeps * 4 + rec->args_len + rec->sub_len;
    if (rec->ndeps > n || rec->args_len > ARGS_MAX || len - *off < need) return -1;
    if (rec->sub_len && rec->type != CU_GRAPH_NODE_TYPE_GRAPH) return -1;
    return 0;
}

/* Add the described nodes to g. */
static CUresult build_graph(struct session *s, CUgraph g, const uint8_t *p, size_t len, int depth, char *why, size_t wl)
{
    size_t max = len / sizeof(struct node_rec), n = 0, off = 0;
    CUgraphNode *nodes = calloc(max + 1, sizeof *nodes), deps[64], *dv = deps;
    CUresult r = nodes ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    while (r == CUDA_SUCCESS && off < len) {
        struct node_rec rec;
        if (next_record(p, len, &off, n, &rec) != 0) break;
        dv = rec.ndeps <= 64 ? deps : malloc(rec.ndeps * sizeof *dv);
        if (!dv) return free(nodes), CUDA_ERROR_OUT_OF_MEMORY;
        for (uint32_t j = 0; j < rec.ndeps && r == CUDA_SUCCESS; j++) {
            uint32_t k;
            memcpy(&k, p + off + 4 * (size_t)j, 4);
            if (k >= n) r = CUDA_ERROR_INVALID_VALUE;
            else dv[j] = nodes[k];
        }
        if (r == CUDA_SUCCESS)
            r = add_node(s, &nodes[n], g, dv, rec.ndeps, &rec, p + off + 4 * (size_t)rec.ndeps, depth, why, wl);
        if (r != CUDA_SUCCESS && !why[0])
            snprintf(why, wl, "rebuilding a %s node failed with CUresult %d", graph_node_type_name(rec.type), (int)r);
        if (dv != deps) free(dv);
        off += (size_t)rec.ndeps * 4 + rec.args_len + rec.sub_len;
        n++;
    }
    if (r == CUDA_SUCCESS && off != len) r = CUDA_ERROR_INVALID_VALUE, snprintf(why, wl, "a malformed graph description");
    free(nodes);
    return r;
}

static CUresult put_id(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle)
{
    if (!id) return CUDA_SUCCESS;
    return handle_is_server_id(id) ? handle_put_server(id, kind, real_handle) : handle_put(s, id, kind, real_handle);
}

/* Give g's nodes, and its child graphs and their nodes, the ids they had:
 * g lists its nodes in the order described (a child graph is the add's
 * copy, listed as the original), which the node types confirm. */
static CUresult put_ids(struct session *s, CUgraph g, const uint8_t *p, size_t len, int depth, char *why, size_t wl)
{
    size_t n = 0, off = 0;
    CUresult r = REAL(cuGraphGetNodes, g, NULL, &n);
    CUgraphNode *v = r == CUDA_SUCCESS && n <= NODES_MAX ? calloc(n + 1, sizeof *v) : NULL;
    if (!v) return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
    if (n) r = REAL(cuGraphGetNodes, g, v, &n);
    for (size_t i = 0; r == CUDA_SUCCESS && off < len; i++) {
        struct node_rec rec;
        CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
        CUgraph child = NULL;
        if (i >= n || next_record(p, len, &off, i, &rec) != 0 || REAL(cuGraphNodeGetType, v[i], &t) != CUDA_SUCCESS ||
            (uint32_t)t != rec.type) {
            snprintf(why, wl, "a rebuilt graph lists its nodes in another order than described");
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        r = put_id(s, rec.id, HK_GRAPH_NODE, v[i]);
        const uint8_t *sub = p + off + (size_t)rec.ndeps * 4 + rec.args_len;
        if (r == CUDA_SUCCESS && rec.type == CU_GRAPH_NODE_TYPE_GRAPH && depth + 1 < DEPTH_MAX &&
            (r = REAL(cuGraphChildGraphNodeGetGraph, v[i], &child)) == CUDA_SUCCESS &&
            (r = put_id(s, rec.graph_id, HK_GRAPH, child)) == CUDA_SUCCESS)
            r = put_ids(s, child, sub, rec.sub_len, depth + 1, why, wl);
        off += (size_t)rec.ndeps * 4 + rec.args_len + rec.sub_len;
    }
    free(v);
    return r;
}

static CUresult replay_graph(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUgraph g = NULL;
    CUresult r = REAL(cuGraphCreate, &g, 0);
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_GRAPH, g)) != CUDA_SUCCESS) REAL(cuGraphDestroy, g);
    if (r == CUDA_SUCCESS) r = build_graph(s, g, it->data, (size_t)it->data_len, 0, why, wl);
    if (r == CUDA_SUCCESS) r = put_ids(s, g, it->data, (size_t)it->data_len, 0, why, wl);
    return r;
}

/* One carried change, on e instantiated from a graph whose nodes are v. */
static CUresult apply_change(struct session *s, CUgraphExec e, CUgraphNode *v, size_t n, const struct change_hdr *h,
                             const uint8_t *data, char *why, size_t wl)
{
    struct node_rec rec;
    void *ctx = NULL, **ptrs = NULL;
    CUDA_KERNEL_NODE_PARAMS kp;
    uint32_t on = 0;
    CUgraph g = NULL;
    CUgraphExecUpdateResultInfo info;
    CUresult r = CUDA_SUCCESS;
    int with_rec = h->call == CH_KERNEL || h->call == CH_MEMSET || h->call == CH_MEMCPY;
    if (h->call != CH_UPDATE && h->node >= n) return CUDA_ERROR_INVALID_VALUE;
    if (with_rec && (h->len < sizeof rec || (memcpy(&rec, data, sizeof rec), rec.args_len != h->len - sizeof rec) ||
                     rec.ndeps || rec.sub_len || rec.args_len > ARGS_MAX))
        return CUDA_ERROR_INVALID_VALUE;
    if ((h->call == CH_MEMSET || h->call == CH_MEMCPY) && (r = handle_get(s, rec.ctx, HK_CONTEXT, &ctx)) != CUDA_SUCCESS)
        return r;
    switch (h->call) {
    case CH_KERNEL:
        if ((r = kernel_params(s, &rec, data + sizeof rec, &kp, &ptrs)) == CUDA_SUCCESS)
            r = REAL(cuGraphExecKernelNodeSetParams_v2, e, v[h->node], &kp);
        free(ptrs);
        return r;
    case CH_MEMSET: return REAL(cuGraphExecMemsetNodeSetParams, e, v[h->node], &rec.memset, (CUcontext)ctx);
    case CH_MEMCPY:
        if ((r = copy_params(s, &rec)) != CUDA_SUCCESS) return r;
        return REAL(cuGraphExecMemcpyNodeSetParams, e, v[h->node], &rec.copy, (CUcontext)ctx);
    case CH_ENABLED:
        if (h->len != sizeof on) return CUDA_ERROR_INVALID_VALUE;
        memcpy(&on, data, sizeof on);
        return REAL(cuGraphNodeSetEnabled, e, v[h->node], on ? 1 : 0);
    case CH_UPDATE:
        if ((r = REAL(cuGraphCreate, &g, 0)) != CUDA_SUCCESS) return r;
        if ((r = build_graph(s, g, data, h->len, 0, why, wl)) == CUDA_SUCCESS)
            r = REAL(cuGraphExecUpdate_v2, e, g, &info);
        REAL(cuGraphDestroy, g);
        return r;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Replay the carried changes, in order, on e, instantiated from g. */
static CUresult apply_changes(struct session *s, CUgraphExec e, CUgraph g, const uint8_t *p, size_t len, char *why,
                              size_t wl)
{
    size_t n = 0, off = 0;
    CUresult r = REAL(cuGraphGetNodes, g, NULL, &n);
    CUgraphNode *v = r == CUDA_SUCCESS && n <= NODES_MAX ? calloc(n + 1, sizeof *v) : NULL;
    if (!v) return r == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : r;
    if (n) r = REAL(cuGraphGetNodes, g, v, &n);
    while (r == CUDA_SUCCESS && off < len) {
        struct change_hdr h;
        if (len - off < sizeof h) break;
        memcpy(&h, p + off, sizeof h);
        off += sizeof h;
        if (len - off < h.len) break;
        r = apply_change(s, e, v, n, &h, p + off, why, wl);
        if (r != CUDA_SUCCESS && !why[0])
            snprintf(why, wl, "replaying a change of an executable graph failed with CUresult %d", (int)r);
        off += h.len;
    }
    if (r == CUDA_SUCCESS && off != len)
        r = CUDA_ERROR_INVALID_VALUE, snprintf(why, wl, "a malformed executable graph description");
    free(v);
    return r;
}

static CUresult replay_exec(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    void *g = NULL;
    CUgraph own = NULL;
    CUgraphExec e = NULL;
    uint64_t snap_len = 0;
    size_t len = (size_t)it->data_len;
    const uint8_t *p = it->data;
    /* with a graph to instantiate from, no snapshot (an empty graph's is empty too) */
    if (len < sizeof snap_len || (memcpy(&snap_len, p, sizeof snap_len), snap_len > len - sizeof snap_len) ||
        (it->parent && snap_len))
        return snprintf(why, wl, "a malformed executable graph description"), CUDA_ERROR_INVALID_VALUE;
    p += sizeof snap_len, len -= sizeof snap_len;
    CUresult r = it->c ? session_bind_ctx(s, (uint32_t)it->c) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && it->parent) r = handle_get(s, it->parent, HK_GRAPH, &g);
    else if (r == CUDA_SUCCESS && (r = REAL(cuGraphCreate, &own, 0)) == CUDA_SUCCESS)
        r = build_graph(s, own, p, (size_t)snap_len, 0, why, wl), g = own;
    /* an upload needs a stream; the executable graph is uploaded at its first launch instead */
    if (r == CUDA_SUCCESS)
        r = REAL(cuGraphInstantiateWithFlags, &e, (CUgraph)g, it->a & ~(uint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
    /* before the graph goes: the changes name its nodes */
    if (r == CUDA_SUCCESS) r = apply_changes(s, e, (CUgraph)g, p + snap_len, len - (size_t)snap_len, why, wl);
    if (own) REAL(cuGraphDestroy, own);
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_GRAPH_EXEC, e)) != CUDA_SUCCESS) REAL(cuGraphExecDestroy, e);
    else if (r != CUDA_SUCCESS && e) REAL(cuGraphExecDestroy, e);
    return r;
}

CUresult migrate_graphs_replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (it->kind == MIG_GRAPH && it->data) return replay_graph(s, it, why, wl);
    if (it->kind == MIG_GRAPH_EXEC && it->data) return replay_exec(s, it, why, wl);
    return CUDA_ERROR_INVALID_VALUE;
}
