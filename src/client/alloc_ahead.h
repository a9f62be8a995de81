/* alloc_ahead.h - spare allocations over a slow link (alloc_ahead.c): the
 * generated cuMemAlloc_v2 and cuMemGetInfo_v2 call its hooks (hooks.h). */
#ifndef SCUDA_CLIENT_ALLOC_AHEAD_H
#define SCUDA_CLIENT_ALLOC_AHEAD_H

#include <cuda.h>

/* The context is gone, and the session freed its spares with it. */
void alloc_ahead_context_gone(CUcontext ctx);

#endif
