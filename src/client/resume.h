/* resume.h - the client's resume of a broken connection (protocol.h,
 * "Resume"; docs/architecture.md, 3.11) and of a session that moved to
 * another server (9.17, "The switch").
 *
 * conn.c notices a break and calls resume_start; the resumer thread
 * reconnects, proves the session's resume secret, installs the new
 * connection, sends again what the session lacks (send_queue.c, by frame
 * number) and tells conn.c how it ended. conn.c owns the connection, its
 * lock and its waiters; this file owns what a resume needs to know. */
#ifndef SCUDA_CLIENT_RESUME_H
#define SCUDA_CLIENT_RESUME_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/messages.gen.h"
#include "../common/protocol.h"

struct server;

/* One server's resume state (servers.h embeds one per server; only
 * resume.c touches it). */
struct resume_state {
    pthread_mutex_t lock; /* guards the move fields and session_pid */
    uint32_t session_pid;
    uint8_t secret[RESUME_SECRET_LEN];
    uint32_t within_ms; /* the shorter of ours and the session's; 0 = no resume */
    /* This break's (written before the resumer starts, read by it). */
    uint32_t window_ms; /* within_ms, or less after silence */
    uint64_t broke_ms;
    char broke_why[160];
    /* A move (docs/architecture.md 9.17, "The switch"): the session said
     * it now lives on another server; the resumer goes there. */
    int moving;
    char move_to[256];
    uint32_t move_pid;
    struct msg_scuda_moved_req move; /* its timings, for the log */
    _Atomic unsigned moves;          /* completed moves (bulk.c opens its connections again) */
    _Atomic unsigned resumes;        /* completed resumes, moves included */
};
#define RESUME_STATE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* From the first ping's reply: the session's pid, its resume secret and
 * how long it waits for a resume. Resume is off when either end says 0. */
void resume_setup(struct server *s, uint32_t session_pid, const uint8_t secret[RESUME_SECRET_LEN],
                  uint32_t session_within_ms);
/* The shorter of SCUDA_RESUME_WITHIN and the session's; 0: no resume. */
uint32_t resume_within_ms(struct server *s);

/* The connection to server s broke for why: start the resumer thread,
 * which tries for window_ms. Called with conn.c's lock held. Returns 0,
 * or -1 when no thread could start (the connection is then lost). */
int resume_start(struct server *s, const char *why, uint32_t window_ms);

/* A scuda_moved notice of len bytes, the session's last frame on this
 * connection: remember where it went. Returns 0, or -1 when malformed. */
int resume_note_move(struct server *s, const uint8_t *buf, uint32_t len);
/* Whether the last break is a move the resumer follows. */
int resume_moving(struct server *s);

/* Completed moves, and completed resumes of any kind (moves included). */
unsigned resume_moves(struct server *s);
unsigned resume_count(struct server *s);

/* ---- what conn.c does for the resumer ---- */

/* Make fd the connection once no thread reads the old one; returns the old fd. */
int conn_swap_fd(struct server *s, int fd);
/* The session has our frames up to ack. */
void conn_note_acked(struct server *s, uint64_t ack);
/* The session's frames we have read whole. */
uint64_t conn_frames_received(struct server *s);
/* The session now lives at addr (a move). */
void conn_set_addr(struct server *s, const char *addr);
/* A failover (failover.c): the session's frames now number from received,
 * and the standby has ours up to acked. */
void conn_failover_counts(struct server *s, uint64_t received, uint64_t acked);
/* The session lives on the standby at addr, as process pid, from now on. */
void resume_failed_over(struct server *s, uint32_t pid, const char *addr);
/* The resume is over: ok, or lost for why (every call then fails). */
void conn_resume_over(struct server *s, int ok, const char *why);

#endif
