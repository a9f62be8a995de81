/* srv_graph.c - the hand-written graph calls (src/client/graph.c has the
 * client side; the messages are in codegen/driver_spec.py, MESSAGES).
 *
 * Kernel node parameters arrive packed like a launch's (launch_params.h)
 * and are checked like a launch's against the layout the driver reports
 * (param_layout.h); the driver copies the argument values when the node is
 * made or changed, so the rebuilt kernelParams live only for the call. A
 * node query packs them again with that layout. Memcpy nodes take
 * device, array and unified sides; a unified address must be device
 * memory of this session, never a host address, which here would be the
 * server's own memory. A host side is the client's memory: the node
 * copies from or into a staging buffer of the session instead
 * (graph_host.h), whose bytes travel at each launch. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dispatch.h"
#include "graph_host.h"
#include "handlers.gen.h"
#include "host_quota.h"
#include "launch_params.h"
#include "param_layout.h"
#include "session.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/value_sizes.h"

/* graph_host.h */
CUresult graph_resolve_deps(srv_call *c, const uint64_t *ids, uint64_t n, CUgraphNode **out)
{
    *out = NULL;
    if (n == 0) return CUDA_SUCCESS;
    CUgraphNode *a = calloc((size_t)n, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < n; i++) {
        void *h;
        CUresult r = handle_get(c->s, ids[i], HK_GRAPH_NODE, &h);
        if (r != CUDA_SUCCESS) {
            free(a);
            return r;
        }
        a[i] = (CUgraphNode)h;
    }
    *out = a;
    return CUDA_SUCCESS;
}

/* ---- kernel nodes -------------------------------------------------------- */

/* A node's handles translated and its parameters rebuilt (free with
 * launch_params_free(&k->lp) after the driver call, on success only). */
struct kernel_node {
    CUDA_KERNEL_NODE_PARAMS p;
    struct launch_params lp;
};

static CUresult resolve_kernel_node(srv_call *c, const struct msg_kernel_node *m, struct kernel_node *k)
{
    void *f, *kern, *ctx;
    int is_kernel;
    CUresult r;
    if ((r = handle_get_function(c->s, m->func, &f, &is_kernel)) != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, m->kern, HK_KERNEL, &kern)) != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, m->ctx, HK_CONTEXT, &ctx)) != CUDA_SUCCESS) return r;
    if ((r = launch_params_build(f ? f : kern, f ? is_kernel : 1, &m->params, &k->lp)) != CUDA_SUCCESS) return r;
    memset(&k->p, 0, sizeof k->p);
    k->p.func = (CUfunction)f;
    k->p.kern = (CUkernel)kern;
    k->p.ctx = (CUcontext)ctx;
    k->p.gridDimX = m->grid[0], k->p.gridDimY = m->grid[1], k->p.gridDimZ = m->grid[2];
    k->p.blockDimX = m->block[0], k->p.blockDimY = m->block[1], k->p.blockDimZ = m->block[2];
    k->p.sharedMemBytes = m->shared_bytes;
    k->p.kernelParams = k->lp.kernel_params;
    k->p.extra = k->lp.extra;
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphAddKernelNode_v2(srv_call *c)
{
    struct msg_cuGraphAddKernelNode_v2_req m;
    if (msg_cuGraphAddKernelNode_v2_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *graph;
    CUgraphNode *deps = NULL, node = NULL;
    struct kernel_node k;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r == CUDA_SUCCESS && (r = resolve_kernel_node(c, &m.params, &k)) == CUDA_SUCCESS) {
        r = REAL(cuGraphAddKernelNode_v2, &node, (CUgraph)graph, deps, m.deps_count, &k.p);
        launch_params_free(&k.lp);
    }
    free(deps);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, m.node, HK_GRAPH_NODE, node);
    return r;
}

CUresult srv_cuGraphKernelNodeSetParams_v2(srv_call *c)
{
    struct msg_cuGraphKernelNodeSetParams_v2_req m;
    if (msg_cuGraphKernelNodeSetParams_v2_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    struct kernel_node k;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS || (r = resolve_kernel_node(c, &m.params, &k)) != CUDA_SUCCESS) return r;
    r = REAL(cuGraphKernelNodeSetParams_v2, (CUgraphNode)node, &k.p);
    launch_params_free(&k.lp);
    return r;
}

CUresult srv_cuGraphExecKernelNodeSetParams_v2(srv_call *c)
{
    struct msg_cuGraphExecKernelNodeSetParams_v2_req m;
    if (msg_cuGraphExecKernelNodeSetParams_v2_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *exec, *node;
    struct kernel_node k;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &exec);
    if (r != CUDA_SUCCESS || (r = resolve_kernel_node(c, &m.params, &k)) != CUDA_SUCCESS) return r;
    r = REAL(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec)exec, (CUgraphNode)node, &k.p);
    launch_params_free(&k.lp);
    return r;
}

/* What the driver holds for the node, packed as the client packs a launch,
 * with the layout used (none for a raw buffer). *heap is for the caller to
 * free after encoding the reply. */
static CUresult pack_node_params(const CUDA_KERNEL_NODE_PARAMS *p, struct msg_cuGraphKernelNodeGetParams_v2_rep *m,
                                 struct msg_arena *a)
{
    struct msg_launch_params *lp = &m->params.params;
    if (!p->kernelParams && p->extra) {
        const void *buf = NULL;
        size_t size = 0;
        for (int i = 0; i < 64 && p->extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = p->extra[i + 1];
            else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(const size_t *)p->extra[i + 1];
        }
        if (size && !buf) return CUDA_ERROR_NOT_SUPPORTED;
        *lp = (struct msg_launch_params){.raw = 1, .data = buf, .data_len = size};
        return CUDA_SUCCESS;
    }
    if (!p->kernelParams) return CUDA_SUCCESS;
    CUresult refused;
    struct param_layout *l = param_layout_dup(p->func ? (void *)p->func : (void *)p->kern, !p->func, &refused);
    if (!l) return refused != CUDA_SUCCESS ? refused : CUDA_ERROR_NOT_SUPPORTED;
    struct msg_param_slot *slots = msg_alloc(a, l->n * sizeof *slots + 1);
    uint8_t *bytes = msg_alloc(a, l->bytes + 1);
    if (slots && bytes) {
        memset(bytes, 0, l->bytes);
        for (uint32_t i = 0; i < l->n; i++) {
            slots[i] = (struct msg_param_slot){l->p[i].offset, l->p[i].size};
            memcpy(bytes + l->p[i].offset, p->kernelParams[i], l->p[i].size);
        }
        *lp = (struct msg_launch_params){.raw = 0, .data = bytes, .data_len = l->bytes};
        m->layout = slots;
        m->layout_count = l->n;
    }
    free(l);
    return slots && bytes ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The id of the function a node runs: the client's, if it has one. */
static uint64_t func_id(struct session *s, CUfunction f)
{
    if (!f) return 0;
    uint64_t id = handle_find_id(s, HK_FUNCTION, f);
    if (!id) id = handle_find_id(s, HK_KERNEL, f); /* a CUkernel launched as a function */
    return id ? id : handle_export(s, HK_FUNCTION, f);
}

/* The node's function name: the client may never have looked this function
 * up (a launch of a CUkernel captured as the kernel's function in its
 * context), and libraries ask (cuDNN reads the names of a captured
 * graph's kernels). */
static const char *node_func_name(const CUDA_KERNEL_NODE_PARAMS *p)
{
    const char *name = NULL;
    if (p->func && REAL(cuFuncGetName, &name, p->func) == CUDA_SUCCESS && name) return name;
    if (p->kern && REAL(cuKernelGetName, &name, p->kern) == CUDA_SUCCESS && name) return name;
    return "";
}

CUresult srv_cuGraphKernelNodeGetParams_v2(srv_call *c)
{
    struct msg_cuGraphKernelNodeGetParams_v2_req m;
    if (msg_cuGraphKernelNodeGetParams_v2_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    if ((r = REAL(cuGraphKernelNodeGetParams_v2, (CUgraphNode)node, &p)) != CUDA_SUCCESS) return r;
    struct msg_cuGraphKernelNodeGetParams_v2_rep rep = {
        .params = {
            .func = func_id(c->s, p.func),
            .kern = p.kern ? handle_export(c->s, HK_KERNEL, p.kern) : 0,
            .ctx = p.ctx ? handle_find_id(c->s, HK_CONTEXT, p.ctx) : 0,
            .grid = {p.gridDimX, p.gridDimY, p.gridDimZ},
            .block = {p.blockDimX, p.blockDimY, p.blockDimZ},
            .shared_bytes = p.sharedMemBytes,
        },
        .name = node_func_name(&p),
    };
    if ((r = pack_node_params(&p, &rep, &c->arena)) == CUDA_SUCCESS) msg_cuGraphKernelNodeGetParams_v2_rep_put(&c->out, &rep);
    return r;
}

/* ---- memcpy nodes ------------------------------------------------------------ */

/* One side of a copy, checked: a unified address must be device memory,
 * an array one of this session's. */
static CUresult side_from_msg(srv_call *c, const struct msg_copy_side *m, CUmemorytype *type, size_t *x,
                              size_t *y, size_t *z, size_t *lod, CUdeviceptr *dev, CUarray *arr, size_t *pitch,
                              size_t *height)
{
    *type = (CUmemorytype)m->type;
    *x = m->x, *y = m->y, *z = m->z, *lod = m->lod;
    *dev = m->ptr;
    *pitch = m->pitch, *height = m->height;
    switch (*type) {
    case CU_MEMORYTYPE_DEVICE:
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED: {
        /* A unified address is fine only as device memory: anything else is
         * the client's host memory, which this process cannot reach. */
        unsigned kind = 0;
        if (REAL(cuPointerGetAttribute, &kind, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, *dev) != CUDA_SUCCESS ||
            kind != CU_MEMORYTYPE_DEVICE) {
            LOG_INFO("memcpy node: unified address %#llx is not device memory", (unsigned long long)*dev);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        return CUDA_SUCCESS;
    }
    case CU_MEMORYTYPE_ARRAY: {
        void *a;
        CUresult r = handle_get(c->s, m->array, HK_ARRAY, &a);
        *arr = (CUarray)a;
        return r;
    }
    case CU_MEMORYTYPE_HOST:
        *dev = 0; /* the client's address: host_side() puts the staging buffer there */
        *x = *y = *z = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The bytes of a host side from its first one: the staging holds the host
 * side laid out as in client memory, with its pitch and height. */
static CUresult host_extent(const struct msg_graph_copy *m, const struct msg_copy_side *side, size_t *out)
{
    uint64_t w = m->width, h = m->height ? m->height : 1, d = m->depth ? m->depth : 1;
    uint64_t pitch = side->pitch ? side->pitch : w, rows = side->height ? side->height : h, n;
    if (w == 0 || pitch < w || rows < h || __builtin_mul_overflow(d - 1, rows, &n) ||
        __builtin_add_overflow(n, h - 1, &n) || __builtin_mul_overflow(n, pitch, &n) ||
        __builtin_add_overflow(n, w, &n) || n > SIZE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    /* Bytes back to the client land as one block: gaps between rows would
     * overwrite client memory the copy does not touch. */
    int to_host = side == &m->dst;
    if (to_host && n != w * h * d) {
        LOG_WARN("memcpy node: a pitched copy into client memory (rows with gaps) is not supported");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    *out = (size_t)n;
    return CUDA_SUCCESS;
}

/* A copy's host side, if any, becomes a staging buffer of records with the
 * client's ids; p then copies from or into it. */
static CUresult host_side(const struct msg_graph_copy *m, const uint64_t *ids, uint32_t nids, CUDA_MEMCPY3D *p,
                          struct graph_host_side *hs)
{
    memset(hs, 0, sizeof *hs);
    int src_host = m->src.type == CU_MEMORYTYPE_HOST, dst_host = m->dst.type == CU_MEMORYTYPE_HOST;
    if (!src_host && !dst_host) return nids ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (src_host && dst_host) {
        LOG_WARN("memcpy node: host to host copies are not supported (both sides are client memory)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    size_t extent;
    CUresult r = host_extent(m, src_host ? &m->src : &m->dst, &extent);
    if (r != CUDA_SUCCESS) return r;
    if ((r = graph_host_side_new(src_host, ids, nids, extent, hs)) != CUDA_SUCCESS) return r;
    if (src_host)
        p->srcHost = hs->staging;
    else
        p->dstHost = hs->staging;
    return CUDA_SUCCESS;
}

static CUresult copy_from_msg(srv_call *c, const struct msg_graph_copy *m, CUDA_MEMCPY3D *p)
{
    memset(p, 0, sizeof *p);
    CUresult r = side_from_msg(c, &m->src, &p->srcMemoryType, &p->srcXInBytes, &p->srcY, &p->srcZ, &p->srcLOD,
                               &p->srcDevice, &p->srcArray, &p->srcPitch, &p->srcHeight);
    CUresult r2 = side_from_msg(c, &m->dst, &p->dstMemoryType, &p->dstXInBytes, &p->dstY, &p->dstZ, &p->dstLOD,
                                &p->dstDevice, &p->dstArray, &p->dstPitch, &p->dstHeight);
    p->WidthInBytes = m->width;
    p->Height = m->height;
    p->Depth = m->depth;
    return r != CUDA_SUCCESS ? r : r2;
}

/* A host side is a staging buffer here: the client puts its own address
 * and offsets back. */
static CUresult side_to_msg(srv_call *c, CUmemorytype type, size_t x, size_t y, size_t z, size_t lod,
                            CUdeviceptr dev, CUarray arr, size_t pitch, size_t height, struct msg_copy_side *m)
{
    if (type == CU_MEMORYTYPE_HOST) x = y = z = dev = 0;
    *m = (struct msg_copy_side){
        (uint32_t)type, x, y, z, lod, dev, arr ? handle_export(c->s, HK_ARRAY, arr) : 0, pitch, height};
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphAddMemcpyNode(srv_call *c)
{
    struct msg_cuGraphAddMemcpyNode_req m;
    if (msg_cuGraphAddMemcpyNode_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    CUresult r = copy_from_msg(c, &m.copy, &p);
    if (r != CUDA_SUCCESS) return r;
    void *graph, *ctx;
    CUgraphNode *deps = NULL, node = NULL;
    struct graph_host_side hs = {0};
    r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS && m.records_count && graph_host_refuse_in_body(graph, "a memcpy node with a host side"))
        r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.ctx, HK_CONTEXT, &ctx);
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r == CUDA_SUCCESS) r = host_side(&m.copy, m.records, m.records_count, &p, &hs);
    if (r == CUDA_SUCCESS)
        r = REAL(cuGraphAddMemcpyNode, &node, (CUgraph)graph, deps, m.deps_count, &p, (CUcontext)ctx);
    free(deps);
    if (r != CUDA_SUCCESS) {
        graph_host_side_free(&hs);
        return r;
    }
    if (hs.n && graph_host_side_hold_graph(&hs, (CUgraph)graph, node) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    return handle_put(c->s, m.node, HK_GRAPH_NODE, node);
}

CUresult srv_cuGraphMemcpyNodeGetParams(srv_call *c)
{
    struct msg_cuGraphMemcpyNodeGetParams_req m;
    if (msg_cuGraphMemcpyNodeGetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    if ((r = REAL(cuGraphMemcpyNodeGetParams, node, &p)) != CUDA_SUCCESS) return r;
    struct msg_cuGraphMemcpyNodeGetParams_rep rep = {
        .copy = {.width = p.WidthInBytes, .height = p.Height, .depth = p.Depth}};
    if ((r = side_to_msg(c, p.srcMemoryType, p.srcXInBytes, p.srcY, p.srcZ, p.srcLOD, p.srcDevice, p.srcArray,
                         p.srcPitch, p.srcHeight, &rep.copy.src)) != CUDA_SUCCESS ||
        (r = side_to_msg(c, p.dstMemoryType, p.dstXInBytes, p.dstY, p.dstZ, p.dstLOD, p.dstDevice, p.dstArray,
                         p.dstPitch, p.dstHeight, &rep.copy.dst)) != CUDA_SUCCESS)
        return r;
    msg_cuGraphMemcpyNodeGetParams_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphMemcpyNodeSetParams(srv_call *c)
{
    struct msg_cuGraphMemcpyNodeSetParams_req m;
    if (msg_cuGraphMemcpyNodeSetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    CUresult r = copy_from_msg(c, &m.copy, &p);
    if (r != CUDA_SUCCESS) return r;
    /* Which graph holds the node's new staging is not known here. */
    if (m.records_count || p.srcMemoryType == CU_MEMORYTYPE_HOST || p.dstMemoryType == CU_MEMORYTYPE_HOST) {
        LOG_WARN("cuGraphMemcpyNodeSetParams: a host side is not supported on a graph's node; set it on the "
                 "executable graph (cuGraphExecMemcpyNodeSetParams) or add the node with it");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    void *node;
    r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    return r == CUDA_SUCCESS ? REAL(cuGraphMemcpyNodeSetParams, node, &p) : r;
}

CUresult srv_cuGraphExecMemcpyNodeSetParams(srv_call *c)
{
    struct msg_cuGraphExecMemcpyNodeSetParams_req m;
    if (msg_cuGraphExecMemcpyNodeSetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    CUresult r = copy_from_msg(c, &m.copy, &p);
    if (r != CUDA_SUCCESS) return r;
    void *ge, *node, *ctx;
    struct graph_host_side hs = {0};
    r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &ge);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.ctx, HK_CONTEXT, &ctx);
    if (r == CUDA_SUCCESS) r = host_side(&m.copy, m.records, m.records_count, &p, &hs);
    if (r == CUDA_SUCCESS) r = REAL(cuGraphExecMemcpyNodeSetParams, (CUgraphExec)ge, node, &p, (CUcontext)ctx);
    if (r != CUDA_SUCCESS) {
        graph_host_side_free(&hs);
        return r;
    }
    /* the node's earlier staging (if any) is no longer staged or delivered */
    return graph_host_side_hold_exec(&hs, (CUgraphExec)ge, node) != 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* ---- instantiation with parameters ---------------------------------------- */

/* The reply goes also on failure: the error node and the result say why. */
CUresult srv_cuGraphInstantiateWithParams(srv_call *c)
{
    struct msg_cuGraphInstantiateWithParams_req m;
    if (msg_cuGraphInstantiateWithParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.flags = m.flags;
    void *graph, *stream;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.upload_stream, HK_STREAM, &stream);
    if (r != CUDA_SUCCESS) return r;
    p.hUploadStream = (CUstream)stream;
    CUgraphExec ge = NULL;
    r = REAL(cuGraphInstantiateWithParams, &ge, (CUgraph)graph, m.has_params ? &p : NULL);
    c->out_on_error = 1;
    struct msg_cuGraphInstantiateWithParams_rep rep = {
        .err_node = handle_export(c->s, HK_GRAPH_NODE, p.hErrNode_out),
        .result = (uint32_t)p.result_out,
    };
    msg_cuGraphInstantiateWithParams_rep_put(&c->out, &rep);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, m.exec, HK_GRAPH_EXEC, ge);
    return r;
}

/* ---- capture info ------------------------------------------------------------- */

/* The capture's state as cuStreamGetCaptureInfo_v3's reply (v2's lacks the
 * edges). The driver sees NULL for every output the client's caller passed
 * NULL for (it checks them); the arrays are empty when not wanted. */
static CUresult capture_info(srv_call *c, int v3, uint64_t stream_id, uint8_t want,
                             struct msg_cuStreamGetCaptureInfo_v3_rep *rep)
{
    void *stream;
    CUresult r = handle_get(c->s, stream_id, HK_STREAM, &stream);
    if (r != CUDA_SUCCESS) return r;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph graph = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    CUstreamCaptureStatus *ps = want & CAPTURE_WANT_STATUS ? &status : NULL;
    cuuint64_t *pid = want & CAPTURE_WANT_ID ? &id : NULL;
    CUgraph *pg = want & CAPTURE_WANT_GRAPH ? &graph : NULL;
    const CUgraphNode **pd = want & CAPTURE_WANT_DEPS ? &deps : NULL;
    const CUgraphEdgeData **pe = want & CAPTURE_WANT_EDGES ? &edges : NULL;
    size_t *pn = want & CAPTURE_WANT_NUM ? &n : NULL;
    if (v3)
        r = real.cuStreamGetCaptureInfo_v3 ? REAL(cuStreamGetCaptureInfo_v3, (CUstream)stream, ps, pid, pg, pd, pe, pn)
                                           : CUDA_ERROR_NOT_SUPPORTED;
    else
        r = real.cuStreamGetCaptureInfo_v2 ? REAL(cuStreamGetCaptureInfo_v2, (CUstream)stream, ps, pid, pg, pd, pn)
                                           : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) return r;
    if ((pd || pe) && n > CAPTURE_MAX_DEPS) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t *ids = NULL;
    if (pd && n && !(ids = msg_alloc(&c->arena, n * sizeof *ids))) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; ids && i < n; i++) ids[i] = deps ? handle_export(c->s, HK_GRAPH_NODE, deps[i]) : 0;
    *rep = (struct msg_cuStreamGetCaptureInfo_v3_rep){
        .status = (uint32_t)status,
        .id = id,
        .graph = handle_export(c->s, HK_GRAPH, graph),
        .num = n,
        .deps = ids,
        .deps_count = pd ? (uint32_t)n : 0,
        .edges = edges,
        .edges_count = edges ? (uint32_t)n : 0,
    };
    return CUDA_SUCCESS;
}

CUresult srv_cuStreamGetCaptureInfo_v2(srv_call *c)
{
    struct msg_cuStreamGetCaptureInfo_v2_req m;
    if (msg_cuStreamGetCaptureInfo_v2_req_get(&c->in, &c->arena, &m) != 0 || (m.want & CAPTURE_WANT_EDGES))
        return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuStreamGetCaptureInfo_v3_rep info;
    CUresult r = capture_info(c, 0, m.stream, m.want, &info);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuStreamGetCaptureInfo_v2_rep rep = {
        .status = info.status, .id = info.id, .graph = info.graph, .num = info.num,
        .deps = info.deps, .deps_count = info.deps_count};
    msg_cuStreamGetCaptureInfo_v2_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuStreamGetCaptureInfo_v3(srv_call *c)
{
    struct msg_cuStreamGetCaptureInfo_v3_req m;
    if (msg_cuStreamGetCaptureInfo_v3_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuStreamGetCaptureInfo_v3_rep rep;
    CUresult r = capture_info(c, 1, m.stream, m.want, &rep);
    if (r == CUDA_SUCCESS) msg_cuStreamGetCaptureInfo_v3_rep_put(&c->out, &rep);
    return r;
}

CUresult srv_cuStreamIsCapturing(srv_call *c)
{
    struct msg_cuStreamIsCapturing_req m;
    if (msg_cuStreamIsCapturing_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.stream, HK_STREAM, &st);
    if (r != CUDA_SUCCESS) return r;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    r = REAL(cuStreamIsCapturing, (CUstream)st, &status);
    struct msg_cuStreamIsCapturing_rep rep = {(uint32_t)status};
    if (r == CUDA_SUCCESS) msg_cuStreamIsCapturing_rep_put(&c->out, &rep);
    return r;
}

/* ---- kernel node attributes ---------------------------------------------------- */

/* The member of CUkernelNodeAttrValue the id names travels
 * (scuda_kernel_node_attr_size). An id without a size here gets no bytes
 * and goes to the driver in a zeroed value: its answer (INVALID_VALUE for
 * ids without a meaning for a node) is the client's. */
CUresult srv_cuGraphKernelNodeGetAttribute(srv_call *c)
{
    struct msg_cuGraphKernelNodeGetAttribute_req m;
    if (msg_cuGraphKernelNodeGetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    size_t n = scuda_kernel_node_attr_size((CUkernelNodeAttrID)m.attr);
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    r = REAL(cuGraphKernelNodeGetAttribute, (CUgraphNode)node, (CUkernelNodeAttrID)m.attr, &v);
    if (r == CUDA_SUCCESS && n == 0) return CUDA_ERROR_NOT_SUPPORTED; /* a value SCUDA cannot size */
    if (r == CUDA_SUCCESS)
        msg_cuGraphKernelNodeGetAttribute_rep_put(&c->out, &(struct msg_cuGraphKernelNodeGetAttribute_rep){&v, n});
    return r;
}

CUresult srv_cuGraphKernelNodeSetAttribute(srv_call *c)
{
    struct msg_cuGraphKernelNodeSetAttribute_req m;
    if (msg_cuGraphKernelNodeSetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    size_t n = scuda_kernel_node_attr_size((CUkernelNodeAttrID)m.attr);
    if (m.value_len != n) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    if (n) memcpy(&v, m.value, n);
    return REAL(cuGraphKernelNodeSetAttribute, (CUgraphNode)node, (CUkernelNodeAttrID)m.attr, &v);
}

/* ---- executable graph update ----------------------------------------------------- */

/* The result comes back also when the update fails: it says why, and
 * names the node at fault (by its id, a session id when the client never
 * named it). */
CUresult srv_cuGraphExecUpdate_v2(srv_call *c)
{
    struct msg_cuGraphExecUpdate_v2_req m;
    if (msg_cuGraphExecUpdate_v2_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *exec, *graph;
    CUresult r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &exec);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r != CUDA_SUCCESS) return r;
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    r = REAL(cuGraphExecUpdate_v2, (CUgraphExec)exec, (CUgraph)graph, &info);
    c->out_on_error = 1;
    struct msg_cuGraphExecUpdate_v2_rep rep = {
        .result = (uint32_t)info.result,
        .error_node = handle_export(c->s, HK_GRAPH_NODE, info.errorNode),
        .error_from_node = handle_export(c->s, HK_GRAPH_NODE, info.errorFromNode),
    };
    msg_cuGraphExecUpdate_v2_rep_put(&c->out, &rep);
    return r;
}

/* ---- memory allocation nodes ------------------------------------------------------ */

/* The address the node returns is the driver's, known to the client from
 * the reply (device memory, as a cuMemAlloc's). */
CUresult srv_cuGraphAddMemAllocNode(srv_call *c)
{
    struct msg_cuGraphAddMemAllocNode_req m;
    if (msg_cuGraphAddMemAllocNode_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *graph;
    CUgraphNode *deps = NULL, node = NULL;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r != CUDA_SUCCESS) return r;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps = m.pool;
    p.poolProps.win32SecurityAttributes = NULL; /* a pointer of the client's: never dereferenced here */
    p.accessDescs = m.access;
    p.accessDescCount = m.access_count;
    p.bytesize = (size_t)m.bytesize;
    r = REAL(cuGraphAddMemAllocNode, &node, (CUgraph)graph, deps, m.deps_count, &p);
    free(deps);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, m.node, HK_GRAPH_NODE, node);
    if (r == CUDA_SUCCESS)
        msg_cuGraphAddMemAllocNode_rep_put(&c->out, &(struct msg_cuGraphAddMemAllocNode_rep){p.dptr});
    return r;
}

CUresult srv_cuGraphMemAllocNodeGetParams(srv_call *c)
{
    struct msg_cuGraphMemAllocNodeGetParams_req m;
    if (msg_cuGraphMemAllocNodeGetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    if ((r = REAL(cuGraphMemAllocNodeGetParams, (CUgraphNode)node, &p)) != CUDA_SUCCESS) return r;
    if (p.accessDescCount > GRAPH_MAX_ACCESS || (p.accessDescCount && !p.accessDescs)) return CUDA_ERROR_UNKNOWN;
    struct msg_cuGraphMemAllocNodeGetParams_rep rep = {
        .pool = p.poolProps,
        .access = p.accessDescs,
        .access_count = (uint32_t)p.accessDescCount,
        .bytesize = p.bytesize,
        .dptr = p.dptr,
    };
    rep.pool.win32SecurityAttributes = NULL; /* a server address means nothing to the client */
    msg_cuGraphMemAllocNodeGetParams_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* ---- batch memory-operation nodes ------------------------------------------ */

/* The operations are raw CUstreamBatchMemOpParams, as for
 * cuStreamBatchMemOp: device addresses only, nothing here dereferences
 * them. */
static CUresult mem_op_params(srv_call *c, uint64_t ctx_id, const CUstreamBatchMemOpParams *ops, uint32_t n,
                              uint32_t flags, CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    void *ctx;
    CUresult r = handle_get(c->s, ctx_id, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS) return r;
    memset(p, 0, sizeof *p);
    p->ctx = (CUcontext)ctx;
    p->count = n;
    p->paramArray = (CUstreamBatchMemOpParams *)ops; /* the request's own copy (arena) */
    p->flags = flags;
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphAddBatchMemOpNode(srv_call *c)
{
    struct msg_cuGraphAddBatchMemOpNode_req m;
    if (msg_cuGraphAddBatchMemOpNode_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *graph;
    CUgraphNode *deps = NULL, node = NULL;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = mem_op_params(c, m.ctx, m.ops, m.ops_count, m.flags, &p);
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r != CUDA_SUCCESS) return r;
    r = REAL(cuGraphAddBatchMemOpNode, &node, (CUgraph)graph, deps, m.deps_count, &p);
    free(deps);
    if (r == CUDA_SUCCESS && (r = handle_put(c->s, m.node, HK_GRAPH_NODE, node)) != CUDA_SUCCESS)
        REAL(cuGraphDestroyNode, node);
    return r;
}

CUresult srv_cuGraphBatchMemOpNodeGetParams(srv_call *c)
{
    struct msg_cuGraphBatchMemOpNodeGetParams_req m;
    if (msg_cuGraphBatchMemOpNodeGetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    if ((r = REAL(cuGraphBatchMemOpNodeGetParams, (CUgraphNode)node, &p)) != CUDA_SUCCESS) return r;
    if (p.count > GRAPH_MAX_MEM_OPS || (p.count && !p.paramArray)) return CUDA_ERROR_UNKNOWN;
    struct msg_cuGraphBatchMemOpNodeGetParams_rep rep = {
        .ctx = p.ctx ? handle_find_id(c->s, HK_CONTEXT, p.ctx) : 0,
        .ops = p.paramArray,
        .ops_count = p.count,
        .flags = p.flags,
    };
    msg_cuGraphBatchMemOpNodeGetParams_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuGraphBatchMemOpNodeSetParams(srv_call *c)
{
    struct msg_cuGraphBatchMemOpNodeSetParams_req m;
    if (msg_cuGraphBatchMemOpNodeSetParams_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *node, *exec = NULL;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p;
    CUresult r = handle_get(c->s, m.node, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS && m.exec) r = handle_get(c->s, m.exec, HK_GRAPH_EXEC, &exec);
    if (r == CUDA_SUCCESS) r = mem_op_params(c, m.ctx, m.ops, m.ops_count, m.flags, &p);
    if (r != CUDA_SUCCESS) return r;
    return exec ? REAL(cuGraphExecBatchMemOpNodeSetParams, (CUgraphExec)exec, (CUgraphNode)node, &p)
                : REAL(cuGraphBatchMemOpNodeSetParams, (CUgraphNode)node, &p);
}

/* ---- cuGraphDebugDotPrint ------------------------------------------------------ */

/* The whole of the file at path, at most GRAPH_MAX_DOT bytes, into a
 * buffer of host_quota_alloc (*out; NULL when empty). */
static CUresult read_dot(const char *path, void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        LOG_ERROR("cuGraphDebugDotPrint: cannot read the driver's file %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (st.st_size > GRAPH_MAX_DOT) {
        LOG_ERROR("cuGraphDebugDotPrint: the graph's dot text is %lld bytes, over SCUDA's limit of %d; print a "
                  "smaller graph or with fewer CU_GRAPH_DEBUG_DOT_FLAGS",
                  (long long)st.st_size, GRAPH_MAX_DOT);
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    size_t want = (size_t)st.st_size, got = 0;
    char *buf = want ? host_quota_alloc(want, "a graph's dot text") : NULL;
    if (want && !buf) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    while (got < want) {
        ssize_t k = read(fd, buf + got, want - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break; /* shorter than it said: send what is there */
        got += (size_t)k;
    }
    close(fd);
    *out = buf;
    *n = got;
    return CUDA_SUCCESS;
}

/* The driver writes a temporary file only this session can read; the
 * text goes back to the client, which writes the application's path. */
CUresult srv_cuGraphDebugDotPrint(srv_call *c)
{
    struct msg_cuGraphDebugDotPrint_req m;
    if (msg_cuGraphDebugDotPrint_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *graph;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r != CUDA_SUCCESS) return r;
    char path[] = "/tmp/scuda-dot-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        LOG_ERROR("cuGraphDebugDotPrint: cannot make a temporary file in /tmp: %s", strerror(errno));
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    close(fd);
    void *text = NULL;
    size_t n = 0;
    r = REAL(cuGraphDebugDotPrint, (CUgraph)graph, path, m.flags);
    if (r == CUDA_SUCCESS) r = read_dot(path, &text, &n);
    unlink(path);
    if (r == CUDA_SUCCESS)
        msg_cuGraphDebugDotPrint_rep_put(&c->out, &(struct msg_cuGraphDebugDotPrint_rep){text, n});
    host_quota_free(text);
    return r;
}

/* ---- cuGraphAddNode: conditional nodes and child graphs moved in ----------------- */

static CUresult add_node_real(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
    if (real.cuGraphAddNode_v2) return real.cuGraphAddNode_v2(node, g, deps, NULL, n, p);
    return REAL(cuGraphAddNode, node, g, deps, n, p);
}

/* The driver makes a conditional node's body graphs: each gets a session
 * id (handle_export), which the client uses as the graph's handle. A
 * child graph moved in is the parent's from now on, and so is its host
 * work (graph_host.h). */
CUresult srv_scuda_graph_add_node(srv_call *c)
{
    struct msg_scuda_graph_add_node_req m;
    if (msg_scuda_graph_add_node_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    int cond = m.type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
    if ((!cond && m.type != CU_GRAPH_NODE_TYPE_GRAPH) || (cond && (m.size == 0 || m.size > GRAPH_MAX_BODIES)))
        return CUDA_ERROR_INVALID_VALUE;
    void *graph, *child = NULL, *ctx = NULL;
    CUresult r = handle_get(c->s, m.graph, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS && !cond) r = handle_get(c->s, m.child, HK_GRAPH, &child);
    if (r == CUDA_SUCCESS && cond) r = handle_get(c->s, m.ctx, HK_CONTEXT, &ctx);
    if (r == CUDA_SUCCESS && !cond && !child) r = CUDA_ERROR_INVALID_VALUE;
    CUgraphNode *deps = NULL, node = NULL;
    if (r == CUDA_SUCCESS) r = graph_resolve_deps(c, m.deps, m.deps_count, &deps);
    if (r != CUDA_SUCCESS) return r;
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = (CUgraphNodeType)m.type;
    if (cond) {
        p.conditional.handle = m.cond;
        p.conditional.type = (CUgraphConditionalNodeType)m.cond_type;
        p.conditional.size = m.size;
        p.conditional.ctx = (CUcontext)ctx;
    } else {
        p.graph.graph = (CUgraph)child;
        p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    }
    r = add_node_real(&node, (CUgraph)graph, deps, m.deps_count, &p);
    free(deps);
    if (r != CUDA_SUCCESS) return r;
    if (!cond) graph_host_child_moved((CUgraph)graph, (CUgraph)child);
    for (uint32_t i = 0; cond && p.conditional.phGraph_out && i < m.size; i++)
        graph_host_body_made((CUgraph)graph, p.conditional.phGraph_out[i]);
    uint64_t *ids = cond ? msg_alloc(&c->arena, m.size * sizeof *ids) : NULL;
    if (cond && !ids)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (cond && !p.conditional.phGraph_out)
        r = CUDA_ERROR_UNKNOWN; /* a driver that made no bodies */
    for (uint32_t i = 0; r == CUDA_SUCCESS && cond && i < m.size; i++)
        if (!(ids[i] = handle_export(c->s, HK_GRAPH, p.conditional.phGraph_out[i]))) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) r = handle_put(c->s, m.node, HK_GRAPH_NODE, node);
    if (r != CUDA_SUCCESS) {
        REAL(cuGraphDestroyNode, node);
        return r;
    }
    struct msg_scuda_graph_add_node_rep rep = {.bodies = ids, .bodies_count = cond ? m.size : 0};
    msg_scuda_graph_add_node_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
