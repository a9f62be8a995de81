/* graph_mem_op.c - batch memory-operation nodes (cuGraphAddBatchMemOpNode,
 * the get and set calls, and the executable graph's set).
 *
 * CUDA_BATCH_MEM_OP_NODE_PARAMS points to an array of
 * CUstreamBatchMemOpParams: it travels as raw elements, as cuStreamBatchMemOp
 * sends it (every address in it is a device address; `alias` is the
 * driver's own). A query hands back a copy this file keeps per node until
 * the next query of that node, as the driver's array stays the node's. */
#define _GNU_SOURCE

#include "graph.h"
#include "servers.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

static int params_ok(const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    return p && p->count <= GRAPH_MAX_MEM_OPS && (p->count == 0 || p->paramArray);
}

EXPORT CUresult cuGraphAddBatchMemOpNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                         size_t numDependencies, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphAddBatchMemOpNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (!params_ok(nodeParams)) return CUDA_ERROR_INVALID_VALUE;
    struct graph_add a;
    CUresult r = graph_add_begin(&a, phGraphNode, dependencies, numDependencies);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuGraphAddBatchMemOpNode_req m = {
        .node = a.node,
        .graph = handle_wire_id(hGraph),
        .ctx = handle_wire_id(nodeParams->ctx),
        .ops = nodeParams->paramArray,
        .ops_count = nodeParams->count,
        .flags = nodeParams->flags,
        .deps = a.deps,
        .deps_count = a.deps_count,
    };
    msg_cuGraphAddBatchMemOpNode_req_put(graph_add_request(&a, OP_cuGraphAddBatchMemOpNode), &m);
    return graph_add_end(&a, graph_add_sync(&a), phGraphNode);
}

/* The operation arrays handed out by queries, per node. */
static struct idmap node_ops = IDMAP_INIT;

EXPORT CUresult cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams_out)
{
    SHIM_ENTER(cuGraphBatchMemOpNodeGetParams, (hNode, nodeParams_out));
    if (!nodeParams_out) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphBatchMemOpNodeGetParams_req m = {handle_wire_id(hNode)};
    struct msg_cuGraphBatchMemOpNodeGetParams_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphBatchMemOpNodeGetParams, server_of_handle(hNode));
    msg_cuGraphBatchMemOpNodeGetParams_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuGraphBatchMemOpNodeGetParams_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphBatchMemOpNodeGetParams: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    CUstreamBatchMemOpParams *ops = NULL;
    if (r == CUDA_SUCCESS) ops = graph_keep_copy(&node_ops, hNode, rep.ops, rep.ops_count * sizeof *ops, &r);
    if (r == CUDA_SUCCESS) {
        nodeParams_out->ctx = (CUcontext)handle_from_server(c.srv, rep.ctx);
        nodeParams_out->count = rep.ops_count;
        nodeParams_out->paramArray = ops;
        nodeParams_out->flags = rep.flags;
    }
    rpc_end(&c);
    return r;
}

/* exec NULL: the graph's node itself. */
static CUresult mem_op_node_set(CUgraphExec exec, CUgraphNode node, const CUDA_BATCH_MEM_OP_NODE_PARAMS *p)
{
    if (!params_ok(p)) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphBatchMemOpNodeSetParams_req m = {
        .exec = handle_wire_id(exec),
        .node = handle_wire_id(node),
        .ctx = handle_wire_id(p->ctx),
        .ops = p->paramArray,
        .ops_count = p->count,
        .flags = p->flags,
    };
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphBatchMemOpNodeSetParams, server_of_handle(node));
    msg_cuGraphBatchMemOpNodeSetParams_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphBatchMemOpNodeSetParams(CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphBatchMemOpNodeSetParams, (hNode, nodeParams));
    return mem_op_node_set(NULL, hNode, nodeParams);
}

EXPORT CUresult cuGraphExecBatchMemOpNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_BATCH_MEM_OP_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphExecBatchMemOpNodeSetParams, (hGraphExec, hNode, nodeParams));
    if (!hGraphExec) return CUDA_ERROR_INVALID_VALUE;
    return mem_op_node_set(hGraphExec, hNode, nodeParams);
}
