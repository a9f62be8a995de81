/* resume.c - see resume.h. */
#define _GNU_SOURCE
#include "resume.h"
#include "../common/why.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bulk_join.h"
#include "session.h"
#include "../common/auth.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/transport.h"

/* The session acknowledges at least this often on a busy connection, so
 * what the client keeps stays small (its one-way frames). */
#define ACK_EVERY_FRAMES 256
#define ACK_EVERY_BYTES (4u << 20)

/* One frame kept until the client acknowledges it. */
struct kept {
    uint64_t no;
    size_t len;
    uint8_t *bytes;
};

static struct {
    uint8_t secret[RESUME_SECRET_LEN];
    /* Sending: numbered under the session's write_lock, so numbers follow
     * the order on the wire; kept_lock guards the list, so an
     * acknowledgement never waits for a long write. */
    uint64_t sent;
    pthread_mutex_t kept_lock;
    struct kept *kept;
    size_t head, count, cap; /* a ring */
    /* Receiving (the dispatch thread only). */
    _Atomic uint64_t received;
    uint64_t acked_frames;
    size_t bytes_since_ack;
    /* A resume handed over by the join thread. */
    pthread_mutex_t offer_lock;
    pthread_cond_t offer_cv;
    int offer_fd;
    uint64_t offer_received;
    _Atomic int current_fd;
    /* Whether a resume can come: the client was given the secret (a raw
     * connection never asks for it) and did not say it is leaving. */
    _Atomic int handed_out, leaving;
} rs = {
    .kept_lock = PTHREAD_MUTEX_INITIALIZER,
    .offer_lock = PTHREAD_MUTEX_INITIALIZER,
    .offer_fd = -1,
    .current_fd = -1,
};

void resume_init(int fd)
{
    atomic_store(&rs.current_fd, fd);
    auth_nonce(rs.secret, sizeof rs.secret);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rs.offer_cv, &attr);
    pthread_condattr_destroy(&attr);
}

const uint8_t *resume_secret(void)
{
    atomic_store(&rs.handed_out, 1);
    return rs.secret;
}

void resume_client_leaving(void) { atomic_store(&rs.leaving, 1); }

/* ---- what we sent ----------------------------------------------------------- */

/* Append a copy (kept_lock held). Returns 0, or -1 out of memory: the
 * frame then cannot be sent again, and a resume that needs it fails. */
static int keep_locked(uint64_t no, const void *bytes, size_t len)
{
    if (rs.count == rs.cap) {
        size_t cap = rs.cap ? rs.cap * 2 : 64;
        struct kept *k = malloc(cap * sizeof *k);
        if (!k) return -1;
        for (size_t i = 0; i < rs.count; i++) k[i] = rs.kept[(rs.head + i) % rs.cap];
        free(rs.kept);
        rs.kept = k;
        rs.head = 0;
        rs.cap = cap;
    }
    uint8_t *copy = malloc(len);
    if (!copy) return -1;
    memcpy(copy, bytes, len);
    rs.kept[(rs.head + rs.count++) % rs.cap] = (struct kept){.no = no, .len = len, .bytes = copy};
    return 0;
}

void resume_keep_locked(const void *kept, size_t kept_len)
{
    uint64_t no = ++rs.sent;
    pthread_mutex_lock(&rs.kept_lock);
    if (keep_locked(no, kept, kept_len) != 0) LOG_WARN("out of memory: frame %llu cannot be sent again after a resume",
                                                       (unsigned long long)no);
    pthread_mutex_unlock(&rs.kept_lock);
}

/* Flatten iov into one buffer for keeping (small frames: replies'
 * results and outputs, device printf, host work). */
static uint8_t *flatten(const struct iovec *iov, int n, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    uint8_t *b = malloc(total ? total : 1);
    if (!b) return NULL;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(b + off, iov[i].iov_base, iov[i].iov_len);
        off += iov[i].iov_len;
    }
    *len = total;
    return b;
}

int resume_write_frame(struct session *s, const struct iovec *iov, int n, const void *kept, size_t kept_len)
{
    uint8_t *flat = NULL;
    if (!kept) {
        flat = flatten(iov, n, &kept_len);
        kept = flat;
    }
    pthread_mutex_lock(&s->write_lock);
    if (kept) resume_keep_locked(kept, kept_len);
    else ++rs.sent; /* out of memory: numbered all the same, so counts agree */
    int rc = io_writev_full(s->fd, (struct iovec *)iov, n);
    pthread_mutex_unlock(&s->write_lock);
    free(flat);
    return rc;
}

void resume_acked(uint64_t ack)
{
    pthread_mutex_lock(&rs.kept_lock);
    while (rs.count > 0 && rs.kept[rs.head].no <= ack) {
        free(rs.kept[rs.head].bytes);
        rs.head = (rs.head + 1) % rs.cap;
        rs.count--;
    }
    pthread_mutex_unlock(&rs.kept_lock);
}

/* ---- what we received --------------------------------------------------------- */

int resume_note_received(uint16_t flags, size_t len)
{
    uint64_t n = atomic_fetch_add(&rs.received, 1) + 1;
    rs.bytes_since_ack += len;
    if (!(flags & FRAME_ACK_ME) && n - rs.acked_frames < ACK_EVERY_FRAMES && rs.bytes_since_ack < ACK_EVERY_BYTES)
        return 0;
    rs.acked_frames = n;
    rs.bytes_since_ack = 0;
    return 1;
}

uint64_t resume_received(void) { return atomic_load(&rs.received); }

/* ---- a resume ------------------------------------------------------------------- */

int resume_check(const struct join_note *note, char *why, size_t whylen)
{
    uint8_t want[SCUDA_PROOF_LEN];
    /* Made for slot RESUME_INDEX whatever the request says: a bulk join's
     * proof is made with another secret, and fails here. */
    auth_join_proof(rs.secret, note->nonce, note->pid, RESUME_INDEX, want);
    if (!auth_equal(want, note->proof, sizeof want))
        return why_fail(why, whylen, "resume of session %u: wrong proof", note->pid);
    return 0;
}

void resume_offer(struct session *s, int fd, uint64_t received)
{
    (void)s;
    pthread_mutex_lock(&rs.offer_lock);
    if (rs.offer_fd >= 0) io_close(rs.offer_fd); /* an older resume nobody took: the newest wins */
    rs.offer_fd = fd;
    rs.offer_received = received;
    pthread_cond_signal(&rs.offer_cv);
    int old = atomic_load(&rs.current_fd);
    pthread_mutex_unlock(&rs.offer_lock);
    /* The old connection may look alive (a NAT that dropped it says
     * nothing): stop everyone using it, so the dispatch thread comes for
     * the new one. */
    if (old >= 0) shutdown(old, SHUT_RDWR);
}

/* Take the offered connection, waiting up to --resume-within. Returns the
 * fd, or -1. */
static int take_offer(struct session *s, uint64_t *received)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += s->opt->resume_within_s;
    pthread_mutex_lock(&rs.offer_lock);
    while (rs.offer_fd < 0 && pthread_cond_timedwait(&rs.offer_cv, &rs.offer_lock, &until) == 0) {
    }
    int fd = rs.offer_fd;
    *received = rs.offer_received;
    rs.offer_fd = -1;
    pthread_mutex_unlock(&rs.offer_lock);
    return fd;
}

/* Send the kept frames the client lacks on fd (write_lock held). Returns
 * how many, -1 when the new connection failed too, -2 when we no longer
 * keep what the client lacks (it acknowledged more than it has). */
static long send_again_locked(int fd, uint64_t client_has)
{
    resume_acked(client_has);
    pthread_mutex_lock(&rs.kept_lock);
    long n = 0;
    if (rs.count > 0 && rs.kept[rs.head].no != client_has + 1) {
        LOG_WARN("resume: the client has %llu of our frames but we keep from frame %llu on",
                 (unsigned long long)client_has, (unsigned long long)rs.kept[rs.head].no);
        n = -2;
    }
    for (size_t i = 0; i < rs.count && n >= 0; i++, n++) {
        const struct kept *k = &rs.kept[(rs.head + i) % rs.cap];
        if (io_write_full(fd, k->bytes, k->len) != 0) n = -1;
    }
    pthread_mutex_unlock(&rs.kept_lock);
    return n;
}

int resume_take(struct session *s, int timeout_ms, uint64_t *client_has)
{
    (void)s;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    uint64_t ns = (uint64_t)until.tv_nsec + (uint64_t)(timeout_ms % 1000) * 1000000u;
    until.tv_sec += timeout_ms / 1000 + (time_t)(ns / 1000000000u);
    until.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&rs.offer_lock);
    while (rs.offer_fd < 0 && pthread_cond_timedwait(&rs.offer_cv, &rs.offer_lock, &until) == 0) {
    }
    int fd = rs.offer_fd;
    *client_has = rs.offer_received;
    rs.offer_fd = -1;
    pthread_mutex_unlock(&rs.offer_lock);
    return fd;
}

int resume_install(struct session *s, int fd, uint64_t client_has)
{
    pthread_mutex_lock(&s->write_lock);
    uint64_t have = atomic_load(&rs.received);
    long again = -1;
    if (hello_send_welcome(fd, WELCOME_OK, "resumed") == 0 && io_write_full(fd, &have, sizeof have) == 0)
        again = send_again_locked(fd, client_has);
    int old = s->fd;
    s->fd = fd;
    atomic_store(&rs.current_fd, fd);
    pthread_mutex_unlock(&s->write_lock);
    if (old >= 0) io_close(old);
    if (again == -2) return -1;
    if (again < 0) {
        /* It broke again at once: as any break. */
        shutdown(fd, SHUT_RDWR);
        LOG_WARN("the resumed connection failed at once");
        return 0;
    }
    LOG_INFO("client resumed the session: %ld frame(s) sent again, %llu of its frames received",
             again, (unsigned long long)have);
    return 0;
}

int resume_wait(struct session *s)
{
    atomic_store(&rs.current_fd, s->fd);
    if (s->opt->resume_within_s <= 0 || !atomic_load(&rs.handed_out) || atomic_load(&rs.leaving)) return -1;
    /* The client hears of the break at once, whatever our side saw. */
    shutdown(s->fd, SHUT_RDWR);
    LOG_INFO("the client's connection broke: waiting up to %d s for it to resume the session (--resume-within)",
             s->opt->resume_within_s);
    uint64_t client_has;
    int fd = take_offer(s, &client_has);
    if (fd < 0) {
        LOG_WARN("the client did not resume within %d s (--resume-within): ending the session",
                 s->opt->resume_within_s);
        return -1;
    }
    return resume_install(s, fd, client_has);
}

/* ---- a migration (docs/architecture.md 9.17, "The switch") ------------------------ */

int resume_can_follow(void) { return atomic_load(&rs.handed_out) && !atomic_load(&rs.leaving); }

uint64_t resume_sent_locked(void) { return rs.sent; }

int resume_drop_newest_locked(uint64_t no)
{
    pthread_mutex_lock(&rs.kept_lock);
    int rc = -1;
    if (rs.count > 0 && rs.kept[(rs.head + rs.count - 1) % rs.cap].no == no && rs.sent == no) {
        free(rs.kept[(rs.head + rs.count - 1) % rs.cap].bytes);
        rs.count--;
        rs.sent--;
        rc = 0;
    }
    pthread_mutex_unlock(&rs.kept_lock);
    return rc;
}

int resume_each_kept(int (*fn)(void *arg, uint64_t no, const void *bytes, size_t len), void *arg)
{
    pthread_mutex_lock(&rs.kept_lock);
    int rc = 0;
    for (size_t i = 0; i < rs.count && rc == 0; i++) {
        const struct kept *k = &rs.kept[(rs.head + i) % rs.cap];
        rc = fn(arg, k->no, k->bytes, k->len);
    }
    pthread_mutex_unlock(&rs.kept_lock);
    return rc;
}

int resume_adopt_kept(uint64_t no, const void *bytes, size_t len)
{
    pthread_mutex_lock(&rs.kept_lock);
    /* In order and above every frame kept so far: the exporter's list. */
    int rc = rs.count > 0 && rs.kept[(rs.head + rs.count - 1) % rs.cap].no >= no ? -1 : keep_locked(no, bytes, len);
    pthread_mutex_unlock(&rs.kept_lock);
    return rc;
}

int resume_adopt(const uint8_t secret[RESUME_SECRET_LEN], uint64_t received, uint64_t sent)
{
    pthread_mutex_lock(&rs.kept_lock);
    int rc = rs.count > 0 && rs.kept[(rs.head + rs.count - 1) % rs.cap].no > sent ? -1 : 0;
    pthread_mutex_unlock(&rs.kept_lock);
    if (rc != 0) return -1;
    memcpy(rs.secret, secret, RESUME_SECRET_LEN);
    rs.sent = sent;
    atomic_store(&rs.received, received);
    rs.acked_frames = received;
    atomic_store(&rs.current_fd, -1); /* the exporter's connection is not the client's */
    atomic_store(&rs.handed_out, 1);
    return 0;
}
