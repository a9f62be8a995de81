/* param_layout.h - each function's parameter layout, as the driver
 * reports it (cuFuncGetParamInfo).
 *
 * The driver reads every parameter at the kernel's own offset and size,
 * and as many parameters as the kernel has, whatever the client sent. So
 * the session places each launch's and kernel node's parameters with the
 * layout the driver reports (launch_params_build, launch_params.h): a
 * request carries the packed bytes only, and is refused when they are
 * fewer than the kernel reads.
 *
 * Layouts are cached per real handle (CUfunction or CUkernel) and
 * forgotten whenever the driver may free functions, after which a handle
 * value can name another function (module or library unload, context
 * destroy, release or reset: param_layout_install wraps those). */
#ifndef SCUDA_SERVER_PARAM_LAYOUT_H
#define SCUDA_SERVER_PARAM_LAYOUT_H

#include <cuda.h>
#include <stdint.h>

#include "launch_params.h"
#include "../common/driver_table.gen.h"

struct param_layout {
    uint32_t n;     /* parameters */
    uint32_t bytes; /* end of the last parameter: what a raw buffer must hold */
    struct {
        uint32_t offset, size;
    } p[];
};

/* Forget every layout after the table's calls that free functions. */
void param_layout_install(struct driver_table *t);

/* A malloc'd copy of h's layout (free() it), or NULL when the driver
 * cannot tell it or the layout was refused: then *refused (when not NULL)
 * is CUDA_ERROR_INVALID_IMAGE (the image's layout claims were false), else
 * CUDA_SUCCESS. */
struct param_layout *param_layout_dup(void *h, int is_kernel, CUresult *refused);

#endif
