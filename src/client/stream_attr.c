/* stream_attr.c - cuStreamGetAttribute and cuStreamSetAttribute.
 *
 * CUstreamAttrValue is a union whose members hold handles (events) and
 * device addresses. Only the member the attribute id names travels
 * (scuda_stream_attr_size, value_sizes.h): the access policy window with
 * its base_ptr as a device address, the synchronization policy, the
 * priority, the memory sync domain and its map. An id SCUDA does not know
 * travels with no value: the session's driver says what it means (its
 * INVALID_VALUE for ids without a meaning for a stream). A getter writes
 * only that member, as the driver does. */
#include <string.h>

#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/ops.gen.h"
#include "../common/value_sizes.h"

static CUresult stream_attr_get(CUstream st, CUstreamAttrID attr, CUstreamAttrValue *out)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuStreamGetAttribute_req m = {handle_wire_id(st), (uint32_t)attr};
    struct msg_cuStreamGetAttribute_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuStreamGetAttribute, server_of_handle(st));
    msg_cuStreamGetAttribute_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        size_t want = scuda_stream_attr_size(attr);
        /* a session answers success only for an id both sides size alike */
        if (msg_cuStreamGetAttribute_rep_get(&c.out, &c.arena, &rep) != 0 || want == 0 || rep.value_len != want)
            r = CUDA_ERROR_UNKNOWN;
        else
            memcpy(out, rep.value, want);
    }
    rpc_end(&c);
    return r;
}

static CUresult stream_attr_set(CUstream st, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuStreamSetAttribute_req m = {handle_wire_id(st), (uint32_t)attr, value,
                                             scuda_stream_attr_size(attr)};
    rpc_call c;
    rpc_begin_on(&c, OP_cuStreamSetAttribute, server_of_handle(st));
    msg_cuStreamSetAttribute_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    SHIM_ENTER(cuStreamGetAttribute, (hStream, attr, value_out));
    return stream_attr_get(hStream, attr, value_out);
}

EXPORT CUresult cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    SHIM_ENTER(cuStreamSetAttribute, (hStream, attr, value));
    return stream_attr_set(hStream, attr, value);
}
