/* conn.h - the client's connection to its session on one server.
 *
 * Threads of the application share it. Sends are serialized by a mutex.
 * Replies are read by whichever waiting thread currently holds the reader
 * role (leader/follower): it hands other threads' replies to them and
 * passes the role on when its own reply has come, so a thread blocked in
 * cuStreamSynchronize never holds up another thread's calls, and no extra
 * receiver thread sits between the socket and the caller. */
#ifndef SCUDA_CLIENT_CONN_H
#define SCUDA_CLIENT_CONN_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/session_info.h"

struct server;
struct waiter;

/* One connection's state (servers.h embeds one per server; only conn.c
 * touches it). */
struct conn_state {
    int fd;
    char addr[256];
    struct session_info info;
    pthread_mutex_t recv_lock; /* guards everything below */
    struct waiter *waiters;
    int reader_active;
    _Atomic int dead; /* read unlocked on the send path; set by the resumer and the liveness thread */
    uint64_t wait_since_ms; /* when the waiter list last became non-empty */
    _Atomic uint32_t next_seq;
    /* Liveness (conn.c, section "liveness"). */
    _Atomic uint64_t rx_progress;      /* bumped by every piece read */
    _Atomic uint32_t server_dead_ms;   /* the session's --dead-after (its pongs say); 0 = none */
    uint32_t dead_after_ms;            /* SCUDA_DEAD_AFTER; 0 = never */
    int liveness_started;
    int transfers;                     /* conn_transfer_begin without end (under recv_lock) */
    void (*_Atomic on_dead)(struct server *s);
    /* Resume (protocol.h, "Resume"; docs/architecture.md, 3.11): resume.c
     * reconnects; the connection's side of it is here. */
    _Atomic int resuming;              /* the connection broke; the resumer thread reconnects */
    pthread_cond_t resumed;            /* broadcast when it is over, either way (under recv_lock) */
    _Atomic uint64_t received;         /* the session's frames read whole (the reader only writes it) */
    uint64_t ack_sent;                 /* what the last ping acknowledged (the reader's) */
    _Atomic uint64_t acked;            /* our frames the session has */
    /* Bytes on the wire, frames included (conn_wire_bytes). */
    _Atomic uint64_t bytes_sent, bytes_received;
    /* The first heartbeat's round trip at connect: how slow the link is,
     * for what pays only over a slow one (alloc_ahead.c). */
    _Atomic uint64_t greet_rtt_us;
};
#define CONN_STATE_INIT                                                                                       \
    { .fd = -1, .recv_lock = PTHREAD_MUTEX_INITIALIZER, .resumed = PTHREAD_COND_INITIALIZER }

/* Connect, authenticate and receive the session info. On failure returns
 * CUDA_ERROR_NO_DEVICE and has logged a message naming the address, the
 * cause and the fix. */
CUresult conn_open(struct server *s, const char *addr);

/* The session info received at connect (valid in REMOTE mode). */
const struct session_info *conn_info(const struct server *s);
const char *conn_addr(const struct server *s);
/* How many times the session moved to another server (docs/architecture.md
 * 9.17): bulk connections are opened again to the new one. */
unsigned conn_moves(struct server *s);
/* How many times the connection was resumed, moves included (resume.c):
 * a striped copy cut by a break goes again over the main connection. */
unsigned conn_resumes(struct server *s);

/* Send one frame to c->srv: header, then `req` bytes, then `bulk` bytes. */
struct rpc_call;
CUresult conn_send(struct rpc_call *c, int async);
/* Wait for the reply to the frame last sent by c (sync calls only). Returns
 * its result; *deferred says whether that is an earlier one-way call's
 * error reported on this reply (the call itself then succeeded). */
CUresult conn_wait(struct rpc_call *c, int *deferred);

/* Bytes sent to and received from the server so far, frames included. */
void conn_wire_bytes(struct server *s, uint64_t *sent, uint64_t *received);

/* Called in a forked child: the connection belongs to the parent. */
void conn_forget_after_fork(struct server *s);

/* What reads a FRAME_HOST_WORK frame of `len` bytes off fd (a replayed
 * graph's host work: capture.c); without one such frames are skipped.
 * The layers above register it at cuInit, so that the connection calls
 * nothing above itself. */
void conn_set_host_work_handler(int (*handler)(int fd, uint32_t len));

/* Liveness (docs/architecture.md, 3.10) for transfers outside the main
 * connection (striped copies on bulk connections): between begin and end
 * the caller waits on the server as a waiting call does, each piece moved
 * is a sign of life, and when the server is declared dead the handler
 * registered here runs (it shuts the bulk connections down, so their
 * transfers fail instead of hanging). */
void conn_transfer_begin(struct server *s);
void conn_transfer_progress(struct server *s);
void conn_transfer_end(struct server *s);
void conn_set_dead_handler(struct server *s, void (*handler)(struct server *s));

/* The calling thread's current context id, which every frame carries
 * (context.c keeps it up to date; 0: none, as for NVML calls). */
void conn_set_thread_ctx(uint32_t ctx_id);
uint32_t conn_thread_ctx(void);
/* The context id this thread's frames to server s carry: its current
 * context's on its current server, else its last context on s, else any
 * live context of s (0: none). A call may name another (rpc_call.ctx). */
uint32_t conn_ctx_on(const struct server *s);

#endif
