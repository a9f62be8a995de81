/* test_tls_records.c - sealed records (tls_records.h) over socketpairs,
 * with fixed keys: every size and iovec shape arrives whole and in order,
 * in reads of any size; a record flipped, replayed, reordered, dropped,
 * cut short or of an impossible length fails cleanly (EPROTO or
 * ECONNRESET, never bytes); the parent's non-waiting writes resume a
 * record the socket took only part of; a link that keeps no read-ahead
 * leaves the bytes after its record on the socket. */
#define _GNU_SOURCE
#include "common/tls_records.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static struct rec_keys key_a, key_b;

/* One end writes on fd w (keys a), the other reads on fd r (keys a). */
struct ends {
    int sv[2];
    struct rec_link *tx, *rx;
};

static void nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static int open_ends(struct ends *e, int read_ahead)
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, e->sv) != 0) return -1;
    nonblock(e->sv[0]);
    nonblock(e->sv[1]);
    e->tx = rec_new(e->sv[0], &key_a, &key_b, 1);
    e->rx = rec_new(e->sv[1], &key_b, &key_a, read_ahead);
    if (!e->tx || !e->rx) return -1;
    rec_set_timeout(e->tx, 10000);
    rec_set_timeout(e->rx, 10000);
    return 0;
}

static void close_ends(struct ends *e)
{
    rec_free(e->tx);
    rec_free(e->rx);
    close(e->sv[0]);
    close(e->sv[1]);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 131 + seed + (i >> 11));
}

/* ---- round trips ------------------------------------------------------ */

struct writer {
    struct rec_link *l;
    const unsigned char *p;
    size_t n;
    unsigned shape;
    int ok;
};

/* n bytes as a writev cut by shape: even pieces, a small head then one
 * large piece, or many tiny pieces and empty ones. */
static void *write_shaped(void *arg)
{
    struct writer *w = arg;
    struct iovec iov[64];
    int cnt = 0;
    size_t off = 0;
    while (off < w->n && cnt < 63) {
        size_t k = w->shape == 0 ? (w->n + 3) / 4 : w->shape == 1 ? (cnt == 0 ? 16 : w->n) : (size_t)(cnt % 5) * 7;
        if (k > w->n - off) k = w->n - off;
        iov[cnt++] = (struct iovec){(void *)(w->p + off), k};
        off += k;
    }
    if (off < w->n) iov[cnt++] = (struct iovec){(void *)(w->p + off), w->n - off};
    w->ok = rec_writev(w->l, iov, cnt) == 0;
    return NULL;
}

/* Read n bytes in reads of at most step (0: all at once). */
static int read_in_steps(struct rec_link *l, unsigned char *p, size_t n, size_t step)
{
    size_t got = 0;
    while (got < n) {
        size_t cap = step && step < n - got ? step : n - got;
        ssize_t k = rec_read_some(l, p + got, cap, -1);
        if (k <= 0) return -1;
        got += (size_t)k;
    }
    return 0;
}

static void round_trips(void)
{
    static const size_t sizes[] = {1, 15, 16, 17, 4095, 16384, 16385, 100000, REC_MAX_PLAIN - 1, REC_MAX_PLAIN,
                                   REC_MAX_PLAIN + 1, 3 * REC_MAX_PLAIN + 17, 5u << 20};
    static const size_t steps[] = {0, 1, 16, 1000, 70000};
    struct ends e;
    CHECK(open_ends(&e, 1) == 0);
    size_t max = 5u << 20;
    unsigned char *src = malloc(max), *dst = malloc(max);
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (unsigned shape = 0; shape < 3; shape++) {
            for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
                size_t n = sizes[i];
                if (steps[s] == 1 && n > 100000) continue; /* a byte at a time: slow, nothing new */
                fill(src, n, (unsigned)(i * 7 + shape + s));
                memset(dst, 0, n);
                struct writer w = {e.tx, src, n, shape, 0};
                pthread_t t;
                pthread_create(&t, NULL, write_shaped, &w);
                int rc = read_in_steps(e.rx, dst, n, steps[s]);
                pthread_join(t, NULL);
                if (rc != 0 || !w.ok || memcmp(src, dst, n) != 0) {
                    printf("FAIL round trip: %zu bytes, shape %u, reads of %zu\n", n, shape, steps[s]);
                    bad++;
                }
            }
        }
    }
    CHECK(bad == 0);
    CHECK(rec_drained(e.rx) == 1);
    printf("ok every size and writev shape arrives whole, in reads of any size\n");
    free(src);
    free(dst);
    close_ends(&e);
}

/* ---- what a relay might do ---------------------------------------------- */

/* The wire bytes of records "one", "two", "three", taken off the socket. */
struct wire {
    unsigned char b[512];
    size_t len, rec_at[3], rec_len[3];
};

static void capture(struct wire *w)
{
    struct ends e;
    CHECK(open_ends(&e, 1) == 0);
    const char *words[3] = {"one", "two", "three"};
    w->len = 0;
    for (int i = 0; i < 3; i++) {
        struct iovec v = {(void *)words[i], strlen(words[i])};
        CHECK(rec_writev(e.tx, &v, 1) == 0);
        ssize_t n = recv(e.sv[1], w->b + w->len, sizeof w->b - w->len, 0);
        CHECK(n == (ssize_t)(REC_HEADER_LEN + strlen(words[i]) + REC_TAG_LEN));
        CHECK(w->b[w->len] == 0); /* never a bulk join's go byte */
        w->rec_at[i] = w->len;
        w->rec_len[i] = (size_t)n;
        w->len += (size_t)n;
    }
    close_ends(&e);
}

/* Feed bytes to a fresh reader with the same keys; then its first reads. */
static int replay_to_reader(const unsigned char *b, size_t n, int close_after, char *out, size_t outlen)
{
    struct ends e;
    CHECK(open_ends(&e, 1) == 0);
    CHECK(send(e.sv[0], b, n, 0) == (ssize_t)n);
    if (close_after) shutdown(e.sv[0], SHUT_WR);
    size_t got = 0;
    int rc = 0;
    while (got < outlen) {
        ssize_t k = rec_read_some(e.rx, out + got, outlen - got, 2000);
        if (k < 0) {
            rc = errno;
            break;
        }
        got += (size_t)k;
    }
    /* Errors stick: the link stays closed. */
    if (rc) {
        char c;
        CHECK(rec_read_some(e.rx, &c, 1, 0) == -1 && errno == rc);
        CHECK(rec_input_ready(e.rx) == 1);
    }
    close_ends(&e);
    return rc;
}

static void relay_tricks(void)
{
    struct wire w;
    capture(&w);
    char got[16] = "";
    unsigned char b[512];

    /* The control: the bytes as they were read back fine. */
    CHECK(replay_to_reader(w.b, w.len, 0, got, 11) == 0 && !memcmp(got, "onetwothree", 11));

    /* A bit flipped in the header, the body, the tag. */
    size_t spots[3] = {3, REC_HEADER_LEN + 1, w.rec_len[0] - 1};
    for (int i = 0; i < 3; i++) {
        memcpy(b, w.b, w.len);
        b[spots[i]] ^= 0x01;
        memset(got, 0, sizeof got);
        CHECK(replay_to_reader(b, w.len, 0, got, 11) == EPROTO);
        CHECK(got[0] == 0); /* nothing of the altered record came out */
    }
    printf("ok a flipped bit in a record's length, body or tag fails it (EPROTO)\n");

    /* Replayed: one, one. */
    memcpy(b, w.b, w.rec_len[0]);
    memcpy(b + w.rec_len[0], w.b, w.rec_len[0]);
    CHECK(replay_to_reader(b, 2 * w.rec_len[0], 0, got, 6) == EPROTO && !memcmp(got, "one", 3));
    /* Reordered: two, one. */
    memcpy(b, w.b + w.rec_at[1], w.rec_len[1]);
    memcpy(b + w.rec_len[1], w.b, w.rec_len[0]);
    memset(got, 0, sizeof got);
    CHECK(replay_to_reader(b, w.rec_len[0] + w.rec_len[1], 0, got, 6) == EPROTO && got[0] == 0);
    /* Dropped: one, three. */
    memcpy(b, w.b, w.rec_len[0]);
    memcpy(b + w.rec_len[0], w.b + w.rec_at[2], w.rec_len[2]);
    CHECK(replay_to_reader(b, w.rec_len[0] + w.rec_len[2], 0, got, 8) == EPROTO && !memcmp(got, "one", 3));
    printf("ok a replayed, reordered or dropped record fails (EPROTO)\n");

    /* Cut short, then the connection ends: an end, not bytes. */
    memset(got, 0, sizeof got);
    CHECK(replay_to_reader(w.b, w.rec_len[0] - 3, 1, got, 3) == ECONNRESET && got[0] == 0);
    /* An impossible length (a TLS record's header, say). */
    unsigned char tls_hdr[5 + 32] = {0x17, 0x03, 0x03, 0x00, 0x20};
    CHECK(replay_to_reader(tls_hdr, sizeof tls_hdr, 0, got, 3) == EPROTO);
    unsigned char zero_len[REC_HEADER_LEN + REC_TAG_LEN] = {0};
    CHECK(replay_to_reader(zero_len, sizeof zero_len, 0, got, 3) == EPROTO);
    printf("ok a truncated record reads as the end (ECONNRESET); an impossible length fails (EPROTO)\n");
}

/* ---- the parent's writes, exact reads, waits ------------------------------- */

/* The socket takes part of a record: EAGAIN, and the same call later
 * finishes it, once. */
static void write_some_resumes(void)
{
    struct ends e;
    CHECK(open_ends(&e, 1) == 0);
    int small = 4096;
    setsockopt(e.sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t n = 100000;
    unsigned char *src = malloc(n), *dst = malloc(n);
    fill(src, n, 3);
    errno = 0;
    ssize_t w = rec_write_some(e.tx, src, n);
    CHECK(w == -1 && errno == EAGAIN);
    size_t got = 0;
    int rounds = 0;
    while (w < 0 && rounds++ < 10000) {
        ssize_t k = rec_read_some(e.rx, dst + got, n - got, 0);
        if (k > 0) got += (size_t)k;
        w = rec_write_some(e.tx, src, n);
        CHECK(w > 0 || errno == EAGAIN);
    }
    CHECK(w == (ssize_t)n);
    CHECK(rec_read_some(e.rx, dst + got, n - got, 5000) == (ssize_t)(n - got));
    CHECK(!memcmp(src, dst, n));
    CHECK(rec_input_ready(e.rx) == 0); /* the record came once */
    printf("ok a non-waiting write resumes its record where the socket stopped\n");
    free(src);
    free(dst);
    close_ends(&e);
}

/* Without read-ahead a reader takes exactly its record: what follows
 * stays on the socket for whoever reads it next (a bulk join's go byte
 * and second session). */
static void exact_reads(void)
{
    struct ends e;
    CHECK(open_ends(&e, 0) == 0);
    struct iovec v = {"join", 4};
    CHECK(rec_writev(e.tx, &v, 1) == 0);
    CHECK(send(e.sv[0], "G", 1, 0) == 1);
    char buf[16];
    CHECK(rec_read_some(e.rx, buf, sizeof buf, 1000) == 4 && !memcmp(buf, "join", 4));
    CHECK(rec_drained(e.rx) == 1);
    CHECK(recv(e.sv[1], buf, sizeof buf, MSG_DONTWAIT) == 1 && buf[0] == 'G');
    printf("ok without read-ahead a reader leaves the bytes after its record on the socket\n");
    close_ends(&e);
}

/* A read told not to wait that finds part of a large record: EAGAIN, and
 * the part is kept for the next read (the server's parent's reads). */
static void partial_record_kept(void)
{
    struct ends e;
    CHECK(open_ends(&e, 1) == 0);
    size_t n = 64u << 10;
    unsigned char *src = malloc(n), *dst = malloc(n), *wire = malloc(n + 64);
    fill(src, n, 9);
    struct iovec v = {src, n};
    CHECK(rec_writev(e.tx, &v, 1) == 0);
    /* Take the record off the socket and hand it on in two halves. */
    struct ends f;
    CHECK(open_ends(&f, 1) == 0);
    size_t len = 0;
    while (len < n + REC_HEADER_LEN + REC_TAG_LEN) {
        ssize_t k = recv(e.sv[1], wire + len, n + 64 - len, 0);
        CHECK(k > 0);
        if (k <= 0) break;
        len += (size_t)k;
    }
    rec_free(f.rx);
    f.rx = rec_new(f.sv[1], &key_b, &key_a, 1);
    CHECK(send(f.sv[0], wire, len / 2, 0) == (ssize_t)(len / 2));
    errno = 0;
    CHECK(rec_read_some(f.rx, dst, n, 0) == -1 && errno == EAGAIN);
    CHECK(rec_input_ready(f.rx) == 0);
    CHECK(rec_drained(f.rx) == 1);
    CHECK(send(f.sv[0], wire + len / 2, len - len / 2, 0) == (ssize_t)(len - len / 2));
    CHECK(rec_wait_input(f.rx, 5000) == 1);
    CHECK(rec_read_some(f.rx, dst, n, 0) == (ssize_t)n && !memcmp(src, dst, n));
    printf("ok a read that must not wait keeps a partial record for the next one\n");
    free(src);
    free(dst);
    free(wire);
    close_ends(&f);
    close_ends(&e);
}

int main(void)
{
    for (int i = 0; i < REC_KEY_LEN; i++) key_a.key[i] = (uint8_t)i, key_b.key[i] = (uint8_t)(0x80 + i);
    for (int i = 0; i < REC_IV_LEN; i++) key_a.iv[i] = (uint8_t)(3 * i), key_b.iv[i] = (uint8_t)(5 * i);
    round_trips();
    relay_tricks();
    write_some_resumes();
    exact_reads();
    partial_record_kept();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
