/* resume.h - the session's side of a resumed connection (protocol.h,
 * "Resume"; docs/architecture.md, 3.11).
 *
 * Every frame the session writes on the main connection, except pongs,
 * is numbered and kept here until the client acknowledges it, so that a
 * connection that broke can be replaced by the client's new one and
 * nothing sent is lost. A reply that carried device bytes is kept as its
 * FRAME_REDO stand-in instead (no copy of large payloads): the client
 * asks again. Every frame the session reads whole is counted; the count
 * travels in pongs and in the answer to a resume. */
#ifndef SCUDA_SERVER_RESUME_H
#define SCUDA_SERVER_RESUME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../common/protocol.h"

struct session;
struct join_note;

/* At session start, on main connection fd: a fresh resume secret (handed
 * to the client in the reply to its first ping). */
void resume_init(int fd);
/* The secret, for the reply to the first ping: from then on a break
 * waits for a resume. */
const uint8_t *resume_secret(void);
/* The client said it exits (its last ping): a break ends the session. */
void resume_client_leaving(void);

/* Write one numbered frame (iov[0] is its header) on the main connection
 * and keep it until acknowledged: a copy of it, or of `kept` (a stand-in
 * of kept_len bytes) when that is not NULL. Takes s->write_lock. Returns 0, or
 * -1 when the connection is broken (the frame is kept all the same). */
int resume_write_frame(struct session *s, const struct iovec *iov, int n, const void *kept, size_t kept_len);
/* The same for a caller that holds s->write_lock and writes the frame
 * itself afterwards (a streamed reply): number it and keep `kept`. */
void resume_keep_locked(const void *kept, size_t kept_len);

/* A frame of the client's was read whole. Returns 1 when the client
 * should hear an acknowledgement now (it asked with FRAME_ACK_ME, or
 * much arrived since the last one). */
int resume_note_received(uint16_t flags, size_t len);
/* What the client's frames count, for a pong (and it was acknowledged). */
uint64_t resume_received(void);
/* The client acknowledged `ack` of our frames: forget them. */
void resume_acked(uint64_t ack);

/* In the join thread: 0 when note proves the resume secret, else -1 with
 * the reason (for the log only) in why. */
int resume_check(const struct join_note *note, char *why, size_t whylen);
/* Hand a checked resume's connection to the dispatch thread (which takes
 * it in resume_wait) and shut the old connection down, so the dispatch
 * thread and any writer stop using it at once. */
void resume_offer(struct session *s, int fd, uint64_t received);

/* In the dispatch thread, after its connection broke: wait up to
 * --resume-within for a resume, then make the new connection the
 * session's: welcome it, send again what the client lacks, close the old
 * one. Returns 0 when resumed, -1 when none came (the session ends). */
int resume_wait(struct session *s);

/* Wait up to timeout_ms for a checked resume (resume_offer). Returns its
 * fd and what the client has of our frames, or -1. */
int resume_take(struct session *s, int timeout_ms, uint64_t *client_has);
/* Make fd the session's connection: welcome it, send again what the
 * client lacks, close the old one. Returns 0, or -1 when we no longer keep
 * what it lacks (the session ends). */
int resume_install(struct session *s, int fd, uint64_t client_has);

/* ---- a migration (docs/architecture.md 9.17, "The switch") ------------------ */

/* 1 when the client holds the secret and did not say it leaves. */
int resume_can_follow(void);
/* Our frames numbered so far (s->write_lock held). */
uint64_t resume_sent_locked(void);
/* Forget frame `no` when it is the newest one kept and was never written
 * (s->write_lock held): a migration reply that the switch did not need. */
int resume_drop_newest_locked(uint64_t no);
/* Call fn for each kept frame, oldest first, until it returns nonzero. */
int resume_each_kept(int (*fn)(void *arg, uint64_t no, const void *bytes, size_t len), void *arg);
/* On the server a session moves to, before its client resumes: the
 * exporter's kept frames (in order), then its secret and counts. Each
 * returns 0, or -1 when the state is inconsistent (or out of memory). */
int resume_adopt_kept(uint64_t no, const void *bytes, size_t len);
int resume_adopt(const uint8_t secret[RESUME_SECRET_LEN], uint64_t received, uint64_t sent);

#endif
