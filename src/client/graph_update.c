/* graph_update.c - cuGraphExecUpdate, both exports.
 *
 * The session updates its executable graph from its graph; the nodes the
 * driver names in the result (the node that could not be updated, the
 * ends of an edge that differs) are the session's, and come back as their
 * ids: the client's own for nodes it made, session ids (handle_export)
 * for nodes of captured or cloned graphs. The pre-12.0 export reports the
 * same through two outputs. */
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

static CUresult exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    struct msg_cuGraphExecUpdate_v2_req m = {handle_wire_id(exec), handle_wire_id(graph)};
    struct msg_cuGraphExecUpdate_v2_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphExecUpdate_v2, server_of_handle(exec));
    msg_cuGraphExecUpdate_v2_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    /* the result comes back on failure too: it says why */
    if (msg_cuGraphExecUpdate_v2_rep_get(&c.out, &c.arena, &rep) != 0) {
        if (r == CUDA_SUCCESS) { /* a failure met before the update has no outputs */
            LOG_ERROR("cuGraphExecUpdate: malformed reply from the server");
            r = CUDA_ERROR_UNKNOWN;
        }
    } else {
        info->result = (CUgraphExecUpdateResult)rep.result;
        info->errorNode = (CUgraphNode)handle_from_server(c.srv, rep.error_node);
        info->errorFromNode = (CUgraphNode)handle_from_server(c.srv, rep.error_from_node);
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    SHIM_ENTER(cuGraphExecUpdate_v2, (hGraphExec, hGraph, resultInfo));
    if (!resultInfo) return CUDA_ERROR_INVALID_VALUE;
    return exec_update(hGraphExec, hGraph, resultInfo);
}

EXPORT CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                  CUgraphExecUpdateResult *updateResult_out)
{
    SHIM_ENTER(cuGraphExecUpdate, (hGraphExec, hGraph, hErrorNode_out, updateResult_out));
    if (!hErrorNode_out || !updateResult_out) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info = {CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL};
    CUresult r = exec_update(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = info.result;
    return r;
}
