/* conn.h - the client's one connection to its session on the server.
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
#include <stddef.h>
#include <stdint.h>

#include "../common/session_info.h"

/* Connect, authenticate and receive the session info. On failure returns
 * CUDA_ERROR_NO_DEVICE and has logged a message naming the address, the
 * cause and the fix. */
CUresult conn_open(const char *addr);

/* The session info received at connect (valid in REMOTE mode). */
const struct session_info *conn_info(void);
const char *conn_addr(void);
/* How many times the session moved to another server (docs/architecture.md
 * 9.17): bulk connections are opened again to the new one. */
unsigned conn_moves(void);
/* How many times the connection was resumed, moves included (resume.c):
 * a striped copy cut by a break goes again over the main connection. */
unsigned conn_resumes(void);

/* Send one frame: header, then `req` bytes, then `bulk` bytes. */
struct rpc_call;
CUresult conn_send(struct rpc_call *c, int async);
/* Wait for the reply to the frame last sent by c (sync calls only). Returns
 * its result; *deferred says whether that is an earlier one-way call's
 * error reported on this reply (the call itself then succeeded). */
CUresult conn_wait(struct rpc_call *c, int *deferred);

/* Bytes sent to and received from the server so far, frames included. */
void conn_wire_bytes(uint64_t *sent, uint64_t *received);

/* Called in a forked child: the connection belongs to the parent. */
void conn_forget_after_fork(void);

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
void conn_transfer_begin(void);
void conn_transfer_progress(void);
void conn_transfer_end(void);
void conn_set_dead_handler(void (*handler)(void));

/* The calling thread's current context id, which every frame carries
 * (context.c keeps it up to date; 0: none, as for NVML calls). */
void conn_set_thread_ctx(uint32_t ctx_id);
uint32_t conn_thread_ctx(void);

#endif
