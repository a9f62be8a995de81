/* graph_node.c - the generic graph-node calls: cuGraphAddNode,
 * cuGraphNodeSetParams and cuGraphExecNodeSetParams take a
 * CUgraphNodeParams, a union over every node type. Most types this client
 * forwards have their own call (graph.c and the generated stubs), so
 * these unpack the union and call it: one path per node type, whichever
 * API the program uses. XLA builds its command buffers this way.
 *
 * Two types exist only here, with an op of their own
 * (scuda_graph_add_node): a conditional node, whose body graphs the
 * driver makes at the add (their session ids come back; the array the
 * application gets is kept per node, as the driver's is the node's), and
 * a child graph moved into its parent (the parent owns it from then on).
 *
 * External semaphore nodes return CUDA_ERROR_NOT_SUPPORTED and log the
 * type once. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "graph.h"
#include "servers.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

static CUresult unsupported_type(const char *call, CUgraphNodeType type)
{
    static _Atomic uint32_t logged; /* one bit per type */
    uint32_t bit = (unsigned)type < 32 ? 1u << (unsigned)type : 1u << 31;
    if (!(atomic_fetch_or(&logged, bit) & bit))
        LOG_WARN("%s of a node of type %d is not supported by SCUDA; returning CUDA_ERROR_NOT_SUPPORTED", call,
                 (int)type);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* CUDA_KERNEL_NODE_PARAMS_v3 and CUDA_KERNEL_NODE_PARAMS (v2) have the same
 * fields in the same order. */
static CUDA_KERNEL_NODE_PARAMS kernel_params(const CUgraphNodeParams *p)
{
    _Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == sizeof(CUDA_KERNEL_NODE_PARAMS_v3), "kernel params");
    CUDA_KERNEL_NODE_PARAMS k;
    memcpy(&k, &p->kernel, sizeof k);
    return k;
}

static CUDA_MEMSET_NODE_PARAMS memset_params(const CUgraphNodeParams *p)
{
    CUDA_MEMSET_NODE_PARAMS m = {
        .dst = p->memset.dst,
        .pitch = p->memset.pitch,
        .value = p->memset.value,
        .elementSize = p->memset.elementSize,
        .width = p->memset.width,
        .height = p->memset.height,
    };
    return m;
}

/* CUDA_HOST_NODE_PARAMS_v2 begins as CUDA_HOST_NODE_PARAMS does (fn,
 * userData); v2 adds syncMode, which a replayed node cannot honour (the
 * client runs the function when the session's frame arrives). */
_Static_assert(offsetof(CUDA_HOST_NODE_PARAMS_v2, fn) == offsetof(CUDA_HOST_NODE_PARAMS, fn) &&
                   offsetof(CUDA_HOST_NODE_PARAMS_v2, userData) == offsetof(CUDA_HOST_NODE_PARAMS, userData),
               "host node params");

/* CUDA_BATCH_MEM_OP_NODE_PARAMS_v2 (the union's) and v1 are the same. */
_Static_assert(sizeof(CUDA_BATCH_MEM_OP_NODE_PARAMS_v2) == sizeof(CUDA_BATCH_MEM_OP_NODE_PARAMS) &&
                   offsetof(CUDA_BATCH_MEM_OP_NODE_PARAMS_v2, paramArray) ==
                       offsetof(CUDA_BATCH_MEM_OP_NODE_PARAMS, paramArray) &&
                   offsetof(CUDA_BATCH_MEM_OP_NODE_PARAMS_v2, flags) == offsetof(CUDA_BATCH_MEM_OP_NODE_PARAMS, flags),
               "batch mem op node params");
#define MEM_OP_PARAMS(p) ((const CUDA_BATCH_MEM_OP_NODE_PARAMS *)&(p)->memOp)

/* CUDA_MEM_ALLOC_NODE_PARAMS_v2 is v1 in another order; the address goes
 * back into the caller's parameters. */
static CUresult add_alloc_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a = {
        .poolProps = p->alloc.poolProps,
        .accessDescs = p->alloc.accessDescs,
        .accessDescCount = p->alloc.accessDescCount,
        .bytesize = p->alloc.bytesize,
    };
    CUresult r = cuGraphAddMemAllocNode(ph, g, deps, n, &a);
    if (r == CUDA_SUCCESS) p->alloc.dptr = a.dptr;
    return r;
}

/* The body graph arrays handed to the application, per conditional node:
 * they live as long as the process (a few bytes per node). */
static struct idmap bodies_of_node = IDMAP_INIT;

/* A conditional node, or a child graph moved in (type GRAPH). */
static CUresult add_node_op(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
    int cond = p->type == CU_GRAPH_NODE_TYPE_CONDITIONAL;
    if (cond && (p->conditional.size == 0 || p->conditional.size > GRAPH_MAX_BODIES)) return CUDA_ERROR_INVALID_VALUE;
    struct graph_add a;
    CUresult r = graph_add_begin(&a, ph, deps, n);
    if (r != CUDA_SUCCESS) return r;
    struct msg_scuda_graph_add_node_req m = {
        .node = a.node,
        .graph = handle_wire_id(g),
        .type = (uint32_t)p->type,
        .child = cond ? 0 : handle_wire_id(p->graph.graph),
        .cond = cond ? p->conditional.handle : 0,
        .cond_type = cond ? (uint32_t)p->conditional.type : 0,
        .size = cond ? p->conditional.size : 0,
        .ctx = cond ? handle_wire_id(p->conditional.ctx) : 0,
        .deps = a.deps,
        .deps_count = a.deps_count,
    };
    msg_scuda_graph_add_node_req_put(graph_add_request(&a, OP_scuda_graph_add_node), &m);
    struct msg_scuda_graph_add_node_rep rep;
    r = graph_add_sync(&a);
    if (r == CUDA_SUCCESS && (msg_scuda_graph_add_node_rep_get(&a.c.out, &a.c.arena, &rep) != 0 ||
                              rep.bodies_count != m.size)) {
        LOG_ERROR("cuGraphAddNode: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    CUgraph *bodies = NULL;
    if (r == CUDA_SUCCESS && cond && !(bodies = calloc(rep.bodies_count, sizeof *bodies)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; bodies && i < rep.bodies_count; i++) bodies[i] = (CUgraph)handle_from_server(a.c.srv, rep.bodies[i]);
    if (bodies && idmap_put(&bodies_of_node, m.node, 0, bodies) != 0) {
        free(bodies);
        r = CUDA_ERROR_OUT_OF_MEMORY; /* the node stays in the graph, as after any failure the driver reports late */
    }
    if (r == CUDA_SUCCESS && cond) p->conditional.phGraph_out = bodies;
    return graph_add_end(&a, r, ph);
}

static CUresult add_node(CUgraphNode *ph, CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *p)
{
    CUDA_KERNEL_NODE_PARAMS k;
    CUDA_MEMSET_NODE_PARAMS m;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = kernel_params(p);
        return cuGraphAddKernelNode_v2(ph, g, deps, n, &k);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags != 0 || p->memcpy.reserved != 0) return CUDA_ERROR_INVALID_VALUE;
        return cuGraphAddMemcpyNode(ph, g, deps, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        m = memset_params(p);
        return cuGraphAddMemsetNode(ph, g, deps, n, &m, p->memset.ctx);
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(ph, g, deps, n);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) return add_node_op(ph, g, deps, n, p);
        if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE) return CUDA_ERROR_INVALID_VALUE;
        return cuGraphAddChildGraphNode(ph, g, deps, n, p->graph.graph);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return add_node_op(ph, g, deps, n, p);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphAddEventWaitNode(ph, g, deps, n, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphAddEventRecordNode(ph, g, deps, n, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return cuGraphAddMemFreeNode(ph, g, deps, n, p->free.dptr);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphAddHostNode(ph, g, deps, n, (const CUDA_HOST_NODE_PARAMS *)&p->host);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return add_alloc_node(ph, g, deps, n, p);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return cuGraphAddBatchMemOpNode(ph, g, deps, n, MEM_OP_PARAMS(p));
    default:
        return unsupported_type("cuGraphAddNode", p->type);
    }
}

/* Edges that are not plain full-completion dependencies (ports, types) are
 * added after the node, with their data. */
static int edges_are_plain(const CUgraphEdgeData *e, size_t n)
{
    static const CUgraphEdgeData plain;
    for (size_t i = 0; e && i < n; i++)
        if (memcmp(&e[i], &plain, sizeof plain) != 0) return 0;
    return 1;
}

EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                  CUgraphNodeParams *nodeParams)
{
    SHIM_ENTER(cuGraphAddNode_v2, (phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams));
    if (!phGraphNode || !nodeParams || (numDependencies && !dependencies)) return CUDA_ERROR_INVALID_VALUE;
    if (edges_are_plain(dependencyData, numDependencies))
        return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
    CUresult r = add_node(phGraphNode, hGraph, NULL, 0, nodeParams);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < numDependencies && r == CUDA_SUCCESS; i++)
        r = cuGraphAddDependencies_v2(hGraph, &dependencies[i], phGraphNode, &dependencyData[i], 1);
    if (r != CUDA_SUCCESS) cuGraphDestroyNode(*phGraphNode);
    return r;
}

EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    SHIM_ENTER(cuGraphAddNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

EXPORT CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    SHIM_ENTER(cuGraphNodeSetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS k;
    CUDA_MEMSET_NODE_PARAMS m;
    switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = kernel_params(nodeParams);
        return cuGraphKernelNodeSetParams_v2(hNode, &k);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphMemcpyNodeSetParams(hNode, &nodeParams->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        m = memset_params(nodeParams);
        return cuGraphMemsetNodeSetParams(hNode, &m);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphEventWaitNodeSetEvent(hNode, nodeParams->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphEventRecordNodeSetEvent(hNode, nodeParams->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphHostNodeSetParams(hNode, (const CUDA_HOST_NODE_PARAMS *)&nodeParams->host);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return cuGraphBatchMemOpNodeSetParams(hNode, MEM_OP_PARAMS(nodeParams));
    default:
        return unsupported_type("cuGraphNodeSetParams", nodeParams->type);
    }
}

EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    SHIM_ENTER(cuGraphExecNodeSetParams, (hGraphExec, hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS k;
    CUDA_MEMSET_NODE_PARAMS m;
    switch (nodeParams->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        k = kernel_params(nodeParams);
        return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphExecMemcpyNodeSetParams(hGraphExec, hNode, &nodeParams->memcpy.copyParams,
                                              nodeParams->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        m = memset_params(nodeParams);
        return cuGraphExecMemsetNodeSetParams(hGraphExec, hNode, &m, nodeParams->memset.ctx);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        return cuGraphExecChildGraphNodeSetParams(hGraphExec, hNode, nodeParams->graph.graph);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphExecEventWaitNodeSetEvent(hGraphExec, hNode, nodeParams->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphExecEventRecordNodeSetEvent(hGraphExec, hNode, nodeParams->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphExecHostNodeSetParams(hGraphExec, hNode, (const CUDA_HOST_NODE_PARAMS *)&nodeParams->host);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        return cuGraphExecBatchMemOpNodeSetParams(hGraphExec, hNode, MEM_OP_PARAMS(nodeParams));
    default:
        return unsupported_type("cuGraphExecNodeSetParams", nodeParams->type);
    }
}
