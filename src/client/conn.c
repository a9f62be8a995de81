/* conn.c - see conn.h. */
#define _GNU_SOURCE
#include "conn.h"
#include "failover.h"
#include "resume.h"
#include "rpc.h"
#include "send_queue.h"
#include "servers.h"
#include "shim.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/dial.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/tls.h"
#include "../common/transport.h"
#include "../common/clock.h"

#define CONNECT_TIMEOUT_MS 5000
/* The session runs cuInit before it welcomes us; that can take seconds. */
#define WELCOME_TIMEOUT_MS 60000
#define DEAD_PEER_S 10
/* How long a thread waiting for a reply polls the socket before it sleeps. */
#define REPLY_SPIN_NS 30000
/* SCUDA_DEAD_AFTER's default, in seconds (docs/architecture.md, 3.10). */
#define DEAD_AFTER_DEFAULT_S 10
/* Large payloads are read in pieces of this size, each counted as a sign
 * of life: a 64 MiB reply on a slow link is not a silent server. */
#define READ_PIECE (1u << 20)
/* How long a client tries to resume a server that went silent, rather than
 * one whose connection broke (declare_dead_locked): a fresh path answers
 * within a few round trips; a frozen session never does. */
#define RESUME_AFTER_SILENCE_MS 250u
/* How often the liveness thread looks at the connection: pings, the
 * dead-after rule, and what arrives while no call waits (read_while_idle). */
#define IDLE_TICK_MS 100u

/* What one-way calls may leave kept for a resume before one of them waits
 * for the session's acknowledgement (conn_send). */
#define KEPT_SOFT_MAX (8u << 20)

/* A thread waiting for its reply, or (ack_only) for the session to
 * acknowledge a frame whose bytes it lent (send_queue.h). Lives in the
 * thread's storage. */
struct waiter {
    uint32_t seq;
    struct rpc_call *call;
    int done;
    int ack_only;
    int redo;                    /* the reply was lost in a resume: send the request again */
    _Atomic uint64_t frame_no;   /* its frame's number (protocol.h, "Resume") */
    CUresult result;
    int deferred; /* result is an earlier one-way call's error (FRAME_DEFERRED) */
    CUresult held;               /* a deferred error a FRAME_REDO stand-in carried */
    pthread_cond_t cv;
    struct waiter *next;
};


const struct session_info *conn_info(const struct server *s) { return &s->c.info; }
const char *conn_addr(const struct server *s) { return s->c.addr; }
unsigned conn_moves(struct server *s) { return resume_moves(s); }
unsigned conn_resumes(struct server *s) { return resume_count(s); }

static int (*host_work)(int fd, uint32_t len);
void conn_set_host_work_handler(int (*handler)(int fd, uint32_t len)) { host_work = handler; }

static __thread uint32_t thread_ctx;
/* The context last current in this thread on each server: a call that
 * goes to a server other than the current context's (by the handle or
 * pointer it names) runs there in it, as the driver runs a copy in the
 * context of the memory it names. */
static __thread uint32_t thread_ctx_on[SCUDA_MAX_SERVERS];
void conn_set_thread_ctx(uint32_t ctx_id)
{
    thread_ctx = ctx_id;
    if (ctx_id) thread_ctx_on[server_current()->index] = ctx_id;
}
uint32_t conn_thread_ctx(void) { return thread_ctx; }
uint32_t conn_ctx_on(const struct server *s)
{
    if (s == server_current()) return thread_ctx;
    return thread_ctx_on[s->index] ? thread_ctx_on[s->index] : s->any_ctx;
}

static void on_writer_error(void *server, int err);
static int take_pong(struct server *s, uint32_t len);
static void broke_locked(struct server *s, const char *why, uint32_t window_ms);
static int liveness_greet(struct server *s);
static void liveness_start(struct server *s);
static void say_goodbye(void);

/* ---- connect and handshake ------------------------------------------- */

static CUresult handshake_fail(struct server *s, const char *what, const char *fix)
{
    LOG_ERROR("server %s: %s; %s", s->c.addr, what, fix);
    if (s->c.fd >= 0) io_close(s->c.fd);
    s->c.fd = -1;
    return CUDA_ERROR_NO_DEVICE;
}

/* The client's CUDA_VISIBLE_DEVICES, for the server to apply as the real
 * driver would (set but empty counts: no devices). *sends is 0 when the
 * variable is unset. A server too old to apply it is refused here:
 * ignoring it would hand the program the GPUs it excluded (another job's,
 * say). */
static CUresult visible_request(struct server *s, uint16_t server_flags, uint8_t req[VISIBLE_REQ_LEN], int *sends)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    *sends = 0;
    if (v == NULL || s->visible_here) return CUDA_SUCCESS;
    if (!(server_flags & HELLO_SERVER_VISIBLE))
        return handshake_fail(s, "the server cannot apply this client's CUDA_VISIBLE_DEVICES (it is older than this "
                              "client)",
                              "upgrade the server, or unset CUDA_VISIBLE_DEVICES to use every GPU it serves");
    char why[256];
    if (hello_visible_request(req, v, why, sizeof why) != 0)
        return handshake_fail(s, why, "then run the program again");
    *sends = 1;
    return CUDA_SUCCESS;
}

static CUresult read_welcome(struct server *s, int sent_visible)
{
    uint32_t status;
    char msg[256];
    int rc = hello_read_session_welcome(s->c.fd, WELCOME_TIMEOUT_MS, &status, msg, sizeof msg, &s->c.info);
    if (rc == -1) return handshake_fail(s, msg, "check the server's log");
    if (rc != 0) return handshake_fail(s, msg, "use a client and server of the same SCUDA version");
    if (status != WELCOME_OK) {
        static const char *fixes[] = {
            [WELCOME_BAD_VERSION] = "use a client and server of the same SCUDA version",
            [WELCOME_BAD_TOKEN] = "set SCUDA_TOKEN or SCUDA_TOKEN_FILE to a token in the server's token file",
            [WELCOME_SERVER_FULL] = "wait for a session to end, or raise the server's --max-sessions",
            [WELCOME_NO_DEVICE] = "check the GPU and driver on the server",
            [WELCOME_INTERNAL] = "check the server's log",
        };
        const char *fix = status < sizeof fixes / sizeof fixes[0] && fixes[status] ? fixes[status] : "check the server's log";
        if (status == WELCOME_NO_DEVICE && sent_visible)
            fix = "check CUDA_VISIBLE_DEVICES: its indices count the server's GPUs as `scuda info` lists them "
                  "without it, and an empty value means no GPU";
        char what[512];
        snprintf(what, sizeof what, "refused: %s", msg[0] ? msg : "no reason given");
        return handshake_fail(s, what, fix);
    }
    if (liveness_greet(s) != 0)
        return handshake_fail(s, "no answer to the first heartbeat",
                              "use a client and server of the same SCUDA version");
    liveness_start(s);
    static atomic_flag goodbye_set = ATOMIC_FLAG_INIT; /* servers open in parallel (init.c) */
    if (!atomic_flag_test_and_set(&goodbye_set)) atexit(say_goodbye);
    return CUDA_SUCCESS;
}

CUresult conn_open(struct server *s, const char *addr)
{
    char err[256];
    snprintf(s->c.addr, sizeof s->c.addr, "%s", addr);
    s->c.dead = 0; /* a forked child that connects anew (the NVML shim does) */
    char why[1024];
    s->c.fd = dial(addr, CONNECT_TIMEOUT_MS, PREFACE_SESSION, why, sizeof why);
    if (s->c.fd == -2) {
        /* Reached, but refused or not trusted: why says what to do. */
        LOG_ERROR("server %s: %s", addr, why);
        s->c.fd = -1;
        return CUDA_ERROR_NO_DEVICE;
    }
    if (s->c.fd < 0) {
        LOG_ERROR("cannot reach server %s: %s; start `scuda server` on the GPU machine, "
                  "or point SCUDA_SERVER (or `scuda run --server`) at a running one", addr, why);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (sendq_start(&s->q, s->c.fd, on_writer_error, s) != 0)
        LOG_WARN("no writer thread: every call is written directly");

    uint8_t nonce[SCUDA_NONCE_LEN];
    uint16_t server_flags = 0;
    int hr = hello_read_server_judged(s->c.fd, CONNECT_TIMEOUT_MS, nonce, &server_flags, err, sizeof err);
    if (hr != 0)
        return handshake_fail(s, err, hr == -2 ? "use a client and server of the same SCUDA version"
                                            : "check the address and port");
    uint8_t visible[VISIBLE_REQ_LEN];
    int sends_visible = 0;
    CUresult vr = visible_request(s, server_flags, visible, &sends_visible);
    if (vr != CUDA_SUCCESS) return vr;
    if (hello_send_client(s->c.fd, sends_visible ? HELLO_VISIBLE_DEVICES : 0,
                          ~0ull /* every device the server offers */,
                          scuda_token(), nonce, sends_visible ? visible : NULL, sends_visible ? sizeof visible : 0) != 0)
        return handshake_fail(s, "connection closed during the handshake", "check the server's log");
    return read_welcome(s, sends_visible);
}

/* ---- failure ---------------------------------------------------------- */

/* Called with recv_lock held. Every waiter gets the error. */
static void mark_dead_locked(struct server *s, const char *why)
{
    if (!s->c.dead) {
        s->c.dead = 1;
        LOG_ERROR("lost the connection to server %s: %s; CUDA calls now fail with "
                  "CUDA_ERROR_DEVICE_UNAVAILABLE", s->c.addr, why);
    }
    for (struct waiter *w = s->c.waiters; w; w = w->next) {
        if (!w->done) {
            w->done = 1;
            w->result = CUDA_ERROR_DEVICE_UNAVAILABLE;
            pthread_cond_signal(&w->cv);
        }
    }
    pthread_cond_broadcast(&s->c.resumed);
}

static void on_writer_error(void *server, int err)
{
    struct server *s = server;
    pthread_mutex_lock(&s->c.recv_lock);
    broke_locked(s, err == ECONNRESET || err == EPIPE ? "the connection was closed" : strerror(err),
                 resume_within_ms(s));
    pthread_mutex_unlock(&s->c.recv_lock);
}

void conn_forget_after_fork(struct server *s)
{
    sendq_forget_after_fork(&s->q);
    /* The child must never write to the parent's socket: like real CUDA
     * after fork, calls in the child fail, and the parent is unharmed. */
    if (s->c.fd >= 0) io_forget(s->c.fd);
    s->c.fd = -1;
    s->c.dead = 1;
    s->c.waiters = NULL;
    s->c.reader_active = 0;
    s->c.liveness_started = 0; /* threads do not survive fork */
    s->c.transfers = 0;
    atomic_store(&s->c.resuming, 0);
    pthread_mutex_init(&s->c.recv_lock, NULL);
    pthread_cond_init(&s->c.resumed, NULL);
}

/* ---- sending ---------------------------------------------------------- */

/* The calling thread's waiter: one call at a time per thread. */
static __thread struct waiter thread_waiter;
static __thread int thread_waiter_ready;

static struct waiter *my_waiter(void)
{
    if (!thread_waiter_ready) {
        pthread_cond_init(&thread_waiter.cv, NULL);
        thread_waiter_ready = 1;
    }
    return &thread_waiter;
}
static void unlink_waiter_locked(struct server *s, struct waiter *target);

void conn_wire_bytes(struct server *s, uint64_t *sent, uint64_t *received)
{
    *sent = atomic_load(&s->c.bytes_sent);
    *received = atomic_load(&s->c.bytes_received);
}

CUresult conn_send(struct rpc_call *c, int async)
{
    struct server *s = c->srv;
    if (c->req.oom) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t len = c->req.len + c->bulk_len;
    if (len > SCUDA_MAX_FRAME) return CUDA_ERROR_INVALID_VALUE;
    if (failover_before_send) failover_before_send(s, len); /* a full journal: a snapshot first */
    struct frame_header h = {
        .length = (uint32_t)len,
        .op = c->wire_op ? c->wire_op : c->op,
        .flags = async ? FRAME_ASYNC : 0,
        .seq = atomic_fetch_add_explicit(&s->c.next_seq, 1, memory_order_relaxed),
        /* The thread's context is on one server; another server gets the
         * thread's last context there, else any of its contexts (0, none:
         * the session runs the call in whatever context it has bound),
         * unless the call names its own. */
        .ctx = c->ctx ? c->ctx : conn_ctx_on(s),
    };
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[3] = {
        {.iov_base = hdr, .iov_len = sizeof hdr},
        {.iov_base = c->req.data, .iov_len = c->req.len},
        {.iov_base = (void *)c->bulk, .iov_len = c->bulk_len},
    };

    /* A one-way frame whose bytes are too large to copy for a resume is
     * kept by reference: the call waits until the session has it
     * (send_queue.h). So does one sent while much is kept: one-way calls
     * alone read no acknowledgements, and this one reads them, so what is
     * kept stays bounded (a round trip per KEPT_SOFT_MAX bytes). */
    int lend = async && resume_within_ms(s) && !sendq_journaling(&s->q) &&
               (FRAME_HEADER_LEN + len > SENDQ_KEEP_COPY_MAX || sendq_kept_bytes(&s->q) > KEPT_SOFT_MAX);
    if (lend) {
        h.flags |= FRAME_ACK_ME;
        frame_header_encode(&h, hdr);
    }
    if (async && !lend && !atomic_load_explicit(&s->c.resuming, memory_order_relaxed) && !s->c.dead) {
        if (FRAME_HEADER_LEN + len <= SENDQ_SMALL_FRAME && sendq_enqueue(&s->q, iov, c->bulk_len ? 3 : 2) == 0) {
            atomic_fetch_add_explicit(&s->c.bytes_sent, FRAME_HEADER_LEN + len, memory_order_relaxed);
            return CUDA_SUCCESS;
        }
    }

    /* Register before sending: the reply (or acknowledgement) can come
     * before we wait. */
    struct waiter *w = NULL;
    pthread_mutex_lock(&s->c.recv_lock);
    /* While the connection resumes, calls wait (bounded by
     * SCUDA_RESUME_WITHIN: the resumer ends it either way). */
    while (atomic_load(&s->c.resuming) && !s->c.dead) pthread_cond_wait(&s->c.resumed, &s->c.recv_lock);
    if (s->c.dead) {
        pthread_mutex_unlock(&s->c.recv_lock);
        return CUDA_ERROR_DEVICE_UNAVAILABLE;
    }
    if (!async || lend) {
        w = my_waiter();
        w->seq = h.seq;
        w->call = c;
        w->done = 0;
        w->redo = 0;
        w->ack_only = async;
        w->deferred = 0;
        atomic_store(&w->frame_no, 0);
        if (s->c.waiters == NULL && s->c.transfers == 0) s->c.wait_since_ms = now_ms();
        w->next = s->c.waiters;
        s->c.waiters = w;
    }
    pthread_mutex_unlock(&s->c.recv_lock);

    int n = c->bulk_len ? 3 : 2;
    int rc = 0;
    if (!async || lend || FRAME_HEADER_LEN + len > SENDQ_SMALL_FRAME || sendq_enqueue(&s->q, iov, n) != 0)
        rc = sendq_write_direct(&s->q, iov, n, w ? &w->frame_no : NULL);
    atomic_fetch_add_explicit(&s->c.bytes_sent, FRAME_HEADER_LEN + len, memory_order_relaxed);
    if (rc != 0) {
        /* The frame is kept: a resume sends it again. */
        pthread_mutex_lock(&s->c.recv_lock);
        broke_locked(s, errno == ECONNRESET || errno == EPIPE ? "the connection was closed" : strerror(errno),
                     resume_within_ms(s));
        pthread_mutex_unlock(&s->c.recv_lock);
    }
    if (lend) {
        int deferred;
        return conn_wait(c, &deferred); /* the acknowledgement */
    }
    return CUDA_SUCCESS;
}

/* ---- receiving -------------------------------------------------------- */

static struct waiter *find_waiter_locked(struct server *s, uint32_t seq)
{
    for (struct waiter *w = s->c.waiters; w; w = w->next)
        if (w->seq == seq && !w->done && !w->ack_only) return w;
    return NULL;
}

static void unlink_waiter_locked(struct server *s, struct waiter *target)
{
    for (struct waiter **pp = &s->c.waiters; *pp; pp = &(*pp)->next) {
        if (*pp == target) {
            *pp = target->next;
            return;
        }
    }
}

/* Set on the liveness thread while it reads an idle connection (see
 * read_while_idle): its reads are bounded, since no caller's wait, and so
 * no dead-after verdict, covers them. */
static __thread int idle_reader;

/* Every read of the main connection: in pieces, each one a sign of life
 * for the liveness thread. */
static int conn_read(struct server *s, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n > 0) {
        size_t k = n < READ_PIECE ? n : READ_PIECE;
        int rc = idle_reader && s->c.dead_after_ms ? io_read_full_timeout(s->c.fd, p, k, (int)s->c.dead_after_ms)
                                                   : io_read_full(s->c.fd, p, k);
        if (rc != 0) return -1;
        atomic_fetch_add_explicit(&s->c.rx_progress, 1, memory_order_relaxed);
        p += k;
        n -= k;
    }
    return 0;
}

/* Device printf text from the session: written through stdio so it stays
 * in order with the application's own buffered output. */
static int deliver_output(struct server *s, uint32_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf || conn_read(s, buf, len) != 0) {
        free(buf);
        return -1;
    }
    if (len > 1) {
        FILE *f = buf[0] == 2 ? stderr : stdout;
        fwrite(buf + 1, 1, len - 1, f);
        if (f == stderr) fflush(f);
    }
    free(buf);
    return 0;
}

/* Reads a bulk reply straight into the caller's sink: [u32 result][u64 n][n bytes][outputs]. */
static int read_bulk_reply(struct server *s, struct waiter *w, const struct frame_header *h)
{
    uint32_t len = h->length;
    struct rpc_call *c = w->call;
    uint8_t head[12];
    if (len < sizeof head || conn_read(s, head, sizeof head) != 0) return -1;
    uint32_t result;
    uint64_t n;
    memcpy(&result, head, 4);
    memcpy(&n, head + 4, 8);
    if (n > len - sizeof head || n > c->sink_len) return -1;
    if (conn_read(s, c->sink, (size_t)n) != 0) return -1;
    size_t rest = len - sizeof head - (size_t)n;
    free(c->reply);
    c->reply = malloc(rest ? rest : 1);
    if (!c->reply || conn_read(s, c->reply, rest) != 0) return -1;
    wr_init(&c->out, c->reply, rest);
    c->arena.bulk_apart = 1; /* the bulk field is in the sink, not in c->out */
    c->arena.bulk_len = n;
    w->result = (CUresult)result;
    w->deferred = (h->flags & FRAME_DEFERRED) != 0;
    return 0;
}

static int read_plain_reply(struct server *s, struct waiter *w, const struct frame_header *h)
{
    uint32_t len = h->length;
    struct rpc_call *c = w->call;
    free(c->reply); /* a reply cut by a break, read again after the resume */
    c->reply = malloc(len ? len : 1);
    if (!c->reply || len < 4 || conn_read(s, c->reply, len) != 0) return -1;
    uint32_t result;
    memcpy(&result, c->reply, 4);
    wr_init(&c->out, (uint8_t *)c->reply + 4, len - 4);
    w->result = (CUresult)result;
    w->deferred = (h->flags & FRAME_DEFERRED) != 0;
    return 0;
}

/* Skip a frame nobody waits for (a late reply after an error). */
static int discard(struct server *s, uint32_t len)
{
    uint8_t buf[4096];
    while (len > 0) {
        uint32_t n = len < sizeof buf ? len : (uint32_t)sizeof buf;
        if (conn_read(s, buf, n) != 0) return -1;
        len -= n;
    }
    return 0;
}

/* The session has our frames up to ack: forget them, and let calls that
 * lent their bytes return. */
static void note_acked(struct server *s, uint64_t ack)
{
    if (ack <= atomic_load(&s->c.acked)) return;
    atomic_store(&s->c.acked, ack);
    sendq_acked(&s->q, ack);
    pthread_mutex_lock(&s->c.recv_lock);
    for (struct waiter *w = s->c.waiters; w; w = w->next) {
        uint64_t no = atomic_load(&w->frame_no);
        if (w->ack_only && !w->done && no && no <= ack) {
            w->done = 1;
            w->result = CUDA_SUCCESS;
            pthread_cond_signal(&w->cv);
        }
    }
    pthread_mutex_unlock(&s->c.recv_lock);
}

/* A pong: the session is alive. Nobody waits for it; it only says how
 * often the session wants to hear from us. */
static int take_pong(struct server *s, uint32_t len)
{
    uint8_t buf[64];
    if (len > sizeof buf || conn_read(s, buf, len) != 0) {
        errno = EPROTO;
        return -1;
    }
    wire_reader r;
    wr_init(&r, buf, len);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_live_pong_req m;
    if (msg_scuda_live_pong_req_get(&r, &arena, &m) == 0) {
        atomic_store(&s->c.server_dead_ms, m.dead_after_ms);
        note_acked(s, m.ack);
    }
    msg_arena_free(&arena);
    return 0;
}

/* A reply whose device bytes were lost in a resume (FRAME_REDO): its
 * caller sends the request again. A deferred error it carried is held
 * for the repeated call's reply. */
static int take_redo(struct server *s, struct waiter *w, const struct frame_header *h)
{
    uint32_t result;
    if (h->length != 4 || conn_read(s, &result, 4) != 0) {
        errno = EPROTO;
        return -1;
    }
    if (h->flags & FRAME_DEFERRED) w->held = (CUresult)result;
    w->redo = 1;
    return 0;
}

/* After a failover, the reply to a call the application already saw: the
 * standby ran it again from the journal. Check its result, drop the rest. */
static int take_replayed(struct server *s, const struct frame_header *h)
{
    uint32_t result;
    if (h->length < sizeof result || (h->flags & FRAME_REDO)) return discard(s, h->length);
    if (conn_read(s, &result, sizeof result) != 0) return -1;
    failover_check_result(h->seq, h->op, result);
    return discard(s, h->length - (uint32_t)sizeof result);
}

/* A numbered frame (protocol.h, "Resume"), after its header. */
static int take_frame(struct server *s, const struct frame_header *h)
{
    if (h->flags & FRAME_OUTPUT) return deliver_output(s, h->length);
    if (h->flags & FRAME_HOST_WORK) return host_work ? host_work(s->c.fd, h->length) : discard(s, h->length);

    pthread_mutex_lock(&s->c.recv_lock);
    struct waiter *w = find_waiter_locked(s, h->seq);
    pthread_mutex_unlock(&s->c.recv_lock);
    if (w == NULL) return failover_replaying && failover_replaying(s) ? take_replayed(s, h) : discard(s, h->length);

    int rc = h->flags & FRAME_REDO                   ? take_redo(s, w, h)
             : (h->flags & FRAME_BULK) && w->call->sink ? read_bulk_reply(s, w, h)
                                                        : read_plain_reply(s, w, h);
    if (rc != 0) return -1;
    if (failover_note_result && !(h->flags & FRAME_REDO)) failover_note_result(s, h->seq, h->op, (uint32_t)w->result);
    /* The reply says the session has our request and all before it: what
     * the request lent must be forgotten before its caller returns. */
    note_acked(s, atomic_load(&w->frame_no));
    pthread_mutex_lock(&s->c.recv_lock);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&s->c.recv_lock);
    return 0;
}

/* One more of the session's frames read whole. The session keeps what it
 * sent until we say we have it: a one-way scuda_resume_ack says so every
 * ACK_EVERY frames (pings say so too, when the client is idle). */
#define ACK_EVERY 128
static void frame_received(struct server *s)
{
    uint64_t n = atomic_fetch_add(&s->c.received, 1) + 1;
    if (n - s->c.ack_sent < ACK_EVERY) return;
    s->c.ack_sent = n;
    wire_buf b;
    wb_init(&b);
    msg_scuda_resume_ack_req_put(&b, &(struct msg_scuda_resume_ack_req){.ack = n});
    uint8_t frame[FRAME_HEADER_LEN + 16];
    struct frame_header h = {
        .length = (uint32_t)b.len,
        .op = OP_scuda_resume_ack,
        .flags = FRAME_ASYNC,
        .seq = atomic_fetch_add_explicit(&s->c.next_seq, 1, memory_order_relaxed),
    };
    frame_header_encode(&h, frame);
    memcpy(frame + FRAME_HEADER_LEN, b.data, b.len);
    struct iovec iov = {.iov_base = frame, .iov_len = FRAME_HEADER_LEN + b.len};
    /* Through the writer thread: the reader never blocks on the socket. */
    if (sendq_enqueue(&s->q, &iov, 1) == 0)
        atomic_fetch_add_explicit(&s->c.bytes_sent, iov.iov_len, memory_order_relaxed);
    wb_free(&b);
}

/* The session's last frame on this connection: it moved to another
 * server (scuda_moved). Remember where; the caller treats it as a break,
 * and the resumer goes there. Returns -1 (errno ECONNABORTED), or -1 with
 * EPROTO when the notice is malformed. */
static int take_moved(struct server *s, uint32_t len)
{
    uint8_t buf[512];
    errno = EPROTO;
    if (len > sizeof buf || conn_read(s, buf, len) != 0) return -1;
    errno = resume_note_move(s, buf, len) == 0 ? ECONNABORTED : EPROTO;
    return -1;
}

/* Take one frame whose header is in hdr. Called without recv_lock. */
static int take_one_frame(struct server *s, const uint8_t hdr[FRAME_HEADER_LEN])
{
    struct frame_header h;
    frame_header_decode(hdr, &h);
    atomic_fetch_add_explicit(&s->c.bytes_received, FRAME_HEADER_LEN + (uint64_t)h.length, memory_order_relaxed);
    if (h.length > SCUDA_MAX_FRAME + SCUDA_REPLY_MARGIN) {
        errno = EPROTO;
        return -1;
    }
    if (h.op == OP_scuda_live_pong && !(h.flags & FRAME_REPLY)) return take_pong(s, h.length); /* not numbered */
    if (h.op == OP_scuda_moved && !(h.flags & FRAME_REPLY)) return take_moved(s, h.length);      /* not numbered */
    int rc = take_frame(s, &h);
    if (rc == 0) frame_received(s);
    return rc;
}

/* Read one frame as the reader. Called without recv_lock; takes it to
 * find the waiter, which cannot leave while it is not done. */
static int read_one_frame(struct server *s)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    /* A reply is often microseconds away: poll before sleeping in read. */
    io_spin_for_input(s->c.fd, REPLY_SPIN_NS);
    if (conn_read(s, hdr, sizeof hdr) != 0) return -1;
    return take_one_frame(s, hdr);
}

/* The reader's read failed (errno saved): decide what the break is.
 * Called with recv_lock held. */
static void reader_failed_locked(struct server *s, int saved)
{
    /* Altered bytes (EPROTO: TLS, or a frame no session sends) are an
     * attack or a fault on the path: no resume, as before. */
    if (saved == EPROTO) mark_dead_locked(s, strerror(saved));
    else if (resume_moving(s)) broke_locked(s, "the session moved to another server", resume_within_ms(s));
    else
        broke_locked(s, saved == ECONNRESET ? "the server closed the connection" : strerror(saved),
                     resume_within_ms(s));
}

/* The reader role is free: wake a waiter to take it, if any. Called with
 * recv_lock held. */
static void pass_reader_role_locked(struct server *s)
{
    for (struct waiter *w = s->c.waiters; w; w = w->next) {
        if (!w->done) {
            pthread_cond_signal(&w->cv);
            return;
        }
    }
}

/* Wait until me is done, reading for everyone while no one else does.
 * Returns with recv_lock held. */
static void wait_done_locked(struct server *s, struct waiter *me)
{
    while (!me->done) {
        if (s->c.reader_active || atomic_load(&s->c.resuming)) {
            /* The resumer wakes every waiter when it is over. */
            pthread_cond_wait(&me->cv, &s->c.recv_lock);
            continue;
        }
        s->c.reader_active = 1;
        pthread_mutex_unlock(&s->c.recv_lock);
        int rc = read_one_frame(s);
        int saved = errno;
        pthread_mutex_lock(&s->c.recv_lock);
        s->c.reader_active = 0;
        if (rc != 0) reader_failed_locked(s, saved);
    }
    unlink_waiter_locked(s, me);
    pass_reader_role_locked(s);
}

CUresult conn_wait(struct rpc_call *c, int *deferred)
{
    struct server *s = c->srv;
    struct waiter *me = my_waiter();
    me->held = CUDA_SUCCESS;
    for (;;) {
        pthread_mutex_lock(&s->c.recv_lock);
        wait_done_locked(s, me);
        pthread_mutex_unlock(&s->c.recv_lock);
        if (!me->redo || me->result == CUDA_ERROR_DEVICE_UNAVAILABLE) break;
        /* Its bytes were lost in a resume: ask again (protocol.h). */
        CUresult r = conn_send(c, 0);
        if (r != CUDA_SUCCESS) return r;
    }
    *deferred = me->deferred;
    if (me->held != CUDA_SUCCESS && me->result == CUDA_SUCCESS) {
        *deferred = 1;
        return me->held;
    }
    return me->result;
}

/* ---- reading an idle connection ------------------------------------------ */

/* With no call waiting, nobody would read the connection: a session that
 * moved (its scuda_moved notice) or a server that closed it would be seen
 * only at the next call, perhaps minutes later, while the session's old
 * server waits out --resume-within for a client that never comes (a drain
 * then waits as long). So the liveness thread, on its 100 ms tick, takes
 * the reader role when it is free and reads what is there, never waiting
 * for a frame to start. A caller that arrives meanwhile registers as a
 * waiter and sleeps until the role is handed to it, as behind any reader;
 * its reply, should it come first, is delivered by this thread. */

/* Frames taken per tick at most: a server that talks without pause cannot
 * keep the liveness thread from its own work. */
#define IDLE_FRAMES_PER_TICK 64

/* One frame if one has begun to arrive: 1 taken, 0 nothing there, -1
 * failed (errno). A frame that has begun is read whole, each piece
 * bounded by SCUDA_DEAD_AFTER (idle_reader): a partial TLS record or half
 * a frame that stops coming is a silent server. */
static int read_idle_frame(struct server *s)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    ssize_t k = io_read_some(s->c.fd, hdr, sizeof hdr, 0);
    if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    atomic_fetch_add_explicit(&s->c.rx_progress, 1, memory_order_relaxed);
    if ((size_t)k < sizeof hdr && conn_read(s, hdr + k, sizeof hdr - (size_t)k) != 0) return -1;
    return take_one_frame(s, hdr) == 0 ? 1 : -1;
}

static void read_while_idle(struct server *s)
{
    pthread_mutex_lock(&s->c.recv_lock);
    /* A striped copy in flight (transfers) is left to its own rules
     * (docs/architecture.md 9.17, "The switch"): its bulk connections are
     * A's, and following a move under it is not built. */
    int idle = !s->c.dead && !s->c.reader_active && !atomic_load(&s->c.resuming) && !s->c.waiters &&
               !s->c.transfers && s->c.fd >= 0;
    if (idle) s->c.reader_active = 1;
    pthread_mutex_unlock(&s->c.recv_lock);
    if (!idle) return;
    idle_reader = 1;
    int rc = 0, saved = 0;
    for (int i = 0; i < IDLE_FRAMES_PER_TICK && (rc = read_idle_frame(s)) == 1; i++) continue;
    saved = errno;
    idle_reader = 0;
    pthread_mutex_lock(&s->c.recv_lock);
    s->c.reader_active = 0;
    if (rc < 0) reader_failed_locked(s, saved);
    pass_reader_role_locked(s);
    pthread_mutex_unlock(&s->c.recv_lock);
}

/* ---- liveness ------------------------------------------------------------ */

/* A session that hangs (a stopped process, a wedged host, a partition that
 * TCP keepalive cannot see because the host still answers) sends nothing.
 * The rule: while a caller waits on the session, the session must send
 * something at least every SCUDA_DEAD_AFTER seconds; it sends pongs when
 * it has nothing else to say (session.c). Past that, the client declares
 * it dead and every pending and later call fails as for a lost
 * connection. The other way round, the client pings when it has sent
 * nothing for a quarter of the shorter of the two bounds, so an idle but
 * live client keeps its session. A busy connection sends no pings: the
 * liveness thread only compares counters the hot path bumps anyway. */

static uint32_t dead_after_ms_from_env(void)
{
    const char *v = getenv("SCUDA_DEAD_AFTER");
    if (!v || !*v) return DEAD_AFTER_DEFAULT_S * 1000u;
    char *end;
    double s = strtod(v, &end);
    if (*end || !(s >= 0) || s > 86400) {
        LOG_WARN("SCUDA_DEAD_AFTER='%s' is not a number of seconds from 0 (never) to 86400; using %d",
                 v, DEAD_AFTER_DEFAULT_S);
        return DEAD_AFTER_DEFAULT_S * 1000u;
    }
    uint32_t ms = (uint32_t)(s * 1000);
    return s > 0 && ms < 100 ? 100 : ms;
}

static void ping_frame(struct server *s, uint8_t *frame, size_t *len, int async, int leaving)
{
    wire_buf b;
    wb_init(&b);
    struct msg_scuda_live_ping_req m = {
        .dead_after_ms = s->c.dead_after_ms, .ack = atomic_load(&s->c.received), .leaving = (uint8_t)leaving};
    msg_scuda_live_ping_req_put(&b, &m);
    struct frame_header h = {
        .length = (uint32_t)b.len,
        .op = OP_scuda_live_ping,
        .flags = async ? FRAME_ASYNC : 0,
        .seq = atomic_fetch_add_explicit(&s->c.next_seq, 1, memory_order_relaxed),
    };
    frame_header_encode(&h, frame);
    memcpy(frame + FRAME_HEADER_LEN, b.data, b.len);
    *len = FRAME_HEADER_LEN + b.len;
    wb_free(&b);
}

/* The first ping asks for an answer (it is not one-way), which carries the
 * session's --dead-after: from then on both ends know how often to speak. */
static int liveness_greet(struct server *s)
{
    s->c.dead_after_ms = dead_after_ms_from_env();
    uint8_t frame[FRAME_HEADER_LEN + 32];
    size_t len;
    ping_frame(s, frame, &len, 0, 0);
    uint64_t sent_ns = now_ns();
    if (io_write_full(s->c.fd, frame, len) != 0) return -1;
    uint8_t hdr[FRAME_HEADER_LEN];
    struct frame_header h;
    if (io_read_full_timeout(s->c.fd, hdr, sizeof hdr, WELCOME_TIMEOUT_MS) != 0) return -1;
    frame_header_decode(hdr, &h);
    uint8_t buf[128];
    if (h.op != OP_scuda_live_ping || !(h.flags & FRAME_REPLY) || h.length < 4 || h.length > sizeof buf ||
        io_read_full_timeout(s->c.fd, buf, h.length, WELCOME_TIMEOUT_MS) != 0)
        return -1;
    atomic_store(&s->c.greet_rtt_us, (now_ns() - sent_ns) / 1000u);
    wire_reader r;
    wr_init(&r, buf + 4, h.length - 4);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_live_ping_rep m;
    int rc = msg_scuda_live_ping_rep_get(&r, &arena, &m);
    msg_arena_free(&arena);
    if (rc != 0) return -1;
    atomic_store(&s->c.server_dead_ms, m.dead_after_ms);
    /* Frame 1 each way: the ping and its reply (protocol.h, "Resume"). */
    atomic_store(&s->c.received, 1);
    s->c.ack_sent = 1;
    atomic_store(&s->c.acked, 1);
    sendq_set_first_no(&s->q, 2);
    resume_setup(s, s->c.info.session_pid, m.resume_secret, m.resume_within_ms);
    return 0;
}

/* Called with recv_lock held. */
static void declare_dead_locked(struct server *s, uint64_t silent_ms)
{
    if (s->c.dead) return;
    if (atomic_load(&s->c.resuming)) return;
    LOG_ERROR("server %s sent nothing for %.1f s (SCUDA_DEAD_AFTER=%.1f): declared dead%s; check the server "
              "machine and its session process (stopped, hung in the driver, or cut off by the network), or "
              "raise SCUDA_DEAD_AFTER",
              s->c.addr, (double)silent_ms / 1000, (double)s->c.dead_after_ms / 1000,
              resume_within_ms(s) ? "; trying to resume the session"
                                    : "; CUDA calls now fail with CUDA_ERROR_DEVICE_UNAVAILABLE");
    char why[64];
    snprintf(why, sizeof why, "it sent nothing for %.1f s", (double)silent_ms / 1000);
    /* Silence on an open connection is a frozen server (a stopped host, a
     * wedged driver) or a path that dropped it without a word (a NAT
     * timeout). One reconnect tells them apart within a quarter of a second: a
     * fresh path resumes at once, a frozen session never answers. So the
     * client errors out within SCUDA_DEAD_AFTER + 1 s, never later. */
    uint32_t window = resume_within_ms(s) < RESUME_AFTER_SILENCE_MS ? resume_within_ms(s) : RESUME_AFTER_SILENCE_MS;
    broke_locked(s, why, window);
    /* Unblock whoever reads or writes: the reader's read and the writer's
     * write now fail at once. */
    shutdown(s->c.fd, SHUT_RDWR);
    void (*on_dead)(struct server *) = atomic_load(&s->c.on_dead);
    if (on_dead) on_dead(s);
}

void conn_set_dead_handler(struct server *s, void (*handler)(struct server *s))
{
    atomic_store(&s->c.on_dead, handler);
}

void conn_transfer_begin(struct server *s)
{
    pthread_mutex_lock(&s->c.recv_lock);
    if (s->c.waiters == NULL && s->c.transfers == 0) s->c.wait_since_ms = now_ms();
    s->c.transfers++;
    pthread_mutex_unlock(&s->c.recv_lock);
}

void conn_transfer_progress(struct server *s) { atomic_fetch_add_explicit(&s->c.rx_progress, 1, memory_order_relaxed); }

void conn_transfer_end(struct server *s)
{
    pthread_mutex_lock(&s->c.recv_lock);
    s->c.transfers--;
    pthread_mutex_unlock(&s->c.recv_lock);
}

/* How often to ping: a quarter of the shorter bound (ours or the session's). */
static uint64_t ping_interval_ms(struct server *s)
{
    uint32_t mine = s->c.dead_after_ms, theirs = atomic_load(&s->c.server_dead_ms);
    uint32_t shortest = mine && theirs ? (mine < theirs ? mine : theirs) : (mine ? mine : theirs);
    return shortest ? shortest / 4 : 0;
}

static void send_ping(struct server *s)
{
    uint8_t frame[FRAME_HEADER_LEN + 32];
    size_t len;
    ping_frame(s, frame, &len, 1, 0);
    struct iovec iov = {.iov_base = frame, .iov_len = len};
    /* Through the writer thread: this thread never blocks on the socket. */
    if (sendq_enqueue(&s->q, &iov, 1) != 0) return;
    stats_count(OP_scuda_live_ping, 1);
    atomic_fetch_add_explicit(&s->c.bytes_sent, len, memory_order_relaxed);
}

static void *liveness_main(void *server)
{
    struct server *s = server;
    uint64_t sent_seen = 0, rx_seen = 0, rx_at = now_ms(), last_ping = now_ms();
    for (;;) {
        uint64_t interval = ping_interval_ms(s);
        /* Ticks short enough to declare death within a few percent of the
         * bound, and to follow a move within a second (read_while_idle). */
        uint64_t tick = interval && interval < IDLE_TICK_MS ? interval : IDLE_TICK_MS;
        struct timespec ts = {.tv_sec = (time_t)(tick / 1000), .tv_nsec = (long)(tick % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        uint64_t now = now_ms();
        uint64_t sent = atomic_load(&s->c.bytes_sent);
        if (sent != sent_seen) {
            sent_seen = sent;
            last_ping = now; /* anything we send counts as a ping */
        } else if (interval && now - last_ping >= interval) {
            send_ping(s);
            sent_seen = atomic_load(&s->c.bytes_sent);
            last_ping = now;
        }
        read_while_idle(s);
        uint64_t rx = atomic_load(&s->c.rx_progress);
        if (rx != rx_seen) {
            rx_seen = rx;
            rx_at = now;
        }
        pthread_mutex_lock(&s->c.recv_lock);
        int stop = s->c.dead;
        if (!stop && !atomic_load(&s->c.resuming) && (s->c.waiters || s->c.transfers) && s->c.dead_after_ms) {
            /* The clock again, under the lock: a caller may have started
             * waiting (wait_since_ms) after `now` was read, and now - since
             * would wrap to centuries of silence and kill a live server. */
            uint64_t at = now_ms(), since = rx_at > s->c.wait_since_ms ? rx_at : s->c.wait_since_ms;
            if (at > since && at - since >= s->c.dead_after_ms) {
                declare_dead_locked(s, at - since);
                stop = s->c.dead;
            }
        }
        pthread_mutex_unlock(&s->c.recv_lock);
        if (stop) return NULL;
    }
}

static void liveness_start(struct server *s)
{
    if (s->c.liveness_started) return;
    pthread_t t;
    if (pthread_create(&t, NULL, liveness_main, s) != 0) {
        LOG_WARN("no liveness thread: a hung server will not be noticed (%s)", strerror(errno));
        return;
    }
    pthread_detach(t);
    s->c.liveness_started = 1;
}


/* ---- resume: the connection's side (resume.c reconnects) ---------------------- */

/* Called with recv_lock held: the connection broke for `why`. Calls wait
 * while the resumer tries for window_ms (0: the connection is lost). */
static void broke_locked(struct server *s, const char *why, uint32_t window_ms)
{
    if (s->c.dead || atomic_load(&s->c.resuming)) return;
    if (!window_ms) {
        mark_dead_locked(s, resume_moving(s) ? "the session moved to another server, and this client does not resume "
                                           "connections (SCUDA_RESUME_WITHIN=0)" : why);
        return;
    }
    atomic_store(&s->c.resuming, 1);
    shutdown(s->c.fd, SHUT_RDWR); /* whoever still reads or writes it stops now */
    if (resume_start(s, why, window_ms) != 0) {
        atomic_store(&s->c.resuming, 0);
        mark_dead_locked(s, why);
    }
}

int conn_swap_fd(struct server *s, int fd)
{
    /* A reader that was inside a read when the old connection broke has
     * left it (shutdown) before we take its fd away. */
    pthread_mutex_lock(&s->c.recv_lock);
    while (s->c.reader_active) {
        pthread_mutex_unlock(&s->c.recv_lock);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        pthread_mutex_lock(&s->c.recv_lock);
    }
    int old = s->c.fd;
    s->c.fd = fd;
    pthread_mutex_unlock(&s->c.recv_lock);
    return old;
}

void conn_note_acked(struct server *s, uint64_t ack) { note_acked(s, ack); }
uint64_t conn_frames_received(struct server *s) { return atomic_load(&s->c.received); }

void conn_failover_counts(struct server *s, uint64_t received, uint64_t acked)
{
    atomic_store(&s->c.received, received);
    s->c.ack_sent = received;
    atomic_store(&s->c.acked, acked);
}

void conn_set_addr(struct server *s, const char *addr)
{
    pthread_mutex_lock(&s->c.recv_lock);
    snprintf(s->c.addr, sizeof s->c.addr, "%s", addr);
    pthread_mutex_unlock(&s->c.recv_lock);
}

void conn_resume_over(struct server *s, int ok, const char *why)
{
    pthread_mutex_lock(&s->c.recv_lock);
    atomic_store(&s->c.resuming, 0);
    if (ok) {
        s->c.wait_since_ms = now_ms(); /* the silence of the break is not the new connection's */
        for (struct waiter *w = s->c.waiters; w; w = w->next) pthread_cond_signal(&w->cv);
        pthread_cond_broadcast(&s->c.resumed);
    } else {
        mark_dead_locked(s, why);
        sendq_forget_kept(&s->q);
    }
    pthread_mutex_unlock(&s->c.recv_lock);
}

/* At exit: tell the session we leave, so that it ends with the connection
 * instead of waiting SCUDA_RESUME_WITHIN for a resume. A process that is
 * killed cannot say so: its session waits the server's --resume-within. */
static void say_goodbye_to(struct server *s)
{
    if (s->c.dead || s->c.fd < 0 || atomic_load(&s->c.resuming)) return;
    uint8_t frame[FRAME_HEADER_LEN + 32];
    size_t len;
    ping_frame(s, frame, &len, 1, 1);
    struct iovec iov = {.iov_base = frame, .iov_len = len};
    sendq_write_direct(&s->q, &iov, 1, NULL);
}

static void say_goodbye(void)
{
    for (int i = 0; i < SCUDA_MAX_SERVERS; i++) say_goodbye_to(&servers[i]);
}
