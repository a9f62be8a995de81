/* staging.h - pools of host buffers for bulk copies.
 *
 * Copies from pinned memory run truly asynchronously, so the session can
 * receive the next chunk of a host-to-device copy while the DMA of the last
 * one runs, and copy the next chunk of a device-to-host copy while it sends
 * the last one (docs/architecture.md, 3.7 Bulk data). A buffer goes back to its pool when
 * the event recorded after its copy has completed.
 *
 * The session's own pool (staging_acquire) serves copies over the main
 * connection: 4 buffers of STAGING_SIZE. Striped copies (bulk.c) have a
 * pool of their own, sized by their number of connections. */
#ifndef SCUDA_SERVER_STAGING_H
#define SCUDA_SERVER_STAGING_H

#include <cuda.h>
#include <stddef.h>

#define STAGING_SIZE (8u << 20)

struct staging;
struct staging_pool;

/* A free buffer of STAGING_SIZE bytes from the session's pool, waiting for
 * the copy of one if all are copying. Needs a current context. NULL when
 * all are held, or pinned memory cannot be had (then callers copy the
 * plain way). */
struct staging *staging_acquire(void);
/* Let the host memory quota take idle buffers back (host_quota.h): call
 * once at session start. */
void staging_init(void);
/* Drop every buffer of the session pool without freeing it, for a test
 * whose driver already freed them (the fuzzer's reset). */
void staging_forget_all(void);

/* A pool of `count` buffers of `size` bytes. NULL when out of memory. */
struct staging_pool *staging_pool_new(int count, size_t size);
/* Allocate every buffer of the pool now (needs a current context; later
 * takers may run on threads without one). A buffer that cannot be pinned
 * is ordinary memory: copies through it are slower, never wrong. Returns
 * 0, or -1 when not even ordinary memory could be had. */
int staging_pool_fill(struct staging_pool *p);
/* A free buffer of p, waiting while every one is held or copying. */
struct staging *staging_pool_take(struct staging_pool *p);

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
