/* param_layout.h - each function's parameter layout, as the driver
 * reports it (cuFuncGetParamInfo).
 *
 * The driver reads every parameter at the kernel's own offset and size,
 * and as many parameters as the kernel has, whatever the client sent. So
 * the session checks each launch and kernel node against the layout the
 * driver reports, never against the one that came with the request:
 *
 *   void *f; int is_kernel;
 *   handle_get_function(s, id, &f, &is_kernel);
 *   if (param_layout_check(f, is_kernel, &lp) != CUDA_SUCCESS) ... refuse
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

/* CUDA_SUCCESS when lp is what the driver will read for function or
 * kernel h: the same count, offsets and sizes, or a raw buffer that holds
 * all of the kernel's parameter bytes. Otherwise one log line and
 * CUDA_ERROR_INVALID_VALUE, also when the driver cannot tell the layout
 * and lp carries parameters. */
CUresult param_layout_check(void *h, int is_kernel, const struct launch_params *lp);

/* A malloc'd copy of h's layout (free() it), or NULL when the driver
 * cannot tell it. */
struct param_layout *param_layout_dup(void *h, int is_kernel);

#endif
