/* bulk_join.h - how a bulk connection reaches its session (protocol.h,
 * "Bulk connections").
 *
 * The parent runs the connection's handshake itself (admission.c),
 * reads the join request, and passes the connection with a join_note
 * down the pair of the session with that pid and that user (children.c,
 * SCM_RIGHTS), keeping its own copy. The session checks the proof
 * against its join secret (bulk.c): it welcomes a good join itself, and
 * answers the parent with a join_verdict either way. Every bad join (no
 * such session, another user's, a wrong secret, a taken slot) is refused
 * by the parent, with one message, no sooner than a fixed delay after
 * the request: a refusal tells no one which pids are live sessions.
 * Only the session knows its secret; the parent only carries the proof.
 *
 * Over TLS the parent's TLS session, in which the request came, cannot
 * move to the session. A bad join is refused inside it, as above. A good
 * one (the session checked the proof first, so no one without the secret
 * ever sees the difference) is the session's: it sends JOIN_GO_BYTE in
 * plain, runs a TLS session of its own on the socket, and the client
 * repeats its request inside that one before it is welcomed (bulk_join.c,
 * second_tls). */
#ifndef SCUDA_SERVER_BULK_JOIN_H
#define SCUDA_SERVER_BULK_JOIN_H

#include <stdint.h>

#include "../common/protocol.h"

#define JOIN_NOTE_MAGIC 0x4e494f4au    /* "JOIN" */
enum join_kind { JOIN_BULK = 0, JOIN_RESUME = 1, JOIN_PEER = 2 /* a peer link (peer_link.h) */ };
#define JOIN_VERDICT_MAGIC 0x54434456u /* "VDCT" */

/* The one refusal of every bad join, and how long after the join request
 * it is sent at the earliest: longer than a session takes to check a
 * proof, so both paths answer at the same moment. */
#define JOIN_REFUSAL "bulk join refused: no open slot of a session of yours matches it; copies go over the main connection"
#define RESUME_REFUSAL "resume refused: no session of yours matches it"
#define PEER_REFUSAL "peer join refused: no open grant matches it"
#define JOIN_REFUSAL_DELAY_MS 100

/* What travels with the connection's fd from the parent to the session. */
struct join_note {
    uint32_t magic;
    uint32_t pid;   /* the session the client names */
    uint32_t index; /* which of its bulk connections this is */
    uint8_t nonce[SCUDA_NONCE_LEN]; /* of this connection's handshake */
    uint8_t proof[SCUDA_PROOF_LEN]; /* auth_join_proof(), as the client computed it */
    uint32_t kind;     /* JOIN_BULK, or JOIN_RESUME: the session's new main connection */
    uint64_t received; /* a resume: the session's frames the client has */
    uint32_t zstd;     /* a bulk join with HELLO_JOIN_ZSTD: compressed chunks allowed */
};

/* The session's answer, up its pair: the join with that nonce was
 * welcomed (ok 1) or is the parent's to refuse (ok 0). */
struct join_verdict {
    uint32_t magic;
    uint32_t ok;
    uint8_t nonce[SCUDA_NONCE_LEN];
};

/* An operator's request that the session move (control.c; docs/operate.md,
 * "Moving a session"): it comes down the pair with the connection of
 * whoever asked, on which the session writes the outcome, one line. */
#define MIGRATE_NOTE_MAGIC 0x5247494du /* "MIGR" */
#define MIGRATE_TO_MAX 256
struct migrate_note {
    uint32_t magic;
    char to[MIGRATE_TO_MAX]; /* HOST:PORT, NUL-terminated */
};

struct session;
/* In a session: start the thread that takes joins from the parent on
 * s->ctl_fd, for as long as the session lives (a join before the client's
 * scuda_bulk_setup is refused). Returns 0 or -1. */
int bulk_join_listen(struct session *s);
/* From here on every join is taken; before, only peer joins (the links
 * of an import, which runs before the session serves). */
void bulk_join_open_all(void);

#endif
