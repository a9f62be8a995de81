/* migrate_stage.h - a snapshot's device memory copied aside on the GPU
 * under the hold, so that it streams to the standby while the session
 * runs on (docs/architecture.md, 9.24 "The memory goes after the hold").
 *
 * Every range of migrate_memory() gets scratch memory of its own size in
 * its own context (device_window.h: outside the session's state, not
 * charged to the quota) and a device-to-device copy there; reading the
 * staged ranges later gives the bytes as they were at the hold. Staging
 * is refused, and nothing stays allocated, when the device has not room
 * for it all plus a margin, or any allocation or copy fails: the caller
 * then copies synchronously, as a move does. */
#ifndef SCUDA_SERVER_MIGRATE_STAGE_H
#define SCUDA_SERVER_MIGRATE_STAGE_H

#include <cuda.h>
#include <stddef.h>

#include "migrate_state.h"

struct migrate_stage {
    struct migrate_range *v; /* v[i]: where range i was copied (addr 0 for an empty range) */
    long n;
    CUcontext ctx;           /* a context to read them in (the first range's) */
    uint64_t bytes;          /* staged in all */
};

/* Copy ranges r[0..n) aside. Returns 0 with *st filled, or -1 with why
 * (nothing allocated). */
int migrate_stage(const struct migrate_range *r, long n, struct migrate_stage *st, char *why, size_t whylen);

/* Free what migrate_stage allocated (safe on a zeroed struct). */
void migrate_unstage(struct migrate_stage *st);

#endif
