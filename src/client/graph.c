/* graph.c - CUDA graphs and stream capture in the client: what the
 * generator cannot encode (codegen/driver_spec.py, `manual`).
 *
 * - Kernel nodes: their parameters hold a function handle and pointers to
 *   the argument values. They travel packed exactly as a launch's do
 *   (launch_pack_params, launch.h) and the session rebuilds kernelParams.
 *   cuGraphKernelNodeGetParams hands back pointers into a copy this file
 *   keeps per node until the next query of that node.
 * - Memcpy nodes: device, unified (when it is device memory) and array
 *   sides. A host side would make the graph read or write client memory
 *   when it replays on the server: CUDA_ERROR_NOT_SUPPORTED, logged.
 * - cuStreamGetCaptureInfo_v2/_v3 return driver-owned arrays of the
 *   capture's dependencies: the client copies them into a buffer of the
 *   calling thread, valid until that thread's next such call.
 * - Capture bookkeeping for capture_status() (launch.h): a count of the
 *   captures in progress, kept by the generated begin/end stubs.
 * - Host work in captures: a device-to-host copy into client memory or a
 *   host function on a capturing stream becomes a record here (the
 *   destination, or the function) and a copy into a staging buffer or a
 *   host node in the session's graph (src/server/graph_host.c). At each
 *   replay the session sends the bytes, or "run it", before its next
 *   reply, and the reader thread delivers them (graph_host_deliver). So
 *   they happen before any synchronizing call that saw the graph finish
 *   returns, but no sooner: a host function runs only once some thread of
 *   the process waits for the session, and must not call CUDA (as
 *   natively).
 *
 * Every graph, node and executable graph handle is an id
 * (docs/architecture.md, 3.5 Virtual handles); the nodes of a captured
 * graph get ids from the session (handle_export). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "launch.h"
#include "module.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* Most dependencies a capture-info reply can carry (ids of 8 bytes). */
#define MAX_CAPTURE_DEPS (SCUDA_MAX_FRAME / 16)

/* ---- capture bookkeeping ------------------------------------------------ */

static _Atomic int captures_active;

void capture_begun(void) { atomic_fetch_add(&captures_active, 1); }

void capture_ended(CUresult r)
{
    /* cuStreamEndCapture ends the capture when it succeeds and when it
     * reports the capture invalidated; other errors (not capturing, wrong
     * thread) leave it going. Counting high only costs a query. */
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) return;
    int n = atomic_load(&captures_active);
    while (n > 0 && !atomic_compare_exchange_weak(&captures_active, &n, n - 1)) {
    }
}

CUresult capture_status(CUstream hStream, CUstreamCaptureStatus *status)
{
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (atomic_load(&captures_active) <= 0) return CUDA_SUCCESS;
    /* an error: e.g. the legacy stream during a global capture */
    return cuStreamIsCapturing(hStream, status);
}

/* PyTorch asks this before every synchronizing copy (~34 times a GPT-2
 * step). No stream can be capturing while no capture has begun in this
 * process (a stream joins a capture only through one), so the answer is
 * local then; during a capture the session answers. */
EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SHIM_ENTER(cuStreamIsCapturing, (hStream, captureStatus));
    if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load(&captures_active) <= 0) {
        *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
    }
    rpc_call c;
    rpc_begin(&c, OP_cuStreamIsCapturing);
    rpc_put_handle(&c.req, hStream);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) *captureStatus = (CUstreamCaptureStatus)wr_u32(&c.out);
    rpc_end(&c);
    return r;
}

CUresult capture_refuse(CUstream hStream, const char *what)
{
    CUstreamCaptureStatus status;
    CUresult r = capture_status(hStream, &status);
    if (r != CUDA_SUCCESS) return r;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
    LOG_WARN("stream capture: %s cannot be captured: the graph would replay on the server, which cannot "
             "reach the client's memory or run its code; returning CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
             what);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* ---- host work in captures ------------------------------------------------ */

struct host_record {
    int kind;      /* HOST_WORK_DATA: a copy; HOST_WORK_RUN: a function */
    void *dst;
    size_t n;
    CUhostFn fn;
    void *user;
};

static struct idmap host_records = IDMAP_INIT;

static CUresult capture_record(uint16_t op, struct host_record *rec, CUdeviceptr src, CUstream hStream)
{
    uint64_t id = handle_new_id();
    if (idmap_put(&host_records, id, 0, rec) != 0) {
        free(rec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rpc_call c;
    rpc_begin(&c, op);
    wb_put_u64(&c.req, id);
    if (op == OP_scuda_capture_dtoh) {
        wb_put_u64(&c.req, src);
        wb_put_u64(&c.req, rec->n);
    }
    rpc_put_handle(&c.req, hStream);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    if (r != CUDA_SUCCESS) free(idmap_del(&host_records, id));
    return r;
}

CUresult capture_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream hStream)
{
    /* one record per chunk: each replay's bytes travel in frames of their own */
    for (size_t off = 0; off < n; off += SCUDA_CHUNK) {
        struct host_record *rec = calloc(1, sizeof *rec);
        if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
        rec->kind = HOST_WORK_DATA;
        rec->dst = (char *)dst + off;
        rec->n = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        CUresult r = capture_record(OP_scuda_capture_dtoh, rec, src + off, hStream);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

CUresult capture_hostfn(CUstream hStream, CUhostFn fn, void *userData)
{
    struct host_record *rec = calloc(1, sizeof *rec);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    rec->kind = HOST_WORK_RUN;
    rec->fn = fn;
    rec->user = userData;
    return capture_record(OP_scuda_capture_hostfn, rec, 0, hStream);
}

static int skip_bytes(int fd, size_t n)
{
    uint8_t buf[4096];
    while (n) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        if (io_read_full(fd, buf, k) != 0) return -1;
        n -= k;
    }
    return 0;
}

int graph_host_deliver(int fd, uint32_t len)
{
    uint8_t head[9];
    if (len < sizeof head || io_read_full(fd, head, sizeof head) != 0) return -1;
    uint64_t id;
    memcpy(&id, head + 1, 8);
    size_t rest = len - sizeof head;
    void *v = NULL;
    struct host_record *rec = idmap_get(&host_records, id, NULL, &v) ? v : NULL;
    switch (head[0]) {
    case HOST_WORK_DATA:
        if (rec && rec->kind == HOST_WORK_DATA && rest == rec->n) return io_read_full(fd, rec->dst, rest);
        LOG_WARN("graph host work: bytes for unknown record %llu dropped", (unsigned long long)id);
        return skip_bytes(fd, rest);
    case HOST_WORK_RUN:
        if (skip_bytes(fd, rest) != 0) return -1;
        if (rec && rec->kind == HOST_WORK_RUN) rec->fn(rec->user);
        return 0;
    case HOST_WORK_FORGET:
        free(idmap_del(&host_records, id));
        return skip_bytes(fd, rest);
    default:
        return skip_bytes(fd, rest);
    }
}

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

/* Node handles as wire ids, in `small` or in *heap (free it). NULL when out
 * of memory. */
static const uint64_t *node_ids(const CUgraphNode *nodes, size_t n, uint64_t *small, size_t cap, uint64_t **heap)
{
    uint64_t *ids = small;
    *heap = NULL;
    if (n > cap && !(ids = *heap = malloc(n * sizeof *ids))) return NULL;
    for (size_t i = 0; i < n; i++) ids[i] = handle_wire_id(nodes[i]);
    return ids;
}

static CUresult add_kernel_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
                                const CUDA_KERNEL_NODE_PARAMS *p)
{
    if (!phGraphNode || (ndeps && !deps) || ndeps > GRAPH_MAX_DEPS) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphAddKernelNode_v2_req m = {.node = handle_new_id(), .graph = handle_wire_id(hGraph)};
    struct launch_pack pk;
    CUresult r = kernel_node_msg(p, &m.params, &pk);
    if (r != CUDA_SUCCESS) return r;
    uint64_t small[32], *heap;
    m.deps = node_ids(deps, ndeps, small, 32, &heap);
    m.deps_count = (uint32_t)ndeps;
    if (!m.deps) {
        launch_pack_free(&pk);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rpc_call c;
    rpc_begin(&c, OP_cuGraphAddKernelNode_v2);
    msg_cuGraphAddKernelNode_v2_req_put(&c.req, &m);
    launch_pack_free(&pk);
    free(heap);
    r = rpc_sync(&c);
    rpc_end(&c);
    if (r == CUDA_SUCCESS) *phGraphNode = (CUgraphNode)handle_from_id(m.node);
    return r;
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
        rpc_begin(&c, OP_cuGraphExecKernelNodeSetParams_v2);
        msg_cuGraphExecKernelNodeSetParams_v2_req_put(&c.req, &m);
    } else {
        struct msg_cuGraphKernelNodeSetParams_v2_req m = {handle_wire_id(hNode), k};
        rpc_begin(&c, OP_cuGraphKernelNodeSetParams_v2);
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
    p->func = (CUfunction)handle_from_id(k->func);
    p->kern = (CUkernel)handle_from_id(k->kern);
    p->ctx = (CUcontext)handle_from_id(k->ctx);
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
    rpc_begin(&c, OP_cuGraphKernelNodeGetParams_v2);
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

/* TODO: the memcpy node's request becomes a message (messages.gen.h). */
static void put_deps(wire_buf *b, const CUgraphNode *deps, size_t n)
{
    wb_put_u64(b, n);
    for (size_t i = 0; i < n; i++) rpc_put_handle(b, deps[i]);
}

/* ---- memcpy nodes ---------------------------------------------------------- */

/* As it travels, per side (source first): u32 memory type, u64 x in bytes,
 * y, z, lod, u64 device pointer, u64 array id, u64 pitch, u64 height; then
 * u64 width in bytes, height, depth. Host sides never travel. */
static CUresult put_memcpy3d(wire_buf *b, const CUDA_MEMCPY3D *p, const char *fn)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (p->srcMemoryType == CU_MEMORYTYPE_HOST || p->dstMemoryType == CU_MEMORYTYPE_HOST) {
        LOG_WARN("%s: a memcpy node with a side in host memory would read or write client memory when the graph "
                 "replays on the server; not supported", fn);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    wb_put_u32(b, (uint32_t)p->srcMemoryType);
    wb_put_u64(b, p->srcXInBytes);
    wb_put_u64(b, p->srcY);
    wb_put_u64(b, p->srcZ);
    wb_put_u64(b, p->srcLOD);
    wb_put_u64(b, p->srcDevice);
    rpc_put_handle(b, p->srcArray);
    wb_put_u64(b, p->srcPitch);
    wb_put_u64(b, p->srcHeight);
    wb_put_u32(b, (uint32_t)p->dstMemoryType);
    wb_put_u64(b, p->dstXInBytes);
    wb_put_u64(b, p->dstY);
    wb_put_u64(b, p->dstZ);
    wb_put_u64(b, p->dstLOD);
    wb_put_u64(b, p->dstDevice);
    rpc_put_handle(b, p->dstArray);
    wb_put_u64(b, p->dstPitch);
    wb_put_u64(b, p->dstHeight);
    wb_put_u64(b, p->WidthInBytes);
    wb_put_u64(b, p->Height);
    wb_put_u64(b, p->Depth);
    return CUDA_SUCCESS;
}

static void read_memcpy3d(wire_reader *in, CUDA_MEMCPY3D *p)
{
    memset(p, 0, sizeof *p);
    p->srcMemoryType = (CUmemorytype)wr_u32(in);
    p->srcXInBytes = wr_u64(in);
    p->srcY = wr_u64(in);
    p->srcZ = wr_u64(in);
    p->srcLOD = wr_u64(in);
    p->srcDevice = wr_u64(in);
    p->srcArray = (CUarray)handle_from_id(wr_u64(in));
    p->srcPitch = wr_u64(in);
    p->srcHeight = wr_u64(in);
    p->dstMemoryType = (CUmemorytype)wr_u32(in);
    p->dstXInBytes = wr_u64(in);
    p->dstY = wr_u64(in);
    p->dstZ = wr_u64(in);
    p->dstLOD = wr_u64(in);
    p->dstDevice = wr_u64(in);
    p->dstArray = (CUarray)handle_from_id(wr_u64(in));
    p->dstPitch = wr_u64(in);
    p->dstHeight = wr_u64(in);
    p->WidthInBytes = wr_u64(in);
    p->Height = wr_u64(in);
    p->Depth = wr_u64(in);
}

/* Request: u64 node id (picked here), u64 graph, u64 n, n node ids,
 * copy, u64 context. */
EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies, const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SHIM_ENTER(cuGraphAddMemcpyNode, (phGraphNode, hGraph, dependencies, numDependencies, copyParams, ctx));
    if (!phGraphNode || (numDependencies && !dependencies)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = handle_new_id();
    rpc_call c;
    rpc_begin(&c, OP_cuGraphAddMemcpyNode);
    wb_put_u64(&c.req, id);
    rpc_put_handle(&c.req, hGraph);
    put_deps(&c.req, dependencies, numDependencies);
    CUresult r = put_memcpy3d(&c.req, copyParams, "cuGraphAddMemcpyNode");
    rpc_put_handle(&c.req, ctx);
    if (r == CUDA_SUCCESS) r = rpc_sync(&c);
    rpc_end(&c);
    if (r == CUDA_SUCCESS) *phGraphNode = (CUgraphNode)handle_from_id(id);
    return r;
}

/* Request: u64 node. Reply: the copy. */
EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    SHIM_ENTER(cuGraphMemcpyNodeGetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    rpc_call c;
    rpc_begin(&c, OP_cuGraphMemcpyNodeGetParams);
    rpc_put_handle(&c.req, hNode);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        read_memcpy3d(&c.out, nodeParams);
        if (!wr_ok_end(&c.out)) {
            LOG_ERROR("cuGraphMemcpyNodeGetParams: malformed reply from the server");
            r = CUDA_ERROR_UNKNOWN;
        }
    }
    rpc_end(&c);
    return r;
}

/* Request: u64 node, the copy. */
EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    SHIM_ENTER(cuGraphMemcpyNodeSetParams, (hNode, nodeParams));
    rpc_call c;
    rpc_begin(&c, OP_cuGraphMemcpyNodeSetParams);
    rpc_put_handle(&c.req, hNode);
    CUresult r = put_memcpy3d(&c.req, nodeParams, "cuGraphMemcpyNodeSetParams");
    if (r == CUDA_SUCCESS) r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

/* Request: u64 executable graph, u64 node, the copy, u64 context. */
EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                               const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    SHIM_ENTER(cuGraphExecMemcpyNodeSetParams, (hGraphExec, hNode, copyParams, ctx));
    rpc_call c;
    rpc_begin(&c, OP_cuGraphExecMemcpyNodeSetParams);
    rpc_put_handle(&c.req, hGraphExec);
    rpc_put_handle(&c.req, hNode);
    CUresult r = put_memcpy3d(&c.req, copyParams, "cuGraphExecMemcpyNodeSetParams");
    rpc_put_handle(&c.req, ctx);
    if (r == CUDA_SUCCESS) r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

/* ---- instantiation with parameters ------------------------------------- */

/* Request: u64 executable graph id (picked here), u64 graph, u8 params
 * present, then u64 flags and u64 upload stream. Reply (also on failure):
 * u64 error node id, u32 result. */
EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SHIM_ENTER(cuGraphInstantiateWithParams, (phGraphExec, hGraph, instantiateParams));
    if (!phGraphExec) return CUDA_ERROR_INVALID_VALUE;
    uint64_t id = handle_new_id();
    rpc_call c;
    rpc_begin(&c, OP_cuGraphInstantiateWithParams);
    wb_put_u64(&c.req, id);
    rpc_put_handle(&c.req, hGraph);
    wb_put_u8(&c.req, instantiateParams != NULL);
    if (instantiateParams) {
        wb_put_u64(&c.req, instantiateParams->flags);
        rpc_put_handle(&c.req, instantiateParams->hUploadStream);
    }
    CUresult r = rpc_sync(&c);
    if (instantiateParams && c.out.left >= 12) {
        instantiateParams->hErrNode_out = (CUgraphNode)handle_from_id(wr_u64(&c.out));
        instantiateParams->result_out = (CUgraphInstantiateResult)wr_u32(&c.out);
    }
    rpc_end(&c);
    if (r == CUDA_SUCCESS) *phGraphExec = (CUgraphExec)handle_from_id(id);
    return r;
}

/* ---- capture info ---------------------------------------------------------- */

/* The dependency arrays handed out, per thread (freed at thread exit). */
struct capture_arrays {
    CUgraphNode *deps;
    CUgraphEdgeData *edges;
    size_t cap;
};

static pthread_key_t arrays_key;
static pthread_once_t arrays_once = PTHREAD_ONCE_INIT;

static void arrays_free(void *p)
{
    struct capture_arrays *a = p;
    if (!a) return;
    free(a->deps);
    free(a->edges);
    free(a);
}

static void arrays_init(void) { pthread_key_create(&arrays_key, arrays_free); }

static struct capture_arrays *thread_arrays(size_t n)
{
    pthread_once(&arrays_once, arrays_init);
    struct capture_arrays *a = pthread_getspecific(arrays_key);
    if (!a) {
        if (!(a = calloc(1, sizeof *a))) return NULL;
        pthread_setspecific(arrays_key, a);
    }
    if (n > a->cap) {
        CUgraphNode *d = realloc(a->deps, n * sizeof *d);
        if (d) a->deps = d;
        CUgraphEdgeData *e = realloc(a->edges, n * sizeof *e);
        if (e) a->edges = e;
        if (!d || !e) return NULL;
        a->cap = n;
    }
    return a;
}

enum { WANT_STATUS = 1, WANT_ID = 2, WANT_GRAPH = 4, WANT_DEPS = 8, WANT_EDGES = 16, WANT_NUM = 32 };

/* Request: u64 stream, u8 which outputs are wanted (WANT_*). Reply: u32
 * status, u64 capture id, u64 graph id, u64 n, then (with WANT_DEPS) n node
 * ids and (with WANT_EDGES) u8 present + n CUgraphEdgeData. */
static CUresult capture_info(uint16_t op, CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *num)
{
    uint8_t want = (status ? WANT_STATUS : 0) | (id ? WANT_ID : 0) | (graph ? WANT_GRAPH : 0) |
                   (deps ? WANT_DEPS : 0) | (edges ? WANT_EDGES : 0) | (num ? WANT_NUM : 0);
    rpc_call c;
    rpc_begin(&c, op);
    rpc_put_handle(&c.req, hStream);
    wb_put_u8(&c.req, want);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        CUstreamCaptureStatus st = (CUstreamCaptureStatus)wr_u32(&c.out);
        cuuint64_t cid = wr_u64(&c.out);
        uint64_t gid = wr_u64(&c.out);
        uint64_t n = wr_u64(&c.out);
        struct capture_arrays *a = NULL;
        if ((deps || edges) && n > MAX_CAPTURE_DEPS) {
            r = CUDA_ERROR_UNKNOWN;
        } else if ((deps || edges) && n && !(a = thread_arrays((size_t)n))) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            for (uint64_t i = 0; deps && i < n; i++) a->deps[i] = (CUgraphNode)handle_from_id(wr_u64(&c.out));
            int have_edges = edges ? wr_u8(&c.out) : 0;
            if (have_edges && n) wr_raw(&c.out, a->edges, (size_t)n * sizeof *a->edges);
            if (!wr_ok_end(&c.out)) {
                LOG_ERROR("cuStreamGetCaptureInfo: malformed reply from the server");
                r = CUDA_ERROR_UNKNOWN;
            } else {
                if (status) *status = st;
                if (id) *id = cid;
                if (graph) *graph = (CUgraph)handle_from_id(gid);
                if (num) *num = (size_t)n;
                if (deps) *deps = n ? a->deps : NULL;
                if (edges) *edges = have_edges && n ? a->edges : NULL;
            }
        }
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    SHIM_ENTER(cuStreamGetCaptureInfo_v2,
               (hStream, captureStatus_out, id_out, graph_out, dependencies_out, numDependencies_out));
    return capture_info(OP_cuStreamGetCaptureInfo_v2, hStream, captureStatus_out, id_out, graph_out,
                        dependencies_out, NULL, numDependencies_out);
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out)
{
    SHIM_ENTER(cuStreamGetCaptureInfo_v3, (hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                           edgeData_out, numDependencies_out));
    return capture_info(OP_cuStreamGetCaptureInfo_v3, hStream, captureStatus_out, id_out, graph_out,
                        dependencies_out, edgeData_out, numDependencies_out);
}
