/* peer_link.c - copies between sessions on two servers go server to
 * server over a peer link, never through the client (docs/architecture.md,
 * 3.12 Peer links; src/server/peer_link.h).
 *
 * Two stand-in servers, and a raw client holding a session on each (as
 * the multi-server client will: one connection per server). The client
 * gets a grant from session A, hands it to session B, which joins A over
 * a link of its own, then announces a copy to both at once:
 *   - 64 MiB and some odd bytes arrive byte-exact, and the link carries
 *     a copy the other way too;
 *   - the client's two connections carry a few hundred bytes meanwhile,
 *     not the copy (the kernel's own byte counters, TCP_INFO);
 *   - a wrong grant, a used one and one for no session are all refused
 *     with the one refusal of every bad peer join;
 *   - a length beyond either end's allocation is refused, and the link
 *     stays in step (a good copy follows);
 *   - grants stop at the session's bound of links;
 *   - killing A while B waits in a copy fails B's call within seconds.
 * With E2E_TLS=1 all of it runs over TLS (B pins A's certificate). */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <linux/tcp.h> /* tcp_info with byte counts */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/messages.gen.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "harness.h"

#define MIB (1ull << 20)
#define COPY_BYTES (64 * MIB + 12345)
#define PIECE MIB
#define REFUSAL "peer join refused: no open grant matches it"

static uint32_t next_seq = 0x70000000u;

static uint64_t device_alloc(int fd, uint64_t size)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, size);
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(h_raw_call(fd, OP_cuMemAlloc_v2, H_RAW_CTX, b.data, b.len, &out, &len) == CUDA_SUCCESS && len == 8);
    uint64_t dev;
    memcpy(&dev, out, 8);
    free(out);
    wb_free(&b);
    return dev;
}

static void upload(int fd, uint64_t dst, const uint8_t *p, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += PIECE) {
        uint64_t len = n - off < PIECE ? n - off : PIECE;
        wire_buf b;
        wb_init(&b);
        msg_scuda_memcpy_htod_req_put(&b, &(struct msg_scuda_memcpy_htod_req){.dst = dst + off, .data_len = len,
                                                                               .mode = COPY_SYNC});
        wb_put_raw(&b, p + off, len);
        CHECK(h_raw_call(fd, OP_scuda_memcpy_htod, H_RAW_CTX, b.data, b.len, NULL, NULL) == CUDA_SUCCESS);
        wb_free(&b);
    }
}

static void download(int fd, uint64_t src, uint8_t *p, uint64_t n)
{
    for (uint64_t off = 0; off < n; off += PIECE) {
        uint64_t len = n - off < PIECE ? n - off : PIECE;
        wire_buf b;
        wb_init(&b);
        msg_scuda_memcpy_dtoh_req_put(&b, &(struct msg_scuda_memcpy_dtoh_req){.src = src + off, .n = len,
                                                                               .mode = COPY_SYNC});
        uint8_t *out = NULL;
        size_t got = 0;
        CHECK(h_raw_call(fd, OP_scuda_memcpy_dtoh, H_RAW_CTX, b.data, b.len, &out, &got) == CUDA_SUCCESS &&
              got >= len + 8);
        memcpy(p + off, out + got - len, len); /* the blob's bytes end the reply */
        free(out);
        wb_free(&b);
    }
}

/* Bytes the kernel moved on the client's socket, both ways. */
static uint64_t socket_bytes(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0);
    return ti.tcpi_bytes_received + ti.tcpi_bytes_acked;
}

struct grant {
    uint32_t pid, link;
    uint8_t secret[PEER_SECRET_LEN];
    char fp[80];
};

static struct grant get_grant(int fa)
{
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK(h_raw_call(fa, OP_scuda_peer_grant, H_RAW_CTX, NULL, 0, &out, &len) == CUDA_SUCCESS, "scuda_peer_grant");
    wire_reader r;
    wr_init(&r, out, len);
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_scuda_peer_grant_rep rep;
    CHECK(msg_scuda_peer_grant_rep_get(&r, &a, &rep) == 0);
    struct grant g = {.pid = rep.pid, .link = rep.link};
    memcpy(g.secret, rep.secret, sizeof g.secret);
    snprintf(g.fp, sizeof g.fp, "%s", rep.fingerprint ? rep.fingerprint : "");
    msg_arena_free(&a);
    free(out);
    return g;
}

/* scuda_peer_connect on B: the CUresult; *local gets B's slot. */
static long connect_peer(int fb, const char *addr, const struct grant *g, uint32_t *local)
{
    wire_buf b;
    wb_init(&b);
    struct msg_scuda_peer_connect_req m = {.addr = addr, .pid = g->pid, .link = g->link, .fingerprint = g->fp};
    memcpy(m.secret, g->secret, sizeof m.secret);
    msg_scuda_peer_connect_req_put(&b, &m);
    uint8_t *out = NULL;
    size_t len = 0;
    long r = h_raw_call(fb, OP_scuda_peer_connect, H_RAW_CTX, b.data, b.len, &out, &len);
    if (r == CUDA_SUCCESS) {
        CHECK(len >= 4);
        memcpy(local, out, 4);
    }
    free(out);
    wb_free(&b);
    return r;
}

static uint32_t send_end(int fd, uint16_t op, uint64_t ptr, uint64_t n, uint32_t link)
{
    wire_buf b;
    wb_init(&b);
    if (op == OP_scuda_peer_send)
        msg_scuda_peer_send_req_put(&b, &(struct msg_scuda_peer_send_req){.src = ptr, .n = n, .link = link});
    else
        msg_scuda_peer_recv_req_put(&b, &(struct msg_scuda_peer_recv_req){.dst = ptr, .n = n, .link = link});
    uint32_t seq = next_seq++;
    CHECK(h_raw_send(fd, op, 0, seq, H_RAW_CTX, b.data, (uint32_t)b.len) == 0);
    wb_free(&b);
    return seq;
}

/* A copy announced to both ends at once, as peer_copy does: both results. */
static void copy(int fa, uint64_t src, uint32_t la, int fb, uint64_t dst, uint32_t lb, uint64_t n, long *ra,
                 long *rb)
{
    uint32_t sa = send_end(fa, OP_scuda_peer_send, src, n, la);
    uint32_t sb = send_end(fb, OP_scuda_peer_recv, dst, n, lb);
    *ra = h_raw_call_reply(fa, sa, 60000, NULL, NULL);
    *rb = h_raw_call_reply(fb, sb, 60000, NULL, NULL);
}

int main(void)
{
    const char *tls = getenv("E2E_TLS");
    /* Its own name over TLS: the two runs' logs must not be one file. */
    h_begin(tls && strcmp(tls, "1") == 0 ? "peer_link_tls" : "peer_link", 200);
    struct h_server a, b;
    h_server_start(&a, "peer-a", &(struct h_server_opts){0});
    h_server_start(&b, "peer-b", &(struct h_server_opts){0});
    int fa = h_raw_session(a.addr), fb = h_raw_session(b.addr);
    uint64_t src = device_alloc(fa, COPY_BYTES), dst = device_alloc(fb, COPY_BYTES);
    uint64_t small = device_alloc(fb, MIB);
    uint8_t *want = malloc(COPY_BYTES), *got = malloc(COPY_BYTES);
    CHECK(want && got);
    h_pattern(want, COPY_BYTES, 77);
    upload(fa, src, want, COPY_BYTES);

    /* The link. */
    struct grant g = get_grant(fa);
    CHECK((g.fp[0] != 0) == (a.tls != 0), "the grant names a certificate exactly when the server speaks TLS");
    uint32_t lb = 0;
    CHECK(connect_peer(fb, a.addr, &g, &lb) == CUDA_SUCCESS, "B joins A with a good grant");

    /* The copy, and the bytes on the client's sockets meanwhile. */
    uint64_t before = socket_bytes(fa) + socket_bytes(fb);
    long ra, rb;
    uint64_t t0 = h_now_ms();
    copy(fa, src, g.link, fb, dst, lb, COPY_BYTES, &ra, &rb);
    uint64_t ms = h_now_ms() - t0;
    uint64_t crossed = socket_bytes(fa) + socket_bytes(fb) - before;
    CHECK(ra == CUDA_SUCCESS && rb == CUDA_SUCCESS, "the copy: send %ld, receive %ld", ra, rb);
    CHECK(crossed < 64 * 1024, "%llu bytes crossed the client during a %llu-byte peer copy",
          (unsigned long long)crossed, (unsigned long long)COPY_BYTES);
    download(fb, dst, got, COPY_BYTES);
    long at = h_diff(want, got, COPY_BYTES);
    CHECK(at < 0, "the copy differs at byte %ld", at);

    /* The same link the other way: B sends, A receives. */
    uint64_t back = device_alloc(fa, 3 * MIB + 7);
    copy(fb, dst + 1, lb, fa, back, g.link, 3 * MIB + 7, &rb, &ra);
    CHECK(ra == CUDA_SUCCESS && rb == CUDA_SUCCESS, "the copy back: send %ld, receive %ld", rb, ra);
    download(fa, back, got, 3 * MIB + 7);
    CHECK(h_diff(want + 1, got, 3 * MIB + 7) < 0, "the copy back differs");

    /* Bad grants: wrong secret, the used one again, a session that is not
     * there. One refusal for all, and the link slot stays usable. */
    struct grant bad = get_grant(fa);
    bad.secret[0] ^= 1;
    uint32_t unused;
    CHECK(connect_peer(fb, a.addr, &bad, &unused) != CUDA_SUCCESS, "a wrong secret is refused");
    CHECK(connect_peer(fb, a.addr, &g, &unused) != CUDA_SUCCESS, "a used grant is refused");
    struct grant nobody = get_grant(fa);
    nobody.pid = 1;
    CHECK(connect_peer(fb, a.addr, &nobody, &unused) != CUDA_SUCCESS, "a grant for no session is refused");
    CHECK(h_wait_log(&b, REFUSAL, 3, 5000) == 3, "every bad peer join gets the one refusal (%d of 3)",
          h_server_log_count(&b, REFUSAL));

    /* Lengths beyond an allocation: the source's, the destination's. */
    copy(fa, src, g.link, fb, dst, lb, COPY_BYTES + 1, &ra, &rb);
    CHECK(ra == CUDA_ERROR_INVALID_VALUE && rb == CUDA_ERROR_INVALID_VALUE,
          "a copy past the source's allocation: send %ld, receive %ld", ra, rb);
    copy(fa, src, g.link, fb, small, lb, 2 * MIB, &ra, &rb);
    CHECK(ra == CUDA_SUCCESS && rb == CUDA_ERROR_INVALID_VALUE,
          "a copy past the destination's allocation: send %ld, receive %ld", ra, rb);
    memset(got, 0, 3 * MIB);
    upload(fb, dst, got, 3 * MIB);
    copy(fa, src + 5, g.link, fb, dst, lb, 3 * MIB, &ra, &rb);
    CHECK(ra == CUDA_SUCCESS && rb == CUDA_SUCCESS, "a copy after the refusals: send %ld, receive %ld", ra, rb);
    download(fb, dst, got, 3 * MIB);
    CHECK(h_diff(want + 5, got, 3 * MIB) < 0, "the link is in step after the refusals");

    /* A session keeps a few links and grants, no more. */
    int granted = 0;
    long gr = CUDA_SUCCESS;
    while (granted < 32 && (gr = h_raw_call(fa, OP_scuda_peer_grant, H_RAW_CTX, NULL, 0, NULL, NULL)) == CUDA_SUCCESS)
        granted++;
    CHECK(gr == CUDA_ERROR_TOO_MANY_PEERS && granted < 8, "grants stop at the session's bound: %d more, then %ld",
          granted, gr);

    /* A's session dies while B waits for the copy's bytes. */
    uint32_t sb = send_end(fb, OP_scuda_peer_recv, dst, COPY_BYTES, lb);
    h_sleep_ms(300);
    CHECK(kill((pid_t)g.pid, SIGKILL) == 0);
    t0 = h_now_ms();
    rb = h_raw_call_reply(fb, sb, 20000, NULL, NULL);
    uint64_t waited = h_now_ms() - t0;
    CHECK(rb == CUDA_ERROR_DEVICE_UNAVAILABLE, "B's copy from a dead session: %ld", rb);
    CHECK(waited < 5000, "B's copy failed only after %llu ms", (unsigned long long)waited);

    close(fa);
    close(fb);
    h_server_stop_killed(&a, 1); /* A's session is the one killed above */
    h_server_stop(&b);
    free(want);
    free(got);
    printf("PASS peer_link%s: %llu bytes server to server in %llu ms, %llu bytes through the client\n",
           a.tls ? " (TLS)" : "", (unsigned long long)COPY_BYTES, (unsigned long long)ms, (unsigned long long)crossed);
    return 0;
}
