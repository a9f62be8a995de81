/* bulk.c - see bulk.h.
 *
 * One striped copy runs at a time (the client sends the next announcement
 * only after the last chunk of this one). Its handler posts a job; each
 * connection's thread does its share, chunks j, j+k, j+2k... of the copy:
 *   host to device: the thread reads a chunk into a pinned buffer and
 *     queues it; the handler, on the dispatch thread, starts its DMA
 *     (asynchronous, so receiving goes on meanwhile) and gives the buffer
 *     back when the DMA is done. Over TLS the thread queues each piece of
 *     a few records as soon as it has opened them, so the DMA of a chunk
 *     runs while the rest of it arrives.
 *   device to host: the handler starts the DMA of each chunk into a
 *     pinned buffer and queues it on its connection; the thread waits for
 *     that DMA and sends the chunk. Over TLS the DMAs go in pieces of a
 *     few records, the first piece of every connection's chunk first, then
 *     the second pieces...; each piece has its event, and the thread seals
 *     and sends a piece as soon as it has landed. So every connection
 *     starts sealing after one piece per connection has landed, not after
 *     the whole chunks of the connections before it (plain TCP has no
 *     crypto to overlap: it keeps whole chunks, one write each).
 * A copy whose CUDA call fails still moves every chunk (discarded, or
 * zeros), so the connections stay in step. A connection that fails, or
 * carries something other than the chunk expected, ends striping for the
 * session: every bulk connection is shut down, which wakes every thread
 * and tells the client, and the copy fails. Later copies use the main
 * connection.
 * Compressed chunks (protocol.h): over connections that joined with
 * HELLO_JOIN_ZSTD, a chunk may come compressed; its thread decompresses
 * it into its buffer before the handler sees it. Sending, a thread
 * compresses a chunk when the copy's policy (from the client, in the
 * announcement) and the probe of that chunk say it pays; such a copy goes
 * in whole chunks, never pieces. */
#define _GNU_SOURCE
#include "bulk.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulk_join.h"
#include "dispatch.h"
#include "handlers.gen.h"
#include "session.h"
#include "snapshot_dirty.h"
#include "staging.h"
#include "../common/auth.h"
#include "../common/compress.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/tls.h"
#include "../common/tls_records.h"
#include "../common/transport.h"

/* Pinned buffers beyond one per connection: the DMAs in flight. */
#define POOL_EXTRA 4
#define QUEUE_CAP (BULK_MAX_STREAMS + POOL_EXTRA)
/* Pieces over TLS, both ways: at least two records, and at most
 * PIECES_PER_CHUNK per chunk (each piece costs a DMA and an event on the
 * dispatch thread, and a wait on the connection's), so a 1 MiB chunk goes
 * in 4 pieces of 256 KiB and a 4 MiB one in 8 of 512 KiB. */
#define PIECE_MIN (2 * REC_MAX_PLAIN)
#define PIECES_PER_CHUNK 8
#define PIECE_ENV "SCUDA_BULK_PIECE_KIB"

enum job_dir { JOB_RECV, JOB_SEND };
/* One chunk in a buffer (NULL for a failed copy's chunk: zeros), or one
 * piece of a chunk received in pieces: `at` bytes into the buffer; the
 * chunk's last piece (`last`) gives the buffer back, and a piece of no
 * bytes only that (a connection lost in the middle of a chunk). */
struct item {
    struct staging *b;
    uint64_t off;
    uint32_t at, len;
    int last;
};

/* Pieces received and not yet landed: at most every pool buffer's pieces. */
#define READY_CAP (QUEUE_CAP * STAGING_PIECES_MAX)
struct queue {
    struct item *items; /* cap of them */
    size_t head, tail, cap;
};

/* What the connections' threads work on. */
struct job {
    uint64_t gen; /* bumped for each job */
    enum job_dir dir;
    uint64_t id, n, nchunks;
    uint32_t chunk;
    uint32_t piece; /* DMA (and send, receive) in pieces of this size; 0: whole chunks */
    int used; /* connections 0..used-1 carry its chunks: min(k, nchunks) */
    unsigned policy; /* compress.h: how eagerly chunks sent are compressed; 0 never */
};

struct link {
    int fd; /* -1 until it joins */
    int index;
    int zstd; /* joined with HELLO_JOIN_ZSTD: compressed chunks allowed, both ways */
    uint8_t *packed; /* zstd: BULK_CHUNK_MAX bytes for a compressed chunk */
    struct queue out; /* JOB_SEND: this connection's chunks, in order */
    struct item out_items[QUEUE_CAP];
    /* Its thread waits here (a job for it, a chunk queued for it, a
     * failure), so a chunk wakes its own connection's thread, not all k,
     * and a copy that uses few connections wakes only those. */
    pthread_cond_t cv;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv; /* for the handler: a chunk received, room in a queue, a thread finished, a failure */
    int k;             /* connections granted at setup; 0: no setup */
    int joined;
    int dead; /* striping is over for this session */
    uint8_t secret[BULK_SECRET_LEN];
    uint64_t last_id;
    struct staging_pool *pool;
    int pool_filled;
    void *zeros; /* BULK_CHUNK_MAX zero bytes */
    struct job job;
    int idle_ms; /* --idle-timeout: the longest a chunk may stall; 0: no limit */
    int working; /* threads still on the current job */
    int failed;  /* the current job failed */
    int tls;     /* the connections are TLS (the main one's kind: all are) */
    int piece_set; /* SCUDA_BULK_PIECE_KIB: -1 unset; 0 whole chunks; else the piece size */
    unsigned pieces_sent; /* the current job's pieces written, for the debug line */
    unsigned chunks_packed; /* the current job's chunks that went compressed, for the debug line */
    struct queue ready; /* JOB_RECV: chunks or pieces received, for the handler */
    struct item ready_items[READY_CAP];
    struct link link[BULK_MAX_STREAMS];
} bulk = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
        .ready = {.items = bulk.ready_items, .cap = READY_CAP}};

/* ---- queues (bulk.lock held) -------------------------------------------------- */

static int queue_empty(const struct queue *q) { return q->head == q->tail; }
static int queue_full(const struct queue *q) { return q->tail - q->head == q->cap; }
static void queue_push(struct queue *q, struct item it) { q->items[q->tail++ % q->cap] = it; }
static struct item queue_pop(struct queue *q) { return q->items[q->head++ % q->cap]; }

/* Give back the buffers of chunks nobody will use. */
static void queue_drain(struct queue *q)
{
    while (!queue_empty(q)) {
        struct item it = queue_pop(q);
        if (it.b && it.last) staging_release(it.b);
    }
}

/* ---- failure ------------------------------------------------------------------- */

/* Called with bulk.lock held. Logs once, then shuts every connection down:
 * threads blocked on them wake with an error, and the client sees its
 * connections end. The fds stay open until the session exits, so no
 * thread ever uses a number that was reused. */
static void fail_locked(int index, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_locked(int index, const char *fmt, ...)
{
    bulk.failed = 1;
    if (!bulk.dead) {
        char why[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        if (index >= 0)
            LOG_WARN("bulk connection %d: %s; striping ends for this session, copies go on over the main "
                     "connection", index, why);
        else
            LOG_WARN("bulk copies: %s; striping ends for this session", why);
        bulk.dead = 1;
        for (int i = 0; i < bulk.k; i++)
            if (bulk.link[i].fd >= 0) shutdown(bulk.link[i].fd, SHUT_RDWR);
    }
    pthread_cond_broadcast(&bulk.cv);
    for (int i = 0; i < bulk.k; i++) pthread_cond_broadcast(&bulk.link[i].cv);
}

void bulk_end(const char *why)
{
    pthread_mutex_lock(&bulk.lock);
    if (bulk.k && !bulk.dead) fail_locked(-1, "%s", why);
    pthread_mutex_unlock(&bulk.lock);
}

static int job_failed(void)
{
    pthread_mutex_lock(&bulk.lock);
    int f = bulk.failed;
    pthread_mutex_unlock(&bulk.lock);
    return f;
}

/* ---- one connection's share of a job ----------------------------------------------- */

static uint32_t chunk_len(const struct job *j, uint64_t idx)
{
    uint64_t off = idx * j->chunk;
    return j->n - off < j->chunk ? (uint32_t)(j->n - off) : j->chunk;
}

/* The connection failed under a job (errno err): end striping, unless
 * the job failed already (then this is only the echo of that). */
static int lost(struct link *l, const struct job *j, int err)
{
    pthread_mutex_lock(&bulk.lock);
    if (!bulk.failed)
        fail_locked(l->index, "%s during copy %llu", err == ECONNRESET ? "connection closed" : strerror(err),
                    (unsigned long long)j->id);
    pthread_mutex_unlock(&bulk.lock);
    return -1;
}

/* Read a chunk's bytes. Under an idle timeout, a client silent that long
 * in the middle of a chunk ends striping, which fails the copy and frees
 * the dispatch thread waiting for the chunk, instead of holding the
 * session forever. */
static int recv_full(struct link *l, void *p, size_t n)
{
    return bulk.idle_ms > 0 ? io_read_full_timeout(l->fd, p, n, bulk.idle_ms) : io_read_full(l->fd, p, n);
}

/* Hand a received piece to the handler. */
static void push_ready(struct item it)
{
    pthread_mutex_lock(&bulk.lock);
    queue_push(&bulk.ready, it);
    pthread_cond_broadcast(&bulk.cv);
    pthread_mutex_unlock(&bulk.lock);
}

/* Receive a chunk into b, handing each piece (the whole chunk when the
 * job has no pieces) to the handler as soon as its records are opened, so
 * its DMA overlaps the rest of the chunk. Returns 0, or -1 (errno set)
 * with b given back, through the handler once it has pieces of it. */
static int recv_chunk(struct link *l, const struct job *j, struct staging *b, uint64_t off, uint32_t len)
{
    uint32_t piece = j->piece ? j->piece : len;
    for (uint32_t at = 0; at < len; at += piece) {
        uint32_t n = len - at < piece ? len - at : piece;
        if (recv_full(l, (char *)staging_data(b) + at, n) != 0) {
            int err = errno;
            if (at == 0)
                staging_release(b);
            else
                push_ready((struct item){b, off + at, at, 0, 1});
            errno = err;
            return -1;
        }
        push_ready((struct item){b, off + at, at, n, at + n == len});
    }
    return 0;
}

/* Receive a compressed chunk of `packed` bytes and decompress it into b,
 * whole. A frame that is not exactly len bytes ends striping. Returns 0,
 * or -1 after fail_locked (b given back). */
static int recv_packed(struct link *l, const struct job *j, struct staging *b, uint64_t off, uint32_t len,
                       uint32_t packed)
{
    if (recv_full(l, l->packed, packed) != 0) {
        int err = errno;
        staging_release(b);
        return lost(l, j, err);
    }
    if (decompress_chunk(staging_data(b), len, l->packed, packed) != 0) {
        staging_release(b);
        pthread_mutex_lock(&bulk.lock);
        fail_locked(l->index, "the compressed chunk at offset %llu of copy %llu does not decompress to its %u bytes",
                    (unsigned long long)off, (unsigned long long)j->id, len);
        pthread_mutex_unlock(&bulk.lock);
        return -1;
    }
    push_ready((struct item){b, off, 0, len, 1});
    return 0;
}

/* Receive this connection's chunks. Returns 0, or -1 after fail_locked. */
static int link_recv(struct link *l, const struct job *j)
{
    for (uint64_t idx = (uint64_t)l->index; idx < j->nchunks && !job_failed(); idx += (uint64_t)bulk.k) {
        uint64_t off = idx * j->chunk;
        uint32_t len = chunk_len(j, idx);
        uint8_t head[BULK_CHUNK_HEAD], want[BULK_CHUNK_HEAD];
        bulk_head_encode(want, j->id, off, len);
        if (recv_full(l, head, sizeof head) != 0) return lost(l, j, errno);
        uint32_t packed = bulk_head_packed(head);
        if (memcmp(head, want, BULK_CHUNK_HEAD_FIXED) != 0 || (packed && (!l->zstd || packed >= len))) {
            pthread_mutex_lock(&bulk.lock);
            fail_locked(l->index, "expected chunk at offset %llu of copy %llu, got something else",
                        (unsigned long long)off, (unsigned long long)j->id);
            pthread_mutex_unlock(&bulk.lock);
            return -1;
        }
        struct staging *b = staging_pool_take(bulk.pool);
        if (job_failed()) {
            staging_release(b);
            return 0;
        }
        if (packed) {
            if (recv_packed(l, j, b, off, len, packed) != 0) return -1;
            continue;
        }
        if (recv_chunk(l, j, b, off, len) != 0) return lost(l, j, errno);
    }
    return 0;
}

/* The next chunk the handler queued for l; 0 when the job failed. */
static int next_out(struct link *l, struct item *it)
{
    pthread_mutex_lock(&bulk.lock);
    while (queue_empty(&l->out) && !bulk.failed) pthread_cond_wait(&l->cv, &bulk.lock);
    int got = !bulk.failed;
    if (got) *it = queue_pop(&l->out);
    pthread_cond_broadcast(&bulk.cv); /* room in the queue, for the handler */
    pthread_mutex_unlock(&bulk.lock);
    return got;
}

/* Send a chunk piece by piece, each as soon as its DMA is done; a piece
 * that was never copied (the copy failed) goes as zeros. Returns 0, or -1
 * (errno set). */
static int send_pieces(struct link *l, const struct job *j, const struct item *it, uint8_t *head, unsigned *sent)
{
    for (uint32_t at = 0; at < it->len; at += j->piece) {
        uint32_t n = it->len - at < j->piece ? it->len - at : j->piece;
        int landed = staging_piece_wait(it->b, (int)(at / j->piece)) == CUDA_SUCCESS;
        void *p = landed ? (char *)staging_data(it->b) + at : bulk.zeros;
        struct iovec iov[2] = {{head, BULK_CHUNK_HEAD}, {p, n}};
        /* The header goes with the first piece, as with a whole chunk:
         * the records on the wire are the same. */
        if ((at == 0 ? io_writev_full(l->fd, iov, 2) : io_write_full(l->fd, p, n)) != 0) return -1;
        ++*sent;
    }
    return 0;
}

/* Compress a chunk of *n bytes at p into l->packed when the job's policy
 * and the probe say it pays (compress.h). Returns 1 with the compressed
 * length in *n, 0 to send it plain. */
static int pack_chunk(struct link *l, const struct job *j, const void *p, uint32_t *n)
{
    if (!j->policy || !l->zstd) return 0;
    struct compress_probe probe;
    compress_probe(p, *n, &probe);
    if (!compress_worth(j->policy, j->used, &probe)) return 0;
    size_t z = compress_chunk(l->packed, *n, p, *n);
    if (z == 0) return 0;
    *n = (uint32_t)z;
    return 1;
}

/* Send this connection's chunks. Returns 0, or -1 after fail_locked. */
static int link_send(struct link *l, const struct job *j)
{
    unsigned sent = 0, packed = 0;
    for (uint64_t idx = (uint64_t)l->index; idx < j->nchunks; idx += (uint64_t)bulk.k) {
        struct item it;
        if (!next_out(l, &it)) return 0;
        uint8_t head[BULK_CHUNK_HEAD];
        bulk_head_encode(head, j->id, it.off, it.len);
        int rc;
        if (it.b && j->piece) {
            rc = send_pieces(l, j, &it, head, &sent);
        } else {
            if (it.b) staging_wait(it.b);
            void *p = it.b ? staging_data(it.b) : bulk.zeros;
            uint32_t n = it.len;
            if (it.b && pack_chunk(l, j, p, &n)) {
                bulk_head_encode_packed(head, j->id, it.off, it.len, n);
                p = l->packed;
                packed++;
            }
            struct iovec iov[2] = {{head, sizeof head}, {p, n}};
            rc = io_writev_full(l->fd, iov, 2);
        }
        int err = errno;
        if (it.b) staging_release(it.b);
        if (rc != 0) return lost(l, j, err);
    }
    pthread_mutex_lock(&bulk.lock);
    bulk.pieces_sent += sent;
    bulk.chunks_packed += packed;
    pthread_mutex_unlock(&bulk.lock);
    return 0;
}

static void *link_main(void *arg)
{
    struct link *l = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&bulk.lock);
    for (;;) {
        while (bulk.job.gen == seen) pthread_cond_wait(&l->cv, &bulk.lock);
        seen = bulk.job.gen;
        struct job j = bulk.job;
        if (l->index >= j.used) continue; /* not counted in bulk.working: nothing to do */
        pthread_mutex_unlock(&bulk.lock);
        if (j.dir == JOB_RECV)
            link_recv(l, &j);
        else
            link_send(l, &j);
        pthread_mutex_lock(&bulk.lock);
        if (bulk.failed) queue_drain(&l->out);
        bulk.working--;
        pthread_cond_broadcast(&bulk.cv);
    }
    return NULL;
}

/* ---- joining ------------------------------------------------------------------------ */

/* Whether the join could become its connection now. 0, or -1 (why). */
static int check_locked(const struct join_note *note, char *why, size_t whylen)
{
    uint8_t want[SCUDA_PROOF_LEN];
    if (bulk.k == 0) {
        snprintf(why, whylen, "this session has not asked for bulk connections");
        return -1;
    }
    if (bulk.dead) {
        snprintf(why, whylen, "striping has ended for this session");
        return -1;
    }
    if (note->index >= (uint32_t)bulk.k) {
        snprintf(why, whylen, "connection %u asked for, this session has %d", note->index, bulk.k);
        return -1;
    }
    auth_join_proof(bulk.secret, note->nonce, note->pid, note->index, want);
    if (!auth_equal(want, note->proof, sizeof want)) {
        snprintf(why, whylen, "wrong join secret");
        return -1;
    }
    if (bulk.link[note->index].fd >= 0) {
        snprintf(why, whylen, "connection %u has joined already", note->index);
        return -1;
    }
    return 0;
}

static int admit_locked(const struct join_note *note, int fd, char *why, size_t whylen)
{
    if (check_locked(note, why, whylen) != 0) return -1;
    struct link *l = &bulk.link[note->index];
    l->zstd = note->zstd != 0;
    if (l->zstd && !l->packed && !(l->packed = malloc(BULK_CHUNK_MAX))) {
        snprintf(why, whylen, "out of memory for its compressed chunks");
        return -1;
    }
    l->fd = fd;
    bulk.tls = tls_of(fd) != NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, link_main, l) != 0) {
        l->fd = -1;
        snprintf(why, whylen, "cannot start a thread for it");
        return -1;
    }
    pthread_detach(t);
    if (++bulk.joined == bulk.k)
        LOG_INFO("bulk: %d connections joined; large copies are striped over them", bulk.k);
    return 0;
}

int bulk_check(const struct join_note *note, char *why, size_t whylen)
{
    pthread_mutex_lock(&bulk.lock);
    int rc = check_locked(note, why, whylen);
    pthread_mutex_unlock(&bulk.lock);
    return rc;
}

int bulk_admit(struct session *s, const struct join_note *note, int fd, char *why, size_t whylen)
{
    (void)s;
    pthread_mutex_lock(&bulk.lock);
    int rc = admit_locked(note, fd, why, whylen);
    pthread_mutex_unlock(&bulk.lock);
    return rc;
}

/* The spec writes the secret's length as a number (messages.gen.h does
 * not see protocol.h). */
_Static_assert(sizeof ((struct msg_scuda_bulk_setup_rep *)0)->secret == BULK_SECRET_LEN,
               "scuda_bulk_setup's secret is BULK_SECRET_LEN bytes");

/* SCUDA_BULK_PIECE_KIB, for measuring: the piece size of striped copies,
 * both ways, plain TCP included (0: whole chunks, also over TLS; rounded
 * up to whole records). Unset: the default (pieces over TLS only). -1
 * when unset or not understood. */
static int piece_setting(void)
{
    const char *v = getenv(PIECE_ENV);
    if (!v || !*v) return -1;
    char *end;
    long kib = strtol(v, &end, 10);
    if (*end || kib < 0 || kib > (long)(BULK_CHUNK_MAX >> 10)) {
        LOG_WARN("%s=%s is not a number of KiB from 0 to %u; striped copies keep their default pieces (unset it "
                 "or give a number)", PIECE_ENV, v, BULK_CHUNK_MAX >> 10);
        return -1;
    }
    return (int)(kib << 10);
}

/* The piece size of a job in chunks of `chunk` bytes: whole
 * records, few enough for a buffer's events; 0: whole chunks. */
static uint32_t piece_size(uint32_t chunk)
{
    uint64_t p = bulk.piece_set >= 0 ? (uint64_t)bulk.piece_set : bulk.tls ? chunk / PIECES_PER_CHUNK : 0;
    if (p == 0) return 0;
    if (bulk.piece_set < 0 && p < PIECE_MIN) p = PIECE_MIN;
    uint64_t fewest = (chunk + STAGING_PIECES_MAX - 1) / STAGING_PIECES_MAX;
    if (p < fewest) p = fewest;
    p = (p + REC_MAX_PLAIN - 1) / REC_MAX_PLAIN * REC_MAX_PLAIN;
    return p < chunk ? (uint32_t)p : 0;
}

CUresult srv_scuda_bulk_setup(srv_call *c)
{
    struct msg_scuda_bulk_setup_req m;
    if (msg_scuda_bulk_setup_req_get(&c->in, &c->arena, &m) != 0 || m.want < 2) return CUDA_ERROR_INVALID_VALUE;
    uint32_t want = m.want;
    pthread_mutex_lock(&bulk.lock);
    CUresult r = CUDA_SUCCESS;
    if (bulk.k != 0) {
        LOG_WARN("bulk: the client asked for bulk connections twice; refused");
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        int k = want > BULK_MAX_STREAMS ? BULK_MAX_STREAMS : (int)want;
        for (int i = 0; i < BULK_MAX_STREAMS; i++) {
            bulk.link[i] = (struct link){.fd = -1, .index = i};
            bulk.link[i].out = (struct queue){.items = bulk.link[i].out_items, .cap = QUEUE_CAP};
            pthread_cond_init(&bulk.link[i].cv, NULL);
        }
        bulk.pool = staging_pool_new(k + POOL_EXTRA, BULK_CHUNK_MAX);
        bulk.zeros = calloc(1, BULK_CHUNK_MAX);
        auth_nonce(bulk.secret, sizeof bulk.secret);
        if (!bulk.pool || !bulk.zeros) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            bulk.k = k;
            bulk.idle_ms = c->s->opt->idle_timeout_s > 0 ? c->s->opt->idle_timeout_s * 1000 : 0;
            bulk.piece_set = piece_setting();
            struct msg_scuda_bulk_setup_rep rep = {.k = (uint32_t)k, .pid = (uint32_t)getpid(),
                                                   .chunk_max = BULK_CHUNK_MAX};
            memcpy(rep.secret, bulk.secret, sizeof rep.secret);
            msg_scuda_bulk_setup_rep_put(&c->out, &rep);
        }
    }
    pthread_mutex_unlock(&bulk.lock);
    return r;
}

/* ---- striped copies ---------------------------------------------------------------------- */

/* Whether every connection joined with HELLO_JOIN_ZSTD. */
static int all_zstd_locked(void)
{
    for (int i = 0; i < bulk.k; i++)
        if (!bulk.link[i].zstd) return 0;
    return bulk.k > 0;
}

/* Check the announcement (NULL: it did not decode) and post its job to
 * every connection. An announcement the connections cannot follow
 * (malformed, out of bounds, while striping is not on) ends striping: the
 * client's chunks would otherwise sit unread. Returns 0, or -1. */
static int post_job(srv_call *c, const struct msg_bulk_copy *a, enum job_dir dir, struct job *posted)
{
    pthread_mutex_lock(&bulk.lock);
    const char *bad = NULL;
    if (!a) bad = "malformed announcement";
    else if (bulk.k == 0 || bulk.joined < bulk.k) bad = "announced before every connection joined";
    else if (bulk.dead) bad = "announced after striping ended";
    else if (bulk.working) bad = "announced while another striped copy runs";
    else if (a->n == 0 || a->n > BULK_COPY_MAX) bad = "copy size out of bounds";
    else if (a->chunk < BULK_CHUNK_MIN || a->chunk > BULK_CHUNK_MAX) bad = "chunk size out of bounds";
    else if (a->id <= bulk.last_id) bad = "copy id not above the last one";
    else if (a->mode >> BULK_MODE_POLICY_SHIFT && !all_zstd_locked())
        bad = "compression asked over connections that did not negotiate it";
    else if (!bulk.pool_filled && staging_pool_fill(bulk.pool) != 0) bad = "out of memory for its buffers";
    /* Before any setup there is nothing to end: a copy cut by a move and
     * sent again to the server the session moved to (its announcement
     * unread by the old one) fails alone, and striping can start here. */
    if (bad && bulk.k == 0) {
        LOG_WARN("bulk copies: %s %s; it fails", scuda_op_name(c->op), bad);
        pthread_mutex_unlock(&bulk.lock);
        return -1;
    }
    if (bad) {
        fail_locked(-1, "%s %s", scuda_op_name(c->op), bad);
        pthread_mutex_unlock(&bulk.lock);
        return -1;
    }
    bulk.pool_filled = 1;
    bulk.last_id = a->id;
    bulk.failed = 0;
    bulk.ready.head = bulk.ready.tail = 0;
    uint64_t nchunks = (a->n + a->chunk - 1) / a->chunk;
    int used = nchunks < (uint64_t)bulk.k ? (int)nchunks : bulk.k;
    bulk.job = (struct job){.gen = bulk.job.gen + 1, .dir = dir, .id = a->id, .n = a->n,
                            .nchunks = nchunks, .chunk = a->chunk, .used = used,
                            .policy = a->mode >> BULK_MODE_POLICY_SHIFT};
    /* A compressed chunk is sent whole (link_send). */
    bulk.job.piece = bulk.job.policy ? 0 : piece_size(a->chunk);
    bulk.pieces_sent = 0;
    bulk.chunks_packed = 0;
    bulk.working = used;
    *posted = bulk.job;
    for (int i = 0; i < used; i++) pthread_cond_signal(&bulk.link[i].cv);
    pthread_mutex_unlock(&bulk.lock);
    return 0;
}

/* Wait for every connection's thread to finish the job. Returns 1 when
 * the job failed. */
static int finish_job(void)
{
    pthread_mutex_lock(&bulk.lock);
    while (bulk.working > 0) pthread_cond_wait(&bulk.cv, &bulk.lock);
    int failed = bulk.failed;
    queue_drain(&bulk.ready);
    for (int i = 0; i < bulk.k; i++) queue_drain(&bulk.link[i].out);
    pthread_mutex_unlock(&bulk.lock);
    return failed;
}

/* The stream and the capture check every host copy gets (srv_memory.c). */
static CUresult copy_stream(srv_call *c, const struct msg_bulk_copy *a, CUstream *st)
{
    void *h = NULL;
    CUresult r = handle_get(c->s, a->stream, HK_STREAM, &h);
    *st = (CUstream)h;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (r == CUDA_SUCCESS && a->mode == COPY_ASYNC && real.cuStreamIsCapturing &&
        REAL(cuStreamIsCapturing, *st, &cs) == CUDA_SUCCESS && cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        LOG_WARN("a striped copy on a capturing stream: refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (a->mode != COPY_ASYNC) *st = NULL; /* the synchronous copies' stream */
    return r;
}

/* Start the DMA of every chunk or piece the connections receive, as it
 * comes. r is the copy's result so far: once it fails, buffers are only
 * given back, each after the DMAs queued from it (st is fit for an event
 * when the copy started well). */
static CUresult land_chunks(uint64_t dst, CUstream st, CUresult r, struct staging **last, unsigned *dmas)
{
    int stream_ok = r == CUDA_SUCCESS;
    pthread_mutex_lock(&bulk.lock);
    for (;;) {
        while (queue_empty(&bulk.ready) && bulk.working > 0) pthread_cond_wait(&bulk.cv, &bulk.lock);
        if (queue_empty(&bulk.ready)) break;
        struct item it = queue_pop(&bulk.ready);
        int failed = bulk.failed;
        pthread_mutex_unlock(&bulk.lock);
        if (r == CUDA_SUCCESS && !failed && it.len) {
            snapshot_note_write(); /* a chunk outside any call: the next snapshot copies it */
            r = REAL(cuMemcpyHtoDAsync_v2, dst + it.off, (char *)staging_data(it.b) + it.at, it.len, st);
            ++*dmas;
        }
        if (it.last) {
            if (stream_ok)
                staging_release_after(it.b, st);
            else
                staging_release(it.b);
            if (r == CUDA_SUCCESS && !failed) *last = it.b;
        }
        pthread_mutex_lock(&bulk.lock);
    }
    pthread_mutex_unlock(&bulk.lock);
    return r;
}

/* One-way, like scuda_memcpy_htod; a failure is reported by the next
 * synchronizing call. */
CUresult srv_scuda_bulk_htod(srv_call *c)
{
    struct msg_scuda_bulk_htod_req m;
    struct job j;
    int ok = msg_scuda_bulk_htod_req_get(&c->in, &c->arena, &m) == 0;
    if (post_job(c, ok ? &m.copy : NULL, JOB_RECV, &j) != 0) return CUDA_ERROR_INVALID_VALUE;
    m.copy.mode &= BULK_MODE_COPY; /* the rest was the compression policy */
    const struct msg_bulk_copy *a = &m.copy;
    CUstream st;
    CUresult r = copy_stream(c, a, &st);
    struct staging *last = NULL;
    unsigned dmas = 0;
    r = land_chunks(a->dev, st, r, &last, &dmas);
    if (finish_job()) return r == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : r;
    if (j.piece)
        LOG_DEBUG("bulk: copy %llu to the device: %llu bytes in %llu chunks, %u pieces of %u KiB landed",
                  (unsigned long long)j.id, (unsigned long long)j.n, (unsigned long long)j.nchunks, dmas,
                  j.piece >> 10);
    /* cuMemcpyHtoD's meaning: the next call runs after the copy is done. */
    if (a->mode != COPY_ASYNC && last) session_after_copy(last);
    return r;
}

/* The client closed its bulk connections after a copy failed on one of
 * them. The session may not have seen that copy fail (every chunk of a
 * copy to the host can be in the sockets before the client's side
 * breaks), so the end of striping is logged, and the connections shut,
 * here too. */
CUresult srv_scuda_bulk_end(srv_call *c)
{
    struct msg_scuda_bulk_end_req m;
    if (msg_scuda_bulk_end_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    char why[96];
    snprintf(why, sizeof why, "the client's bulk connection %u failed during a copy",
             m.index < BULK_MAX_STREAMS ? m.index : BULK_MAX_STREAMS);
    bulk_end(why);
    return CUDA_SUCCESS;
}

/* Queue one chunk on its connection, waiting while its queue is full.
 * Returns 0, or -1 when the job failed (the chunk's buffer given back). */
static int queue_out(struct link *l, struct item it)
{
    pthread_mutex_lock(&bulk.lock);
    while (queue_full(&l->out) && !bulk.failed) pthread_cond_wait(&bulk.cv, &bulk.lock);
    int ok = !bulk.failed;
    if (ok) {
        queue_push(&l->out, it);
        pthread_cond_signal(&l->cv);
    }
    pthread_mutex_unlock(&bulk.lock);
    if (!ok && it.b) staging_release(it.b);
    return ok ? 0 : -1;
}

/* Copy one chunk from the device into a buffer. NULL (the chunk goes as
 * zeros) once the copy has failed; *r then says why. */
static struct staging *fetch_chunk(uint64_t src, uint32_t len, CUstream st, CUresult *r)
{
    if (*r != CUDA_SUCCESS) return NULL;
    struct staging *b = staging_pool_take(bulk.pool);
    *r = REAL(cuMemcpyDtoHAsync_v2, staging_data(b), src, len, st);
    if (*r == CUDA_SUCCESS) *r = staging_record(b, st);
    if (*r == CUDA_SUCCESS) return b;
    staging_release(b);
    return NULL;
}

/* Whole chunks, one after another, each queued on its connection. */
static void fetch_whole(const struct job *j, uint64_t src, CUstream st, CUresult *r)
{
    for (uint64_t idx = 0; idx < j->nchunks; idx++) {
        uint64_t off = idx * j->chunk;
        uint32_t len = chunk_len(j, idx);
        struct staging *b = fetch_chunk(src + off, len, st, r);
        if (queue_out(&bulk.link[idx % (uint64_t)bulk.k], (struct item){b, off, 0, len, 1}) != 0) return;
    }
}

/* ---- device to host in pieces ----------------------------------------------------- */

/* The chunk a connection has open: its buffer, and how much of it has
 * been queued for DMA. */
struct filling {
    struct staging *b; /* NULL: none open */
    uint64_t idx;      /* the open chunk, else the connection's next one */
    uint32_t len, queued;
};

/* What a copy in pieces did, for the debug line. */
struct piece_trace {
    unsigned pieces;
    char first[96]; /* the chunks of the first pieces, in the order queued */
};

/* Open connection i's next chunk: take a buffer (the spare one, or one
 * free now) and queue the chunk on the connection, whose thread then
 * waits piece by piece. After a failed DMA the chunk goes as zeros, at
 * once. Returns 1 when done, 0 when no buffer is free, -1 when the job
 * failed. */
static int open_chunk(const struct job *j, struct filling *f, int i, CUresult r, struct staging **spare)
{
    struct staging *b = NULL;
    if (r == CUDA_SUCCESS) {
        b = *spare ? *spare : staging_pool_try_take(bulk.pool);
        if (!b) return 0;
        *spare = NULL;
        staging_pieces_begin(b);
    }
    uint32_t len = chunk_len(j, f->idx);
    if (queue_out(&bulk.link[i], (struct item){b, f->idx * j->chunk, 0, len, 1}) != 0) return -1;
    if (b)
        *f = (struct filling){.b = b, .idx = f->idx, .len = len};
    else
        f->idx += (uint64_t)bulk.k;
    return 1;
}

/* Queue the DMA of the open chunk's next piece, and mark it. The chunk is
 * closed after its last piece, or at once when a DMA fails (its thread
 * sends the pieces never copied as zeros). */
static void fill_piece(const struct job *j, struct filling *f, uint64_t src, CUstream st, CUresult *r,
                       struct piece_trace *t)
{
    uint32_t n = f->len - f->queued < j->piece ? f->len - f->queued : j->piece;
    if (*r == CUDA_SUCCESS)
        *r = REAL(cuMemcpyDtoHAsync_v2, (char *)staging_data(f->b) + f->queued, src + f->idx * j->chunk + f->queued,
                  n, st);
    if (*r == CUDA_SUCCESS) *r = staging_piece_record(f->b, st);
    if (*r == CUDA_SUCCESS) {
        size_t at = strlen(t->first);
        if (t->pieces++ < (unsigned)j->used)
            snprintf(t->first + at, sizeof t->first - at, "%s%llu", at ? " " : "", (unsigned long long)f->idx);
        f->queued += n;
    }
    if (*r != CUDA_SUCCESS || f->queued == f->len) {
        staging_pieces_end(f->b, st);
        f->b = NULL;
        f->idx += (uint64_t)bulk.k;
    }
}

/* Queue every chunk's DMA in pieces, round-robin over the connections:
 * each connection's open chunk gets one piece per round, so the first
 * piece of every connection's chunk lands before any second piece. A
 * connection whose chunk is all queued opens its next one when a buffer
 * is free; when none can go on, wait for a buffer (the connections give
 * theirs back as they send). Every chunk opened is closed on the way
 * out, so no thread waits for a piece that never comes. */
static void fetch_in_pieces(const struct job *j, uint64_t src, CUstream st, CUresult *r, struct piece_trace *t)
{
    struct filling f[BULK_MAX_STREAMS];
    for (int i = 0; i < j->used; i++) f[i] = (struct filling){.idx = (uint64_t)i};
    struct staging *spare = NULL;
    for (int stop = 0; !stop;) {
        int moved = 0, left = 0;
        for (int i = 0; i < j->used && !stop; i++) {
            if (!f[i].b && f[i].idx >= j->nchunks) continue;
            left = 1;
            int opened = f[i].b ? 1 : open_chunk(j, &f[i], i, *r, &spare);
            if (opened < 0) stop = 1;
            if (opened <= 0) continue;
            moved = 1;
            if (f[i].b) fill_piece(j, &f[i], src, st, r, t);
        }
        if (!left || job_failed()) break;
        if (!stop && !moved) spare = staging_pool_take(bulk.pool);
    }
    for (int i = 0; i < j->used; i++)
        if (f[i].b) staging_pieces_end(f[i].b, st);
    if (spare) staging_release(spare);
}

/* Replies with the result after every chunk went out. */
CUresult srv_scuda_bulk_dtoh(srv_call *c)
{
    struct msg_scuda_bulk_dtoh_req m;
    struct job j;
    int ok = msg_scuda_bulk_dtoh_req_get(&c->in, &c->arena, &m) == 0;
    if (post_job(c, ok ? &m.copy : NULL, JOB_SEND, &j) != 0) return CUDA_ERROR_INVALID_VALUE;
    m.copy.mode &= BULK_MODE_COPY; /* the rest was the compression policy */
    const struct msg_bulk_copy *a = &m.copy;
    CUstream st;
    CUresult r = copy_stream(c, a, &st);
    struct piece_trace t = {0};
    if (j.piece)
        fetch_in_pieces(&j, a->dev, st, &r, &t);
    else
        fetch_whole(&j, a->dev, st, &r);
    if (finish_job()) return r == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : r;
    if (j.policy) {
        pthread_mutex_lock(&bulk.lock);
        unsigned packed = bulk.chunks_packed;
        pthread_mutex_unlock(&bulk.lock);
        LOG_DEBUG("bulk: copy %llu from the device: %u of %llu chunks compressed (policy %u)",
                  (unsigned long long)j.id, packed, (unsigned long long)j.nchunks, j.policy);
    }
    if (j.piece) {
        pthread_mutex_lock(&bulk.lock);
        unsigned sent = bulk.pieces_sent;
        pthread_mutex_unlock(&bulk.lock);
        LOG_DEBUG("bulk: copy %llu from the device: %llu bytes in %llu chunks, %u pieces of %u KiB queued, %u "
                  "sent; first pieces from chunks %s",
                  (unsigned long long)j.id, (unsigned long long)j.n, (unsigned long long)j.nchunks, t.pieces,
                  j.piece >> 10, sent, t.first);
    }
    return r;
}
