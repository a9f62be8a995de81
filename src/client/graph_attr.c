/* graph_attr.c - cuGraphKernelNodeGetAttribute / SetAttribute.
 *
 * CUkernelNodeAttrValue is the launch-attribute union, whose members hold
 * events (launch-only attributes) as well as plain values. As for a
 * stream's attributes (stream_attr.c), only the member the id names
 * travels (scuda_kernel_node_attr_size, value_sizes.h); an id SCUDA does
 * not know travels with no value and the session's driver says what it
 * means. A getter writes only that member, as the driver does. */
#include <string.h>

#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/ops.gen.h"
#include "../common/value_sizes.h"

EXPORT CUresult cuGraphKernelNodeGetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                              CUkernelNodeAttrValue *value_out)
{
    SHIM_ENTER(cuGraphKernelNodeGetAttribute, (hNode, attr, value_out));
    if (!value_out) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphKernelNodeGetAttribute_req m = {handle_wire_id(hNode), (uint32_t)attr};
    struct msg_cuGraphKernelNodeGetAttribute_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphKernelNodeGetAttribute, server_of_handle(hNode));
    msg_cuGraphKernelNodeGetAttribute_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        size_t want = scuda_kernel_node_attr_size(attr);
        /* a session answers success only for an id both sides size alike */
        if (msg_cuGraphKernelNodeGetAttribute_rep_get(&c.out, &c.arena, &rep) != 0 || want == 0 ||
            rep.value_len != want)
            r = CUDA_ERROR_UNKNOWN;
        else
            memcpy(value_out, rep.value, want);
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuGraphKernelNodeSetAttribute(CUgraphNode hNode, CUkernelNodeAttrID attr,
                                              const CUkernelNodeAttrValue *value)
{
    SHIM_ENTER(cuGraphKernelNodeSetAttribute, (hNode, attr, value));
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuGraphKernelNodeSetAttribute_req m = {handle_wire_id(hNode), (uint32_t)attr, value,
                                                      scuda_kernel_node_attr_size(attr)};
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphKernelNodeSetAttribute, server_of_handle(hNode));
    msg_cuGraphKernelNodeSetAttribute_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}
