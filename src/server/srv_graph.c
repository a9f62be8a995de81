/* srv_graph.c - the hand-written graph calls (src/client/graph.c has the
 * client side and each request's layout).
 *
 * Kernel node parameters arrive packed like a launch's (launch_params.h)
 * and are checked like a launch's against the layout the driver reports
 * (param_layout.h); the driver copies the argument values when the node is
 * made or changed, so the rebuilt kernelParams live only for the call. A
 * node query packs them again with that layout. Memcpy nodes take
 * device, array and unified sides; a unified address must be device
 * memory of this session, never a host address, which here would be the
 * server's own memory. */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "launch_params.h"
#include "param_layout.h"
#include "session.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

#define MAX_DEPS (SCUDA_MAX_FRAME / 8)

/* TODO: the memcpy node's request becomes a message (messages.gen.h). */
static CUresult read_deps(srv_call *c, const uint64_t **ids, uint64_t *n)
{
    *n = wr_u64(&c->in);
    uint64_t *v = *n <= MAX_DEPS && *n <= c->in.left / 8 ? msg_alloc(&c->arena, (size_t)*n * 8 + 8) : NULL;
    for (uint64_t i = 0; v && i < *n; i++) v[i] = wr_u64(&c->in);
    *ids = v;
    return v ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Node ids -> a malloc'd array of real nodes (NULL when n is 0). */
static CUresult resolve_deps(srv_call *c, const uint64_t *ids, uint64_t n, CUgraphNode **out)
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
    if (r == CUDA_SUCCESS) r = resolve_deps(c, m.deps, m.deps_count, &deps);
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
        for (int i = 0; p->extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
            if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = p->extra[i + 1];
            else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(const size_t *)p->extra[i + 1];
        }
        if (size && !buf) return CUDA_ERROR_NOT_SUPPORTED;
        *lp = (struct msg_launch_params){.raw = 1, .data = buf, .data_len = size};
        return CUDA_SUCCESS;
    }
    if (!p->kernelParams) return CUDA_SUCCESS;
    struct param_layout *l = param_layout_dup(p->func ? (void *)p->func : (void *)p->kern, !p->func);
    if (!l) return CUDA_ERROR_NOT_SUPPORTED;
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

/* One side: u32 type, u64 x, y, z, lod, u64 device pointer, u64 array id,
 * u64 pitch, u64 height. */
static CUresult read_side(srv_call *c, CUmemorytype *type, size_t *x, size_t *y, size_t *z, size_t *lod,
                          CUdeviceptr *dev, CUarray *arr, size_t *pitch, size_t *height)
{
    *type = (CUmemorytype)wr_u32(&c->in);
    *x = wr_u64(&c->in);
    *y = wr_u64(&c->in);
    *z = wr_u64(&c->in);
    *lod = wr_u64(&c->in);
    *dev = wr_u64(&c->in);
    uint64_t array_id = wr_u64(&c->in);
    *pitch = wr_u64(&c->in);
    *height = wr_u64(&c->in);
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
        CUresult r = handle_get(c->s, array_id, HK_ARRAY, &a);
        *arr = (CUarray)a;
        return r;
    }
    default:
        return CUDA_ERROR_NOT_SUPPORTED; /* host memory never travels */
    }
}

static CUresult read_memcpy3d(srv_call *c, CUDA_MEMCPY3D *p)
{
    memset(p, 0, sizeof *p);
    CUresult r = read_side(c, &p->srcMemoryType, &p->srcXInBytes, &p->srcY, &p->srcZ, &p->srcLOD, &p->srcDevice,
                           &p->srcArray, &p->srcPitch, &p->srcHeight);
    CUresult r2 = read_side(c, &p->dstMemoryType, &p->dstXInBytes, &p->dstY, &p->dstZ, &p->dstLOD, &p->dstDevice,
                            &p->dstArray, &p->dstPitch, &p->dstHeight);
    p->WidthInBytes = wr_u64(&c->in);
    p->Height = wr_u64(&c->in);
    p->Depth = wr_u64(&c->in);
    return r != CUDA_SUCCESS ? r : r2;
}

static CUresult put_side(srv_call *c, CUmemorytype type, size_t x, size_t y, size_t z, size_t lod, CUdeviceptr dev,
                         CUarray arr, size_t pitch, size_t height)
{
    if (type == CU_MEMORYTYPE_HOST) return CUDA_ERROR_NOT_SUPPORTED;
    wb_put_u32(&c->out, (uint32_t)type);
    wb_put_u64(&c->out, x);
    wb_put_u64(&c->out, y);
    wb_put_u64(&c->out, z);
    wb_put_u64(&c->out, lod);
    wb_put_u64(&c->out, dev);
    wb_put_u64(&c->out, arr ? handle_export(c->s, HK_ARRAY, arr) : 0);
    wb_put_u64(&c->out, pitch);
    wb_put_u64(&c->out, height);
    return CUDA_SUCCESS;
}

/* Request: u64 node id, u64 graph, deps, copy, u64 context. */
CUresult srv_cuGraphAddMemcpyNode(srv_call *c)
{
    uint64_t node_id = wr_u64(&c->in), graph_id = wr_u64(&c->in);
    const uint64_t *dep_ids;
    uint64_t ndeps;
    if (read_deps(c, &dep_ids, &ndeps) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D p;
    CUresult rp = read_memcpy3d(c, &p);
    uint64_t ctx_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    if (rp != CUDA_SUCCESS) return rp;
    void *graph, *ctx;
    CUgraphNode *deps = NULL, node = NULL;
    CUresult r = handle_get(c->s, graph_id, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, ctx_id, HK_CONTEXT, &ctx);
    if (r == CUDA_SUCCESS) r = resolve_deps(c, dep_ids, ndeps, &deps);
    if (r == CUDA_SUCCESS) r = REAL(cuGraphAddMemcpyNode, &node, (CUgraph)graph, deps, ndeps, &p, (CUcontext)ctx);
    free(deps);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, node_id, HK_GRAPH_NODE, node);
    return r;
}

/* Request: u64 node. Reply: the copy. */
CUresult srv_cuGraphMemcpyNodeGetParams(srv_call *c)
{
    uint64_t node_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, node_id, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    if ((r = REAL(cuGraphMemcpyNodeGetParams, node, &p)) != CUDA_SUCCESS) return r;
    if ((r = put_side(c, p.srcMemoryType, p.srcXInBytes, p.srcY, p.srcZ, p.srcLOD, p.srcDevice, p.srcArray,
                      p.srcPitch, p.srcHeight)) != CUDA_SUCCESS ||
        (r = put_side(c, p.dstMemoryType, p.dstXInBytes, p.dstY, p.dstZ, p.dstLOD, p.dstDevice, p.dstArray,
                      p.dstPitch, p.dstHeight)) != CUDA_SUCCESS)
        return r;
    wb_put_u64(&c->out, p.WidthInBytes);
    wb_put_u64(&c->out, p.Height);
    wb_put_u64(&c->out, p.Depth);
    return CUDA_SUCCESS;
}

/* Request: u64 node, copy. */
CUresult srv_cuGraphMemcpyNodeSetParams(srv_call *c)
{
    uint64_t node_id = wr_u64(&c->in);
    CUDA_MEMCPY3D p;
    CUresult rp = read_memcpy3d(c, &p);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    if (rp != CUDA_SUCCESS) return rp;
    void *node;
    CUresult r = handle_get(c->s, node_id, HK_GRAPH_NODE, &node);
    return r == CUDA_SUCCESS ? REAL(cuGraphMemcpyNodeSetParams, node, &p) : r;
}

/* Request: u64 executable graph, u64 node, copy, u64 context. */
CUresult srv_cuGraphExecMemcpyNodeSetParams(srv_call *c)
{
    uint64_t exec_id = wr_u64(&c->in), node_id = wr_u64(&c->in);
    CUDA_MEMCPY3D p;
    CUresult rp = read_memcpy3d(c, &p);
    uint64_t ctx_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    if (rp != CUDA_SUCCESS) return rp;
    void *ge, *node, *ctx;
    CUresult r = handle_get(c->s, exec_id, HK_GRAPH_EXEC, &ge);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, node_id, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, ctx_id, HK_CONTEXT, &ctx);
    return r == CUDA_SUCCESS ? REAL(cuGraphExecMemcpyNodeSetParams, (CUgraphExec)ge, node, &p, (CUcontext)ctx) : r;
}

/* ---- instantiation with parameters ---------------------------------------- */

/* Request: u64 executable graph id, u64 graph, u8 params present [u64
 * flags, u64 upload stream]. Reply, also on failure: u64 error node id,
 * u32 instantiate result. */
CUresult srv_cuGraphInstantiateWithParams(srv_call *c)
{
    uint64_t exec_id = wr_u64(&c->in), graph_id = wr_u64(&c->in);
    uint8_t have = wr_u8(&c->in);
    CUDA_GRAPH_INSTANTIATE_PARAMS p;
    memset(&p, 0, sizeof p);
    uint64_t stream_id = 0;
    if (have) {
        p.flags = wr_u64(&c->in);
        stream_id = wr_u64(&c->in);
    }
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *graph, *stream;
    CUresult r = handle_get(c->s, graph_id, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = handle_get(c->s, stream_id, HK_STREAM, &stream);
    if (r != CUDA_SUCCESS) return r;
    p.hUploadStream = (CUstream)stream;
    CUgraphExec ge = NULL;
    r = REAL(cuGraphInstantiateWithParams, &ge, (CUgraph)graph, have ? &p : NULL);
    c->out_on_error = 1;
    wb_put_u64(&c->out, handle_export(c->s, HK_GRAPH_NODE, p.hErrNode_out));
    wb_put_u32(&c->out, (uint32_t)p.result_out);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, exec_id, HK_GRAPH_EXEC, ge);
    return r;
}

/* ---- capture info ------------------------------------------------------------- */

enum { WANT_STATUS = 1, WANT_ID = 2, WANT_GRAPH = 4, WANT_DEPS = 8, WANT_EDGES = 16, WANT_NUM = 32 };

/* Request: u64 stream, u8 wanted outputs. Reply: u32 status, u64 id, u64
 * graph id, u64 n, [n node ids], [u8 edges present, n CUgraphEdgeData]. */
static CUresult capture_info(srv_call *c, int v3)
{
    uint64_t stream_id = wr_u64(&c->in);
    uint8_t want = wr_u8(&c->in);
    if (!wr_ok_end(&c->in) || (!v3 && (want & WANT_EDGES))) return CUDA_ERROR_INVALID_VALUE;
    void *stream;
    CUresult r = handle_get(c->s, stream_id, HK_STREAM, &stream);
    if (r != CUDA_SUCCESS) return r;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    CUgraph graph = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 0;
    /* The driver sees the same NULLs as the client's call: it checks them. */
    CUstreamCaptureStatus *ps = want & WANT_STATUS ? &status : NULL;
    cuuint64_t *pid = want & WANT_ID ? &id : NULL;
    CUgraph *pg = want & WANT_GRAPH ? &graph : NULL;
    const CUgraphNode **pd = want & WANT_DEPS ? &deps : NULL;
    size_t *pn = want & WANT_NUM ? &n : NULL;
    if (v3)
        r = real.cuStreamGetCaptureInfo_v3 ? REAL(cuStreamGetCaptureInfo_v3, (CUstream)stream, ps, pid, pg, pd,
                                                                            want & WANT_EDGES ? &edges : NULL, pn)
                                           : CUDA_ERROR_NOT_SUPPORTED;
    else
        r = real.cuStreamGetCaptureInfo_v2 ? REAL(cuStreamGetCaptureInfo_v2, (CUstream)stream, ps, pid, pg, pd, pn)
                                           : CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) return r;
    if ((deps || edges) && n > MAX_DEPS / 2) return CUDA_ERROR_OUT_OF_MEMORY;
    wb_put_u32(&c->out, (uint32_t)status);
    wb_put_u64(&c->out, id);
    wb_put_u64(&c->out, handle_export(c->s, HK_GRAPH, graph));
    wb_put_u64(&c->out, n);
    if (want & WANT_DEPS)
        for (size_t i = 0; i < n; i++) wb_put_u64(&c->out, deps ? handle_export(c->s, HK_GRAPH_NODE, deps[i]) : 0);
    if (want & WANT_EDGES) {
        wb_put_u8(&c->out, edges != NULL);
        if (edges && n) wb_put_raw(&c->out, edges, n * sizeof *edges);
    }
    return CUDA_SUCCESS;
}

CUresult srv_cuStreamGetCaptureInfo_v2(srv_call *c) { return capture_info(c, 0); }
CUresult srv_cuStreamGetCaptureInfo_v3(srv_call *c) { return capture_info(c, 1); }

/* Request: u64 stream. Reply: u32 capture status. */
CUresult srv_cuStreamIsCapturing(srv_call *c)
{
    uint64_t id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, id, HK_STREAM, &st);
    if (r != CUDA_SUCCESS) return r;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    r = REAL(cuStreamIsCapturing, (CUstream)st, &status);
    if (r == CUDA_SUCCESS) wb_put_u32(&c->out, (uint32_t)status);
    return r;
}
