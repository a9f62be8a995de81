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

/* One chunk as read: range v[range] at offset off. */
struct migrate_chunk {
    long range;
    uint64_t off;
    const uint8_t *bytes;
    size_t len;
};

/* Called for every chunk in order, on the calling thread (the chunk's
 * bytes are valid until it returns); nonzero stops the read and is
 * returned. */
typedef int (*migrate_chunk_fn)(void *arg, const struct migrate_chunk *c);

/* Read ranges v[0..n) from the device in the current context, each chunk
 * digested into d (migrate_digest_chunk) and handed to fn (NULL: none).
 * Returns 0, fn's nonzero, or -1 with why when a read failed. */
int migrate_memory_read(const struct migrate_range *v, long n, struct migrate_digest *d, migrate_chunk_fn fn,
                        void *arg, char *why, size_t whylen);

#endif
