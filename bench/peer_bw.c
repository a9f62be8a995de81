/* peer_bw.c - a copy between devices of two servers, server to server
 * over a peer link (docs/architecture.md, 3.12), against the raw link.
 *
 *   peer_bw HOST:PORT_A HOST:PORT_B [MiB]      (default 1024)
 *
 * A raw client (the wire protocol itself, as the e2e tests speak it; no
 * shim): a session on each server, device 0 of each; a buffer of MiB on
 * each; the link set up (scuda_peer_grant on A, scuda_peer_connect on B);
 * one warm-up copy of 64 MiB, then 3 copies of MiB from A to B, the
 * median timed. Then the raw link to B (HELLO_RAW_SINK, one TCP stream,
 * the same bytes) for comparison; on one host both go over loopback.
 * SCUDA_TOKEN, SCUDA_TLS, SCUDA_TLS_FINGERPRINT as for any client.
 * Prints "figure<TAB>value" lines; exit status 1 on any failure.
 *
 *   cc -O2 -std=c11 -D__CUDA_API_VERSION_INTERNAL=1 -Isrc -I/usr/local/cuda/include bench/peer_bw.c \
 *      build/libscuda_common.a -lssl -lcrypto -lpthread -ldl */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "common/config.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/messages.gen.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/session_info.h"
#include "common/transport.h"
#include "common/wire.h"

#define MiB (1ull << 20)
#define CTX 0x200u /* the context id this client gives device 0's primary context */
#define REPS 3

static uint32_t next_seq = 1;

static void die(const char *fmt, const char *what, long r)
{
    fprintf(stderr, "peer_bw: ");
    fprintf(stderr, fmt, what, r);
    fprintf(stderr, "\n");
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint32_t send_frame(int fd, uint16_t op, const wire_buf *b)
{
    struct frame_header h = {.length = (uint32_t)b->len, .op = op, .seq = next_seq++, .ctx = CTX};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {b->data, b->len}};
    if (io_writev_full(fd, iov, b->len ? 2 : 1) != 0) die("%s: the connection closed", "send", 0);
    return h.seq;
}

/* The reply to seq: its CUresult; the payload after it into *out (malloc'd). */
static long reply(int fd, uint32_t seq, uint8_t **out, size_t *len)
{
    for (;;) {
        uint8_t hdr[FRAME_HEADER_LEN];
        struct frame_header h;
        if (io_read_full_timeout(fd, hdr, sizeof hdr, 120000) != 0) return -1;
        frame_header_decode(hdr, &h);
        if (h.length > SCUDA_MAX_FRAME + 64u) return -1;
        uint8_t *p = malloc(h.length + 1u);
        if (!p || io_read_full_timeout(fd, p, h.length, 120000) != 0) return -1;
        if ((h.flags & FRAME_REPLY) && h.seq == seq && h.length >= 4) {
            uint32_t r;
            memcpy(&r, p, 4);
            if (out) {
                memmove(p, p + 4, h.length - 4);
                *out = p;
                *len = h.length - 4;
            } else {
                free(p);
            }
            return (long)r;
        }
        free(p);
    }
}

static long call(int fd, uint16_t op, wire_buf *b, uint8_t **out, size_t *len)
{
    long r = reply(fd, send_frame(fd, op, b), out, len);
    wb_reset(b);
    return r;
}

static int session(const char *addr)
{
    char err[300];
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint32_t st = 0;
    int fd = dial(addr, 10000, PREFACE_SESSION, err, sizeof err);
    if (fd < 0) die("%s: cannot connect", addr, 0);
    struct session_info *si = malloc(sizeof *si);
    if (!si || hello_read_server(fd, 10000, nonce, err, sizeof err) != 0 ||
        hello_send_client(fd, 0, ~0ull, scuda_token(), nonce, NULL, 0) != 0 ||
        hello_read_session_welcome(fd, 30000, &st, err, sizeof err, si) != 0 || st != WELCOME_OK)
        die("%s: the handshake failed (status %ld)", addr, (long)st);
    free(si);
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &(struct msg_scuda_primary_ctx_retain_req){.dev = 0, .ctx = CTX});
    long r = call(fd, OP_scuda_primary_ctx_retain, &b, NULL, NULL);
    if (r != CUDA_SUCCESS) die("%s: retaining the primary context: %ld", addr, r);
    wb_free(&b);
    return fd;
}

static uint64_t alloc(int fd, uint64_t n)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, n);
    uint8_t *out = NULL;
    size_t len = 0;
    long r = call(fd, OP_cuMemAlloc_v2, &b, &out, &len);
    if (r != CUDA_SUCCESS || len < 8) die("%s: %ld", "cuMemAlloc", r);
    uint64_t dev;
    memcpy(&dev, out, 8);
    free(out);
    wb_free(&b);
    return dev;
}

static void link_up(int fa, const char *addr_a, int fb, uint32_t *la, uint32_t *lb)
{
    wire_buf b;
    wb_init(&b);
    uint8_t *out = NULL;
    size_t len = 0;
    long r = call(fa, OP_scuda_peer_grant, &b, &out, &len);
    if (r != CUDA_SUCCESS) die("%s: %ld (a server without peer links?)", "scuda_peer_grant", r);
    wire_reader rd;
    wr_init(&rd, out, len);
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_scuda_peer_grant_rep g;
    if (msg_scuda_peer_grant_rep_get(&rd, &a, &g) != 0) die("%s: a malformed reply", "scuda_peer_grant", 0);
    struct msg_scuda_peer_connect_req m = {.addr = addr_a, .pid = g.pid, .link = g.link,
                                           .fingerprint = g.fingerprint ? g.fingerprint : ""};
    memcpy(m.secret, g.secret, sizeof m.secret);
    msg_scuda_peer_connect_req_put(&b, &m);
    uint8_t *out2 = NULL;
    size_t len2 = 0;
    r = call(fb, OP_scuda_peer_connect, &b, &out2, &len2);
    if (r != CUDA_SUCCESS || len2 < 4) die("%s: %ld (see the second server's log)", "scuda_peer_connect", r);
    *la = g.link;
    memcpy(lb, out2, 4);
    msg_arena_free(&a);
    free(out);
    free(out2);
    wb_free(&b);
}

/* One copy, announced to both ends at once: seconds. */
static double copy(int fa, uint64_t src, uint32_t la, int fb, uint64_t dst, uint32_t lb, uint64_t n)
{
    wire_buf b;
    wb_init(&b);
    double t0 = now_s();
    msg_scuda_peer_send_req_put(&b, &(struct msg_scuda_peer_send_req){.src = src, .n = n, .link = la});
    uint32_t sa = send_frame(fa, OP_scuda_peer_send, &b);
    wb_reset(&b);
    msg_scuda_peer_recv_req_put(&b, &(struct msg_scuda_peer_recv_req){.dst = dst, .n = n, .link = lb});
    uint32_t sb = send_frame(fb, OP_scuda_peer_recv, &b);
    long ra = reply(fa, sa, NULL, NULL), rb = reply(fb, sb, NULL, NULL);
    double s = now_s() - t0;
    if (ra != CUDA_SUCCESS || rb != CUDA_SUCCESS) die("the copy failed: %s %ld (see the servers' logs)", "", ra ? ra : rb);
    wb_free(&b);
    return s;
}

/* The raw link to addr: one sink transfer of n bytes, seconds. */
static double raw_sink(const char *addr, uint64_t n)
{
    char err[300];
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint32_t st = 0;
    char msg[64];
    int fd = dial(addr, 10000, PREFACE_SESSION, err, sizeof err);
    if (fd < 0 || hello_read_server(fd, 10000, nonce, err, sizeof err) != 0 ||
        hello_send_client(fd, HELLO_RAW_SINK, 0, scuda_token(), nonce, NULL, 0) != 0 ||
        hello_read_welcome(fd, 10000, &st, msg, sizeof msg) != 0 || st != WELCOME_OK)
        die("%s: no raw sink link", addr, 0);
    uint8_t *buf = malloc(n);
    if (!buf) die("%s: out of memory", "raw sink", 0);
    memset(buf, 0x5a, n);
    uint64_t ack = 0, end = 0;
    double t0 = now_s();
    if (io_write_full(fd, &n, sizeof n) != 0 || io_write_full(fd, buf, n) != 0 ||
        io_read_full_timeout(fd, &ack, sizeof ack, 120000) != 0 || ack != n)
        die("%s: the transfer failed", "raw sink", 0);
    double s = now_s() - t0;
    io_write_full(fd, &end, sizeof end);
    io_close(fd);
    free(buf);
    return s;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: peer_bw HOST:PORT_A HOST:PORT_B [MiB]\n");
        return 2;
    }
    uint64_t n = (argc > 3 ? strtoull(argv[3], NULL, 10) : 1024) * MiB;
    if (n == 0) n = MiB;
    int fa = session(argv[1]), fb = session(argv[2]);
    uint64_t src = alloc(fa, n), dst = alloc(fb, n);
    uint32_t la, lb;
    link_up(fa, argv[1], fb, &la, &lb);
    copy(fa, src, la, fb, dst, lb, n < 64 * MiB ? n : 64 * MiB); /* warm-up: the link's buffers, the TCP window */
    double v[REPS], raw[REPS];
    for (int i = 0; i < REPS; i++) v[i] = copy(fa, src, la, fb, dst, lb, n);
    for (int i = 0; i < REPS; i++) raw[i] = raw_sink(argv[2], n);
    qsort(v, REPS, sizeof v[0], cmp);
    qsort(raw, REPS, sizeof raw[0], cmp);
    printf("bytes\t%llu\n", (unsigned long long)n);
    printf("peer_copy_GBps\t%.2f\n", (double)n / v[REPS / 2] / 1e9);
    printf("raw_link_GBps\t%.2f\n", (double)n / raw[REPS / 2] / 1e9);
    printf("peer_vs_raw\t%.2f\n", v[REPS / 2] > 0 ? raw[REPS / 2] / v[REPS / 2] : 0);
    io_close(fa);
    io_close(fb);
    return 0;
}
