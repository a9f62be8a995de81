/* context.h - contexts in the client (context.c). Most of its interface is
 * the driver API itself; this is what the rest of the library needs. */
#ifndef SCUDA_CLIENT_CONTEXT_H
#define SCUDA_CLIENT_CONTEXT_H

#include <cuda.h>

/* Called with every context that goes away (cuCtxDestroy, the last
 * release or a reset of a primary context), after the session destroyed
 * it. Set once, at cuInit. */
void context_set_destroy_hook(void (*hook)(CUcontext ctx));

/* A device's primary context, without a reference (export_tables.h). */
CUresult scuda_primary_ctx_lookup(CUdevice dev, CUcontext *pctx);

#endif
