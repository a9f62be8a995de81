/* snapshot.h - snapshots for failover to a standby server (snapshot.c;
 * docs/architecture.md, 9.24 Failover to a standby). */
#ifndef SCUDA_SERVER_SNAPSHOT_H
#define SCUDA_SERVER_SNAPSHOT_H

#include <stdatomic.h>
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
struct migrate_later;
int migrate_copy_out(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *b_pid,
                     struct msg_scuda_migrate_rep *rep, unsigned *ahead, char *why, size_t whylen,
                     struct migrate_later **later);

/* A snapshot whose memory was staged under the hold (migrate_stage.h):
 * the items are on the importer, the memory follows from a thread while
 * the session runs on. */
struct migrate_later {
    int fd;                  /* to the importer (the caller closes it) */
    uint64_t received, sent; /* the resume counts at the hold, for MIG_PARK */
    uint64_t hold_ns;        /* from the request to the hold */
    uint64_t stage_ns;       /* copying the memory aside on the GPU */
    uint64_t staged;         /* bytes staged */
    uint64_t held_ns;        /* from the request to the session serving again: its calls' pause */
    struct migrate_later_state *in; /* migrate_out.c's */
};

/* Stream the staged memory (stopping when *stop is set), send MIG_END and
 * judge the verdict: 0 when the importer holds a checked copy, else -1
 * with why. *rep: bytes sent, the importer's replay and copy times;
 * *kept: bytes the parked copy lent. On any thread. */
int migrate_later_finish(struct migrate_later *l, const _Atomic int *stop, struct msg_scuda_migrate_rep *rep,
                         uint64_t *kept, char *why, size_t whylen);
/* The session's ranges the copy holds (malloc'd: the caller's now). */
long migrate_later_ranges(struct migrate_later *l, struct migrate_range **out);
/* Free the staging and the rest (not the fd). */
void migrate_later_free(struct migrate_later *l);

/* 1 while a snapshot's memory streams after its hold: no move, no other
 * snapshot until it is parked or failed. */
int snapshot_streaming(void);

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
