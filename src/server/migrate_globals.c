/* migrate_globals.c - at the hold, every variable of the code that ran is
 * looked up, so that its bytes move (docs/architecture.md, 9.17).
 *
 * A kernel may change a __device__ variable its client never asks about
 * (a counter, a table built on the device); a variable the client never
 * looked up is in no note, and the other server's driver would give it
 * the image's initial value. So at the hold, every variable that the
 * image of a module, or of a library in a context, declares is looked up
 * through the driver and noted as a lookup of the client's would be: the
 * notes go at the end of the placing sequence (migrate_seq.c), the other
 * server replays them last, in this order, and checks each address, and
 * their bytes move and are digested with the other globals. Only code
 * that may have run is asked (migrate_seq_units): a library loaded
 * lazily is not placed in a context by the listing, and whatever the
 * lookups place on this server is noted, so the replay places the same.
 * Lookups of names already noted add nothing; they stay noted if the
 * move fails, since they happened. */
#include <stdio.h>
#include <stdlib.h>

#include "dispatch.h"
#include "../common/image_check.h"
#include "migrate_seq.h"
#include "migrate_state.h"
#include "session.h"

struct lookup {
    const struct migrate_unit *u;
    void *real;
    char *why;
    size_t whylen;
};

static const char *unit_word(const struct migrate_unit *u) { return u->kind == MIG_LIBRARY ? "library" : "module"; }

/* One name the image declares: found, it is noted; a name the driver
 * does not know (a string literal's, a texture reference) has no bytes. */
static int look_up(const char *name, void *arg)
{
    struct lookup *l = arg;
    CUdeviceptr p = 0;
    size_t size = 0;
    int lib = l->u->kind == MIG_LIBRARY;
    CUresult r = lib ? REAL(cuLibraryGetGlobal, &p, &size, (CUlibrary)l->real, name)
                     : REAL(cuModuleGetGlobal_v2, &p, &size, (CUmodule)l->real, name);
    if (r == CUDA_ERROR_NOT_FOUND) return 0;
    if (r != CUDA_SUCCESS) {
        snprintf(l->why, l->whylen, "looking up variable %.200s of %s %#llx failed with CUresult %d", name,
                 unit_word(l->u), (unsigned long long)l->u->id, (int)r);
        return 1;
    }
    if (lib) migrate_note_library_global(l->u->id, name, p, size);
    else migrate_note_global(l->u->id, name, p, size);
    return 0;
}

/* The compute capability the driver loads code for in the current context. */
static CUresult current_arch(unsigned *arch)
{
    CUdevice dev;
    int major = 0, minor = 0;
    CUresult r = REAL(cuCtxGetDevice, &dev);
    if (r == CUDA_SUCCESS) r = REAL(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (r == CUDA_SUCCESS) r = REAL(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    *arch = (unsigned)(major * 10 + minor);
    return r;
}

static int note_unit(struct session *s, const struct migrate_unit *u, char *why, size_t whylen)
{
    struct lookup l = {.u = u, .why = why, .whylen = whylen};
    unsigned arch = 0;
    char err[256] = "";
    CUresult r = session_bind_ctx(s, (uint32_t)u->ctx);
    if (r == CUDA_SUCCESS) r = handle_get(s, u->id, u->kind == MIG_LIBRARY ? HK_LIBRARY : HK_MODULE, &l.real);
    if (r == CUDA_SUCCESS) r = current_arch(&arch);
    if (r != CUDA_SUCCESS) {
        snprintf(why, whylen, "cannot ask about %s %#llx in context %llu (CUresult %d)", unit_word(u),
                 (unsigned long long)u->id, (unsigned long long)u->ctx, (int)r);
        return -1;
    }
    if (!u->image) {
        snprintf(why, whylen, "the image of %s %#llx was not kept", unit_word(u), (unsigned long long)u->id);
        return -1;
    }
    int rc = image_globals(u->image, u->len, arch, look_up, &l, err, sizeof err);
    if (rc < 0)
        snprintf(why, whylen, "%s %#llx, whose code ran: %s; its __device__ variables cannot be copied (load it "
                              "without fatbin compression, or with code for this GPU)",
                 unit_word(u), (unsigned long long)u->id, err);
    return rc ? -1 : 0;
}

int migrate_note_all_globals(struct session *s, char *why, size_t whylen)
{
    struct migrate_unit *u = NULL;
    size_t n = 0;
    if (migrate_seq_units(&u, &n) != 0) {
        snprintf(why, whylen, "out of host memory listing the session's modules");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = note_unit(s, &u[i], why, whylen);
    free(u);
    return rc;
}
