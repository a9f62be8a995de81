/* migrate_switch.h - the switch: after a checked migration the client
 * leaves the exporting server A for the importing server B
 * (migrate_switch.c; docs/architecture.md, 9.17, "The switch"). */
#ifndef SCUDA_SERVER_MIGRATE_SWITCH_H
#define SCUDA_SERVER_MIGRATE_SWITCH_H

#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"

struct session;
struct srv_call;

/* The frames of the migration connection (migrate_out.c, migrate_in.c). */
int migrate_send_item(int fd, const struct msg_migrate_item *it, uint32_t seq);
int migrate_read_verdict(int fd, int timeout_ms, struct msg_arena *a, struct msg_migrate_verdict *v, void **payload);
int migrate_read_item(int fd, int timeout_ms, void **payload, struct msg_arena *a, struct msg_migrate_item *it,
                      char *why, size_t wl);
/* The same, read into buf when the frame fits its cap (*payload NULL
 * then: the item's bytes point into buf until the next read). */
int migrate_read_item_into(int fd, int timeout_ms, uint8_t *buf, size_t cap, void **payload, struct msg_arena *a,
                           struct msg_migrate_item *it, char *why, size_t wl);
void migrate_send_verdict(int fd, const struct msg_migrate_verdict *v);
/* Send the last item of a hand-over (MIG_SWITCH, MIG_PARK) and read the
 * other server's verdict on it: 0 when it says `word` ("ready",
 * "parked"), else -1 with why, naming the peer as `peer` ("the standby")
 * and what it did not do as `to_do` ("park the copy"). */
int migrate_hand_over_item(int fd, const struct msg_migrate_item *it, uint32_t seq, const char *word,
                           const char *peer, const char *to_do, char *why, size_t wl);
/* Connect to `to` as a client does, asking for a session that imports;
 * B's session pid in *pid. Returns the fd, or -1 with why. (migrate_out.c) */
int migrate_connect_peer(const char *to, uint32_t *pid, char *why, size_t whylen);

/* ---- on A, the exporting session ------------------------------------------ */

/* Move the session to `to` (HOST:PORT), on the dispatch thread: refuse
 * with the reasons, or hold, copy, check, and switch. c is the client's
 * scuda_migrate call (its reply goes out from whichever server the client
 * resumes on), NULL for an operator's request. rep gets the outcome.
 * Returns 1 when the client was told to move (the dispatch thread then
 * calls migrate_switch_wait before it reads again), else 0: the session
 * goes on here. (migrate_out.c) */
int migrate_session(struct session *s, const char *to, struct srv_call *c, struct msg_scuda_migrate_rep *rep);
/* 1 when the last migrate_session failed at or after reaching the other
 * server (another server might do), 0 when the session cannot move now. */
int migrate_failed_at_peer(void);

/* After a good verdict on fd: hand B the resume state, and on B's word
 * that it waits for the client, send the client the notice. c and rep as
 * above. Returns 0 when the notice went out, -1 with why when nothing
 * changed for the client (it goes on here). */
int migrate_switch_out(struct session *s, int fd, const char *to, uint32_t b_pid, struct srv_call *c,
                       struct msg_scuda_migrate_rep *rep, uint64_t t0_ns, char *why, size_t wl);
/* 1 while a notice went out and the outcome is not known. */
int migrate_switch_pending(void);
/* On the dispatch thread, after the notice: wait until B says the client
 * resumed there (returns -1: this session ends), or the client comes back
 * here (returns 0: it goes on here, on the new connection), or neither
 * within --resume-within (-1). */
int migrate_switch_wait(struct session *s);
/* The outcome of the last migration, for an operator's request. */
const char *migrate_switch_outcome(void);

/* ---- an operator's request (scuda migrate; control.c) ------------------------- */

/* From the join thread: move to `to` at the next call boundary; the
 * outcome goes to reply_fd as one line, which is then closed. */
void migrate_request_post(const char *to, int reply_fd);
/* 1 while a request waits for the dispatch thread. */
int migrate_request_waiting(void);
/* On the dispatch thread: run it. Returns 1 when the client was told to
 * move (the answer follows migrate_switch_wait), else 0 (answered). */
int migrate_request_run(struct session *s);
/* From the thread that loaded ahead (migrate_preload.c): the request
 * takes its turn again, now to hold and move. */
void migrate_request_repost(void);
/* The outcome line for whoever asked (nothing when no one did). */
void migrate_request_answer(const char *line);

/* ---- on B, the importing session ------------------------------------------- */

/* After the verdict: take A's resume state and tell A this session waits
 * for the client. Returns 0, or -1 (the process then exits). */
int migrate_switch_in(struct session *s, char *why, size_t wl);
/* Once joins are taken: wait for the client's resume, A's connection
 * open. Returns when the client resumed; ends the process when A took the
 * session back or no resume came within --resume-within. */
void migrate_switch_in_await(struct session *s);

#endif
