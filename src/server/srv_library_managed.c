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

/* cudart asks for its __managed__ variables while it sets up a device,
 * before the client's thread has a current context, so the frame may name
 * none. The variable's address is the same in every context, but the
 * driver needs one to load the library: lacking one, the call runs in an
 * active primary context (retained around the call, so it is never the
 * last reference). */
static CUresult get_managed(CUdeviceptr *p, size_t *size, CUlibrary lib, const char *name)
{
    CUresult r = REAL(cuLibraryGetManaged, p, size, lib, name);
    CUcontext cur = NULL;
    if (r != CUDA_ERROR_INVALID_CONTEXT || REAL(cuCtxGetCurrent, &cur) != CUDA_SUCCESS || cur) return r;
    int n = 0;
    if (REAL(cuDeviceGetCount, &n) != CUDA_SUCCESS) return r;
    for (CUdevice d = 0; d < n; d++) {
        unsigned flags = 0;
        int active = 0;
        CUcontext primary = NULL;
        if (REAL(cuDevicePrimaryCtxGetState, d, &flags, &active) != CUDA_SUCCESS || !active) continue;
        if (REAL(cuDevicePrimaryCtxRetain, &primary, d) != CUDA_SUCCESS) continue;
        if (REAL(cuCtxPushCurrent_v2, primary) == CUDA_SUCCESS) {
            r = REAL(cuLibraryGetManaged, p, size, lib, name);
            REAL(cuCtxPopCurrent_v2, &cur);
        }
        REAL(cuDevicePrimaryCtxRelease_v2, d);
        return r;
    }
    return r;
}

CUresult srv_scuda_library_get_managed(srv_call *c)
{
    struct msg_scuda_library_get_managed_req m;
    if (msg_scuda_library_get_managed_req_get(&c->in, &c->arena, &m) != 0 || !m.name) return CUDA_ERROR_INVALID_VALUE;
    void *lib;
    CUresult r = handle_get(c->s, m.library, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr p = 0;
    size_t size = 0;
    if ((r = get_managed(&p, &size, (CUlibrary)lib, m.name)) != CUDA_SUCCESS) return r;
    migrate_note_library_managed(m.library, m.name, p, size); /* a placing event (migrate_seq.c) */
    struct msg_scuda_library_get_managed_rep rep = {.ptr = p, .size = size};
    msg_scuda_library_get_managed_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
