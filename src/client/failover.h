/* failover.h - carrying on on a standby server when the server dies
 * (failover.c; docs/architecture.md, 9.24 Failover to a standby).
 *
 * With SCUDA_STANDBY=HOST:PORT[,HOST:PORT...] the client asks its session, at a
 * synchronizing call every SCUDA_SNAPSHOT_EVERY seconds, for a snapshot
 * parked on the standby (op scuda_snapshot_ahead), and keeps every frame it sends
 * after it (the journal, send_queue.h). When the server dies, the resumer
 * (resume.c) resumes the parked copy instead and the journal is sent
 * again; replies to calls the application already saw are checked
 * against their first results here and dropped (conn.c). After a
 * failover the next standby of the list covers the session. The first
 * server only (servers[0]). */
#ifndef SCUDA_CLIENT_FAILOVER_H
#define SCUDA_CLIENT_FAILOVER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/protocol.h"

struct server;

/* conn.c and resume.c are compiled into the NVML shim too, which has no
 * failover: they call what they use only where it is linked in. */
#define FAILOVER_HOOK __attribute__((weak))

/* 1 when SCUDA_STANDBY is set and failovers have not used up its list. */
int failover_standby(void);

/* A synchronizing call returned: take a snapshot when the interval
 * passed (or none was taken yet, or the journal is past its bound). */
void failover_at_sync(void);
/* Before s sends a frame of len bytes: a journal that would pass
 * SCUDA_JOURNAL_MAX takes a snapshot now. */
void failover_before_send(struct server *s, size_t len) FAILOVER_HOOK;

/* The reader got the reply to call `seq` (op) with `result`: kept while a
 * journal is, to check its replay. */
void failover_note_result(struct server *s, uint32_t seq, uint16_t op, uint32_t result) FAILOVER_HOOK;
/* After a failover: a reply nobody waits for is a replayed call's. Check
 * its result against the first one (loudly on a mismatch). */
int failover_replaying(struct server *s) FAILOVER_HOOK;
void failover_check_result(uint32_t seq, uint16_t op, uint32_t result) FAILOVER_HOOK;

/* ---- for the resumer (resume.c) ---- */

/* 1 when s has a parked copy to fail over to; then its address, the
 * parked session's pid and our frame count to claim. */
int failover_target(struct server *s, char *addr, size_t addrlen, uint32_t *pid, uint64_t *have) FAILOVER_HOOK;
/* The parked copy took the resume on fd, having server_has of our frames:
 * make fd the connection and send the journal. Returns 0, or -1. */
int failover_install(struct server *s, int fd, uint64_t server_has) FAILOVER_HOOK;
/* The standby could not take the session: no failover any more. */
void failover_abandon(struct server *s, const char *why) FAILOVER_HOOK;

#endif
