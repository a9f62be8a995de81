/* srv_stream.c - the session's side of stream attributes
 * (src/client/stream_attr.c). A value arrives as the one member of
 * CUstreamAttrValue its id names and goes to the driver in an otherwise
 * zeroed union; a getter returns that member only. For an id SCUDA does not
 * size, the driver is asked (a get into scratch) so that its own error
 * comes back; an id it accepts but SCUDA cannot carry is NOT_SUPPORTED,
 * never a zeroed value set or returned. */
#include <string.h>

#include "dispatch.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/value_sizes.h"

static CUresult unknown_attr(CUstream st, uint32_t attr)
{
    CUstreamAttrValue scratch;
    memset(&scratch, 0, sizeof scratch);
    CUresult r = REAL(cuStreamGetAttribute, st, (CUstreamAttrID)attr, &scratch);
    if (r != CUDA_SUCCESS) return r;
    LOG_WARN("stream attribute %u has a meaning for this driver but SCUDA does not carry it: "
             "CUDA_ERROR_NOT_SUPPORTED", attr);
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult srv_cuStreamGetAttribute(srv_call *c)
{
    struct msg_cuStreamGetAttribute_req m;
    if (msg_cuStreamGetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.stream, HK_STREAM, &st);
    if (r != CUDA_SUCCESS) return r;
    size_t n = scuda_stream_attr_size((CUstreamAttrID)m.attr);
    if (n == 0) return unknown_attr((CUstream)st, m.attr);
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    r = REAL(cuStreamGetAttribute, (CUstream)st, (CUstreamAttrID)m.attr, &v);
    if (r == CUDA_SUCCESS) msg_cuStreamGetAttribute_rep_put(&c->out, &(struct msg_cuStreamGetAttribute_rep){&v, n});
    return r;
}

CUresult srv_cuStreamSetAttribute(srv_call *c)
{
    struct msg_cuStreamSetAttribute_req m;
    if (msg_cuStreamSetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.stream, HK_STREAM, &st);
    if (r != CUDA_SUCCESS) return r;
    size_t n = scuda_stream_attr_size((CUstreamAttrID)m.attr);
    if (n == 0) return unknown_attr((CUstream)st, m.attr);
    if (m.value_len != n) return CUDA_ERROR_INVALID_VALUE; /* not what a client sends */
    CUstreamAttrValue v;
    memset(&v, 0, sizeof v);
    memcpy(&v, m.value, n);
    return REAL(cuStreamSetAttribute, (CUstream)st, (CUstreamAttrID)m.attr, &v);
}
