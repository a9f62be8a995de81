/* migrate_landing.h - where the importer's device bytes land, and the
 * check of what landed (docs/architecture.md, 9.17 "Device bytes").
 *
 * Each MIG_BYTES frame is read straight into a slot of pinned host memory
 * and a thread of that slot copies it to the device, reads it back and
 * digests what the device holds, while the next frames arrive into the
 * other slots. Synchronous copies, on threads: an async copy would need
 * an event, and events a session creates are part of the state it
 * imports (migrate_seq.c notes them).
 *
 * The chunks must come in the importer's own order of its ranges
 * (migrate_memory(), chunks of MIGRATE_CHUNK): bytes anywhere else are
 * refused, and a range the exporter said the parked copy holds (kept) is
 * read back and digested the same way. At the end every chunk must have
 * come, and the digests go into the state's digest in order: the same
 * digest the exporter took of what it sent, so a copy that differs in
 * any byte, misses a range or puts bytes elsewhere does not match. */
#ifndef SCUDA_SERVER_MIGRATE_LANDING_H
#define SCUDA_SERVER_MIGRATE_LANDING_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "migrate_state.h"

struct migrate_landing;

/* Ready to take the session's memory: its ranges now (migrate_memory()),
 * the slots, and their threads, in the calling thread's current context.
 * NULL with why when there is no memory or thread for it. */
struct migrate_landing *migrate_landing_open(char *why, size_t wl);

/* A buffer to read the next frame into, and its capacity: a free slot's
 * (this waits for one). */
uint8_t *migrate_landing_buffer(struct migrate_landing *l, size_t *cap);

/* Chunk bytes for addr: copied to the device and checked by a slot's
 * thread (from the slot, where the frame was read into it; else copied
 * there first). Refused, with why, unless they are the next chunk. */
CUresult migrate_landing_bytes(struct migrate_landing *l, uint64_t addr, const uint8_t *data, uint64_t len,
                               char *why, size_t wl);

/* Range (addr, size) is on the device already (kept from the parked
 * copy): its chunks are read back and checked. Refused, with why, unless
 * it is the next range whole. */
CUresult migrate_landing_kept(struct migrate_landing *l, uint64_t addr, uint64_t size, char *why, size_t wl);

/* Wait for every slot; when every chunk came and was checked, feed their
 * digests to d in order (d may be NULL: only the wait and the free).
 * Frees l. Returns CUDA_SUCCESS, or the first failure with why. */
CUresult migrate_landing_close(struct migrate_landing *l, struct migrate_digest *d, char *why, size_t wl);

#endif
