/* texture.c - texture and surface objects (docs/architecture.md, 9.16
 * Textures and surfaces).
 *
 * A CUDA_RESOURCE_DESC holds an array handle (an id here) or a device
 * pointer; it travels as the res_desc record. The objects are the server
 * driver's own 64-bit values: kernels read them, so they come back as the
 * driver made them and go out again unchanged. */
#include <string.h>

#include "handles.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

/* The record for a descriptor: only the named type's fields. An unknown
 * type is the driver's CUDA_ERROR_INVALID_VALUE, refused before sending. */
static CUresult res_to_msg(const CUDA_RESOURCE_DESC *d, struct msg_res_desc *m)
{
    memset(m, 0, sizeof *m);
    m->type = (uint32_t)d->resType;
    m->flags = d->flags;
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        m->array = handle_wire_id(d->res.array.hArray);
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        m->array = handle_wire_id(d->res.mipmap.hMipmappedArray);
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_LINEAR:
        m->ptr = d->res.linear.devPtr;
        m->format = (uint32_t)d->res.linear.format;
        m->channels = d->res.linear.numChannels;
        m->size = d->res.linear.sizeInBytes;
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_PITCH2D:
        m->ptr = d->res.pitch2D.devPtr;
        m->format = (uint32_t)d->res.pitch2D.format;
        m->channels = d->res.pitch2D.numChannels;
        m->width = d->res.pitch2D.width;
        m->height = d->res.pitch2D.height;
        m->pitch = d->res.pitch2D.pitchInBytes;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static void res_from_msg(const struct msg_res_desc *m, CUDA_RESOURCE_DESC *d)
{
    memset(d, 0, sizeof *d);
    d->resType = (CUresourcetype)m->type;
    d->flags = m->flags;
    switch (m->type) {
    case CU_RESOURCE_TYPE_ARRAY:
        d->res.array.hArray = (CUarray)handle_from_id(m->array);
        break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        d->res.mipmap.hMipmappedArray = (CUmipmappedArray)handle_from_id(m->array);
        break;
    case CU_RESOURCE_TYPE_LINEAR:
        d->res.linear.devPtr = (CUdeviceptr)m->ptr;
        d->res.linear.format = (CUarray_format)m->format;
        d->res.linear.numChannels = m->channels;
        d->res.linear.sizeInBytes = (size_t)m->size;
        break;
    case CU_RESOURCE_TYPE_PITCH2D:
        d->res.pitch2D.devPtr = (CUdeviceptr)m->ptr;
        d->res.pitch2D.format = (CUarray_format)m->format;
        d->res.pitch2D.numChannels = m->channels;
        d->res.pitch2D.width = (size_t)m->width;
        d->res.pitch2D.height = (size_t)m->height;
        d->res.pitch2D.pitchInBytes = (size_t)m->pitch;
        break;
    default:
        break;
    }
}

static CUresult malformed(const char *call)
{
    LOG_ERROR("%s: malformed reply from the server", call);
    return CUDA_ERROR_UNKNOWN;
}

EXPORT CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                  const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    SHIM_ENTER(cuTexObjectCreate, (pTexObject, pResDesc, pTexDesc, pResViewDesc));
    if (!pTexObject || !pResDesc || !pTexDesc) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuTexObjectCreate_req m = {.tex = *pTexDesc, .has_view = pResViewDesc != NULL};
    if (pResViewDesc) m.view = *pResViewDesc;
    CUresult r = res_to_msg(pResDesc, &m.res);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuTexObjectCreate_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_cuTexObjectCreate);
    msg_cuTexObjectCreate_req_put(&c.req, &m);
    r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuTexObjectCreate_rep_get(&c.out, &c.arena, &rep) != 0)
        r = malformed("cuTexObjectCreate");
    if (r == CUDA_SUCCESS) *pTexObject = (CUtexObject)rep.obj;
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUtexObject texObject)
{
    SHIM_ENTER(cuTexObjectGetResourceDesc, (pResDesc, texObject));
    if (!pResDesc) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuTexObjectGetResourceDesc_req m = {.obj = texObject};
    struct msg_cuTexObjectGetResourceDesc_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_cuTexObjectGetResourceDesc);
    msg_cuTexObjectGetResourceDesc_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuTexObjectGetResourceDesc_rep_get(&c.out, &c.arena, &rep) != 0)
        r = malformed("cuTexObjectGetResourceDesc");
    if (r == CUDA_SUCCESS) res_from_msg(&rep.res, pResDesc);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    SHIM_ENTER(cuSurfObjectCreate, (pSurfObject, pResDesc));
    if (!pSurfObject || !pResDesc) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuSurfObjectCreate_req m;
    CUresult r = res_to_msg(pResDesc, &m.res);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuSurfObjectCreate_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_cuSurfObjectCreate);
    msg_cuSurfObjectCreate_req_put(&c.req, &m);
    r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuSurfObjectCreate_rep_get(&c.out, &c.arena, &rep) != 0)
        r = malformed("cuSurfObjectCreate");
    if (r == CUDA_SUCCESS) *pSurfObject = (CUsurfObject)rep.obj;
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *pResDesc, CUsurfObject surfObject)
{
    SHIM_ENTER(cuSurfObjectGetResourceDesc, (pResDesc, surfObject));
    if (!pResDesc) return CUDA_ERROR_INVALID_VALUE;
    struct msg_cuSurfObjectGetResourceDesc_req m = {.obj = surfObject};
    struct msg_cuSurfObjectGetResourceDesc_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_cuSurfObjectGetResourceDesc);
    msg_cuSurfObjectGetResourceDesc_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuSurfObjectGetResourceDesc_rep_get(&c.out, &c.arena, &rep) != 0)
        r = malformed("cuSurfObjectGetResourceDesc");
    if (r == CUDA_SUCCESS) res_from_msg(&rep.res, pResDesc);
    rpc_end(&c);
    return r;
}
