/* peer_link.h - a session's links to sessions on other servers, for
 * copies between devices of different servers that never cross the
 * client (docs/architecture.md, 3.12 Peer links).
 *
 * The client asks session A (the source) for a grant (scuda_peer_grant):
 * A reserves one of its few link slots and makes a random one-time secret
 * for it, good for PEER_GRANT_TTL_MS. The client hands the grant to
 * session B (scuda_peer_connect), which dials A's server (peer_dial.c)
 * and joins with it: A's parent routes the connection to A by pid, as a
 * bulk join (bulk_join.h), and A checks the proof in constant time and
 * consumes the grant. Every bad peer join gets the parent's one refusal.
 * The link then stays open for later copies (peer_copy.c), one at a time,
 * until either end fails on it or the session ends. */
#ifndef SCUDA_SERVER_PEER_LINK_H
#define SCUDA_SERVER_PEER_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "../common/protocol.h"

/* Links (and grants, which each hold a slot) one session keeps at once:
 * one link per other server of the client (a link carries copies both
 * ways), with room for one being set up again. Each link that copied
 * holds two pinned PEER_CHUNK buffers. */
#define PEER_LINKS_MAX 8
/* How long a grant waits for its join. */
#define PEER_GRANT_TTL_MS 30000
/* The longest one read or write on a link may wait: a dead or silent
 * peer ends the copy with an error after this, never a hang. */
#define PEER_IO_TIMEOUT_MS 30000
/* A copy's chunk: each link has two pinned buffers of this size, so the
 * DMA of one chunk runs while the other is on the wire (peer_copy.c). */
#define PEER_CHUNK (4u << 20)

struct join_note;
struct staging;

/* A join the parent passed on (JOIN_PEER): whether its proof matches an
 * open grant. peer_join_admit also consumes the grant and makes fd the
 * slot's link. Return 0, or -1 with the reason (for the log) in why. */
int peer_join_check(const struct join_note *note, char *why, size_t whylen);
int peer_join_admit(const struct join_note *note, int fd, char *why, size_t whylen);
/* The join thread sent the admitted link its welcome: from now on it may
 * be used (and closed) by another thread. */
void peer_join_welcomed(uint32_t slot);

/* A grant on a free slot (its index; -1 when none is free), its secret
 * into secret: the client's scuda_peer_grant, and an importing session's
 * links for a migration's memory (migrate_links.h). */
int peer_grant(uint8_t secret[PEER_SECRET_LEN]);

/* The link joined on `slot`, taken whole: its fd is the caller's and the
 * slot is free again. -1 when the slot holds no link. */
int peer_link_take(uint32_t slot);

/* Dial the server at addr and join session pid's slot `link` with the
 * grant's secret; over TLS (fp not empty) the server must present that
 * certificate. Returns the connected fd, or -1 with the reason in err. */
int peer_dial(const char *addr, uint32_t pid, uint32_t link, const uint8_t secret[PEER_SECRET_LEN], const char *fp,
              char *err, size_t errlen);

/* A copy's hold on link `slot`: its fd and its two staging buffers
 * (allocated at the first copy; they need a current context). One copy
 * at a time per link: a second waits. Returns 0, or -1 when the slot
 * holds no link. */
struct peer_hold {
    uint32_t slot;
    int fd;
    struct staging *buf[2];
};
int peer_link_acquire(uint32_t slot, struct peer_hold *h);
/* Let the link go; broken: it is out of step or dead, close it. */
void peer_link_release(struct peer_hold *h, int broken);

/* Every grant and link gone, and the buffers forgotten (not freed: the
 * driver's reset freed them), for the session fuzzer's reset between
 * inputs. No copy may run. */
void peer_link_forget_all(void);

#endif
