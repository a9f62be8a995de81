/* bulk_join.h - how a bulk connection reaches its session (protocol.h,
 * "Bulk connections").
 *
 * The parent forks a child per accepted connection, which runs the
 * handshake. When the hello asks for HELLO_BULK_JOIN, that child (the join
 * child) reads the join request and hands the connection, with a
 * join_note, up its socketpair to the parent (children.c), which passes
 * both down to the session's pair. The session checks the proof against
 * its join secret (bulk.c) and welcomes the connection or refuses it.
 * Only the session knows its secret; the parent and the join child only
 * carry the proof. */
#ifndef SCUDA_SERVER_BULK_JOIN_H
#define SCUDA_SERVER_BULK_JOIN_H

#include <stdint.h>

#include "../common/protocol.h"

#define JOIN_NOTE_MAGIC 0x4e494f4au /* "JOIN" */

/* What travels with the connection's fd between the processes. */
struct join_note {
    uint32_t magic;
    uint32_t pid;   /* the session the client names */
    uint32_t index; /* which of its bulk connections this is */
    uint8_t nonce[SCUDA_NONCE_LEN]; /* of this connection's handshake */
    uint8_t proof[SCUDA_PROOF_LEN]; /* auth_join_proof(), as the client computed it */
};

/* The join child, after a handshake with HELLO_BULK_JOIN: read the join
 * request, refuse it at once when no such session exists, else hand the
 * connection up `ctl`. Exits the process. */
void bulk_join_child(int fd, int ctl, const uint8_t nonce[SCUDA_NONCE_LEN], const char *peer)
    __attribute__((noreturn));

struct session;
/* In a session: start the thread that takes joins from the parent on
 * s->ctl_fd, for as long as the session lives (a join before the client's
 * scuda_bulk_setup is refused, with a reason). Returns 0 or -1. */
int bulk_join_listen(struct session *s);

#endif
