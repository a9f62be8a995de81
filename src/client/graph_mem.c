/* graph_mem.c - memory allocation nodes (cuGraphAddMemAllocNode,
 * cuGraphMemAllocNodeGetParams).
 *
 * CUDA_MEM_ALLOC_NODE_PARAMS points to an array of access descriptors:
 * they travel as an array, and a query hands back a copy this file keeps
 * per node until the next query of that node (as the driver's array
 * stays the node's). The address the node returns is the session
 * driver's, like cuMemAlloc's: device memory, which every client path
 * already treats as such (pointer attributes are asked of the session,
 * copies go to the device), so nothing is remembered of it here. Free
 * nodes and captured cuMemAllocAsync / cuMemFreeAsync are forwarded as
 * they are (generated). */
#define _GNU_SOURCE

#include "graph.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    SHIM_ENTER(cuGraphAddMemAllocNode, (phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
    if (!nodeParams || nodeParams->accessDescCount > GRAPH_MAX_ACCESS ||
        (nodeParams->accessDescCount && !nodeParams->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    struct graph_add a;
    CUresult r = graph_add_begin(&a, phGraphNode, dependencies, numDependencies);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuGraphAddMemAllocNode_req m = {
        .node = a.node,
        .graph = handle_wire_id(hGraph),
        .pool = nodeParams->poolProps,
        .access = nodeParams->accessDescs,
        .access_count = (uint32_t)nodeParams->accessDescCount,
        .bytesize = nodeParams->bytesize,
        .deps = a.deps,
        .deps_count = a.deps_count,
    };
    m.pool.win32SecurityAttributes = NULL; /* a host pointer: meaningless there (Windows only) */
    msg_cuGraphAddMemAllocNode_req_put(graph_add_request(&a, OP_cuGraphAddMemAllocNode), &m);
    struct msg_cuGraphAddMemAllocNode_rep rep;
    r = graph_add_sync(&a);
    if (r == CUDA_SUCCESS && msg_cuGraphAddMemAllocNode_rep_get(&a.c.out, &a.c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphAddMemAllocNode: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS) nodeParams->dptr = rep.dptr;
    return graph_add_end(&a, r, phGraphNode);
}

/* The access descriptors handed out by a query, per node (replaced at
 * the next query of that node). */
static struct idmap node_access = IDMAP_INIT;

EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    SHIM_ENTER(cuGraphMemAllocNodeGetParams, (hNode, params_out));
    if (!params_out) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphMemAllocNodeGetParams_req m = {handle_wire_id(hNode)};
    struct msg_cuGraphMemAllocNodeGetParams_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphMemAllocNodeGetParams, server_of_handle(hNode));
    msg_cuGraphMemAllocNodeGetParams_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuGraphMemAllocNodeGetParams_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphMemAllocNodeGetParams: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    CUmemAccessDesc *access = NULL;
    if (r == CUDA_SUCCESS)
        access = graph_keep_copy(&node_access, hNode, rep.access, rep.access_count * sizeof *access, &r);
    if (r == CUDA_SUCCESS) {
        params_out->poolProps = rep.pool;
        params_out->poolProps.win32SecurityAttributes = NULL;
        params_out->accessDescs = access;
        params_out->accessDescCount = rep.access_count;
        params_out->bytesize = (size_t)rep.bytesize;
        params_out->dptr = rep.dptr;
    }
    rpc_end(&c);
    return r;
}
