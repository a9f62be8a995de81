/* send_queue.h - writer-side batching of one-way calls
 * (docs/architecture.md, 9.3 Calls, threads and ordering).
 *
 * Small one-way frames (launches, memsets, event records) are copied into
 * a queue; a writer thread drains it with one write for everything queued
 * meanwhile, so a burst of launches costs a memcpy each, not a system call
 * each. The writer spins briefly after each batch while calls keep coming
 * and then sleeps, so an idle application never waits on it: the first
 * call after a pause wakes it at once.
 *
 * Everything else (calls that wait for a reply, bulk data sent from the
 * caller's buffer) is written directly by the calling thread, after it has
 * written out whatever was queued before it: the server sees frames in
 * exactly the order the application made its calls. */
#ifndef SCUDA_CLIENT_SEND_QUEUE_H
#define SCUDA_CLIENT_SEND_QUEUE_H

#include <stddef.h>
#include <sys/uio.h>

/* Frames up to this size are queued; larger ones are written directly. */
#define SENDQ_SMALL_FRAME (16u << 10)

/* Start the writer thread for fd. on_error(errno) is called (once per
 * failure) when a write fails. Returns 0 or -1. */
int sendq_start(int fd, void (*on_error)(int err));
/* Queue a copy of the frame. Returns 0, or -1 when the frame must be
 * written directly instead (queue full or writer not running). */
int sendq_enqueue(const struct iovec *iov, int iovcnt);
/* Write queued frames, then this frame, from the calling thread.
 * Returns 0 or -1 (errno set). */
int sendq_write_direct(struct iovec *iov, int iovcnt);
/* In a forked child: the queue and its thread belong to the parent. */
void sendq_forget_after_fork(void);

#endif
