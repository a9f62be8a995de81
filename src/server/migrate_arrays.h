/* migrate_arrays.h - CUDA arrays in a live migration (docs/architecture.md,
 * 9.17 Live migration, "Arrays").
 *
 * An array is asked for its descriptor when the session moves
 * (cuArray3DGetDescriptor), made again on the other server with that
 * descriptor in the context it was made in, under the client's id, and its
 * contents follow (cuMemcpy3D through host memory), checked there by
 * reading them back. Texture and surface objects are values the driver
 * chose and kernels hold, so a session with live ones cannot move. */
#ifndef SCUDA_SERVER_MIGRATE_ARRAYS_H
#define SCUDA_SERVER_MIGRATE_ARRAYS_H

#include <stddef.h>

#include "migrate_state.h"

struct session;
struct migrate_items;

/* Wrap t's array creation (to note the context) and texture and surface
 * objects (to count the live ones). Once, at session start. */
void migrate_arrays_install(struct driver_table *t);
/* Append why the session's arrays cannot move, nothing when they can. */
void migrate_arrays_explain(char *why, size_t whylen);
/* MIG_ARRAY items, each followed by its MIG_ARRAY_BYTES. Returns 0, or -1
 * with why. Their data stays valid until the next call. */
int migrate_arrays_items(struct migrate_items *l, char *why, size_t whylen);
/* Feed every array's id and descriptor to the digest (and, on the
 * importer, a mark when an array's bytes did not all arrive). */
void migrate_arrays_digest(struct migrate_digest *d);
/* Replay one MIG_ARRAY or MIG_ARRAY_BYTES item. */
CUresult migrate_arrays_replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl);

#endif
