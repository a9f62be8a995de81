/* staging.h - a small pool of pinned host buffers for bulk copies.
 *
 * Copies from pinned memory run truly asynchronously, so the session can
 * receive the next chunk of a host-to-device copy while the DMA of the last
 * one runs, and copy the next chunk of a device-to-host copy while it sends
 * the last one (DESIGN §3, Bulk data). A buffer goes back to the pool when
 * the event recorded after its copy has completed. */
#ifndef SCUDA_SERVER_STAGING_H
#define SCUDA_SERVER_STAGING_H

#include <cuda.h>
#include <stddef.h>

#define STAGING_SIZE (8u << 20)

struct staging;

/* A free buffer of STAGING_SIZE bytes, waiting for one if all are in use.
 * Needs a current context. NULL when pinned memory cannot be had (then
 * callers copy the plain way). */
struct staging *staging_acquire(void);
void *staging_data(struct staging *b);
/* Mark the end of the buffer's copy: work queued on `stream` so far. */
CUresult staging_record(struct staging *b, CUstream stream);
/* Give the buffer back; it is reused once its recorded work is done. */
void staging_release(struct staging *b);
/* Both: the buffer is free once the work queued on `stream` is done. */
CUresult staging_release_after(struct staging *b, CUstream stream);
/* Wait until that work is done (e.g. before running a later call that
 * must see a "synchronous" copy complete). */
CUresult staging_wait(struct staging *b);

#endif
