/* graph_user_object.c - cuUserObjectCreate.
 *
 * A user object's destructor is client code, but the object's references
 * are counted by the session's driver (graphs hold them, launches in
 * flight too). The destructor and its data become a run record
 * (capture.h), as a host node's function does: when the driver destroys
 * the object, the session queues "run record R" once and then forgets the
 * record, and the client runs destroy(ptr) when that host work arrives,
 * before the reply of its next call that waits for the session. The
 * session never waits for the client. Retain and release (of the object
 * and of a graph's references) are forwarded as they are. */
#include "capture.h"
#include "rpc.h"
#include "shim.h"
#include "../common/ops.gen.h"

EXPORT CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy, unsigned int initialRefcount,
                                   unsigned int flags)
{
    SHIM_ENTER(cuUserObjectCreate, (object_out, ptr, destroy, initialRefcount, flags));
    if (!object_out || !destroy || initialRefcount == 0) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_user_object_create_req m = {.object = handle_new_id(), .refcount = initialRefcount,
                                                 .flags = flags};
    CUresult r = capture_run_record_new(destroy, ptr, &m.record);
    if (r != CUDA_SUCCESS) return r;
    rpc_call c;
    rpc_begin(&c, OP_scuda_user_object_create);
    msg_scuda_user_object_create_req_put(&c.req, &m);
    r = rpc_sync(&c);
    rpc_end(&c);
    if (r != CUDA_SUCCESS) {
        capture_record_drop(m.record); /* the session holds it only when the object was made */
        return r;
    }
    *object_out = (CUuserObject)handle_from_id(m.object);
    return CUDA_SUCCESS;
}
