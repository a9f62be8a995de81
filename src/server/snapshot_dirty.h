/* snapshot_dirty.h - which of a session's device memory may have changed
 * since its last snapshot parked on a standby (snapshot_dirty.c;
 * docs/architecture.md, 9.24 Failover to a standby, "Unchanged memory
 * stays on the standby"). */
#ifndef SCUDA_SERVER_SNAPSHOT_DIRTY_H
#define SCUDA_SERVER_SNAPSHOT_DIRTY_H

#include <stdint.h>

/* Ranges written since the last snapshot, unless `all`. */
#define SNAPSHOT_WRITTEN_MAX 64
struct snapshot_written {
    int all; /* anything may have changed */
    int n;
    struct {
        uint64_t addr, len;
    } r[SNAPSHOT_WRITTEN_MAX];
};

/* A call `op` was read from the client, before it runs: unless it only
 * reads, or its handler names what it writes (snapshot_note_range), all
 * device memory may change. */
void snapshot_note_op(uint16_t op);
/* A copy to the device (a call that snapshot_note_op left to its
 * handler) writes [addr, addr+len): before it does. */
void snapshot_note_range(uint64_t addr, uint64_t len);
/* Device memory was written outside a call (a striped copy's chunk). */
void snapshot_note_write(void);

/* At a snapshot: what may have changed since the last one that parked
 * (all of it when memory was ever shared with another session, which may
 * write it without a call of ours). Starts a new period. */
void snapshot_dirty_take(struct snapshot_written *out);
/* The snapshot did not park: the period goes on, everything dirty. */
void snapshot_dirty_failed(void);
/* 1 when [addr, addr+size) may have changed according to w. */
int snapshot_written_touches(const struct snapshot_written *w, uint64_t addr, uint64_t size);

#endif
