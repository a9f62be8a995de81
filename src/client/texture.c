/* texture.c - texture and surface objects (docs/architecture.md, 9.16
 * Textures and surfaces).
 *
 * A CUDA_RESOURCE_DESC holds an array handle (an id here) or a device
 * pointer; it travels as the res_desc record. The objects are the server
 * driver's own 64-bit values: kernels read them, so they come back as the
 * driver made them and go out again unchanged. */

#include "handles.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/res_desc.h"

/* The record for a descriptor: only the named type's fields. An unknown
 * type is the driver's CUDA_ERROR_INVALID_VALUE, refused before sending. */
static CUresult res_to_msg(const CUDA_RESOURCE_DESC *d, struct msg_res_desc *m)
{
    return res_desc_to_msg(d, handle_wire_id(res_desc_handle(d)), m) == 0 ? CUDA_SUCCESS
                                                                           : CUDA_ERROR_INVALID_VALUE;
}

/* The array the reply names is one of server srv's: tagged with it. */
static void res_from_msg(const struct msg_res_desc *m, CUDA_RESOURCE_DESC *d, const struct server *srv)
{
    (void)res_desc_from_msg(m, res_desc_has_handle(m->type) ? handle_from_server(srv, m->array) : NULL, d);
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
    if (r == CUDA_SUCCESS) res_from_msg(&rep.res, pResDesc, c.srv);
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
    if (r == CUDA_SUCCESS) res_from_msg(&rep.res, pResDesc, c.srv);
    rpc_end(&c);
    return r;
}
