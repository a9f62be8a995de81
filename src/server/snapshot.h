/* snapshot.h - snapshots for failover to a standby server (snapshot.c;
 * docs/architecture.md, 9.24 Failover to a standby). */
#ifndef SCUDA_SERVER_SNAPSHOT_H
#define SCUDA_SERVER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "migrate_state.h"
#include "snapshot_dirty.h"
#include "../common/messages.gen.h"

struct session;

struct migrate_preloaded;

/* What a move sends to `to`, checked, without the switch (migrate_out.c),
 * on the connection `to` loaded ahead on when `pre` still fits (its fd
 * -1: none; taken either way). Returns the connection to the importer,
 * or -1 with why; *ahead: of the images it holds, those loaded ahead. */
int migrate_copy_out(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *b_pid,
                     struct msg_scuda_migrate_rep *rep, unsigned *ahead, char *why, size_t whylen);

/* The next migrate_copy_out keeps, from parked copy `pid` on the
 * importer's machine (0: none), every range that copy had (`had`) and
 * that w says did not change; how many bytes it kept; and the ranges it
 * copied (malloc'd: the caller frees), -1 when none. */
void migrate_out_keep_from(uint32_t pid, const struct snapshot_written *w, const struct migrate_range *had, long nhad);
uint64_t migrate_out_kept(void);
long migrate_out_ranges(struct migrate_range **out);

/* The session ends normally: the standby drops the copies it parked. */
void snapshot_discard_all(void);

#endif
