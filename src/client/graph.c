/* graph.c - CUDA graph nodes in the client: what the generator cannot
 * encode (codegen/driver_spec.py, `manual`). Stream capture is capture.c.
 *
 * - Kernel nodes: their parameters hold a function handle and pointers to
 *   the argument values. They travel packed exactly as a launch's do
 *   (launch_pack_params, launch.h) and the session rebuilds kernelParams.
 *   cuGraphKernelNodeGetParams hands back pointers into a copy this file
 *   keeps per node until the next query of that node.
 * - Memcpy nodes: device, unified (when it is device memory) and array
 *   sides travel as they are. A host side (one at most) is client memory,
 *   which the graph cannot reach when it replays on the server: the
 *   session copies from or into a staging buffer instead, and the bytes
 *   travel at each launch (graph_launch.c) or come back after it, as
 *   upload or data records (capture.h) with an id per SCUDA_CHUNK.
 *
 * Every graph, node and executable graph handle is an id
 * (docs/architecture.md, 3.5 Virtual handles); the nodes of a captured
 * graph get ids from the session (handle_export). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "servers.h"
#include "graph.h"
#include "graph_launch.h"
#include "launch.h"
#include "module.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* ---- kernel node parameters ---------------------------------------------- */

/* A node's parameters as they travel (the kernel_node record of
 * messages.gen.h). The kernel and context count only without a function,
 * as in the driver. pk holds the packed bytes until the request is
 * encoded (launch_pack_free). */
static CUresult kernel_node_msg(const CUDA_KERNEL_NODE_PARAMS *p, struct msg_kernel_node *m, struct launch_pack *pk)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const void *f = p->func ? (const void *)p->func : (const void *)p->kern;
    struct func_desc *d = func_lookup(f);
    if (!d) return f ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    if (p->kernelParams && p->extra) return CUDA_ERROR_INVALID_VALUE;
    if (!d->layout_known && !p->extra) {
        CUresult r = func_layout(f, d);
        if (r != CUDA_SUCCESS) return r;
    }
    CUresult r = launch_pack_params(d, p->kernelParams, p->extra, pk);
    if (r != CUDA_SUCCESS) return r;
    *m = (struct msg_kernel_node){
        .func = handle_wire_id(p->func),
        .kern = p->func ? 0 : handle_wire_id(p->kern),
        .ctx = p->func ? 0 : handle_wire_id(p->ctx),
        .grid = {p->gridDimX, p->gridDimY, p->gridDimZ},
        .block = {p->blockDimX, p->blockDimY, p->blockDimZ},
        .shared_bytes = p->sharedMemBytes,
        .params = pk->params,
    };
    return CUDA_SUCCESS;
}

/* The v1 struct is the v2 one without kern and ctx: the client sends v2. */
static CUDA_KERNEL_NODE_PARAMS from_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    q.func = p->func;
    q.gridDimX = p->gridDimX, q.gridDimY = p->gridDimY, q.gridDimZ = p->gridDimZ;
    q.blockDimX = p->blockDimX, q.blockDimY = p->blockDimY, q.blockDimZ = p->blockDimZ;
    q.sharedMemBytes = p->sharedMemBytes;
    q.kernelParams = p->kernelParams;
    q.extra = p->extra;
    return q;
}

static void to_v1(const CUDA_KERNEL_NODE_PARAMS *p, CUDA_KERNEL_NODE_PARAMS_v1 *q)
{
    memset(q, 0, sizeof *q);
    q->func = p->func;
    q->gridDimX = p->gridDimX, q->gridDimY = p->gridDimY, q->gridDimZ = p->gridDimZ;
    q->blockDimX = p->blockDimX, q->blockDimY = p->blockDimY, q->blockDimZ = p->blockDimZ;
    q->sharedMemBytes = p->sharedMemBytes;
    q->kernelParams = p->kernelParams;
    q->extra = p->extra;
}

static CUresult add_kernel_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct graph_add a;
    CUresult r = graph_add_begin(&a, phGraphNode, deps, ndeps);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuGraphAddKernelNode_v2_req m = {
        .node = a.node, .graph = handle_wire_id(hGraph), .deps = a.deps, .deps_count = a.deps_count};
    struct launch_pack pk;
    r = kernel_node_msg(p, &m.params, &pk);
    if (r != CUDA_SUCCESS) return graph_add_end(&a, r, phGraphNode);
    msg_cuGraphAddKernelNode_v2_req_put(graph_add_request(&a, OP_cuGraphAddKernelNode_v2), &m);
    launch_pack_free(&pk);
    return graph_add_end(&a, graph_add_sync(&a), phGraphNode);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphAddKernelNode_v2, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SHIM_ENTER(cuGraphAddKernelNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = from_v1(nodeParams);
    return add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, &p);
}

/* cuGraphKernelNodeSetParams, or with hExec cuGraphExecKernelNodeSetParams. */
static CUresult set_kernel_node(CUgraphExec hExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *p)
{
    struct msg_kernel_node k;
    struct launch_pack pk;
    CUresult r = kernel_node_msg(p, &k, &pk);
    if (r != CUDA_SUCCESS) return r;
    rpc_call c;
    if (hExec) {
        struct msg_cuGraphExecKernelNodeSetParams_v2_req m = {handle_wire_id(hExec), handle_wire_id(hNode), k};
        rpc_begin_on(&c, OP_cuGraphExecKernelNodeSetParams_v2, server_of_handle(hExec));
        msg_cuGraphExecKernelNodeSetParams_v2_req_put(&c.req, &m);
    } else {
        struct msg_cuGraphKernelNodeSetParams_v2_req m = {handle_wire_id(hNode), k};
        rpc_begin_on(&c, OP_cuGraphKernelNodeSetParams_v2, server_of_handle(hNode));
        msg_cuGraphKernelNodeSetParams_v2_req_put(&c.req, &m);
    }
    launch_pack_free(&pk);
    r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphKernelNodeSetParams_v2, (hNode, nodeParams));
    return set_kernel_node(NULL, hNode, nodeParams);
}

EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SHIM_ENTER(cuGraphKernelNodeSetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = from_v1(nodeParams);
    return set_kernel_node(NULL, hNode, &p);
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphExecKernelNodeSetParams_v2, (hGraphExec, hNode, nodeParams));
    if (!hGraphExec) return CUDA_ERROR_INVALID_VALUE;
    return set_kernel_node(hGraphExec, hNode, nodeParams);
}

EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SHIM_ENTER(cuGraphExecKernelNodeSetParams, (hGraphExec, hNode, nodeParams));
    if (!nodeParams || !hGraphExec) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p = from_v1(nodeParams);
    return set_kernel_node(hGraphExec, hNode, &p);
}

/* The argument values a node query handed out, one block per node:
 * [kernelParams pointers | extra array | size | packed bytes]. The driver's
 * own pointers stay valid until the node changes; these stay valid until
 * the next query of the same node. */
static struct idmap node_args = IDMAP_INIT;

/* The reply's parameters as the driver hands them out: kernelParams
 * pointers into a copy of the packed bytes, or an `extra` array around it. */
static CUresult unpack_kernel_node(uint64_t node, const struct msg_cuGraphKernelNodeGetParams_v2_rep *m,
                                   CUDA_KERNEL_NODE_PARAMS *p)
{
    const struct msg_kernel_node *k = &m->params;
    const struct msg_launch_params *lp = &k->params;
    uint32_t n = lp->raw ? 0 : m->layout_count;
    size_t len = (size_t)lp->data_len;
    memset(p, 0, sizeof *p);
    unsigned tag = handle_tag_of(node); /* the reply's ids are the node's server's */
    p->func = (CUfunction)handle_from_id(handle_tag(k->func, tag));
    p->kern = (CUkernel)handle_from_id(handle_tag(k->kern, tag));
    p->ctx = (CUcontext)handle_from_id(handle_tag(k->ctx, tag));
    p->gridDimX = k->grid[0], p->gridDimY = k->grid[1], p->gridDimZ = k->grid[2];
    p->blockDimX = k->block[0], p->blockDimY = k->block[1], p->blockDimZ = k->block[2];
    p->sharedMemBytes = k->shared_bytes;
    if (!m->name) return CUDA_ERROR_UNKNOWN;
    /* pointers, then the extra array (5 words), the size word, the bytes */
    size_t head = ((size_t)n + 6) * sizeof(void *);
    char *block = malloc(head + (len ? len : 1));
    if (!block) return CUDA_ERROR_OUT_OF_MEMORY;
    void **ptrs = (void **)block;
    char *data = block + head;
    if (len) memcpy(data, lp->data, len);
    for (uint32_t i = 0; i < n; i++) {
        if ((uint64_t)m->layout[i].offset + m->layout[i].size > len) {
            free(block);
            return CUDA_ERROR_UNKNOWN;
        }
        ptrs[i] = data + m->layout[i].offset;
    }
    /* the layout checked: a function no module told of can be set again */
    func_adopt(k->func ? k->func : k->kern, m->name, n, lp->raw ? NULL : m->layout, len);
    if (lp->raw) {
        void **extra = ptrs + n;
        size_t *size = (size_t *)(extra + 5);
        *size = len;
        extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
        extra[1] = data;
        extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
        extra[3] = size;
        extra[4] = CU_LAUNCH_PARAM_END;
        p->extra = extra;
    } else {
        p->kernelParams = n ? ptrs : NULL;
    }
    free(idmap_del(&node_args, node));
    if (idmap_put(&node_args, node, 0, block) != 0) {
        free(block);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult get_kernel_node(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphKernelNodeGetParams_v2_req m = {handle_wire_id(hNode)};
    struct msg_cuGraphKernelNodeGetParams_v2_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphKernelNodeGetParams_v2, server_of_handle(hNode));
    msg_cuGraphKernelNodeGetParams_v2_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        r = msg_cuGraphKernelNodeGetParams_v2_rep_get(&c.out, &c.arena, &rep) == 0
                ? unpack_kernel_node((uint64_t)(uintptr_t)hNode, &rep, p)
                : CUDA_ERROR_UNKNOWN;
        if (r == CUDA_ERROR_UNKNOWN) LOG_ERROR("cuGraphKernelNodeGetParams: malformed reply from the server");
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphKernelNodeGetParams_v2, (hNode, nodeParams));
    return get_kernel_node(hNode, nodeParams);
}

EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    SHIM_ENTER(cuGraphKernelNodeGetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS p;
    CUresult r = get_kernel_node(hNode, &p);
    if (r == CUDA_SUCCESS) to_v1(&p, nodeParams);
    return r;
}

/* ---- memcpy nodes ---------------------------------------------------------- */

/* A node's host side as the application gave it, for its queries. */
struct host_side {
    int is_src;
    void *host;
    size_t x, y, z;
};
static struct idmap node_host_sides = IDMAP_INIT; /* node id -> struct host_side */

/* The records of a copy's host side (none without one): one per
 * SCUDA_CHUNK of its extent, from its first byte. */
struct side_records {
    uint64_t small[4], *ids;
    uint32_t n;
    struct host_side side;
};

static void side_records_drop(struct side_records *sr)
{
    for (uint32_t i = 0; i < sr->n; i++) capture_record_drop(sr->ids[i]);
    if (sr->ids != sr->small) free(sr->ids);
    sr->n = 0;
}

static CUresult side_records_make(const CUDA_MEMCPY3D *p, struct side_records *sr, const char *fn)
{
    memset(sr, 0, sizeof *sr);
    sr->ids = sr->small;
    int src = p->srcMemoryType == CU_MEMORYTYPE_HOST, dst = p->dstMemoryType == CU_MEMORYTYPE_HOST;
    if (!src && !dst) return CUDA_SUCCESS;
    if (src && dst) {
        LOG_WARN("%s: a host-to-host memcpy node is not supported (the graph replays on the server)", fn);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    size_t w = p->WidthInBytes, h = p->Height ? p->Height : 1, d = p->Depth ? p->Depth : 1;
    size_t pitch = src ? p->srcPitch : p->dstPitch, rows = src ? p->srcHeight : p->dstHeight;
    pitch = pitch ? pitch : w;
    rows = rows ? rows : h;
    size_t n;
    if (!w || pitch < w || rows < h || __builtin_mul_overflow(d - 1, rows, &n) ||
        __builtin_add_overflow(n, h - 1, &n) || __builtin_mul_overflow(n, pitch, &n) ||
        __builtin_add_overflow(n, w, &n))
        return CUDA_ERROR_INVALID_VALUE;
    if (dst && n != w * h * d) {
        LOG_WARN("%s: a pitched memcpy node into host memory (rows with gaps) is not supported: the bytes come "
                 "back as one block", fn);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    sr->side = (struct host_side){src, (void *)(src ? p->srcHost : p->dstHost), src ? p->srcXInBytes : p->dstXInBytes,
                                  src ? p->srcY : p->dstY, src ? p->srcZ : p->dstZ};
    if (!sr->side.host) return CUDA_ERROR_INVALID_VALUE;
    char *base = (char *)sr->side.host + sr->side.x + (sr->side.z * rows + sr->side.y) * pitch;
    size_t count = (n + SCUDA_CHUNK - 1) / SCUDA_CHUNK;
    if (count > sizeof sr->small / sizeof *sr->small && !(sr->ids = malloc(count * sizeof *sr->ids)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t off = 0; off < n; off += SCUDA_CHUNK) {
        size_t k = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        CUresult r = capture_record_new(src ? CAPTURE_UPLOAD : HOST_WORK_DATA, base + off, k, &sr->ids[sr->n]);
        if (r != CUDA_SUCCESS) {
            side_records_drop(sr);
            return r;
        }
        sr->n++;
    }
    return CUDA_SUCCESS;
}

/* The call went through: its records are the session's (kept), and the
 * node's host side is remembered for its queries. Else they are dropped. */
static void side_records_done(struct side_records *sr, CUresult r, uint64_t node)
{
    if (r != CUDA_SUCCESS) {
        side_records_drop(sr);
        return;
    }
    free(idmap_del(&node_host_sides, node));
    struct host_side *hs = sr->n ? malloc(sizeof *hs) : NULL;
    if (hs) *hs = sr->side;
    if (hs && idmap_put(&node_host_sides, node, 0, hs) != 0) free(hs);
    if (sr->ids != sr->small) free(sr->ids);
}

/* A copy as it travels (the graph_copy record of messages.gen.h). A host
 * side's address stays here (side_records_make). */
static CUresult copy_msg(const CUDA_MEMCPY3D *p, struct msg_graph_copy *m, const char *fn)
{
    (void)fn;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *m = (struct msg_graph_copy){
        .src = {(uint32_t)p->srcMemoryType, p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD, p->srcDevice,
                handle_wire_id(p->srcArray), p->srcPitch, p->srcHeight},
        .dst = {(uint32_t)p->dstMemoryType, p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD, p->dstDevice,
                handle_wire_id(p->dstArray), p->dstPitch, p->dstHeight},
        .width = p->WidthInBytes,
        .height = p->Height,
        .depth = p->Depth,
    };
    return CUDA_SUCCESS;
}

/* tag: the server tag of the node whose parameters m are (handle_tag.h). */
static void copy_from_msg(const struct msg_graph_copy *m, CUDA_MEMCPY3D *p, unsigned tag)
{
    memset(p, 0, sizeof *p);
    p->srcMemoryType = (CUmemorytype)m->src.type;
    p->srcXInBytes = m->src.x, p->srcY = m->src.y, p->srcZ = m->src.z, p->srcLOD = m->src.lod;
    p->srcDevice = m->src.ptr;
    p->srcArray = (CUarray)handle_from_id(handle_tag(m->src.array, tag));
    p->srcPitch = m->src.pitch, p->srcHeight = m->src.height;
    p->dstMemoryType = (CUmemorytype)m->dst.type;
    p->dstXInBytes = m->dst.x, p->dstY = m->dst.y, p->dstZ = m->dst.z, p->dstLOD = m->dst.lod;
    p->dstDevice = m->dst.ptr;
    p->dstArray = (CUarray)handle_from_id(handle_tag(m->dst.array, tag));
    p->dstPitch = m->dst.pitch, p->dstHeight = m->dst.height;
    p->WidthInBytes = m->width, p->Height = m->height, p->Depth = m->depth;
}

/* A host side comes back as the application gave it. */
static void host_side_restore(uint64_t node, CUDA_MEMCPY3D *p)
{
    void *v = NULL;
    struct host_side *hs = idmap_get(&node_host_sides, node, NULL, &v) ? v : NULL;
    if (!hs) return;
    if (hs->is_src && p->srcMemoryType == CU_MEMORYTYPE_HOST)
        p->srcHost = hs->host, p->srcXInBytes = hs->x, p->srcY = hs->y, p->srcZ = hs->z;
    if (!hs->is_src && p->dstMemoryType == CU_MEMORYTYPE_HOST)
        p->dstHost = hs->host, p->dstXInBytes = hs->x, p->dstY = hs->y, p->dstZ = hs->z;
}

EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SHIM_ENTER(cuGraphAddMemcpyNode, (phGraphNode, hGraph, dependencies, numDependencies, copyParams, ctx));
    struct graph_add a;
    CUresult r = graph_add_begin(&a, phGraphNode, dependencies, numDependencies);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuGraphAddMemcpyNode_req m = {.node = a.node,
                                             .graph = handle_wire_id(hGraph),
                                             .ctx = handle_wire_id(ctx),
                                             .deps = a.deps,
                                             .deps_count = a.deps_count};
    r = copy_msg(copyParams, &m.copy, "cuGraphAddMemcpyNode");
    if (r != CUDA_SUCCESS) return graph_add_end(&a, r, phGraphNode);
    struct side_records sr;
    r = side_records_make(copyParams, &sr, "cuGraphAddMemcpyNode");
    if (r != CUDA_SUCCESS) return graph_add_end(&a, r, phGraphNode);
    m.records = sr.ids;
    m.records_count = sr.n;
    msg_cuGraphAddMemcpyNode_req_put(graph_add_request(&a, OP_cuGraphAddMemcpyNode), &m);
    r = graph_add_sync(&a);
    side_records_done(&sr, r, m.node);
    return graph_add_end(&a, r, phGraphNode);
}

EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    SHIM_ENTER(cuGraphMemcpyNodeGetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphMemcpyNodeGetParams_req m = {handle_wire_id(hNode)};
    struct msg_cuGraphMemcpyNodeGetParams_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphMemcpyNodeGetParams, server_of_handle(hNode));
    msg_cuGraphMemcpyNodeGetParams_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuGraphMemcpyNodeGetParams_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphMemcpyNodeGetParams: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS) {
        copy_from_msg(&rep.copy, nodeParams, handle_tag_of((uint64_t)(uintptr_t)hNode));
        host_side_restore(m.node, nodeParams);
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    SHIM_ENTER(cuGraphMemcpyNodeSetParams, (hNode, nodeParams));
    struct msg_cuGraphMemcpyNodeSetParams_req m = {.node = handle_wire_id(hNode)};
    CUresult r = copy_msg(nodeParams, &m.copy, "cuGraphMemcpyNodeSetParams");
    if (r != CUDA_SUCCESS) return r;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphMemcpyNodeSetParams, server_of_handle(hNode));
    msg_cuGraphMemcpyNodeSetParams_req_put(&c.req, &m);
    r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SHIM_ENTER(cuGraphExecMemcpyNodeSetParams, (hGraphExec, hNode, copyParams, ctx));
    struct msg_cuGraphExecMemcpyNodeSetParams_req m = {
        .exec = handle_wire_id(hGraphExec), .node = handle_wire_id(hNode), .ctx = handle_wire_id(ctx)};
    CUresult r = copy_msg(copyParams, &m.copy, "cuGraphExecMemcpyNodeSetParams");
    if (r != CUDA_SUCCESS) return r;
    struct side_records sr;
    if ((r = side_records_make(copyParams, &sr, "cuGraphExecMemcpyNodeSetParams")) != CUDA_SUCCESS) return r;
    m.records = sr.ids;
    m.records_count = sr.n;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphExecMemcpyNodeSetParams, server_of_handle(hGraphExec));
    msg_cuGraphExecMemcpyNodeSetParams_req_put(&c.req, &m);
    r = rpc_sync(&c);
    rpc_end(&c);
    if (r == CUDA_SUCCESS) graph_launch_forget(hGraphExec); /* its uploads changed */
    if (r != CUDA_SUCCESS) side_records_drop(&sr);
    else if (sr.ids != sr.small) free(sr.ids);
    return r;
}

/* ---- instantiation with parameters ------------------------------------- */

/* The reply comes also on failure: the node at fault and the reason go to
 * the caller's parameters either way. */
EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SHIM_ENTER(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
    if (!phGraphExec) return CUDA_ERROR_INVALID_VALUE;
    struct server *srv = server_of_handle(hGraph); /* the exec is made where its graph is */
    struct msg_cuGraphInstantiateWithParams_req m = {
        .exec = handle_tag(handle_new_id(), (unsigned)srv->index),
        .graph = handle_wire_id(hGraph),
        .has_params = instantiateParams != NULL,
        .flags = instantiateParams ? instantiateParams->flags : 0,
        .upload_stream = instantiateParams ? handle_wire_id(instantiateParams->hUploadStream) : 0,
    };
    struct msg_cuGraphInstantiateWithParams_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphInstantiateWithParams, srv);
    msg_cuGraphInstantiateWithParams_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    /* a failure the session met before instantiating has no outputs */
    int have = msg_cuGraphInstantiateWithParams_rep_get(&c.out, &c.arena, &rep) == 0;
    if (r == CUDA_SUCCESS && !have) {
        LOG_ERROR("cuGraphInstantiateWithParams: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (instantiateParams && have) {
        instantiateParams->hErrNode_out = (CUgraphNode)handle_from_server(c.srv, rep.err_node);
        instantiateParams->result_out = (CUgraphInstantiateResult)rep.result;
    }
    rpc_end(&c);
    if (r == CUDA_SUCCESS) *phGraphExec = (CUgraphExec)handle_from_id(m.exec);
    return r;
}
