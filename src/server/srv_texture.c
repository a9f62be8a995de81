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
#include "../common/res_desc.h"

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
    void *h = NULL;
    if (res_desc_has_handle(m->type)) {
        CUresult r = handle_get(c->s, m->array, res_handle_kind(m->type), &h);
        if (r != CUDA_SUCCESS) return r;
    }
    return res_desc_from_msg(m, h, d) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The reverse, for the getters. An array the session has no id for (the
 * application destroyed it after creating the object) comes back as 0,
 * never as a new id for a handle that may be dead. */
static void res_to_msg(srv_call *c, const CUDA_RESOURCE_DESC *d, struct msg_res_desc *m)
{
    void *h = res_desc_handle(d);
    (void)res_desc_to_msg(d, h ? handle_find_id(c->s, res_handle_kind((uint32_t)d->resType), h) : 0, m);
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
