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
/* The same, waiting up to held_ms for a buffer another call holds to be
 * released (a copy that must otherwise fail: a tight --host-mem-quota). */
struct staging *staging_acquire_within(int held_ms);
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

/* ---- a buffer filled in pieces ----
 * A device-to-host chunk of a striped copy over TLS is copied in pieces,
 * each marked by an event of its own, so its connection's thread can seal
 * and send the first piece while the later ones still copy (bulk.c). The
 * filler marks pieces in order and ends the fill; a reader waits piece by
 * piece. Buffers of staging_pool_new only. */
#define STAGING_PIECES_MAX 32

/* A free buffer of p if one is free now, else NULL (never waits). */
struct staging *staging_pool_try_take(struct staging_pool *p);
/* Start filling b in pieces: none marked yet. */
void staging_pieces_begin(struct staging *b);
/* Mark the end of the next piece's copy: work queued on `stream` so far. */
CUresult staging_piece_record(struct staging *b, CUstream stream);
/* No more pieces come (all marked, or the copy failed): readers waiting
 * for a later piece stop waiting, and the buffer is free once the work
 * queued on `stream` is done, as after staging_record. */
void staging_pieces_end(struct staging *b, CUstream stream);
/* Wait until piece i was marked and its copy is done. CUDA_SUCCESS, or an
 * error when piece i will never be copied (the caller sends zeros). */
CUresult staging_piece_wait(struct staging *b, int i);

#endif
