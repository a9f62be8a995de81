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

#include <stdint.h>

#include "../common/protocol.h"

/* From the first ping's reply: the session's pid, its resume secret and
 * how long it waits for a resume. Resume is off when either end says 0. */
void resume_setup(uint32_t session_pid, const uint8_t secret[RESUME_SECRET_LEN], uint32_t session_within_ms);
/* The shorter of SCUDA_RESUME_WITHIN and the session's; 0: no resume. */
uint32_t resume_within_ms(void);

/* The connection to server addr broke for why: start the resumer thread,
 * which tries for window_ms. Called with conn.c's lock held. Returns 0,
 * or -1 when no thread could start (the connection is then lost). */
int resume_start(const char *addr, const char *why, uint32_t window_ms);

/* A scuda_moved notice of len bytes, the session's last frame on this
 * connection: remember where it went. Returns 0, or -1 when malformed. */
int resume_note_move(const uint8_t *buf, uint32_t len);
/* Whether the last break is a move the resumer follows. */
int resume_moving(void);

/* Completed moves, and completed resumes of any kind (moves included). */
unsigned resume_moves(void);
unsigned resume_count(void);

/* ---- what conn.c does for the resumer ---- */

/* Make fd the connection once no thread reads the old one; returns the old fd. */
int conn_swap_fd(int fd);
/* The session has our frames up to ack. */
void conn_note_acked(uint64_t ack);
/* The session's frames we have read whole. */
uint64_t conn_frames_received(void);
/* The session now lives at addr (a move). */
void conn_set_addr(const char *addr);
/* The resume is over: ok, or lost for why (every call then fails). */
void conn_resume_over(int ok, const char *why);

#endif
