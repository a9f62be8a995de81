/* migrate_memread.h - reading a session's device memory for a move or a
 * snapshot, fast (docs/architecture.md, 9.17 "Device bytes").
 *
 * Both sides of a migration read every range of device memory in chunks
 * of MIGRATE_CHUNK and digest them in the same order: the exporter to
 * send them, the importer (migrate_landing.c) to check what it holds.
 * Chunks are read a batch at a time into pinned host memory (a pageable
 * copy runs at a fraction of the bus), by a thread of their own that
 * reads up to two batches ahead of the caller, so that the reads overlap
 * the sending; each chunk's SHA-256 is computed on its own thread; the
 * state's digest then takes the chunks' digests in order. So neither the
 * reads nor the digest hold back the link, and both sides agree whatever
 * their batching. */
#ifndef SCUDA_SERVER_MIGRATE_MEMREAD_H
#define SCUDA_SERVER_MIGRATE_MEMREAD_H

#include <stddef.h>
#include <stdint.h>

#include "migrate_state.h"

/* Host memory for device bytes: pinned when the driver gives it
 * (portable: any context may copy into it; a pageable copy runs at a
 * fraction of the bus), else plain memory; *pinned says which. */
void *migrate_host_alloc(size_t size, int *pinned);
void migrate_host_free(void *p, int pinned);

/* Lanes a read hands its chunks to at most (migrate_links.h). */
#define MIGRATE_LANES_MAX 8

/* One chunk as read: range v[range] at offset off; index: its place among
 * all the ranges' chunks, from 1. */
struct migrate_chunk {
    long range;
    uint64_t off;
    const uint8_t *bytes;
    size_t len;
    uint64_t index;
};

/* Called for every chunk in order, on the calling thread: 0 hands it to
 * fn, 1 skips it (it is only digested), anything else stops the read and
 * is returned. */
typedef int (*migrate_plan_fn)(void *arg, const struct migrate_chunk *c);
/* Sends chunk c on lane `lane` (0 .. lanes-1): with one lane on the
 * calling thread, in order; with several on each lane's own thread, each
 * lane's chunks in order. The bytes are valid until it returns; nonzero
 * stops the read and is returned. */
typedef int (*migrate_chunk_fn)(void *arg, int lane, const struct migrate_chunk *c);

/* Read ranges v[0..n) from the device in the current context, each chunk
 * digested into d (migrate_digest_chunk), planned (plan NULL: every
 * chunk goes) and handed to fn (NULL: none) on `lanes` lanes. Returns 0,
 * a callback's stop, or -1 with why when a read failed. */
int migrate_memory_read(const struct migrate_range *v, long n, struct migrate_digest *d, migrate_plan_fn plan,
                        migrate_chunk_fn fn, void *arg, int lanes, char *why, size_t whylen);

#endif
