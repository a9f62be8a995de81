/* migrate_preload.h - a move that loads ahead: the other server loads the
 * session's modules and libraries while the session still runs here, so
 * that the hold replays only what came after (docs/architecture.md,
 * 9.17, "Loading ahead").
 *
 * An operator's move (scuda migrate, a drain) starts a thread here: it
 * connects to B, sends the contexts and the placing sequence as it stands
 * (images by digest where B has them), then MIG_PRELOADED, and waits for
 * B to send it back once it replayed them all. Meanwhile the dispatch
 * thread serves the client. When the thread is done it posts the request
 * again; the dispatch thread then holds the session as before and sends
 * only what B lacks: MIG_HOLD, new contexts, the rest of the sequence,
 * and everything after it. The sequence stays one sequence in one order:
 * B replays its head early and its tail at the hold. If the head changed
 * meanwhile (an unload, a context destroyed or changed), the early
 * connection is dropped and the move starts afresh at the hold, as a
 * move without loading ahead. */
#ifndef SCUDA_SERVER_MIGRATE_PRELOAD_H
#define SCUDA_SERVER_MIGRATE_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"

/* What the early connection holds, for the hold (migrate_out.c). */
struct migrate_preloaded {
    int fd;                         /* -1: nothing loaded ahead */
    uint32_t pid, seq;              /* B's session, the next frame number */
    struct msg_migrate_item *sent;  /* what B replayed: contexts, then the sequence's head (no names, no data) */
    long nsent;
    unsigned images, by_hash;       /* images sent, and of them by digest alone */
    uint64_t ns;                    /* how long it took, the session running */
};

/* Who loads ahead: an operator's move (the thread posts the move's
 * request again when done) or a snapshot (the client asks again at a
 * later synchronizing call; snapshot.c). */
enum migrate_preload_for { PRELOAD_FOR_MOVE, PRELOAD_FOR_SNAPSHOT };

/* On the dispatch thread: start loading ahead for a move or a snapshot to
 * `to`. Returns 0 when the thread runs, -1 when it could not start (the
 * copy then goes on without it). */
int migrate_preload_start(const char *to, enum migrate_preload_for purpose);
/* 1 when loading ahead can shorten the hold: the session holds a
 * module's or library's image (replaying images is what makes a hold
 * long: PyTorch's hundreds take seconds). */
int migrate_preload_worthwhile(void);
/* 1 from the start until migrate_preload_take. */
int migrate_preload_busy(void);
/* While busy: 1 when the thread finished (migrate_preload_take will not
 * wait), and whom it loads for. */
int migrate_preload_done(void);
enum migrate_preload_for migrate_preload_purpose(void);
/* At the hold, on the dispatch thread: wait for the thread (it is done
 * when the request was posted again) and take what it left. p->fd is -1
 * when it failed (logged) or loaded ahead for another address. */
void migrate_preload_take(const char *to, struct migrate_preloaded *p);
/* Drop from items[0..n) what B already replayed, in place. Returns the
 * new count, or -1 when the items no longer begin with it (something
 * was unloaded or changed meanwhile): the early connection is useless. */
long migrate_preload_filter(const struct migrate_preloaded *p, struct msg_migrate_item *items, long n);
void migrate_preloaded_free(struct migrate_preloaded *p);
/* The session ends: a thread that finished is joined and its connection
 * closed (the other server drops what it loaded); one still loading is
 * left to end with the process. */
void migrate_preload_abandon(void);

#endif
