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

/* u64 n, then n node ids -> a malloc'd array of real nodes (NULL when n is 0). */
static CUresult read_deps(srv_call *c, const uint8_t **ids, uint64_t *n)
{
    *n = wr_u64(&c->in);
    *ids = *n <= MAX_DEPS ? wr_view(&c->in, (size_t)*n * 8) : NULL;
    return *ids || *n == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult resolve_deps(srv_call *c, const uint8_t *ids, uint64_t n, CUgraphNode **out)
{
    *out = NULL;
    if (n == 0) return CUDA_SUCCESS;
    CUgraphNode *a = calloc((size_t)n, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id;
        void *h;
        memcpy(&id, ids + 8 * i, 8);
        CUresult r = handle_get(c->s, id, HK_GRAPH_NODE, &h);
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

struct kernel_node {
    uint64_t func_id, kern_id, ctx_id;
    CUDA_KERNEL_NODE_PARAMS p;
    struct launch_params lp;
};

/* u64 function, u64 kernel, u64 context, u32 x 7, packed parameters. */
static int read_kernel_node(wire_reader *in, struct kernel_node *k)
{
    memset(&k->p, 0, sizeof k->p);
    k->func_id = wr_u64(in);
    k->kern_id = wr_u64(in);
    k->ctx_id = wr_u64(in);
    k->p.gridDimX = wr_u32(in);
    k->p.gridDimY = wr_u32(in);
    k->p.gridDimZ = wr_u32(in);
    k->p.blockDimX = wr_u32(in);
    k->p.blockDimY = wr_u32(in);
    k->p.blockDimZ = wr_u32(in);
    k->p.sharedMemBytes = wr_u32(in);
    return launch_params_read(in, &k->lp);
}

/* Translate the handles, check the parameters against the layout of what
 * the node runs (its function, else its kernel), and rebuild the argument
 * pointers (free with launch_params_free(&k->lp) after the driver call). */
static CUresult resolve_kernel_node(srv_call *c, struct kernel_node *k)
{
    void *f, *kern, *ctx;
    int is_kernel;
    CUresult r;
    if ((r = handle_get_function(c->s, k->func_id, &f, &is_kernel)) != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, k->kern_id, HK_KERNEL, &kern)) != CUDA_SUCCESS) return r;
    if ((r = handle_get(c->s, k->ctx_id, HK_CONTEXT, &ctx)) != CUDA_SUCCESS) return r;
    if ((r = param_layout_check(f ? f : kern, f ? is_kernel : 1, &k->lp)) != CUDA_SUCCESS) return r;
    k->p.func = (CUfunction)f;
    k->p.kern = (CUkernel)kern;
    k->p.ctx = (CUcontext)ctx;
    if ((r = launch_params_build(&k->lp)) != CUDA_SUCCESS) return r;
    k->p.kernelParams = launch_params_kernel_params(&k->lp);
    k->p.extra = k->lp.extra;
    return CUDA_SUCCESS;
}

static CUDA_KERNEL_NODE_PARAMS_v1 to_v1(const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUDA_KERNEL_NODE_PARAMS_v1 q;
    memset(&q, 0, sizeof q);
    q.func = p->func;
    q.gridDimX = p->gridDimX, q.gridDimY = p->gridDimY, q.gridDimZ = p->gridDimZ;
    q.blockDimX = p->blockDimX, q.blockDimY = p->blockDimY, q.blockDimZ = p->blockDimZ;
    q.sharedMemBytes = p->sharedMemBytes;
    q.kernelParams = p->kernelParams;
    q.extra = p->extra;
    return q;
}

/* Request: u64 node id, u64 graph, deps, kernel node. */
static CUresult add_kernel_node(srv_call *c, int v1)
{
    uint64_t node_id = wr_u64(&c->in), graph_id = wr_u64(&c->in);
    const uint8_t *dep_ids;
    uint64_t ndeps;
    struct kernel_node k;
    if (read_deps(c, &dep_ids, &ndeps) != CUDA_SUCCESS || read_kernel_node(&c->in, &k) != 0 || !wr_ok_end(&c->in))
        return CUDA_ERROR_INVALID_VALUE;
    void *graph;
    CUgraphNode *deps = NULL, node = NULL;
    CUresult r = handle_get(c->s, graph_id, HK_GRAPH, &graph);
    if (r == CUDA_SUCCESS) r = resolve_deps(c, dep_ids, ndeps, &deps);
    if (r == CUDA_SUCCESS && (r = resolve_kernel_node(c, &k)) == CUDA_SUCCESS) {
        if (v1) {
            CUDA_KERNEL_NODE_PARAMS_v1 p1 = to_v1(&k.p);
            r = real.cuGraphAddKernelNode ? REAL(cuGraphAddKernelNode, &node, (CUgraph)graph, deps, ndeps, &p1)
                                          : CUDA_ERROR_NOT_SUPPORTED;
        } else {
            r = real.cuGraphAddKernelNode_v2 ? REAL(cuGraphAddKernelNode_v2, &node, (CUgraph)graph, deps, ndeps, &k.p)
                                             : CUDA_ERROR_NOT_SUPPORTED;
        }
        launch_params_free(&k.lp);
    }
    free(deps);
    if (r == CUDA_SUCCESS) r = handle_put(c->s, node_id, HK_GRAPH_NODE, node);
    return r;
}

CUresult srv_cuGraphAddKernelNode(srv_call *c) { return add_kernel_node(c, 1); }
CUresult srv_cuGraphAddKernelNode_v2(srv_call *c) { return add_kernel_node(c, 0); }

/* Request: [u64 executable graph,] u64 node, kernel node. */
static CUresult set_kernel_node(srv_call *c, int exec, int v1)
{
    uint64_t exec_id = exec ? wr_u64(&c->in) : 0, node_id = wr_u64(&c->in);
    struct kernel_node k;
    if (read_kernel_node(&c->in, &k) != 0 || !wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *ge = NULL, *node;
    CUresult r = handle_get(c->s, node_id, HK_GRAPH_NODE, &node);
    if (r == CUDA_SUCCESS && exec) r = handle_get(c->s, exec_id, HK_GRAPH_EXEC, &ge);
    if (r != CUDA_SUCCESS || (r = resolve_kernel_node(c, &k)) != CUDA_SUCCESS) return r;
    CUDA_KERNEL_NODE_PARAMS_v1 p1 = to_v1(&k.p);
    if (exec && v1)
        r = real.cuGraphExecKernelNodeSetParams ? REAL(cuGraphExecKernelNodeSetParams, (CUgraphExec)ge, node, &p1)
                                                : CUDA_ERROR_NOT_SUPPORTED;
    else if (exec)
        r = real.cuGraphExecKernelNodeSetParams_v2
                ? REAL(cuGraphExecKernelNodeSetParams_v2, (CUgraphExec)ge, node, &k.p)
                : CUDA_ERROR_NOT_SUPPORTED;
    else if (v1)
        r = real.cuGraphKernelNodeSetParams ? REAL(cuGraphKernelNodeSetParams, node, &p1) : CUDA_ERROR_NOT_SUPPORTED;
    else
        r = real.cuGraphKernelNodeSetParams_v2 ? REAL(cuGraphKernelNodeSetParams_v2, node, &k.p)
                                               : CUDA_ERROR_NOT_SUPPORTED;
    launch_params_free(&k.lp);
    return r;
}

CUresult srv_cuGraphKernelNodeSetParams(srv_call *c) { return set_kernel_node(c, 0, 1); }
CUresult srv_cuGraphKernelNodeSetParams_v2(srv_call *c) { return set_kernel_node(c, 0, 0); }
CUresult srv_cuGraphExecKernelNodeSetParams(srv_call *c) { return set_kernel_node(c, 1, 1); }
CUresult srv_cuGraphExecKernelNodeSetParams_v2(srv_call *c) { return set_kernel_node(c, 1, 0); }

/* Pack what the driver holds for the node, as the client packs a launch. */
static CUresult put_node_params(wire_buf *out, const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!p->kernelParams && p->extra) {
        const void *buf = NULL;
        size_t size = 0;
        for (int i = 0; p->extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
            if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = p->extra[i + 1];
            else if (p->extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *(const size_t *)p->extra[i + 1];
        }
        if (size && !buf) return CUDA_ERROR_NOT_SUPPORTED;
        wb_put_u32(out, LAUNCH_RAW_PARAMS);
        wb_put_blob(out, buf, size);
        return CUDA_SUCCESS;
    }
    if (!p->kernelParams) {
        wb_put_u32(out, 0);
        wb_put_u64(out, 0);
        return CUDA_SUCCESS;
    }
    struct param_layout *l = param_layout_dup(p->func ? (void *)p->func : (void *)p->kern, !p->func);
    if (!l) return CUDA_ERROR_NOT_SUPPORTED;
    wb_put_u32(out, l->n);
    for (uint32_t i = 0; i < l->n; i++) {
        wb_put_u32(out, l->p[i].offset);
        wb_put_u32(out, l->p[i].size);
    }
    wb_put_u64(out, l->bytes);
    uint8_t *dst = wb_reserve(out, l->bytes);
    if (dst) {
        memset(dst, 0, l->bytes);
        for (uint32_t i = 0; i < l->n; i++) memcpy(dst + l->p[i].offset, p->kernelParams[i], l->p[i].size);
    }
    free(l);
    return dst ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The id of the function a node runs: the client's, if it has one. */
static uint64_t func_id(struct session *s, CUfunction f)
{
    if (!f) return 0;
    uint64_t id = handle_find_id(s, HK_FUNCTION, f);
    if (!id) id = handle_find_id(s, HK_KERNEL, f); /* a CUkernel launched as a function */
    return id ? id : handle_export(s, HK_FUNCTION, f);
}

/* Request: u64 node. Reply: as read_kernel_node, the parameters packed. */
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

static CUresult get_kernel_node(srv_call *c, int v1)
{
    uint64_t node_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *node;
    CUresult r = handle_get(c->s, node_id, HK_GRAPH_NODE, &node);
    if (r != CUDA_SUCCESS) return r;
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    if (v1) {
        CUDA_KERNEL_NODE_PARAMS_v1 p1;
        memset(&p1, 0, sizeof p1);
        r = real.cuGraphKernelNodeGetParams ? REAL(cuGraphKernelNodeGetParams, node, &p1) : CUDA_ERROR_NOT_SUPPORTED;
        p.func = p1.func;
        p.gridDimX = p1.gridDimX, p.gridDimY = p1.gridDimY, p.gridDimZ = p1.gridDimZ;
        p.blockDimX = p1.blockDimX, p.blockDimY = p1.blockDimY, p.blockDimZ = p1.blockDimZ;
        p.sharedMemBytes = p1.sharedMemBytes;
        p.kernelParams = p1.kernelParams;
        p.extra = p1.extra;
    } else {
        r = real.cuGraphKernelNodeGetParams_v2 ? REAL(cuGraphKernelNodeGetParams_v2, node, &p)
                                               : CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r != CUDA_SUCCESS) return r;
    wb_put_u64(&c->out, func_id(c->s, p.func));
    wb_put_u64(&c->out, p.kern ? handle_export(c->s, HK_KERNEL, p.kern) : 0);
    wb_put_u64(&c->out, p.ctx ? handle_find_id(c->s, HK_CONTEXT, p.ctx) : 0);
    wb_put_u32(&c->out, p.gridDimX);
    wb_put_u32(&c->out, p.gridDimY);
    wb_put_u32(&c->out, p.gridDimZ);
    wb_put_u32(&c->out, p.blockDimX);
    wb_put_u32(&c->out, p.blockDimY);
    wb_put_u32(&c->out, p.blockDimZ);
    wb_put_u32(&c->out, p.sharedMemBytes);
    r = put_node_params(&c->out, &p);
    if (r == CUDA_SUCCESS) wb_put_str(&c->out, node_func_name(&p));
    return r;
}

CUresult srv_cuGraphKernelNodeGetParams(srv_call *c) { return get_kernel_node(c, 1); }
CUresult srv_cuGraphKernelNodeGetParams_v2(srv_call *c) { return get_kernel_node(c, 0); }

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
    const uint8_t *dep_ids;
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
