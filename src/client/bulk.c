/* bulk.c - see bulk.h.
 *
 * One striped copy at a time per server (s->b.lock): its announcement goes
 * over the main connection, in program order with every other call, and
 * its chunks over the k bulk connections, chunk j on connection j mod k.
 * The calling thread moves connection 0's chunks itself; a helper thread
 * per other connection moves the rest at the same time, straight between
 * the caller's buffer and the socket (no staging copy). Any failure on a bulk
 * connection fails that copy with CUDA_ERROR_UNKNOWN and ends striping for
 * this server: every bulk connection is closed (the session notices at
 * once) and later copies use the main connection. A copy that failed
 * because every connection was cut, the main one resumed, goes again over
 * the main connection (again_after_resume).
 *
 * A copy to the device in asynchronous mode from page-locked memory (the
 * caller may not touch it before the stream's work is done, as natively)
 * runs in the background: the announcement goes one-way, every
 * connection's share is moved by its helper (helper 0 too), and the call
 * returns at once; the session runs the copy, and every call after it, in
 * program order, as the chunks land. The next user of the connections
 * first waits for it (settle_locked) and reports a failure as above; the
 * session reports the copy's own failure at the next synchronizing call,
 * as for any one-way call. cuMemFreeHost and cuMemHostUnregister wait for
 * it too (bulk_wait_background). SCUDA_BULK_BACKGROUND=0 turns it off.
 *
 * Lock order: the mirrors' lock (coherence.c) before s->b.lock. A fetch or
 * push of mirrored memory holds the former and may stripe; so a copy
 * pushes mirrored memory before it takes s->b.lock, and the calls it makes
 * under s->b.lock do not push again (rpc_call.pushed).
 *
 * Compression (docs/architecture.md, "Compressed copies"): when every
 * connection joined with HELLO_JOIN_ZSTD, a copy carries a policy
 * (compress.h) made from SCUDA_COMPRESS and the link's rate, measured on
 * the copies that went plain (or SCUDA_LINK_MBPS). Its chunks' sender
 * (this side to the device, the session from it) compresses each chunk
 * the probe says pays. */
#define _GNU_SOURCE
#include "failover.h"
#include "bulk.h"
#include "hooks.h"
#include "conn.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/auth.h"
#include "../common/compress.h"
#include "../common/config.h"
#include "../common/dial.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/tls_records.h"
#include "../common/transport.h"

static double now_s(void);
static void note_rate(struct server *s, uint64_t n, uint64_t wire, double took);

#define CONNECT_TIMEOUT_MS 5000
#define JOIN_TIMEOUT_MS 5000 /* as the main connection's greeting (conn.c) */
#define DEAD_PEER_S 10 /* as the main connection's (conn.c) */


/* ---- moving one connection's chunks ---------------------------------------- */

static int job_failed(struct server *s)
{
    pthread_mutex_lock(&s->b.job_lock);
    int f = s->b.failed;
    pthread_mutex_unlock(&s->b.job_lock);
    return f;
}

/* The first failure of a job: remember it, and shut every connection down
 * so that the other movers, and the session, stop at once. */
static void note_failure(struct server *s, int index, int err)
{
    pthread_mutex_lock(&s->b.job_lock);
    if (!s->b.failed) {
        s->b.failed = 1;
        s->b.fail_index = index;
        s->b.fail_errno = err;
        for (int i = 0; i < s->b.k; i++) shutdown(s->b.fd[i], SHUT_RDWR);
    }
    pthread_mutex_unlock(&s->b.job_lock);
}

/* Send one chunk, compressed when the copy's policy and the probe of
 * this chunk say it pays. head is its plain header. Returns 0, or -1
 * (errno set). */
static int send_chunk(struct server *s, int index, const struct bulk_job *j, uint8_t *head, uint64_t off, uint32_t len)
{
    const char *p = j->host + off;
    size_t n = len;
    struct compress_probe probe;
    if (j->policy) {
        compress_probe(p, len, &probe);
        size_t z = compress_worth(j->policy, j->used, &probe) ? compress_chunk(s->b.packed[index], len, p, len) : 0;
        if (z) {
            bulk_head_encode_packed(head, j->id, off, len, (uint32_t)z);
            p = (const char *)s->b.packed[index];
            n = z;
            atomic_fetch_add(&s->b.packed_sent, 1);
            atomic_fetch_add(&s->b.packed_plain, len);
            atomic_fetch_add(&s->b.packed_wire, z);
        }
    }
    struct iovec iov[2] = {{head, BULK_CHUNK_HEAD}, {(void *)p, n}};
    if (io_writev_full(s->b.fd[index], iov, 2) != 0) return -1;
    atomic_fetch_add(&s->b.job_wire, n);
    return 0;
}

/* Read a compressed chunk of `packed` bytes and decompress it into the
 * len bytes at dst. Returns 0, or -1 (errno set: EBADMSG for a frame
 * that is not exactly len bytes). */
static int recv_packed(struct server *s, int index, char *dst, uint32_t len, uint32_t packed)
{
    if (io_read_full(s->b.fd[index], s->b.packed[index], packed) != 0) return -1;
    if (decompress_chunk(dst, len, s->b.packed[index], packed) != 0) {
        errno = EBADMSG;
        return -1;
    }
    atomic_fetch_add(&s->b.packed_received, 1);
    atomic_fetch_add(&s->b.packed_plain, len);
    atomic_fetch_add(&s->b.packed_wire, packed);
    return 0;
}

/* Chunks index, index + k, ... of the job, on connection `index`. Every
 * chunk header from the session must be exactly the one expected: its
 * offset and length come from the announcement, never from the wire; a
 * compressed chunk (its packed length) only where negotiated, shorter
 * than the chunk, and decompressing to exactly the chunk's length.
 * Returns 0, or -1 with errno set. */
static int move_share(struct server *s, int index, const struct bulk_job *j)
{
    int fd = s->b.fd[index];
    uint64_t nchunks = (j->n + j->chunk - 1) / j->chunk;
    for (uint64_t idx = (uint64_t)index; idx < nchunks; idx += (uint64_t)s->b.k) {
        if (job_failed(s)) return 0;
        uint64_t off = idx * j->chunk;
        uint32_t len = j->n - off < j->chunk ? (uint32_t)(j->n - off) : j->chunk;
        uint8_t want[BULK_CHUNK_HEAD];
        bulk_head_encode(want, j->id, off, len);
        if (j->dir == BULK_TO_DEVICE) {
            if (send_chunk(s, index, j, want, off, len) != 0) return -1;
            conn_transfer_progress(s); /* the session took it: alive */
            continue;
        }
        uint8_t head[BULK_CHUNK_HEAD];
        if (io_read_full(fd, head, sizeof head) != 0) return -1;
        uint32_t packed = bulk_head_packed(head);
        if (memcmp(head, want, BULK_CHUNK_HEAD_FIXED) != 0 || (packed && (!s->b.zstd || packed >= len))) {
            errno = EPROTO;
            return -1;
        }
        if (packed ? recv_packed(s, index, j->host + off, len, packed) : io_read_full(fd, j->host + off, len))
            return -1;
        atomic_fetch_add(&s->b.job_wire, packed ? packed : len);
        conn_transfer_progress(s);
    }
    return 0;
}

static void *helper_main(void *arg)
{
    const struct bulk_helper *me = arg;
    struct server *s = me->s;
    int index = me->index;
    pthread_mutex_lock(&s->b.job_lock);
    uint64_t seen = s->b.gen_at_setup; /* connections opened again after a move: no older job is ours */
    for (;;) {
        while (s->b.job.gen == seen && !s->b.quit) pthread_cond_wait(&s->b.helper_cv[index], &s->b.job_lock);
        if (s->b.quit) break;
        seen = s->b.job.gen;
        struct bulk_job j = s->b.job;
        /* Not counted in s->b.moving: nothing to do. Share 0 is the
         * caller's, unless the job runs in the background. */
        if (index >= j.used || (index == 0 && !j.background)) continue;
        pthread_mutex_unlock(&s->b.job_lock);
        if (move_share(s, index, &j) != 0) note_failure(s, index, errno);
        pthread_mutex_lock(&s->b.job_lock);
        if (--s->b.moving > 0) continue;
        if (j.background) {
            s->b.background_busy = 0;
            s->b.background_failed = s->b.failed;
            s->b.background_took = now_s() - s->b.background_t0;
            pthread_mutex_unlock(&s->b.job_lock);
            conn_transfer_end(s); /* not under job_lock: conn.c's dead handler takes it */
            pthread_mutex_lock(&s->b.job_lock);
        }
        pthread_cond_broadcast(&s->b.done_cv);
    }
    s->b.helpers--;
    pthread_cond_broadcast(&s->b.job_cv);
    pthread_mutex_unlock(&s->b.job_lock);
    return NULL;
}

/* Copies run in the background, ever (tests). */
static _Atomic uint64_t background_copies;

/* Hand job j to the movers: helpers 1.. and, in the background, helper 0. */
static void post_job(struct server *s, const struct bulk_job *j)
{
    conn_transfer_begin(s); /* a silent server fails the copy (conn.h) */
    pthread_mutex_lock(&s->b.job_lock);
    uint64_t gen = s->b.job.gen + 1;
    s->b.job = *j;
    s->b.job.gen = gen;
    s->b.moving = j->used;
    s->b.failed = 0;
    s->b.last_used = j->used;
    if (j->background) {
        s->b.background_busy = 1;
        s->b.background_t0 = now_s();
        atomic_fetch_add(&background_copies, 1);
    }
    for (int i = j->background ? 0 : 1; i < j->used; i++) pthread_cond_signal(&s->b.helper_cv[i]);
    pthread_mutex_unlock(&s->b.job_lock);
}

/* Run a job on every connection: this thread moves connection 0's share.
 * Called with s->b.lock held. Returns 0, or -1 when it failed. */
static int run_job(struct server *s, const struct bulk_job *j)
{
    post_job(s, j);
    if (move_share(s, 0, j) != 0) note_failure(s, 0, errno);
    pthread_mutex_lock(&s->b.job_lock);
    s->b.moving--;
    while (s->b.moving > 0) pthread_cond_wait(&s->b.done_cv, &s->b.job_lock);
    int failed = s->b.failed;
    pthread_mutex_unlock(&s->b.job_lock);
    conn_transfer_end(s);
    return failed ? -1 : 0;
}

/* ---- on and off ------------------------------------------------------------ */

/* Close every connection and stop the helpers. Called with s->b.lock held. */
static void close_all(struct server *s)
{
    pthread_mutex_lock(&s->b.job_lock);
    s->b.quit = 1;
    for (int i = 0; i < s->b.k; i++) pthread_cond_signal(&s->b.helper_cv[i]);
    pthread_mutex_unlock(&s->b.job_lock);
    for (int i = 0; i < s->b.k; i++) {
        if (s->b.fd[i] >= 0) io_close(s->b.fd[i]);
        s->b.fd[i] = -1;
    }
    s->b.state = BULK_OFF;
}

/* Tell the session that striping ended on this side, after the copy's
 * own call ended: it may not have seen the copy fail. One-way; a session
 * that is gone already makes it fail, which changes nothing. */
static void tell_session_striping_ended(struct server *s, int index)
{
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_bulk_end, s);
    c.pushed = 1;
    msg_scuda_bulk_end_req_put(&c.req, &(struct msg_scuda_bulk_end_req){.index = (uint32_t)index});
    (void)rpc_async(&c);
}

/* A copy failed on a bulk connection. Called with s->b.lock held. */
static void go_off_after_failure(struct server *s)
{
    int err = s->b.fail_errno;
    LOG_ERROR("bulk connection %d to server %s failed during a copy (%s): striping ends; later copies use "
              "the main connection only",
              s->b.fail_index, conn_addr(s),
              err == ECONNRESET ? "the server closed it"
              : err == EPROTO  ? "unexpected data"
              : err == EBADMSG ? "a compressed chunk that does not decompress to its length"
                               : strerror(err));
    close_all(s);
}

/* Connect, handshake with HELLO_BULK_JOIN, and be welcomed as connection
 * `index` of session `pid`. Returns the fd, or -1 with the reason in err. */
static int join_one(struct server *s, uint32_t pid, uint32_t index, const uint8_t secret[BULK_SECRET_LEN], int *zstd,
                    char *err, size_t errlen)
{
    int fd = dial(conn_addr(s), CONNECT_TIMEOUT_MS, PREFACE_JOIN, err, errlen);
    if (fd < 0) return -1;
    uint8_t nonce[SCUDA_NONCE_LEN], req[BULK_JOIN_LEN];
    uint32_t status;
    uint16_t server_flags = 0;
    char msg[256];
    if (hello_read_server_judged(fd, JOIN_TIMEOUT_MS, nonce, &server_flags, err, errlen) != 0) goto fail;
    /* Compressed chunks only with a server that says it takes them, so an
     * older one never sees a flag it does not know, nor such a chunk. */
    *zstd = (server_flags & HELLO_SERVER_ZSTD) && s->b.zmode != COMPRESS_OFF;
    hello_join_request(req, pid, index, secret, nonce);
    if (hello_send_client(fd, HELLO_BULK_JOIN | (*zstd ? HELLO_JOIN_ZSTD : 0), 0, scuda_token(), nonce, req,
                          sizeof req) != 0) {
        snprintf(err, errlen, "the connection closed during the handshake");
        goto fail;
    }
    /* Over TLS the session takes the socket over with a TLS session of its
     * own, in which the request is repeated (bulk_join.c, second_tls). */
    int second = dial_second_tls(fd, conn_addr(s), JOIN_TIMEOUT_MS, err, errlen);
    if (second < 0) goto fail;
    if (tls_of(fd) && second == 0 && io_write_full(fd, req, sizeof req) != 0) {
        snprintf(err, errlen, "the connection closed during the second TLS session");
        goto fail;
    }
    if (hello_read_welcome(fd, JOIN_TIMEOUT_MS, &status, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s", msg);
        goto fail;
    }
    if (status != WELCOME_OK || strcmp(msg, "bulk") != 0) {
        snprintf(err, errlen, "refused: %.200s", msg);
        goto fail;
    }
    return fd;
fail:
    io_close(fd);
    return -1;
}

/* The spec writes the secret's length as a number (messages.gen.h does
 * not see protocol.h). */
_Static_assert(sizeof ((struct msg_scuda_bulk_setup_rep *)0)->secret == BULK_SECRET_LEN,
               "scuda_bulk_setup's secret is BULK_SECRET_LEN bytes");

/* scuda_bulk_setup on the main connection: the session's join secret.
 * Returns 0, or -1 (logged). */
static int ask_session(struct server *s, int want, int *k, uint32_t *pid, uint8_t secret[BULK_SECRET_LEN])
{
    struct msg_scuda_bulk_setup_req m = {(uint32_t)want};
    struct msg_scuda_bulk_setup_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_bulk_setup, s);
    c.pushed = 1;
    msg_scuda_bulk_setup_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        if (msg_scuda_bulk_setup_rep_get(&c.out, &c.arena, &rep) != 0 || rep.k < 2 || rep.k > (uint32_t)want ||
            rep.chunk_max < BULK_CHUNK_MIN) {
            r = CUDA_ERROR_UNKNOWN;
        } else {
            *k = (int)rep.k;
            *pid = rep.pid;
            s->b.chunk_max = rep.chunk_max;
            memcpy(secret, rep.secret, BULK_SECRET_LEN);
        }
    }
    rpc_end(&c);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        LOG_WARN("server %s offers no bulk connections (an older server?): large copies use the main "
                 "connection only", conn_addr(s));
    else if (r != CUDA_SUCCESS)
        LOG_WARN("server %s refused bulk connections (CUresult %d): large copies use the main connection only",
                 conn_addr(s), (int)r);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* Whether the session's connections are TLS (the bulk ones are as the
 * main one: dial.c decides by the same address). Asked before every copy
 * from BULK_MIN_COPY_TLS on, so it is worked out once per server the
 * session is on (conn_moves), not from the address each time: the
 * address is rewritten when the session moves. Two threads that race
 * here may both work it out; a stale answer only picks the other path
 * for one copy, and both are correct. */
static int over_tls(struct server *s)
{
    unsigned long moves = conn_moves(s), k = atomic_load(&s->b.tls_known);
    if (k >> 1 == moves + 1ul) return (int)(k & 1u);
    int tls = scuda_tls_for(conn_addr(s));
    atomic_store(&s->b.tls_known, (moves + 1ul) << 1 | (unsigned long)(tls != 0));
    return tls;
}

/* How many connections: SCUDA_BULK_STREAMS; below 2 means none. */
static int streams_wanted(struct server *s)
{
    int tls = over_tls(s);
    int k = scuda_bulk_streams(tls);
    if (k < 0) {
        LOG_WARN("SCUDA_BULK_STREAMS=%s is not a number from 0 to %d; using %d", getenv("SCUDA_BULK_STREAMS"),
                 BULK_MAX_STREAMS, scuda_bulk_streams_default(tls));
        k = scuda_bulk_streams_default(tls);
    }
    if (k >= 2 && failover_standby()) {
        /* A striped copy's bytes bypass the send queue, so the failover journal would miss them. */
        LOG_INFO("SCUDA_STANDBY: striping off, copies use the main connection (and the journal)");
        k = 0;
    }
    if (k < 2) LOG_INFO("SCUDA_BULK_STREAMS=%d: striping off, copies use the main connection", k);
    if (k >= 2 && rpc_sync_every_call()) {
        /* Each one-way call would wait for its reply, and a striped copy's
         * reply waits for its chunks: striping and SCUDA_SYNC exclude each other. */
        LOG_INFO("SCUDA_SYNC: striping off");
        k = 0;
    }
    return k;
}

/* The main connection declared the server dead (conn.h): a copy in
 * progress fails at once instead of waiting on a silent server. Between
 * jobs there is nothing to stop, and the next copy fails on the main
 * connection. */
static void on_server_dead(struct server *s)
{
    pthread_mutex_lock(&s->b.job_lock);
    int running = s->b.moving > 0;
    pthread_mutex_unlock(&s->b.job_lock);
    if (running) note_failure(s, 0, ETIMEDOUT);
}

/* Open the connections. Called with s->b.lock held, once. */
static void setup_locked(struct server *s)
{
    s->b.state = BULK_OFF;
    for (int i = 0; i < BULK_MAX_STREAMS; i++) s->b.fd[i] = -1;
    int want = streams_wanted(s), k = 0;
    uint32_t pid = 0;
    uint8_t secret[BULK_SECRET_LEN];
    if (want < 2 || ask_session(s, want, &k, &pid, secret) != 0) return;
    char err[256] = "";
    int i, zstd = 1;
    s->b.zmode = compress_mode_setting();
    s->b.link_set = compress_link_setting();
    for (i = 0; i < k; i++) {
        int z = 0;
        if ((s->b.fd[i] = join_one(s, pid, (uint32_t)i, secret, &z, err, sizeof err)) < 0) break;
        if (z && !s->b.packed[i] && !(s->b.packed[i] = malloc(BULK_CHUNK_MAX))) z = 0;
        zstd &= z;
    }
    for (int h = 0; i == k && h < k; h++) {
        pthread_t t;
        pthread_mutex_lock(&s->b.job_lock);
        s->b.helpers++;
        s->b.gen_at_setup = s->b.job.gen;
        pthread_mutex_unlock(&s->b.job_lock);
        s->b.helpers_of[h] = (struct bulk_helper){.s = s, .index = h};
        if (pthread_create(&t, NULL, helper_main, &s->b.helpers_of[h]) != 0) {
            pthread_mutex_lock(&s->b.job_lock);
            s->b.helpers--;
            pthread_mutex_unlock(&s->b.job_lock);
            snprintf(err, sizeof err, "cannot start a thread");
            i = h;
            break;
        }
        pthread_detach(t);
    }
    memset(secret, 0, sizeof secret);
    s->b.k = k;
    if (i < k) {
        LOG_WARN("cannot open bulk connection %d of %d to server %s: %s; large copies use the main connection "
                 "only (does a firewall let only one connection through? SCUDA_BULK_STREAMS=0 turns "
                 "striping off)", i + 1, k, conn_addr(s), err);
        close_all(s);
        return;
    }
    s->b.state = BULK_ON;
    s->b.zstd = zstd;
    s->b.copies = 0;
    s->b.link_mbps = 0; /* a new server (after a move) may sit behind another link */
    atomic_store(&s->b.link_mbps_seen, 0);
    conn_set_dead_handler(s, on_server_dead);
    s->b.tls = over_tls(s);
    if (zstd)
        LOG_DEBUG("bulk connections to server %s may carry compressed chunks (SCUDA_COMPRESS=%s)", conn_addr(s),
                  s->b.zmode == COMPRESS_ON ? "on" : "auto");
    LOG_INFO("%d bulk connections to server %s: copies of %u MiB and more are striped", k, conn_addr(s),
             (s->b.tls ? BULK_MIN_COPY_TLS : BULK_MIN_COPY) >> 20);
}

/* The session moved to another server (conn.h): the connections to the
 * old one go, and the next copy opens them to the new one. Called with
 * s->b.lock held, so no job runs and every helper waits for one. */
static void forget_old_server_locked(struct server *s)
{
    s->b.moves_seen = conn_moves(s);
    if (s->b.state == BULK_UNTRIED) return;
    if (s->b.state == BULK_ON) close_all(s);
    pthread_mutex_lock(&s->b.job_lock);
    while (s->b.helpers > 0) pthread_cond_wait(&s->b.job_cv, &s->b.job_lock); /* they see quit at once */
    s->b.quit = 0;
    pthread_mutex_unlock(&s->b.job_lock);
    s->b.state = BULK_UNTRIED;
}

/* A copy's bulk connections failed and the main connection has not been
 * seen to break: was it cut too? A cut of every connection may not be
 * seen yet on the main one: a copy to the host's reply can arrive before
 * the cut (the session replies once its chunks are in its sockets), and
 * nothing reads the main connection after it. So one round trip on it
 * (scuda_ping) reads the break now, and waits for the resume; a bulk
 * connection that broke alone costs that round trip. Returns 1 when the
 * main connection was resumed; *r becomes the ping's error when it is
 * lost. */
static int main_cut_too(struct server *s, unsigned resumes_before, CUresult *r)
{
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_ping, s);
    c.pushed = 1;
    msg_scuda_ping_req_put(&c.req, &(struct msg_scuda_ping_req){0});
    CUresult pr = rpc_sync(&c);
    rpc_end(&c);
    if (pr == CUDA_ERROR_DEVICE_UNAVAILABLE) *r = pr;
    return conn_resumes(s) != resumes_before;
}

/* A copy that failed while the main connection was resumed (every
 * connection cut at once: a relay, a NAT) goes again over the main
 * connection, which is safe: its bytes are only written or read again.
 * Striping ended with the cut (the session takes no second setup).
 * Called with s->b.lock held; cut: the copy failed on its bulk
 * connections. Returns 1 when the caller copies again. */
static int again_after_resume(struct server *s, CUresult *r, int cut, unsigned resumes_before)
{
    if (*r == CUDA_SUCCESS) return 0;
    if (conn_resumes(s) == resumes_before && !(cut && main_cut_too(s, resumes_before, r))) return 0;
    LOG_WARN("a striped copy was cut with the connection to server %s: it goes again over the main connection",
             conn_addr(s));
    if (s->b.state == BULK_ON) close_all(s);
    return 1;
}

/* Takes s->b.lock; returns 1 with it held when striping is on, else 0
 * (lock released). */
/* Wait for a background job to end, and deal with its end as its caller
 * would have. Called with s->b.lock held. */
static void settle_locked(struct server *s)
{
    pthread_mutex_lock(&s->b.job_lock);
    while (s->b.background_busy) pthread_cond_wait(&s->b.done_cv, &s->b.job_lock);
    int failed = s->b.background_failed;
    double took = s->b.background_took;
    uint64_t n = s->b.job.n;
    s->b.background_failed = 0;
    s->b.background_took = 0;
    pthread_mutex_unlock(&s->b.job_lock);
    if (failed) {
        go_off_after_failure(s);
        tell_session_striping_ended(s, s->b.fail_index);
    } else if (took > 0) {
        note_rate(s, n, atomic_load(&s->b.job_wire), took);
    }
}

void bulk_wait_background(void)
{
    for (int i = 0; i < SCUDA_MAX_SERVERS; i++) {
        struct server *s = &servers[i];
        pthread_mutex_lock(&s->b.job_lock);
        while (s->b.background_busy) pthread_cond_wait(&s->b.done_cv, &s->b.job_lock);
        pthread_mutex_unlock(&s->b.job_lock);
    }
}

/* Whether a copy may run in the background: to the device, asynchronous,
 * from page-locked memory (which the caller leaves alone until the stream
 * is done with it), unless SCUDA_BULK_BACKGROUND=0. */
static int may_run_in_background(enum bulk_dir dir, int mode, const void *host, size_t n)
{
    static _Atomic int setting = -1;
    int on = atomic_load(&setting);
    if (on < 0) {
        const char *v = getenv("SCUDA_BULK_BACKGROUND");
        on = !(v != NULL && strcmp(v, "0") == 0);
        atomic_store(&setting, on);
    }
    return on && dir == BULK_TO_DEVICE && mode == COPY_ASYNC && host_memory_pinned(host, n);
}

static int begin(struct server *s, size_t n)
{
    if (n < BULK_MIN_COPY && !(n >= BULK_MIN_COPY_TLS && over_tls(s))) return 0;
    rpc_push_mirrors(); /* not under s->b.lock: see the top of this file */
    pthread_mutex_lock(&s->b.lock);
    settle_locked(s);
    if (conn_moves(s) != s->b.moves_seen) forget_old_server_locked(s);
    if (s->b.state == BULK_UNTRIED) setup_locked(s);
    if (s->b.state == BULK_ON) return 1;
    pthread_mutex_unlock(&s->b.lock);
    return 0;
}

/* At least two chunks per connection, so each connection's transfer
 * overlaps the session's DMA of its last chunk; at most what the
 * session's buffers hold. Over TLS a chunk is a whole number of records,
 * at least one, so every connection carries full records; and a copy too
 * small to give each of the k connections BULK_SHARE_MIN_TLS uses fewer:
 * chunk j goes on connection j mod k, so chunks of about that size leave
 * the connections after the first n / BULK_SHARE_MIN_TLS idle (bulk.h). */
static uint32_t pick_chunk(struct server *s, size_t n)
{
    int tls = s->b.tls;
    uint64_t quantum = tls ? REC_MAX_PLAIN : 64u << 10, c = n / (2u * (uint64_t)s->b.k);
    uint64_t min = tls ? REC_MAX_PLAIN : 4 * BULK_CHUNK_MIN;
    if (tls && n / (uint64_t)s->b.k < BULK_SHARE_MIN_TLS) {
        uint64_t used = n / BULK_SHARE_MIN_TLS ? n / BULK_SHARE_MIN_TLS : 1;
        c = (n + used - 1) / used; /* one chunk per connection used */
    }
    c = (c + quantum - 1) / quantum * quantum;
    uint64_t max = s->b.chunk_max < BULK_CHUNK_MAX ? s->b.chunk_max : BULK_CHUNK_MAX;
    if (c < min) c = min;
    return (uint32_t)(c > max ? max : c);
}

/* Connections that carry chunks of a copy of n bytes in chunks of c. */
static int connections_used(struct server *s, size_t n, uint32_t c)
{
    uint64_t chunks = (n + c - 1) / c;
    return chunks < (uint64_t)s->b.k ? (int)chunks : s->b.k;
}

/* The announcement of job j on the main connection (a bulk_copy): the
 * copy's policy rides in the mode byte's upper bits (protocol.h). */
static struct msg_bulk_copy announcement(uint64_t dev, uint64_t stream, int mode, const struct bulk_job *j)
{
    return (struct msg_bulk_copy){.dev = dev, .stream = stream,
                                  .mode = (uint8_t)((unsigned)mode | j->policy << BULK_MODE_POLICY_SHIFT),
                                  .n = j->n, .chunk = j->chunk, .id = j->id};
}

/* ---- the link's rate -------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The policy of the next copy. Called with s->b.lock held. */
static unsigned copy_policy(struct server *s)
{
    if (!s->b.zstd) return 0;
    return compress_policy((enum compress_mode)s->b.zmode, s->b.link_set > 0 ? s->b.link_set : s->b.link_mbps);
}

/* A copy of n bytes, wire of them on the wire, took `took` seconds from
 * its announcement to its reply. Only a copy sent mostly plain measures
 * the link: a compressed one is slowed by the CPU, not the link. Nor
 * does the first copy over new connections: the session fills its
 * buffers then. A new measure weighs half, so the estimate follows a link
 * that changes within a few copies. Called with s->b.lock held. */
static void note_rate(struct server *s, uint64_t n, uint64_t wire, double took)
{
    if (s->b.copies++ == 0 || wire * 2 < n || n < BULK_MIN_COPY_TLS || !(took > 0)) return;
    double mbps = (double)wire * 8 / took / 1e6;
    s->b.link_mbps = s->b.link_mbps > 0 ? (s->b.link_mbps + mbps) / 2 : mbps;
    if (!(s->b.link_low_mbps > 0) || s->b.link_mbps < s->b.link_low_mbps) s->b.link_low_mbps = s->b.link_mbps;
    atomic_store(&s->b.link_mbps_seen, (uint64_t)s->b.link_mbps + 1);
    LOG_DEBUG("bulk: %llu bytes in %.1f ms, %.0f Mbit/s; the link's estimate is now %.0f Mbit/s",
              (unsigned long long)wire, took * 1e3, mbps, s->b.link_mbps);
}

/* One striped copy, either way: announced on the main connection, run
 * over the bulk connections, and answered by the session. The request
 * waits for its reply, as a one-way copy that lends its bytes waits for
 * their acknowledgement (conn.c): so a copy cut by a break is known to be
 * cut, and no error is left deferred. Closing the connections after a
 * failure ends the session's side of the copy too, so its reply comes. */
static int bulk_copy(struct server *s, enum bulk_dir dir, uint64_t dev, void *host, size_t n, uint64_t stream, int mode,
                     CUresult *r)
{
    if (!begin(s, n)) return 0;
    struct bulk_job j = {.dir = dir, .id = ++s->b.next_id, .n = n, .chunk = pick_chunk(s, n), .host = host};
    j.used = connections_used(s, n, j.chunk);
    j.policy = copy_policy(s);
    rpc_call c;
    if (dir == BULK_TO_DEVICE) {
        struct msg_scuda_bulk_htod_req m = {announcement(dev, stream, mode, &j)};
        rpc_begin_on(&c, OP_scuda_bulk_htod, s);
        msg_scuda_bulk_htod_req_put(&c.req, &m);
    } else {
        struct msg_scuda_bulk_dtoh_req m = {announcement(dev, stream, mode, &j)};
        rpc_begin_on(&c, OP_scuda_bulk_dtoh, s);
        msg_scuda_bulk_dtoh_req_put(&c.req, &m);
    }
    c.pushed = 1;
    atomic_store(&s->b.job_wire, 0);
    if (may_run_in_background(dir, mode, host, n)) {
        j.background = 1;
        *r = rpc_async(&c); /* one-way: the session reports a failure later (the top of this file) */
        if (*r == CUDA_SUCCESS) post_job(s, &j);
        pthread_mutex_unlock(&s->b.lock);
        return 1;
    }
    unsigned resumes = conn_resumes(s);
    int failed = 0;
    double t0 = now_s();
    *r = rpc_start(&c);
    if (*r == CUDA_SUCCESS) {
        failed = run_job(s, &j);
        if (failed) go_off_after_failure(s);
        *r = rpc_finish(&c);
        if (failed && *r == CUDA_SUCCESS) *r = CUDA_ERROR_UNKNOWN;
        if (*r == CUDA_SUCCESS) note_rate(s, n, atomic_load(&s->b.job_wire), now_s() - t0);
    }
    rpc_end(&c);
    if (failed) tell_session_striping_ended(s, s->b.fail_index);
    int again = again_after_resume(s, r, failed, resumes);
    pthread_mutex_unlock(&s->b.lock);
    return !again;
}

int bulk_htod(struct server *s, uint64_t dst, const void *src, size_t n, uint64_t stream, int mode, CUresult *r)
{
    return bulk_copy(s, BULK_TO_DEVICE, dst, (void *)src, n, stream, mode, r);
}

int bulk_dtoh(struct server *s, void *dst, uint64_t src, size_t n, uint64_t stream, int mode, CUresult *r)
{
    return bulk_copy(s, BULK_FROM_DEVICE, src, dst, n, stream, mode, r);
}

void bulk_forget_after_fork(struct server *s)
{
    /* The parent's connections and threads are not ours; closing our
     * copies of the fds leaves the parent's sockets open. */
    for (int i = 0; i < BULK_MAX_STREAMS && s->b.state != BULK_UNTRIED; i++)
        if (s->b.fd[i] >= 0) io_forget(s->b.fd[i]);
    pthread_mutex_init(&s->b.lock, NULL);
    pthread_mutex_init(&s->b.job_lock, NULL);
    pthread_cond_init(&s->b.job_cv, NULL);
    pthread_cond_init(&s->b.done_cv, NULL);
    for (int i = 0; i < BULK_MAX_STREAMS; i++) pthread_cond_init(&s->b.helper_cv[i], NULL);
    s->b.state = BULK_OFF;
    s->b.background_busy = 0; /* the parent's job, on the parent's threads */
    s->b.background_failed = 0;
}

/* For `scuda bench` and the tests: bulk connections in use (0: none). */
EXPORT int scuda_client_bulk_streams(void)
{
    struct server *s = &servers[0]; /* the tests and `scuda bench` use one server */
    pthread_mutex_lock(&s->b.lock);
    settle_locked(s); /* a copy in the background that failed ends striping */
    int k = s->b.state == BULK_ON ? s->b.k : 0;
    pthread_mutex_unlock(&s->b.lock);
    return k;
}

/* For the tests: copies that ran in the background, ever. */
EXPORT uint64_t scuda_client_bulk_background_copies(void) { return atomic_load(&background_copies); }

/* For the tests: connections the last striped copy carried chunks on. */
EXPORT int scuda_client_bulk_last_used(void)
{
    struct server *s = &servers[0];
    pthread_mutex_lock(&s->b.lock);
    int used = s->b.last_used;
    pthread_mutex_unlock(&s->b.lock);
    return used;
}

double bulk_link_mbps(struct server *s) { return (double)atomic_load(&s->b.link_mbps_seen); }

/* For the tests: compressed chunks sent and received, ever, and their
 * bytes plain and on the wire; the link's estimate in Mbit/s, and the
 * lowest it has been (0: none). */
EXPORT void scuda_client_compress_stats(uint64_t out[6])
{
    struct server *s = &servers[0];
    out[0] = atomic_load(&s->b.packed_sent);
    out[1] = atomic_load(&s->b.packed_received);
    out[2] = atomic_load(&s->b.packed_plain);
    out[3] = atomic_load(&s->b.packed_wire);
    pthread_mutex_lock(&s->b.lock);
    out[4] = (uint64_t)s->b.link_mbps;
    out[5] = (uint64_t)s->b.link_low_mbps;
    pthread_mutex_unlock(&s->b.lock);
}
