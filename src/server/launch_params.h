/* launch_params.h - kernel parameters as the client packs them
 * (src/client/launch.h), decoded into the kernelParams array (or the
 * `extra` buffer) the driver wants. Shared by launches (srv_launch.c) and
 * graph kernel nodes (srv_graph.c).
 *
 *   struct launch_params lp;
 *   if (launch_params_read(&c->in, &lp) != 0) ... malformed
 *   ... after wr_ok_end ...
 *   CUresult r = launch_params_build(&lp);
 *   ... real.cuLaunchKernelEx(&cfg, f, launch_params_kernel_params(&lp), lp.extra) ...
 *   ... call the driver ...
 *   launch_params_free(&lp);
 */
#ifndef SCUDA_SERVER_LAUNCH_PARAMS_H
#define SCUDA_SERVER_LAUNCH_PARAMS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/wire.h"

#define LAUNCH_RAW_PARAMS 0xffffffffu
#define LAUNCH_MAX_PARAMS 4096

struct launch_params {
    uint32_t nparams;       /* LAUNCH_RAW_PARAMS: the blob is an `extra` buffer */
    const uint8_t *layout;  /* nparams x (u32 offset, u32 size), in the request */
    const void *blob;
    size_t len;
    /* built: exactly one of these is set when there are parameters */
    void **kernel_params;
    void **extra;
    /* storage: parameters hold doubles and pointers, so the driver gets an
     * aligned copy of the blob */
    uint64_t small[512];
    void *small_ptrs[64];
    void *buf;
    size_t size;
    void *extra_words[5];
};

/* Decode from `in`; 0, or -1 when malformed (a bad layout or count). */
int launch_params_read(wire_reader *in, struct launch_params *lp);
/* Build kernel_params / extra; CUDA_ERROR_OUT_OF_MEMORY at worst. */
CUresult launch_params_build(struct launch_params *lp);
void launch_params_free(struct launch_params *lp);
/* The kernelParams argument for the driver: NULL without parameters or
 * with a raw buffer (then lp->extra is the `extra` argument). */
static inline void **launch_params_kernel_params(const struct launch_params *lp)
{
    return lp->nparams != LAUNCH_RAW_PARAMS && lp->nparams ? lp->kernel_params : NULL;
}

#endif
