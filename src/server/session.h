/* session.h - one client's session: a process of its own
 * (docs/architecture.md, 2 Processes). */
#ifndef SCUDA_SERVER_SESSION_H
#define SCUDA_SERVER_SESSION_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

#include "server.h"
#include "../common/wire.h"

struct session {
    int fd;
    const struct server_options *opt;
    pthread_mutex_t write_lock;      /* one frame at a time on the socket */
    pthread_mutex_t error_lock;
    CUresult deferred_error;         /* first failure of an async call, not yet reported */
    int log_fd;                      /* the server's stderr; fd 1 and 2 carry device printf */
    int ctl_fd;                      /* from the parent: bulk joins (bulk_join.h); -1 = none */
};

/* Runs the session on an accepted, authenticated connection, in the forked
 * child. ctl_fd is the child's end of its socketpair with the parent, on
 * which bulk joins arrive (-1: none). Never returns: the process exits
 * when the client goes away, closing its bulk connections with it. */
void session_main(int fd, int ctl_fd, const struct server_options *opt, int log_fd) __attribute__((noreturn));

struct frame_header;
/* Runs the call of one received frame (header h, payload of h->length
 * bytes, malloc'd and taken over) inline, on the calling thread: the
 * dispatch loop's path from a frame to its reply, without the socket's
 * framing or the worker threads. The session fuzzer's seam
 * (tests/fuzz/libfuzzer/fuzz_session.c). */
void session_run_frame(struct session *s, const struct frame_header *h, void *payload);

/* Make the client's context `ctx_id` current on the calling thread. */
CUresult session_bind_ctx(struct session *s, uint32_t ctx_id);

/* Remember the first failure of an async call for the next reply of an
 * observing call (op flag `observes`, session.c). */
void session_defer_error(struct session *s, CUresult r, uint16_t op);

struct srv_call;
struct staging;
/* A streamed bulk reply: the header promises n bytes, which the handler
 * then writes chunk by chunk, holding the socket until session_stream_end.
 * Its result follows send_reply's rule (an observing call reports an
 * earlier one-way call's error with its bytes). Returns nonzero when the
 * header could not be written (the client is gone); the stream must still
 * be ended. */
int session_stream_begin(struct srv_call *c, uint64_t n);
int session_stream_write(struct srv_call *c, const void *p, size_t len);
void session_stream_end(struct srv_call *c);
/* A call whose handler set c->replied and left its reply to another
 * thread: session_owe_late_reply on the dispatch thread before the
 * handler returns (the liveness thread then keeps the client told that
 * the session lives), session_reply_late once (result CUDA_SUCCESS, the
 * message in out; any thread). */
void session_owe_late_reply(void);
void session_reply_late(struct session *s, uint16_t op, uint32_t seq, const wire_buf *out);
/* Blocking calls running on workers now (a migration waits for none). */
int session_calls_running(void);
/* The next call must not run before this "synchronous" copy completes. */
void session_after_copy(struct staging *b);

#endif
