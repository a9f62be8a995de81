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
 * Each chunk comes with its index among the importer's own chunks (its
 * ranges, migrate_memory(), cut in MIGRATE_CHUNK), in any order and over
 * any of the migration's connections (migrate_links.h): a chunk that is
 * not where the session has that index, or comes twice, is refused; a
 * range the exporter said the parked copy holds (kept) is read back and
 * digested the same way. At the end every chunk must have come, and the
 * digests go into the state's digest in index order: the same digest the
 * exporter took of what it sent, so a copy that differs in any byte,
 * misses a range or puts bytes elsewhere does not match. */
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

/* A free slot to read the next frame into (this waits for one); the
 * caller holds it until migrate_landing_bytes or migrate_landing_give.
 * Thread-safe: each of the migration's connections has a reader. */
int migrate_landing_take(struct migrate_landing *l);
uint8_t *migrate_landing_slot_buf(struct migrate_landing *l, int slot, size_t *cap);
void migrate_landing_give(struct migrate_landing *l, int slot);

/* Chunk `index` (1-based, as it came) for addr: copied to the device and
 * checked by the slot's thread (from the slot, where the frame was read
 * into it; else copied there first). The slot is given up either way.
 * Refused, with why, unless that chunk is addr's and len long, and new. */
CUresult migrate_landing_bytes(struct migrate_landing *l, int slot, uint64_t index, uint64_t addr, const uint8_t *data,
                               uint64_t len, char *why, size_t wl);

/* Whether (addr, size) is one of the session's ranges, whole, and its
 * first chunk is `index` (1-based): the parked copy's bytes may be
 * fetched into it. 0, or -1 with why. */
int migrate_landing_kept_fits(const struct migrate_landing *l, uint64_t index, uint64_t addr, uint64_t size, char *why,
                              size_t wl);

/* That range (kept_fits said yes) is on the device already, kept from
 * the parked copy: its chunks are read back and checked. Refused, with
 * why, when one of them came before. */
CUresult migrate_landing_kept(struct migrate_landing *l, uint64_t index, char *why, size_t wl);

/* A reader's failure, for migrate_landing_close to report (the first
 * one stands); and the failure so far (CUDA_SUCCESS: none). */
void migrate_landing_fail(struct migrate_landing *l, const char *why);
CUresult migrate_landing_error(struct migrate_landing *l, char *why, size_t wl);

/* Wait for every slot; when every chunk came and was checked, feed their
 * digests to d in order (d may be NULL: only the wait and the free).
 * Frees l. Returns CUDA_SUCCESS, or the first failure with why. */
CUresult migrate_landing_close(struct migrate_landing *l, struct migrate_digest *d, char *why, size_t wl);

#endif
