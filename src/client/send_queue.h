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

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../common/protocol.h"

/* Frames up to this size are queued; larger ones are written directly. */
#define SENDQ_SMALL_FRAME (16u << 10)

/* Frames up to this size are copied to be kept for a resume; larger ones
 * are kept by reference (their bytes are the caller's until the session
 * acknowledged them: see sendq_write_direct). */
#define SENDQ_KEEP_COPY_MAX (256u << 10)

struct sendq_buffer {
    uint8_t *data;
    size_t len, cap;
};

/* A frame kept until the session acknowledges it (protocol.h, "Resume"):
 * a copy in the log (one buffer for every copied frame, so a
 * launch costs a memcpy and no malloc), or its header and pointers to
 * the caller's bytes. */
#define KEPT_PARTS 4
struct sendq_kept {
    uint64_t no;
    int copied;
    size_t off; /* copied: where in the log */
    size_t len;
    uint8_t hdr[FRAME_HEADER_LEN];
    struct iovec rest[KEPT_PARTS];
    int nrest;
};

/* One connection's queue (servers.h embeds one per server; only
 * send_queue.c touches it). */
struct sendq {
    int fd;
    int running;
    void (*on_error)(void *arg, int err);
    void *on_error_arg;
    pthread_mutex_t write_lock; /* held while writing to the socket */
    pthread_mutex_t lock;       /* guards pending and sleeping */
    pthread_cond_t wake;
    struct sendq_buffer pending;
    _Atomic size_t pending_len; /* read without the lock while spinning */
    int sleeping;
    /* The buffer being written (under write_lock), kept reachable here: a
     * child forked meanwhile inherits it without the thread that holds it,
     * and LeakSanitizer would call it a leak. */
    void *in_flight;
    /* Numbering and keeping, under lock: numbers follow the order in which
     * frames reach the socket (queued ones in queue order, a direct one
     * right after what it flushes). */
    uint64_t next_no;
    struct sendq_kept *kept;
    size_t kept_head, kept_count, kept_cap; /* a ring */
    _Atomic size_t kept_bytes;
    uint8_t *log;
    size_t log_start, log_end, log_cap; /* copied frames, in order */
    /* The failover journal (failover.c): while on, frames after `floor`
     * stay kept whatever the session acknowledges, each a copy. */
    int journaling;
    uint64_t floor;
};
#define SENDQ_INIT                                                                                           \
    {                                                                                                        \
        .fd = -1, .next_no = 1, .write_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,  \
        .wake = PTHREAD_COND_INITIALIZER                                                                     \
    }

/* Start q's writer thread for fd. on_error(arg, errno) is called (once per
 * failure) when a write fails. Frames are numbered from first_no on
 * (protocol.h, "Resume"). Returns 0 or -1. */
int sendq_start(struct sendq *q, int fd, void (*on_error)(void *arg, int err), void *arg);
void sendq_set_first_no(struct sendq *q, uint64_t first_no);
/* Queue a copy of the frame. Returns 0, or -1 when the frame must be
 * written directly instead (queue full or writer not running). */
int sendq_enqueue(struct sendq *q, const struct iovec *iov, int iovcnt);
/* Write queued frames, then this frame, from the calling thread. The
 * frame's number goes to *no before any byte is written. iov[0] is the
 * frame's header (always copied). A frame above SENDQ_KEEP_COPY_MAX keeps
 * pointers to the rest: the caller must not let them go before the
 * session acknowledged the frame (its reply came, or sendq_acked covers
 * it). Returns 0, or -1 (errno set): the frame is kept all the same, for
 * a resume. */
int sendq_write_direct(struct sendq *q, struct iovec *iov, int iovcnt, _Atomic uint64_t *no);

/* Resume (protocol.h): the session has frames up to `ack`; forget them. */
void sendq_acked(struct sendq *q, uint64_t ack);
/* On the new connection fd: forget what the session has (up to
 * server_has), write every kept frame after it, in order, and make fd the
 * queue's. Queued frames not yet written are among the kept ones. With
 * `replayed` (a failover's journal) every frame sent again carries
 * FRAME_REPLAYED. Returns the number of frames sent again, or -1 (errno
 * set). */
long sendq_resume(struct sendq *q, int fd, uint64_t server_has, int replayed);
/* The failover journal (docs/architecture.md 9.24): from now on keep a
 * copy of every frame numbered from the next on, acknowledged or not
 * (no-op when on already). */
void sendq_journal_begin(struct sendq *q);
/* A snapshot holds the session as of our frame `floor`: forget what is
 * kept up to it; the journal is what follows. */
void sendq_journal_floor(struct sendq *q, uint64_t floor);
/* No journal: frames are forgotten once acknowledged, up to `acked`. */
void sendq_journal_end(struct sendq *q, uint64_t acked);
int sendq_journaling(struct sendq *q);
/* Bytes of the frames kept now (copied or lent). */
size_t sendq_kept_bytes(struct sendq *q);
/* The connection is lost for good: forget every kept frame. */
void sendq_forget_kept(struct sendq *q);
/* In a forked child: the queue and its thread belong to the parent. */
void sendq_forget_after_fork(struct sendq *q);

#endif
