/* context.h - contexts in the client (context.c). Most of its interface is
 * the driver API itself; this is what the rest of the library needs. */
#ifndef SCUDA_CLIENT_CONTEXT_H
#define SCUDA_CLIENT_CONTEXT_H

#include <cuda.h>

/* Called with every context that goes away (cuCtxDestroy, the last
 * release or a reset of a primary context), after the session destroyed
 * it. Set once, at cuInit. */
void context_set_destroy_hook(void (*hook)(CUcontext ctx));

/* The calling thread's current context and its device, as cuCtxGetCurrent
 * and cuCtxGetDevice answer, for the library's own use: not a driver call,
 * so SCUDA_TRACE and its trace file show only the program's calls. 0 when
 * the thread has no current context. */
int context_current(CUcontext *ctx, CUdevice *dev);

/* A device's primary context, without a reference (export_tables.h). */
CUresult scuda_primary_ctx_lookup(CUdevice dev, CUcontext *pctx);

/* Whether the calling thread's current context came from cuCtxCreate's
 * pre-3.2 export: driver 580 runs the 32-bit (pre-3.2) entry points only in
 * such a context and answers CUDA_ERROR_INVALID_CONTEXT in any other. */
int context_current_is_legacy(void);

/* In a legacy context driver 580 refuses the _v2 forms of the 32-bit entry
 * points as well (CUDA_ERROR_INVALID_CONTEXT), except that SCUDA's own
 * 32-bit forms run on them: they call between context_v1_enter() and
 * context_v1_leave(). CUDA_SUCCESS when a _v2 form may run. */
CUresult context_v2_allowed(void);
void context_v1_enter(void);
void context_v1_leave(void);

/* A context the session makes from another object (cuCtxFromGreenCtx):
 * a client record with a fresh id, not primary; its device is set once the
 * session told it; it goes with its owner (context_derived_forget, which
 * also calls the destroy hook). */
struct server;
CUresult context_derived_new(CUcontext *pctx, struct server *srv); /* on srv, its owner's server */
void context_derived_set_device(CUcontext ctx, CUdevice dev);
void context_derived_forget(CUcontext ctx);

#endif
