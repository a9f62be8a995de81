/* bulk.c - see bulk.h.
 *
 * One striped copy at a time (bulk.lock): its announcement goes over the
 * main connection, in program order with every other call, and its chunks
 * over the k bulk connections, chunk j on connection j mod k. The calling
 * thread moves connection 0's chunks itself; a helper thread per other
 * connection moves the rest at the same time, straight between the
 * caller's buffer and the socket (no staging copy). Any failure on a bulk
 * connection fails that copy with CUDA_ERROR_UNKNOWN and ends striping for
 * this process: every bulk connection is closed (the session notices at
 * once) and later copies use the main connection. A copy that failed
 * because every connection was cut, the main one resumed, goes again over
 * the main connection (again_after_resume).
 *
 * Lock order: the mirrors' lock (coherence.c) before bulk.lock. A fetch or
 * push of mirrored memory holds the former and may stripe; so a copy
 * pushes mirrored memory before it takes bulk.lock, and the calls it makes
 * under bulk.lock do not push again (rpc_call.pushed). */
#define _GNU_SOURCE
#include "bulk.h"
#include "conn.h"
#include "rpc.h"
#include "shim.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/auth.h"
#include "../common/config.h"
#include "../common/dial.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/tls_records.h"
#include "../common/transport.h"

#define CONNECT_TIMEOUT_MS 5000
#define JOIN_TIMEOUT_MS 5000 /* as the main connection's greeting (conn.c) */
#define DEAD_PEER_S 10 /* as the main connection's (conn.c) */

enum bulk_state { BULK_UNTRIED, BULK_ON, BULK_OFF };
enum job_dir { TO_DEVICE, FROM_DEVICE };

/* One striped copy, as every connection's mover sees it. */
struct job {
    uint64_t gen;
    enum job_dir dir;
    uint64_t id, n;
    uint32_t chunk;
    int used; /* connections 0..used-1 carry its chunks (min(k, chunks)) */
    char *host; /* the caller's buffer (only read for TO_DEVICE) */
};

static struct {
    pthread_mutex_t lock; /* one striped copy at a time; setup */
    enum bulk_state state;
    int k;
    int tls; /* the connections are TLS: chunks of whole records */
    int fd[BULK_MAX_STREAMS];
    uint32_t chunk_max;
    uint64_t next_id;
    int last_used; /* connections the last striped copy used (tests) */

    pthread_mutex_t job_lock; /* guards what follows */
    pthread_cond_t job_cv;    /* a helper exited */
    /* Helper i waits on helper_cv[i] for a job or quit: a copy that uses
     * fewer connections than k wakes only the helpers it uses. */
    pthread_cond_t helper_cv[BULK_MAX_STREAMS];
    /* The last mover finished: only the job's caller waits for that, so a
     * mover finishing does not wake every idle helper. */
    pthread_cond_t done_cv;
    struct job job;
    int moving; /* movers still on the job */
    int failed; /* the job failed; fail_* say where */
    int fail_index, fail_errno;
    int quit; /* helpers exit */
    int helpers; /* helper threads alive */
    uint64_t gen_at_setup; /* the last job's gen when the helpers started: theirs come after it */
    unsigned moves_seen; /* conn_moves() when the connections were opened */
} bulk = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .job_lock = PTHREAD_MUTEX_INITIALIZER,
    .job_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
    .helper_cv = {[0 ... BULK_MAX_STREAMS - 1] = PTHREAD_COND_INITIALIZER},
};

/* ---- moving one connection's chunks ---------------------------------------- */

static int job_failed(void)
{
    pthread_mutex_lock(&bulk.job_lock);
    int f = bulk.failed;
    pthread_mutex_unlock(&bulk.job_lock);
    return f;
}

/* The first failure of a job: remember it, and shut every connection down
 * so that the other movers, and the session, stop at once. */
static void note_failure(int index, int err)
{
    pthread_mutex_lock(&bulk.job_lock);
    if (!bulk.failed) {
        bulk.failed = 1;
        bulk.fail_index = index;
        bulk.fail_errno = err;
        for (int i = 0; i < bulk.k; i++) shutdown(bulk.fd[i], SHUT_RDWR);
    }
    pthread_mutex_unlock(&bulk.job_lock);
}

/* Chunks index, index + k, ... of the job, on connection `index`. Every
 * chunk header from the session must be exactly the one expected: its
 * offset and length come from the announcement, never from the wire.
 * Returns 0, or -1 with errno set. */
static int move_share(int index, const struct job *j)
{
    int fd = bulk.fd[index];
    uint64_t nchunks = (j->n + j->chunk - 1) / j->chunk;
    for (uint64_t idx = (uint64_t)index; idx < nchunks; idx += (uint64_t)bulk.k) {
        if (job_failed()) return 0;
        uint64_t off = idx * j->chunk;
        uint32_t len = j->n - off < j->chunk ? (uint32_t)(j->n - off) : j->chunk;
        uint8_t want[BULK_CHUNK_HEAD];
        bulk_head_encode(want, j->id, off, len);
        if (j->dir == TO_DEVICE) {
            struct iovec iov[2] = {{want, sizeof want}, {j->host + off, len}};
            if (io_writev_full(fd, iov, 2) != 0) return -1;
            conn_transfer_progress(); /* the session took it: alive */
            continue;
        }
        uint8_t head[BULK_CHUNK_HEAD];
        if (io_read_full(fd, head, sizeof head) != 0) return -1;
        if (memcmp(head, want, sizeof head) != 0) {
            errno = EPROTO;
            return -1;
        }
        if (io_read_full(fd, j->host + off, len) != 0) return -1;
        conn_transfer_progress();
    }
    return 0;
}

static void *helper_main(void *arg)
{
    int index = (int)(intptr_t)arg;
    pthread_mutex_lock(&bulk.job_lock);
    uint64_t seen = bulk.gen_at_setup; /* connections opened again after a move: no older job is ours */
    for (;;) {
        while (bulk.job.gen == seen && !bulk.quit) pthread_cond_wait(&bulk.helper_cv[index], &bulk.job_lock);
        if (bulk.quit) break;
        seen = bulk.job.gen;
        struct job j = bulk.job;
        if (index >= j.used) continue; /* not counted in bulk.moving: nothing to do */
        pthread_mutex_unlock(&bulk.job_lock);
        if (move_share(index, &j) != 0) note_failure(index, errno);
        pthread_mutex_lock(&bulk.job_lock);
        if (--bulk.moving == 0) pthread_cond_signal(&bulk.done_cv);
    }
    bulk.helpers--;
    pthread_cond_broadcast(&bulk.job_cv);
    pthread_mutex_unlock(&bulk.job_lock);
    return NULL;
}

/* Run a job on every connection: this thread moves connection 0's share.
 * Called with bulk.lock held. Returns 0, or -1 when it failed. */
static int run_job(const struct job *j)
{
    conn_transfer_begin(); /* a silent server fails the copy (conn.h) */
    pthread_mutex_lock(&bulk.job_lock);
    uint64_t gen = bulk.job.gen + 1;
    bulk.job = *j;
    bulk.job.gen = gen;
    bulk.moving = j->used;
    bulk.failed = 0;
    bulk.last_used = j->used;
    for (int i = 1; i < j->used; i++) pthread_cond_signal(&bulk.helper_cv[i]);
    pthread_mutex_unlock(&bulk.job_lock);
    if (move_share(0, j) != 0) note_failure(0, errno);
    pthread_mutex_lock(&bulk.job_lock);
    bulk.moving--;
    while (bulk.moving > 0) pthread_cond_wait(&bulk.done_cv, &bulk.job_lock);
    int failed = bulk.failed;
    pthread_mutex_unlock(&bulk.job_lock);
    conn_transfer_end();
    return failed ? -1 : 0;
}

/* ---- on and off ------------------------------------------------------------ */

/* Close every connection and stop the helpers. Called with bulk.lock held. */
static void close_all(void)
{
    pthread_mutex_lock(&bulk.job_lock);
    bulk.quit = 1;
    for (int i = 1; i < bulk.k; i++) pthread_cond_signal(&bulk.helper_cv[i]);
    pthread_mutex_unlock(&bulk.job_lock);
    for (int i = 0; i < bulk.k; i++) {
        if (bulk.fd[i] >= 0) io_close(bulk.fd[i]);
        bulk.fd[i] = -1;
    }
    bulk.state = BULK_OFF;
}

/* A copy failed on a bulk connection. Called with bulk.lock held. */
static void go_off_after_failure(void)
{
    int err = bulk.fail_errno;
    LOG_ERROR("bulk connection %d to server %s failed during a copy (%s): striping ends; later copies use "
              "the main connection only",
              bulk.fail_index, conn_addr(),
              err == ECONNRESET ? "the server closed it" : err == EPROTO ? "unexpected data" : strerror(err));
    close_all();
}

/* Connect, handshake with HELLO_BULK_JOIN, and be welcomed as connection
 * `index` of session `pid`. Returns the fd, or -1 with the reason in err. */
static int join_one(uint32_t pid, uint32_t index, const uint8_t secret[BULK_SECRET_LEN], char *err, size_t errlen)
{
    int fd = dial(conn_addr(), CONNECT_TIMEOUT_MS, PREFACE_JOIN, err, errlen);
    if (fd < 0) return -1;
    uint8_t nonce[SCUDA_NONCE_LEN], req[BULK_JOIN_LEN];
    uint32_t status;
    char msg[256];
    if (hello_read_server(fd, JOIN_TIMEOUT_MS, nonce, err, errlen) != 0) goto fail;
    hello_join_request(req, pid, index, secret, nonce);
    if (hello_send_client(fd, HELLO_BULK_JOIN, 0, scuda_token(), nonce, req, sizeof req) != 0) {
        snprintf(err, errlen, "the connection closed during the handshake");
        goto fail;
    }
    /* Over TLS the session takes the socket over with a TLS session of its
     * own, in which the request is repeated (bulk_join.c, second_tls). */
    int second = dial_second_tls(fd, conn_addr(), JOIN_TIMEOUT_MS, err, errlen);
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
static int ask_session(int want, int *k, uint32_t *pid, uint8_t secret[BULK_SECRET_LEN])
{
    struct msg_scuda_bulk_setup_req m = {(uint32_t)want};
    struct msg_scuda_bulk_setup_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_scuda_bulk_setup);
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
            bulk.chunk_max = rep.chunk_max;
            memcpy(secret, rep.secret, BULK_SECRET_LEN);
        }
    }
    rpc_end(&c);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        LOG_WARN("server %s offers no bulk connections (an older server?): large copies use the main "
                 "connection only", conn_addr());
    else if (r != CUDA_SUCCESS)
        LOG_WARN("server %s refused bulk connections (CUresult %d): large copies use the main connection only",
                 conn_addr(), (int)r);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* Whether the session's connections are TLS (the bulk ones are as the
 * main one: dial.c decides by the same address). Asked before every copy
 * from BULK_MIN_COPY_TLS on, so it is worked out once per server the
 * session is on (conn_moves), not from the address each time: the
 * address is rewritten when the session moves. Two threads that race
 * here may both work it out; a stale answer only picks the other path
 * for one copy, and both are correct. */
static int over_tls(void)
{
    static _Atomic unsigned long known; /* (moves + 1) << 1 | tls; 0: not yet */
    unsigned long moves = conn_moves(), k = atomic_load(&known);
    if (k >> 1 == moves + 1ul) return (int)(k & 1u);
    int tls = scuda_tls_for(conn_addr());
    atomic_store(&known, (moves + 1ul) << 1 | (unsigned long)(tls != 0));
    return tls;
}

/* How many connections: SCUDA_BULK_STREAMS; below 2 means none. */
static int streams_wanted(void)
{
    int tls = over_tls();
    int k = scuda_bulk_streams(tls);
    if (k < 0) {
        LOG_WARN("SCUDA_BULK_STREAMS=%s is not a number from 0 to %d; using %d", getenv("SCUDA_BULK_STREAMS"),
                 BULK_MAX_STREAMS, scuda_bulk_streams_default(tls));
        k = scuda_bulk_streams_default(tls);
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
static void on_server_dead(void)
{
    pthread_mutex_lock(&bulk.job_lock);
    int running = bulk.moving > 0;
    pthread_mutex_unlock(&bulk.job_lock);
    if (running) note_failure(0, ETIMEDOUT);
}

/* Open the connections. Called with bulk.lock held, once. */
static void setup_locked(void)
{
    bulk.state = BULK_OFF;
    for (int i = 0; i < BULK_MAX_STREAMS; i++) bulk.fd[i] = -1;
    int want = streams_wanted(), k = 0;
    uint32_t pid = 0;
    uint8_t secret[BULK_SECRET_LEN];
    if (want < 2 || ask_session(want, &k, &pid, secret) != 0) return;
    char err[256] = "";
    int i;
    for (i = 0; i < k; i++)
        if ((bulk.fd[i] = join_one(pid, (uint32_t)i, secret, err, sizeof err)) < 0) break;
    for (int h = 1; i == k && h < k; h++) {
        pthread_t t;
        pthread_mutex_lock(&bulk.job_lock);
        bulk.helpers++;
        bulk.gen_at_setup = bulk.job.gen;
        pthread_mutex_unlock(&bulk.job_lock);
        if (pthread_create(&t, NULL, helper_main, (void *)(intptr_t)h) != 0) {
            pthread_mutex_lock(&bulk.job_lock);
            bulk.helpers--;
            pthread_mutex_unlock(&bulk.job_lock);
            snprintf(err, sizeof err, "cannot start a thread");
            i = h;
            break;
        }
        pthread_detach(t);
    }
    memset(secret, 0, sizeof secret);
    bulk.k = k;
    if (i < k) {
        LOG_WARN("cannot open bulk connection %d of %d to server %s: %s; large copies use the main connection "
                 "only (does a firewall let only one connection through? SCUDA_BULK_STREAMS=0 turns "
                 "striping off)", i + 1, k, conn_addr(), err);
        close_all();
        return;
    }
    bulk.state = BULK_ON;
    conn_set_dead_handler(on_server_dead);
    bulk.tls = over_tls();
    LOG_INFO("%d bulk connections to server %s: copies of %u MiB and more are striped", k, conn_addr(),
             (bulk.tls ? BULK_MIN_COPY_TLS : BULK_MIN_COPY) >> 20);
}

/* The session moved to another server (conn.h): the connections to the
 * old one go, and the next copy opens them to the new one. Called with
 * bulk.lock held, so no job runs and every helper waits for one. */
static void forget_old_server_locked(void)
{
    bulk.moves_seen = conn_moves();
    if (bulk.state == BULK_UNTRIED) return;
    if (bulk.state == BULK_ON) close_all();
    pthread_mutex_lock(&bulk.job_lock);
    while (bulk.helpers > 0) pthread_cond_wait(&bulk.job_cv, &bulk.job_lock); /* they see quit at once */
    bulk.quit = 0;
    pthread_mutex_unlock(&bulk.job_lock);
    bulk.state = BULK_UNTRIED;
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
static int main_cut_too(unsigned resumes_before, CUresult *r)
{
    rpc_call c;
    rpc_begin(&c, OP_scuda_ping);
    c.pushed = 1;
    msg_scuda_ping_req_put(&c.req, &(struct msg_scuda_ping_req){0});
    CUresult pr = rpc_sync(&c);
    rpc_end(&c);
    if (pr == CUDA_ERROR_DEVICE_UNAVAILABLE) *r = pr;
    return conn_resumes() != resumes_before;
}

/* A copy that failed while the main connection was resumed (every
 * connection cut at once: a relay, a NAT) goes again over the main
 * connection, which is safe: its bytes are only written or read again.
 * Striping ended with the cut (the session takes no second setup).
 * Called with bulk.lock held; cut: the copy failed on its bulk
 * connections. Returns 1 when the caller copies again. */
static int again_after_resume(CUresult *r, int cut, unsigned resumes_before)
{
    if (*r == CUDA_SUCCESS) return 0;
    if (conn_resumes() == resumes_before && !(cut && main_cut_too(resumes_before, r))) return 0;
    LOG_WARN("a striped copy was cut with the connection to server %s: it goes again over the main connection",
             conn_addr());
    if (bulk.state == BULK_ON) close_all();
    return 1;
}

/* Takes bulk.lock; returns 1 with it held when striping is on, else 0
 * (lock released). */
static int begin(size_t n)
{
    if (n < BULK_MIN_COPY && !(n >= BULK_MIN_COPY_TLS && over_tls())) return 0;
    rpc_push_mirrors(); /* not under bulk.lock: see the top of this file */
    pthread_mutex_lock(&bulk.lock);
    if (conn_moves() != bulk.moves_seen) forget_old_server_locked();
    if (bulk.state == BULK_UNTRIED) setup_locked();
    if (bulk.state == BULK_ON) return 1;
    pthread_mutex_unlock(&bulk.lock);
    return 0;
}

/* At least two chunks per connection, so each connection's transfer
 * overlaps the session's DMA of its last chunk; at most what the
 * session's buffers hold. Over TLS a chunk is a whole number of records,
 * at least one, so every connection carries full records; and a copy too
 * small to give each of the k connections BULK_SHARE_MIN_TLS uses fewer:
 * chunk j goes on connection j mod k, so chunks of about that size leave
 * the connections after the first n / BULK_SHARE_MIN_TLS idle (bulk.h). */
static uint32_t pick_chunk(size_t n)
{
    int tls = bulk.tls;
    uint64_t quantum = tls ? REC_MAX_PLAIN : 64u << 10, c = n / (2u * (uint64_t)bulk.k);
    uint64_t min = tls ? REC_MAX_PLAIN : 4 * BULK_CHUNK_MIN;
    if (tls && n / (uint64_t)bulk.k < BULK_SHARE_MIN_TLS) {
        uint64_t used = n / BULK_SHARE_MIN_TLS ? n / BULK_SHARE_MIN_TLS : 1;
        c = (n + used - 1) / used; /* one chunk per connection used */
    }
    c = (c + quantum - 1) / quantum * quantum;
    uint64_t max = bulk.chunk_max < BULK_CHUNK_MAX ? bulk.chunk_max : BULK_CHUNK_MAX;
    if (c < min) c = min;
    return (uint32_t)(c > max ? max : c);
}

/* Connections that carry chunks of a copy of n bytes in chunks of c. */
static int connections_used(size_t n, uint32_t c)
{
    uint64_t chunks = (n + c - 1) / c;
    return chunks < (uint64_t)bulk.k ? (int)chunks : bulk.k;
}

/* The announcement of job j on the main connection (a bulk_copy). */
static struct msg_bulk_copy announcement(uint64_t dev, uint64_t stream, int mode, const struct job *j)
{
    return (struct msg_bulk_copy){.dev = dev, .stream = stream, .mode = (uint8_t)mode, .n = j->n,
                                  .chunk = j->chunk, .id = j->id};
}

int bulk_htod(uint64_t dst, const void *src, size_t n, uint64_t stream, int mode, CUresult *r)
{
    if (!begin(n)) return 0;
    struct job j = {.dir = TO_DEVICE, .id = ++bulk.next_id, .n = n, .chunk = pick_chunk(n), .host = (char *)src};
    j.used = connections_used(n, j.chunk);
    struct msg_scuda_bulk_htod_req m = {announcement(dst, stream, mode, &j)};
    rpc_call c;
    rpc_begin(&c, OP_scuda_bulk_htod);
    c.pushed = 1;
    msg_scuda_bulk_htod_req_put(&c.req, &m);
    /* It waits for the session's reply, as a one-way copy that lends its
     * bytes waits for their acknowledgement (conn.c): so a copy cut by a
     * break is known to be cut, and no error is left deferred. */
    unsigned resumes = conn_resumes();
    int failed = 0;
    *r = rpc_start(&c);
    if (*r == CUDA_SUCCESS) {
        failed = run_job(&j);
        if (failed) go_off_after_failure();
        *r = rpc_finish(&c);
        if (failed && *r == CUDA_SUCCESS) *r = CUDA_ERROR_UNKNOWN;
    }
    rpc_end(&c);
    int again = again_after_resume(r, failed, resumes);
    pthread_mutex_unlock(&bulk.lock);
    return !again;
}

int bulk_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream, int mode, CUresult *r)
{
    if (!begin(n)) return 0;
    struct job j = {.dir = FROM_DEVICE, .id = ++bulk.next_id, .n = n, .chunk = pick_chunk(n), .host = dst};
    j.used = connections_used(n, j.chunk);
    struct msg_scuda_bulk_dtoh_req m = {announcement(src, stream, mode, &j)};
    rpc_call c;
    rpc_begin(&c, OP_scuda_bulk_dtoh);
    c.pushed = 1;
    msg_scuda_bulk_dtoh_req_put(&c.req, &m);
    unsigned resumes = conn_resumes();
    int failed = 0;
    *r = rpc_start(&c);
    if (*r == CUDA_SUCCESS) {
        failed = run_job(&j);
        /* Closing the connections ends the session's side of the copy too,
         * so its reply comes. */
        if (failed) go_off_after_failure();
        *r = rpc_finish(&c);
        if (failed && *r == CUDA_SUCCESS) *r = CUDA_ERROR_UNKNOWN;
    }
    rpc_end(&c);
    int again = again_after_resume(r, failed, resumes);
    pthread_mutex_unlock(&bulk.lock);
    return !again;
}

void bulk_forget_after_fork(void)
{
    /* The parent's connections and threads are not ours; closing our
     * copies of the fds leaves the parent's sockets open. */
    for (int i = 0; i < BULK_MAX_STREAMS && bulk.state != BULK_UNTRIED; i++)
        if (bulk.fd[i] >= 0) io_forget(bulk.fd[i]);
    pthread_mutex_init(&bulk.lock, NULL);
    pthread_mutex_init(&bulk.job_lock, NULL);
    pthread_cond_init(&bulk.job_cv, NULL);
    pthread_cond_init(&bulk.done_cv, NULL);
    for (int i = 0; i < BULK_MAX_STREAMS; i++) pthread_cond_init(&bulk.helper_cv[i], NULL);
    bulk.state = BULK_OFF;
}

/* For `scuda bench` and the tests: bulk connections in use (0: none). */
EXPORT int scuda_client_bulk_streams(void)
{
    pthread_mutex_lock(&bulk.lock);
    int k = bulk.state == BULK_ON ? bulk.k : 0;
    pthread_mutex_unlock(&bulk.lock);
    return k;
}

/* For the tests: connections the last striped copy carried chunks on. */
EXPORT int scuda_client_bulk_last_used(void)
{
    pthread_mutex_lock(&bulk.lock);
    int used = bulk.last_used;
    pthread_mutex_unlock(&bulk.lock);
    return used;
}
