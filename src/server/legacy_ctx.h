/* legacy_ctx.h - the session's pre-3.2 (legacy) contexts.
 *
 * Driver 580 runs the 32-bit entry points only in a context made by
 * cuCtxCreate's first export, and refuses their _v2 forms there
 * (CUDA_ERROR_INVALID_CONTEXT), while the session's copies and queries call
 * the _v2 forms. legacy_ctx_install wraps those in the driver table: in a
 * legacy context they call the 32-bit export, with every address and size
 * checked to fit 32 bits (else INVALID_VALUE, never truncated); in any
 * other context, the _v2 form as before. */
#ifndef SCUDA_SERVER_LEGACY_CTX_H
#define SCUDA_SERVER_LEGACY_CTX_H

#include <cuda.h>

#include "../common/driver_table.gen.h"

void legacy_ctx_install(struct driver_table *t);
/* A context made with cuCtxCreate's first export; its destruction. */
void legacy_ctx_add(CUcontext ctx);
void legacy_ctx_remove(CUcontext ctx);

#endif
