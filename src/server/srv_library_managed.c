/* srv_library_managed.c - cuLibraryGetManaged in the session
 * (docs/architecture.md, 4 Memory kinds).
 *
 * A __managed__ variable lives in the driver's managed memory, which the
 * library's load allocated: the session only tells its address. The
 * client mirrors it as it mirrors cuMemAllocManaged's memory, with
 * ordinary copies. */
#include "dispatch.h"
#include "handlers.gen.h"
#include "migrate_state.h"
#include "session.h"

CUresult srv_scuda_library_get_managed(srv_call *c)
{
    struct msg_scuda_library_get_managed_req m;
    if (msg_scuda_library_get_managed_req_get(&c->in, &c->arena, &m) != 0 || !m.name) return CUDA_ERROR_INVALID_VALUE;
    void *lib;
    CUresult r = handle_get(c->s, m.library, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr p = 0;
    size_t size = 0;
    if ((r = REAL(cuLibraryGetManaged, &p, &size, (CUlibrary)lib, m.name)) != CUDA_SUCCESS) return r;
    migrate_note_library_managed(m.library, m.name, p, size); /* a placing event (migrate_seq.c) */
    struct msg_scuda_library_get_managed_rep rep = {.ptr = p, .size = size};
    msg_scuda_library_get_managed_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
