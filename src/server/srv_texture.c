/* srv_texture.c - texture and surface objects (docs/architecture.md,
 * 9.16 Textures and surfaces).
 *
 * A CUDA_RESOURCE_DESC names an array or a mipmapped array by handle, so
 * it travels as the res_desc record with that handle as an id, translated
 * here both ways. The objects themselves are the driver's 64-bit values,
 * passed through unchanged: kernels read them, so an id would be useless.
 * Device pointers pass through too, as everywhere (architecture 3.5). */
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"

/* The kind of handle a resource type names; HK_NONE for the pointer kinds. */
static enum handle_kind res_handle_kind(uint32_t type)
{
    if (type == CU_RESOURCE_TYPE_ARRAY) return HK_ARRAY;
    if (type == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY) return HK_MIPMAPPED_ARRAY;
    return HK_NONE;
}

/* Build the driver's descriptor from the client's: the handle id becomes
 * the real handle (unknown: CUDA_ERROR_INVALID_HANDLE), and only the
 * fields of the named type are filled, so nothing else reaches the driver. */
static CUresult res_from_msg(srv_call *c, const struct msg_res_desc *m, CUDA_RESOURCE_DESC *d)
{
    memset(d, 0, sizeof *d);
    d->resType = (CUresourcetype)m->type;
    d->flags = m->flags;
    void *h = NULL;
    CUresult r;
    switch (m->type) {
    case CU_RESOURCE_TYPE_ARRAY:
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        if ((r = handle_get(c->s, m->array, res_handle_kind(m->type), &h)) != CUDA_SUCCESS) return r;
        if (m->type == CU_RESOURCE_TYPE_ARRAY) d->res.array.hArray = (CUarray)h;
        else d->res.mipmap.hMipmappedArray = (CUmipmappedArray)h;
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_LINEAR:
        d->res.linear.devPtr = (CUdeviceptr)m->ptr;
        d->res.linear.format = (CUarray_format)m->format;
        d->res.linear.numChannels = m->channels;
        d->res.linear.sizeInBytes = (size_t)m->size;
        return CUDA_SUCCESS;
    case CU_RESOURCE_TYPE_PITCH2D:
        d->res.pitch2D.devPtr = (CUdeviceptr)m->ptr;
        d->res.pitch2D.format = (CUarray_format)m->format;
        d->res.pitch2D.numChannels = m->channels;
        d->res.pitch2D.width = (size_t)m->width;
        d->res.pitch2D.height = (size_t)m->height;
        d->res.pitch2D.pitchInBytes = (size_t)m->pitch;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The reverse, for the getters. An array the session has no id for (the
 * application destroyed it after creating the object) comes back as 0,
 * never as a new id for a handle that may be dead. */
static void res_to_msg(srv_call *c, const CUDA_RESOURCE_DESC *d, struct msg_res_desc *m)
{
    memset(m, 0, sizeof *m);
    m->type = (uint32_t)d->resType;
    m->flags = d->flags;
    switch (d->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        m->array = handle_find_id(c->s, HK_ARRAY, d->res.array.hArray);
        break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        m->array = handle_find_id(c->s, HK_MIPMAPPED_ARRAY, d->res.mipmap.hMipmappedArray);
        break;
    case CU_RESOURCE_TYPE_LINEAR:
        m->ptr = d->res.linear.devPtr;
        m->format = (uint32_t)d->res.linear.format;
        m->channels = d->res.linear.numChannels;
        m->size = d->res.linear.sizeInBytes;
        break;
    case CU_RESOURCE_TYPE_PITCH2D:
        m->ptr = d->res.pitch2D.devPtr;
        m->format = (uint32_t)d->res.pitch2D.format;
        m->channels = d->res.pitch2D.numChannels;
        m->width = d->res.pitch2D.width;
        m->height = d->res.pitch2D.height;
        m->pitch = d->res.pitch2D.pitchInBytes;
        break;
    default:
        break;
    }
}

CUresult srv_cuTexObjectCreate(srv_call *c)
{
    struct msg_cuTexObjectCreate_req m;
    if (msg_cuTexObjectCreate_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_RESOURCE_DESC res;
    CUresult r = res_from_msg(c, &m.res, &res);
    if (r != CUDA_SUCCESS) return r;
    CUtexObject obj = 0;
    r = REAL(cuTexObjectCreate, &obj, &res, &m.tex, m.has_view ? &m.view : NULL);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuTexObjectCreate_rep rep = {.obj = obj};
    msg_cuTexObjectCreate_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuTexObjectGetResourceDesc(srv_call *c)
{
    struct msg_cuTexObjectGetResourceDesc_req m;
    if (msg_cuTexObjectGetResourceDesc_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    CUresult r = REAL(cuTexObjectGetResourceDesc, &res, (CUtexObject)m.obj);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuTexObjectGetResourceDesc_rep rep;
    res_to_msg(c, &res, &rep.res);
    msg_cuTexObjectGetResourceDesc_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuSurfObjectCreate(srv_call *c)
{
    struct msg_cuSurfObjectCreate_req m;
    if (msg_cuSurfObjectCreate_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_RESOURCE_DESC res;
    CUresult r = res_from_msg(c, &m.res, &res);
    if (r != CUDA_SUCCESS) return r;
    CUsurfObject obj = 0;
    if ((r = REAL(cuSurfObjectCreate, &obj, &res)) != CUDA_SUCCESS) return r;
    struct msg_cuSurfObjectCreate_rep rep = {.obj = obj};
    msg_cuSurfObjectCreate_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_cuSurfObjectGetResourceDesc(srv_call *c)
{
    struct msg_cuSurfObjectGetResourceDesc_req m;
    if (msg_cuSurfObjectGetResourceDesc_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUDA_RESOURCE_DESC res;
    memset(&res, 0, sizeof res);
    CUresult r = REAL(cuSurfObjectGetResourceDesc, &res, (CUsurfObject)m.obj);
    if (r != CUDA_SUCCESS) return r;
    struct msg_cuSurfObjectGetResourceDesc_rep rep;
    res_to_msg(c, &res, &rep.res);
    msg_cuSurfObjectGetResourceDesc_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
