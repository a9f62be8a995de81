/* snapshot.h - snapshots for failover to a standby server (snapshot.c;
 * docs/architecture.md, 9.24 Failover to a standby). */
#ifndef SCUDA_SERVER_SNAPSHOT_H
#define SCUDA_SERVER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"

struct session;

/* What a move sends to `to`, checked, without the switch (migrate_out.c).
 * Returns the connection to the importer, or -1 with why. */
int migrate_copy_out(struct session *s, const char *to, uint32_t *b_pid, struct msg_scuda_migrate_rep *rep, char *why,
                     size_t whylen);

/* The session ends normally: the standby drops the copies it parked. */
void snapshot_discard_all(void);

#endif
