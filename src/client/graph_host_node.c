/* graph_host_node.c - host nodes added by hand (cuGraphAddHostNode and
 * the parameter calls).
 *
 * A host node's function is client code and its data client memory, but
 * the graph replays on the server. The function and data become a run
 * record (capture.h), exactly as a host function captured from a stream
 * does: the session's node has the client run fn(userData) at each replay
 * of the node, before the reply of the next call that waits for the
 * session (src/server/graph_host.c). The session never waits for the
 * client, so a client that died cannot stall its GPU work.
 *
 * A query asks the session which record the node holds now (whichever
 * call made or last changed it, clones and captured nodes included) and
 * answers that record's function and data. */
#include <stdlib.h>

#include "capture.h"
#include "graph.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   size_t numDependencies, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphAddHostNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (!nodeParams || !nodeParams->fn) return CUDA_ERROR_INVALID_VALUE;
    struct graph_add a;
    CUresult r = graph_add_begin(&a, phGraphNode, dependencies, numDependencies);
    if (r != CUDA_SUCCESS) return r;
    struct msg_scuda_graph_add_host_node_req m = {
        .node = a.node, .graph = handle_wire_id(hGraph), .deps = a.deps, .deps_count = a.deps_count};
    r = capture_run_record_new(nodeParams->fn, nodeParams->userData, &m.record);
    if (r != CUDA_SUCCESS) return graph_add_end(&a, r, phGraphNode);
    msg_scuda_graph_add_host_node_req_put(graph_add_request(&a, OP_scuda_graph_add_host_node), &m);
    r = graph_add_sync(&a);
    if (r != CUDA_SUCCESS) capture_record_drop(m.record); /* the session holds it only when the node was made */
    return graph_add_end(&a, r, phGraphNode);
}

EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphHostNodeGetParams, (hNode, nodeParams));
    if (!nodeParams) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_graph_host_node_get_req m = {handle_wire_id(hNode)};
    struct msg_scuda_graph_host_node_get_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_graph_host_node_get, server_of_handle(hNode));
    msg_scuda_graph_host_node_get_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_graph_host_node_get_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphHostNodeGetParams: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    rpc_end(&c);
    if (r != CUDA_SUCCESS) return r;
    CUhostFn fn;
    void *user;
    if (capture_run_record(rep.record, &fn, &user) != 0) {
        LOG_ERROR("cuGraphHostNodeGetParams: the server named host record %llu, which this client does not "
                  "have (a server that is not SCUDA's, or a bug)",
                  (unsigned long long)rep.record);
        return CUDA_ERROR_UNKNOWN;
    }
    nodeParams->fn = fn;
    nodeParams->userData = user;
    return CUDA_SUCCESS;
}

/* The node (of exec, or of its graph when exec is NULL) runs fn(user) from
 * now on: a new record; the session keeps the old one while a launch or
 * another graph may still run it. */
static CUresult host_node_set(CUgraphExec exec, CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_graph_host_node_set_req m = {handle_wire_id(exec), handle_wire_id(node), 0};
    CUresult r = capture_run_record_new(p->fn, p->userData, &m.record);
    if (r != CUDA_SUCCESS) return r;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_graph_host_node_set, server_of_handle(node));
    msg_scuda_graph_host_node_set_req_put(&c.req, &m);
    r = rpc_sync(&c);
    rpc_end(&c);
    if (r != CUDA_SUCCESS) capture_record_drop(m.record);
    return r;
}

EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode, const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphHostNodeSetParams, (hNode, nodeParams));
    return host_node_set(NULL, hNode, nodeParams);
}

EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                             const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphExecHostNodeSetParams, (hGraphExec, hNode, nodeParams));
    if (!hGraphExec) return CUDA_ERROR_INVALID_VALUE;
    return host_node_set(hGraphExec, hNode, nodeParams);
}
