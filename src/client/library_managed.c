/* library_managed.c - cuLibraryGetManaged: a library's __managed__
 * variables (docs/architecture.md, 4 Memory kinds).
 *
 * The session asks its driver for the variable's address, which is the
 * driver's managed memory; this process mirrors it at the same address,
 * as cuMemAllocManaged's memory is (coherence.h), so that host code reads
 * and writes the variable through the pointer (static cudart binds a
 * __managed__ variable's host side to that pointer). Unlike a fresh
 * allocation, the variable already holds bytes (its initializer, or what
 * kernels wrote), so the host reads the device's at first touch.
 *
 * A variable is mirrored once however often it is asked for, and stops
 * being mirrored when its library is unloaded (module.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coherence.h"
#include "module.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

struct mirrored_var {
    uint64_t library, dev;
    struct mirrored_var *next;
};

static pthread_mutex_t vars_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mirrored_var *vars;

static CUresult session_get_managed(uint64_t library, const char *name, uint64_t *dev, uint64_t *size)
{
    struct msg_scuda_library_get_managed_req m = {.library = library, .name = name};
    struct msg_scuda_library_get_managed_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_scuda_library_get_managed);
    msg_scuda_library_get_managed_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_library_get_managed_rep_get(&c.out, &c.arena, &rep) != 0)
        r = CUDA_ERROR_UNKNOWN; /* not what any server sends */
    if (r == CUDA_SUCCESS) *dev = rep.ptr, *size = rep.size;
    rpc_end(&c);
    return r;
}

static int mirrored_locked(uint64_t library, uint64_t dev)
{
    for (struct mirrored_var *v = vars; v; v = v->next)
        if (v->library == library && v->dev == dev) return 1;
    return 0;
}

/* Mirror [dev, dev+size) unless this library's variable there already is. */
static CUresult mirror_var(uint64_t library, const char *name, uint64_t dev, uint64_t size)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&vars_lock);
    if (!mirrored_locked(library, dev)) {
        struct mirrored_var *v = malloc(sizeof *v);
        int err = v ? coherence_add_managed_existing(dev, (size_t)size, &r) : ENOMEM;
        if (err) {
            /* The driver chose the address; no other can be asked for. */
            LOG_ERROR("cuLibraryGetManaged(%s): cannot map its %llu bytes at the device address 0x%llx in this "
                      "process (%s); a managed variable needs the same address on the host",
                      name, (unsigned long long)size, (unsigned long long)dev, strerror(err));
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS) {
            *v = (struct mirrored_var){.library = library, .dev = dev, .next = vars};
            vars = v;
        } else {
            free(v);
        }
    }
    pthread_mutex_unlock(&vars_lock);
    return r;
}

/* Static cudart asks for its __managed__ variables while it sets a device
 * up, with the device's primary context retained but not yet current on
 * the thread. The variable is the same in every context, but its mirror
 * (and the session's driver) needs one: lacking a current context, an
 * active primary context stands in for the call. 1 when one was pushed. */
static int push_active_primary(void)
{
    CUcontext cur = NULL;
    int n = 0;
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur || cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
    for (CUdevice d = 0; d < n; d++) {
        unsigned flags = 0;
        int active = 0;
        CUcontext primary = NULL;
        if (cuDevicePrimaryCtxGetState(d, &flags, &active) != CUDA_SUCCESS || !active) continue;
        if (cuDevicePrimaryCtxRetain(&primary, d) != CUDA_SUCCESS) continue;
        int pushed = cuCtxPushCurrent(primary) == CUDA_SUCCESS;
        cuDevicePrimaryCtxRelease(d); /* active: cudart holds its own reference */
        return pushed;
    }
    return 0;
}

static CUresult get_managed(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name);

EXPORT CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    SHIM_ENTER(cuLibraryGetManaged, (dptr, bytes, library, name));
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!library_known(library)) return CUDA_ERROR_INVALID_HANDLE;
    int pushed = push_active_primary();
    CUresult r = get_managed(dptr, bytes, library, name);
    CUcontext popped;
    if (pushed) cuCtxPopCurrent(&popped);
    return r;
}

static CUresult get_managed(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    uint64_t id = (uint64_t)(uintptr_t)library, dev = 0, size = 0;
    CUresult r = session_get_managed(id, name, &dev, &size);
    if (r == CUDA_SUCCESS && (dev == 0 || size == 0 || dev + size < dev)) {
        LOG_ERROR("cuLibraryGetManaged(%s): the server answered the range 0x%llx + %llu", name,
                  (unsigned long long)dev, (unsigned long long)size);
        r = CUDA_ERROR_UNKNOWN; /* not what a driver answers: a hostile or broken server */
    }
    if (r == CUDA_SUCCESS) r = mirror_var(id, name, dev, size);
    if (r != CUDA_SUCCESS) return r;
    if (dptr) *dptr = dev;
    if (bytes) *bytes = (size_t)size;
    return CUDA_SUCCESS;
}

void library_managed_forget(uint64_t library)
{
    pthread_mutex_lock(&vars_lock);
    for (struct mirrored_var **p = &vars; *p;) {
        struct mirrored_var *v = *p;
        if (v->library != library) {
            p = &v->next;
            continue;
        }
        coherence_forget_managed(v->dev);
        *p = v->next;
        free(v);
    }
    pthread_mutex_unlock(&vars_lock);
}
