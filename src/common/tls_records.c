/* tls_records.c - see tls_records.h. */
#define _GNU_SOURCE
#include "tls_records.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <openssl/evp.h>

#include "log.h"
#include "protocol.h"

#define REC_OVERHEAD (REC_HEADER_LEN + REC_TAG_LEN)
/* Bytes read beyond the record being read: many small records per
 * recv(), and little of a large one, whose body is better received
 * straight into its reader's buffer. */
#define READ_AHEAD_BYTES (16u << 10)
/* The same after a record received straight into a buffer: the next
 * record's header, or a small record whole. */
#define DIRECT_READ_AHEAD 1024u
/* A piece of a writev at least this large starts a record of its own, and
 * a record at least this large, that fits the reader's buffer, is received
 * straight into it: a frame header read on its own then takes a small
 * record, and the payload read after it gets whole records. */
#define DIRECT_MIN (16u << 10)
/* Records leave together up to this much: a frame header's record and
 * the payload record after it in one send(). */
#define SEND_BYTES (REC_MAX_PLAIN + REC_OVERHEAD + DIRECT_MIN)
/* How long a read told not to wait still waits for the rest of a large
 * record it has started (rec_may_wait links only): its sender sent it
 * whole, so the rest is on its way. */
#define REST_WAIT_MS 1000

struct direction {
    EVP_CIPHER_CTX *ctx;
    uint8_t iv[REC_IV_LEN];
    uint64_t seq; /* records sealed or opened so far: the nonce */
};

struct rec_link {
    int fd;
    int read_ahead;
    atomic_int timeout_ms;
    atomic_int may_wait;
    atomic_int reported; /* the authentication failure was logged */

    /* Receiving, under rx_lock. `in` holds ciphertext not yet opened,
     * [in_off, in_len), and the plaintext of the last record opened in
     * it, [plain_off, plain_end), which lies before in_off. */
    pthread_mutex_t rx_lock;
    struct direction rx;
    uint8_t *in;
    size_t in_cap, in_off, in_len, plain_off, plain_end;
    int rx_errno; /* the link's end: every later read fails with it */

    /* Sending, under tx_lock: records, [out_off, out_len) not sent yet,
     * carrying out_plain bytes of the caller's (rec_write_some). */
    pthread_mutex_t tx_lock;
    struct direction tx;
    uint8_t *out;
    size_t out_cap, out_off, out_len, out_plain;
};

/* ---- setting up ------------------------------------------------------------ */

static int direction_init(struct direction *d, const struct rec_keys *k, int encrypt)
{
    d->ctx = EVP_CIPHER_CTX_new();
    memcpy(d->iv, k->iv, REC_IV_LEN);
    /* The key schedule once; each record then only sets its nonce. */
    return d->ctx && EVP_CipherInit_ex(d->ctx, EVP_aes_128_gcm(), NULL, k->key, NULL, encrypt) == 1 ? 0 : -1;
}

struct rec_link *rec_new(int fd, const struct rec_keys *tx, const struct rec_keys *rx, int read_ahead)
{
    struct rec_link *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->fd = fd;
    r->read_ahead = read_ahead;
    atomic_init(&r->timeout_ms, -1);
    pthread_mutex_init(&r->rx_lock, NULL);
    pthread_mutex_init(&r->tx_lock, NULL);
    if (direction_init(&r->tx, tx, 1) != 0 || direction_init(&r->rx, rx, 0) != 0) {
        rec_free(r);
        return NULL;
    }
    return r;
}

void rec_free(struct rec_link *r)
{
    if (!r) return;
    EVP_CIPHER_CTX_free(r->tx.ctx);
    EVP_CIPHER_CTX_free(r->rx.ctx);
    pthread_mutex_destroy(&r->rx_lock);
    pthread_mutex_destroy(&r->tx_lock);
    free(r->in);
    free(r->out);
    free(r);
}

void rec_set_timeout(struct rec_link *r, int timeout_ms) { atomic_store(&r->timeout_ms, timeout_ms); }

void rec_may_wait(struct rec_link *r) { atomic_store(&r->may_wait, 1); }

/* ---- small helpers ----------------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Milliseconds left until end (end < 0: no end, -1). */
static int left_ms(int64_t end)
{
    if (end < 0) return -1;
    int64_t left = end - now_ms();
    return left > 0 ? (int)left : 0;
}

static int64_t deadline(int timeout_ms) { return timeout_ms < 0 ? -1 : now_ms() + timeout_ms; }

/* poll() for events; 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t end)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, left_ms(end));
        if (rc < 0 && errno == EINTR) continue;
        return rc;
    }
}

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (*cap >= need) return 0;
    uint8_t *p = realloc(*buf, need);
    if (!p) return -1;
    *buf = p;
    *cap = need;
    return 0;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* As TLS 1.3: the IV base XOR the record number, right-aligned. */
static void nonce_of(const struct direction *d, uint8_t nonce[REC_IV_LEN])
{
    memcpy(nonce, d->iv, REC_IV_LEN);
    for (int i = 0; i < 8; i++) nonce[REC_IV_LEN - 1 - i] ^= (uint8_t)(d->seq >> (8 * i));
}

/* ---- sealing --------------------------------------------------------------- */

/* Where a writev's bytes are taken from next. */
struct cursor {
    const struct iovec *iov;
    int left;   /* iovecs from iov on */
    size_t off; /* bytes of iov[0] taken */
};

/* How many of the next total bytes of c go into one record: up to
 * REC_MAX_PLAIN, ending before a large piece (DIRECT_MIN). */
static size_t record_len(const struct cursor *c, size_t total)
{
    const struct iovec *v = c->iov;
    size_t len = 0, off = c->off;
    while (len < total && len < REC_MAX_PLAIN) {
        size_t avail = v->iov_len - off;
        if (avail == 0) {
            v++;
            off = 0;
            continue;
        }
        if (len > 0 && off == 0 && avail >= DIRECT_MIN) break;
        size_t k = avail < REC_MAX_PLAIN - len ? avail : REC_MAX_PLAIN - len;
        len += k;
        off += k;
    }
    return len < total ? len : total;
}

/* Encrypt the next len bytes of c as one record after those in `out`,
 * reading each piece where it lies. Under tx_lock. 0, or -1 with errno. */
static int seal_record(struct rec_link *r, struct cursor *c, size_t len)
{
    if (grow(&r->out, &r->out_cap, r->out_len + len + REC_OVERHEAD) != 0) return -1;
    if (r->tx.seq == UINT64_MAX) { /* never in practice: 2^64 records */
        errno = EOVERFLOW;
        return -1;
    }
    uint8_t nonce[REC_IV_LEN], *hdr = r->out + r->out_len, *body = hdr + REC_HEADER_LEN;
    EVP_CIPHER_CTX *ctx = r->tx.ctx;
    int n, ok;
    put_be32(hdr, (uint32_t)len);
    nonce_of(&r->tx, nonce);
    ok = EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
         EVP_EncryptUpdate(ctx, NULL, &n, hdr, REC_HEADER_LEN) == 1;
    for (size_t done = 0; ok && done < len;) {
        size_t avail = c->iov->iov_len - c->off;
        if (avail == 0) {
            c->iov++;
            c->left--;
            c->off = 0;
            continue;
        }
        size_t k = avail < len - done ? avail : len - done;
        ok = EVP_EncryptUpdate(ctx, body + done, &n, (const uint8_t *)c->iov->iov_base + c->off, (int)k) == 1 &&
             (size_t)n == k;
        done += k;
        c->off += k;
    }
    ok = ok && EVP_EncryptFinal_ex(ctx, body + len, &n) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, REC_TAG_LEN, body + len) == 1;
    if (!ok) {
        errno = EPROTO;
        return -1;
    }
    r->tx.seq++;
    r->out_len += len + REC_OVERHEAD;
    return 0;
}

/* Send what is left of the records in `out`. wait: for room, within the
 * link's timeout; else EAGAIN when the socket is full. Under tx_lock. */
static int send_record(struct rec_link *r, int wait)
{
    int64_t end = deadline(atomic_load(&r->timeout_ms));
    while (r->out_off < r->out_len) {
        ssize_t w = send(r->fd, r->out + r->out_off, r->out_len - r->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            r->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        if (!wait) {
            errno = EAGAIN;
            return -1;
        }
        int rc = wait_fd(r->fd, POLLOUT, end);
        if (rc == 0) errno = ETIMEDOUT;
        if (rc <= 0) return -1;
    }
    r->out_off = r->out_len = 0;
    return 0;
}

static int writev_locked(struct rec_link *r, const struct iovec *iov, int iovcnt)
{
    /* A record rec_write_some left half sent goes first: its number is
     * taken, so the ones after it need it there. */
    if (send_record(r, 1) != 0) return -1;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
    struct cursor c = {iov, iovcnt, 0};
    while (total > 0) {
        size_t len = record_len(&c, total);
        if (r->out_len > 0 && r->out_len + len + REC_OVERHEAD > SEND_BYTES && send_record(r, 1) != 0) return -1;
        if (seal_record(r, &c, len) != 0) return -1;
        total -= len;
    }
    return send_record(r, 1);
}

int rec_writev(struct rec_link *r, const struct iovec *iov, int iovcnt)
{
    pthread_mutex_lock(&r->tx_lock);
    int rc = writev_locked(r, iov, iovcnt);
    int e = errno;
    pthread_mutex_unlock(&r->tx_lock);
    errno = e;
    return rc;
}

ssize_t rec_write_some(struct rec_link *r, const void *buf, size_t n)
{
    pthread_mutex_lock(&r->tx_lock);
    ssize_t rc = 0;
    if (r->out_off == r->out_len && n > 0) {
        struct iovec v = {(void *)buf, n < REC_MAX_PLAIN ? n : REC_MAX_PLAIN};
        struct cursor c = {&v, 1, 0};
        rc = seal_record(r, &c, v.iov_len);
        r->out_plain = v.iov_len;
    }
    if (rc == 0 && r->out_off < r->out_len) rc = send_record(r, 0) == 0 ? (ssize_t)r->out_plain : -1;
    int e = errno;
    pthread_mutex_unlock(&r->tx_lock);
    errno = e;
    return rc;
}

/* ---- opening ---------------------------------------------------------------- */

/* The peer's address for the log. */
static void peer_name(int fd, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "";
    snprintf(out, outlen, "the peer");
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        snprintf(out, outlen, "%s:%u", host, ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        snprintf(out, outlen, "[%s]:%u", host, ntohs(a->sin6_port));
    }
}

/* A record failed its tag or its length: the link is over. Logged once. */
static void broken(struct rec_link *r)
{
    r->rx_errno = EPROTO;
    if (atomic_exchange(&r->reported, 1)) return;
    char peer[80];
    peer_name(r->fd, peer, sizeof peer);
    LOG_WARN("TLS record from %s failed authentication: connection closed. The bytes were altered, replayed or "
             "cut on the way (a relay or a fault on the path), or the peer does not speak SCUDA's TLS records "
             "(protocol v%d): use a client and server of the same SCUDA version",
             peer, SCUDA_PROTOCOL_VERSION);
}

/* Decrypt body[0..len) in place and check it against hdr and tag. Under
 * rx_lock. 0, or -1 when it is not the peer's next record. */
static int open_record(struct rec_link *r, const uint8_t *hdr, uint8_t *body, size_t len, uint8_t *tag)
{
    uint8_t nonce[REC_IV_LEN];
    EVP_CIPHER_CTX *ctx = r->rx.ctx;
    int n;
    nonce_of(&r->rx, nonce);
    int ok = EVP_DecryptInit_ex(ctx, NULL, NULL, NULL, nonce) == 1 &&
             EVP_DecryptUpdate(ctx, NULL, &n, hdr, REC_HEADER_LEN) == 1 &&
             EVP_DecryptUpdate(ctx, body, &n, body, (int)len) == 1 && (size_t)n == len &&
             EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, REC_TAG_LEN, tag) == 1 &&
             EVP_DecryptFinal_ex(ctx, body + len, &n) == 1;
    if (!ok) return -1;
    r->rx.seq++;
    return 0;
}

/* The record `in` starts with: 1 and its plaintext length, 0 when its
 * header is not all here, -1 when the length is impossible. */
static int next_record(const struct rec_link *r, size_t *len)
{
    if (r->in_len - r->in_off < REC_HEADER_LEN) return 0;
    uint32_t n = get_be32(r->in + r->in_off);
    if (n == 0 || n > REC_MAX_PLAIN) return -1;
    *len = n;
    return 1;
}

/* Whether `in` holds a whole record (or one that cannot be: also a read's
 * answer). */
static int whole_record(const struct rec_link *r)
{
    size_t len = 0;
    int h = next_record(r, &len);
    return h < 0 || (h > 0 && r->in_len - r->in_off >= len + REC_OVERHEAD);
}

/* Open the whole record at in_off where it lies. */
static void open_in_buffer(struct rec_link *r, size_t len)
{
    uint8_t *hdr = r->in + r->in_off, *body = hdr + REC_HEADER_LEN;
    if (open_record(r, hdr, body, len, body + len) != 0) {
        broken(r);
        return;
    }
    r->plain_off = r->in_off + REC_HEADER_LEN;
    r->plain_end = r->plain_off + len;
    r->in_off += len + REC_OVERHEAD;
}

/* Take what the socket holds now into `in`, never waiting: 1 when bytes
 * came, 0 when none, -1 at the link's end (rx_errno set). Only with no
 * plaintext held. */
static int pull(struct rec_link *r)
{
    size_t len = 0, have = r->in_len - r->in_off;
    int h = next_record(r, &len);
    size_t need = h > 0 ? len + REC_OVERHEAD : REC_HEADER_LEN; /* the record's bytes, or its header's */
    if (r->in_off > 0) {
        /* At most part of one record: read-ahead takes whole small ones,
         * and a large one moves here once. */
        memmove(r->in, r->in + r->in_off, have);
        r->in_off = 0;
        r->in_len = have;
    }
    if (grow(&r->in, &r->in_cap, need + (r->read_ahead ? READ_AHEAD_BYTES : 0)) != 0) {
        r->rx_errno = ENOMEM;
        return -1;
    }
    /* Without read-ahead, exactly this record: what follows it on the
     * socket is not ours. */
    size_t want = need > have ? need - have : 0;
    if (r->read_ahead) want = want + READ_AHEAD_BYTES < r->in_cap - r->in_len ? want + READ_AHEAD_BYTES : r->in_cap - r->in_len;
    ssize_t n;
    do n = recv(r->fd, r->in + r->in_len, want, MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        r->in_len += (size_t)n;
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    r->rx_errno = n == 0 ? ECONNRESET : errno;
    return -1;
}

/* The rest of a record of len bytes whose start is in `in`, straight into
 * buf (len <= its room), opened there. With read-ahead the bytes after
 * the record land in `in`, in the same system call. A wait that runs out
 * puts the part received back into `in`. Under rx_lock. */
static ssize_t read_direct(struct rec_link *r, uint8_t *buf, size_t len, int timeout_ms)
{
    uint8_t hdr[REC_HEADER_LEN], tag[REC_TAG_LEN];
    size_t got = r->in_len - r->in_off - REC_HEADER_LEN, tag_got = 0;
    memcpy(hdr, r->in + r->in_off, REC_HEADER_LEN);
    memcpy(buf, r->in + r->in_off + REC_HEADER_LEN, got);
    r->in_off = r->in_len = 0;
    int64_t end = deadline(timeout_ms == 0 ? REST_WAIT_MS : timeout_ms);
    while (got < len || tag_got < REC_TAG_LEN) {
        struct iovec v[3];
        int nv = 0;
        if (got < len) v[nv++] = (struct iovec){buf + got, len - got};
        v[nv++] = (struct iovec){tag + tag_got, REC_TAG_LEN - tag_got};
        if (r->read_ahead && grow(&r->in, &r->in_cap, DIRECT_READ_AHEAD) == 0)
            v[nv++] = (struct iovec){r->in, DIRECT_READ_AHEAD};
        struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)nv};
        ssize_t n = recvmsg(r->fd, &m, MSG_DONTWAIT);
        if (n > 0) {
            size_t k = (size_t)n < len - got ? (size_t)n : len - got;
            got += k;
            n -= (ssize_t)k;
            k = (size_t)n < REC_TAG_LEN - tag_got ? (size_t)n : REC_TAG_LEN - tag_got;
            tag_got += k;
            r->in_len = (size_t)n - k; /* read ahead: only once the tag is whole */
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            r->rx_errno = n == 0 ? ECONNRESET : errno;
            errno = r->rx_errno;
            return -1;
        }
        int rc = wait_fd(r->fd, POLLIN, end);
        if (rc > 0) continue;
        int e = rc < 0 ? errno : timeout_ms == 0 ? EAGAIN : ETIMEDOUT;
        if (grow(&r->in, &r->in_cap, REC_HEADER_LEN + got + tag_got) != 0) {
            r->rx_errno = ENOMEM;
        } else {
            memcpy(r->in, hdr, REC_HEADER_LEN);
            memcpy(r->in + REC_HEADER_LEN, buf, got);
            memcpy(r->in + REC_HEADER_LEN + got, tag, tag_got);
            r->in_len = REC_HEADER_LEN + got + tag_got;
        }
        errno = e;
        return -1;
    }
    if (open_record(r, hdr, buf, len, tag) != 0) {
        broken(r);
        errno = EPROTO;
        return -1;
    }
    return (ssize_t)len;
}

/* One step of a read under rx_lock: >0 bytes handed out, -1 with errno
 * (EAGAIN: nothing without waiting), 0 to go on. */
static ssize_t read_step(struct rec_link *r, uint8_t *buf, size_t cap, int timeout_ms)
{
    if (r->plain_off < r->plain_end) {
        size_t k = r->plain_end - r->plain_off < cap ? r->plain_end - r->plain_off : cap;
        memcpy(buf, r->in + r->plain_off, k);
        r->plain_off += k;
        return (ssize_t)k;
    }
    if (r->rx_errno) {
        errno = r->rx_errno;
        return -1;
    }
    size_t len = 0, have = r->in_len - r->in_off;
    int h = next_record(r, &len);
    if (h < 0) {
        broken(r);
    } else if (h > 0 && have >= len + REC_OVERHEAD) {
        open_in_buffer(r, len);
    } else if (h > 0 && cap >= len && len >= DIRECT_MIN && have - REC_HEADER_LEN < len &&
               (timeout_ms != 0 || atomic_load(&r->may_wait))) {
        return read_direct(r, buf, len, timeout_ms);
    } else if (pull(r) == 0) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

ssize_t rec_read_some(struct rec_link *r, void *buf, size_t cap, int timeout_ms)
{
    if (cap == 0) return 0;
    if (timeout_ms < 0) timeout_ms = atomic_load(&r->timeout_ms);
    int64_t end = deadline(timeout_ms);
    pthread_mutex_lock(&r->rx_lock);
    ssize_t n;
    for (;;) {
        n = read_step(r, buf, cap, timeout_ms);
        if (n > 0 || (n < 0 && (errno != EAGAIN || timeout_ms == 0))) break;
        if (n == 0) continue;
        /* Nothing here: wait without the lock, as a reader asleep on the
         * socket holds nothing anyone needs. */
        pthread_mutex_unlock(&r->rx_lock);
        int rc = wait_fd(r->fd, POLLIN, end);
        int e = errno;
        pthread_mutex_lock(&r->rx_lock);
        if (rc <= 0) {
            errno = rc == 0 ? ETIMEDOUT : e;
            n = -1;
            break;
        }
    }
    int e = errno;
    pthread_mutex_unlock(&r->rx_lock);
    errno = e;
    return n;
}

/* ---- waiting ---------------------------------------------------------------- */

static int ready_locked(const struct rec_link *r)
{
    return r->plain_off < r->plain_end || r->rx_errno || whole_record(r);
}

int rec_input_ready(struct rec_link *r)
{
    pthread_mutex_lock(&r->rx_lock);
    int ready = ready_locked(r);
    if (!ready && pull(r) != 0) ready = ready_locked(r);
    pthread_mutex_unlock(&r->rx_lock);
    return ready;
}

int rec_wait_input(struct rec_link *r, int timeout_ms)
{
    int64_t end = deadline(timeout_ms);
    for (;;) {
        if (rec_input_ready(r)) return 1;
        int rc = wait_fd(r->fd, POLLIN, end);
        if (rc <= 0) return rc;
        /* Readable may be part of a record only: look again. */
        if (end >= 0 && now_ms() >= end) return rec_input_ready(r);
    }
}

int rec_drained(struct rec_link *r)
{
    pthread_mutex_lock(&r->rx_lock);
    int drained = !ready_locked(r);
    pthread_mutex_unlock(&r->rx_lock);
    return drained;
}
