/* bulk.h - the session's bulk connections: extra TCP connections from the
 * same client that carry the chunks of large copies, several at once
 * (protocol.h, "Bulk connections"; docs/architecture.md, 9.9 Copies and striping).
 *
 * The client asks for them with scuda_bulk_setup, which makes this
 * session's join secret; each connection then joins through the parent
 * (bulk_join.c) and gets a thread here. A striped copy is announced on the
 * main connection (scuda_bulk_htod, scuda_bulk_dtoh) and runs in arrival
 * order like any call, so a kernel launched after a copy sees its bytes;
 * its chunks move on all connections at once, through pinned buffers that
 * overlap the network with DMA. The handlers are srv_scuda_bulk_* (listed
 * in handlers.gen.h). */
#ifndef SCUDA_SERVER_BULK_H
#define SCUDA_SERVER_BULK_H

#include <stddef.h>

struct session;
struct join_note;

/* A join the parent passed on: check its proof against this session's
 * join secret and, when it is good, make fd bulk connection note->index
 * (its thread started; the caller then sends the welcome). Returns 0, or
 * -1 with the reason in why (fd is then still the caller's). */
/* bulk_admit's checks alone, fd left out: a TLS join is checked before
 * the session runs its own TLS session on it (bulk_join.c). */
int bulk_check(const struct join_note *note, char *why, size_t whylen);
int bulk_admit(struct session *s, const struct join_note *note, int fd, char *why, size_t whylen);

/* Striping ends for this session (`why` is logged): every bulk
 * connection is shut down, so a client waiting on one wakes with an
 * error and copies again over its main connection. A migration calls it
 * at the switch: a client blocked in a striped copy that the held
 * session never read would otherwise never read the move notice. */
void bulk_end(const char *why);

#endif
