/* fuzz_frames.c - mutate real request frames and throw them at a server.
 *
 * 1. Record. A client linked against the shim runs a workload that touches
 *    most of the protocol (contexts, streams, events, allocations, every
 *    copy and memset form, module load, launches with parameters, device
 *    printf, errors). It talks to the server through a recording proxy, so
 *    the corpus is exactly the frames the shim builds.
 * 2. Fuzz. For FUZZ_SECONDS (default 20), FUZZ_THREADS connections at a time
 *    (default 2) replay the recording with mutations: bit flips, truncation,
 *    extension, lying header lengths, changed op ids and flags, interesting
 *    values over 8-byte fields, payloads spliced from other frames, frames
 *    dropped and repeated. Requests the shim would wait for are waited for
 *    (briefly), so that later frames meet the state they were recorded in.
 *    Interleaved are synthesized frames for every op, of the payload
 *    lengths a discovery pass found to decode (zeros, probed per op).
 * 3. Judge. No session died from a signal or wrote a sanitizer report
 *    (h_server_stop), the parent still accepts and greets, and a normal
 *    client afterwards passes.
 *
 * When a session dies, the bytes sent on its connection are saved to
 * build/tests/e2e/logs/fuzz_frames.crash-SESSIONPID.*.out, and
 * `fuzz_frames --replay FILE` sends them again after a fresh handshake, to
 * a server of its own.
 *
 * FUZZ_SEED fixes the random seed (printed at the start); FUZZ_MUTATE (default
 * 30) is the most frames per connection mutated, in percent (0: replay the
 * recording unchanged, to check that it replays cleanly). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/wire.h"
#include "harness.h"
#include "workload.h"

/* ---- the corpus ---------------------------------------------------------- */

struct frame {
    struct frame_header h;
    uint8_t *p;
};

#define MAX_FRAMES 4096
static struct frame corpus[MAX_FRAMES];
static int ncorpus;
static size_t corpus_bytes;

/* The proxy: relays one client connection to the server and records the
 * client's frames (after its preface and client_hello; plain TCP only). */
struct proxy {
    int lfd;
    int port;
    const char *server_addr;
    _Atomic int running;
};

static void record(const uint8_t *data, size_t n)
{
    static uint8_t *buf;
    static size_t len, cap;
    static size_t skip = PREFACE_LEN + CLIENT_HELLO_LEN;
    if (len + n > cap) {
        cap = (len + n) * 2;
        buf = realloc(buf, cap);
        CHECK(buf != NULL);
    }
    memcpy(buf + len, data, n);
    len += n;
    size_t off = 0;
    if (skip) {
        size_t k = skip < len ? skip : len;
        off = k;
        skip -= k;
    }
    while (len - off >= FRAME_HEADER_LEN) {
        struct frame_header h;
        frame_header_decode(buf + off, &h);
        if (len - off < FRAME_HEADER_LEN + (size_t)h.length) break;
        /* Keep frames small enough to send many of: bulk beyond 64 KiB is
         * truncated, with its header length adjusted. */
        if (ncorpus < MAX_FRAMES && h.length <= (1u << 16) && corpus_bytes < (64u << 20)) {
            corpus[ncorpus].h = h;
            corpus[ncorpus].p = malloc(h.length + 1);
            CHECK(corpus[ncorpus].p != NULL);
            memcpy(corpus[ncorpus].p, buf + off + FRAME_HEADER_LEN, h.length);
            corpus_bytes += h.length;
            ncorpus++;
        }
        off += FRAME_HEADER_LEN + h.length;
    }
    memmove(buf, buf + off, len - off);
    len -= off;
}

static void *proxy_main(void *arg)
{
    struct proxy *px = arg;
    atomic_store(&px->running, 1);
    int cfd = accept4(px->lfd, NULL, NULL, SOCK_CLOEXEC);
    CHECK(cfd >= 0);
    char err[256];
    int sfd = tcp_connect(px->server_addr, 5000, err, sizeof err);
    CHECK(sfd >= 0, "proxy: %s", err);
    struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    static uint8_t buf[1 << 16];
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[0].revents) {
            ssize_t n = read(cfd, buf, sizeof buf);
            if (n <= 0) break;
            record(buf, (size_t)n);
            if (io_write_full(sfd, buf, (size_t)n) != 0) break;
        }
        if (p[1].revents) {
            ssize_t n = read(sfd, buf, sizeof buf);
            if (n <= 0) break;
            if (io_write_full(cfd, buf, (size_t)n) != 0) break;
        }
    }
    close(cfd);
    close(sfd);
    return NULL;
}

static int recorder_client(void *arg)
{
    (void)arg;
    workload_full(1);
    return 0;
}

static void record_corpus(const char *server_addr)
{
    struct proxy px = {.server_addr = server_addr};
    px.lfd = tcp_listen("127.0.0.1:0", &px.port, (char[256]){0}, 256);
    CHECK(px.lfd >= 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, proxy_main, &px) == 0);
    /* Fork the client only once the thread runs: under ASan a starting
     * thread holds the allocator's lock for a moment, and a child forked
     * then inherits it locked and hangs at its first malloc. */
    while (!atomic_load(&px.running)) h_sleep_ms(1);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", px.port);
    setenv("SCUDA_SERVER", addr, 1);
    h_wait_ok(h_spawn(recorder_client, NULL, 30, -1, -1), 30000, "the recording client");
    setenv("SCUDA_SERVER", server_addr, 1);
    pthread_join(t, NULL);
    close(px.lfd);
    CHECK(ncorpus > 50, "only %d frames recorded", ncorpus);
    int ops_seen = 0;
    static uint8_t seen[65536];
    for (int i = 0; i < ncorpus; i++)
        if (!seen[corpus[i].h.op]++) ops_seen++;
    printf("recorded %d frames (%zu payload bytes) of %d different ops\n", ncorpus, corpus_bytes, ops_seen);
}

/* ---- mutation -------------------------------------------------------------- */

static _Thread_local uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }

static const uint64_t interesting[] = {
    0, 1, 2, 3, 7, 8, 15, 16, 255, 256, 4095, 4096, 65535, 65536, 0x7fffffff, 0x80000000u, 0xffffffffu,
    0x100000000ull, (1ull << 40), 0x7fffffffffffffffull, 0x8000000000000000ull, UINT64_MAX, UINT64_MAX - 1,
    SCUDA_MAX_FRAME, SCUDA_MAX_FRAME + 1ull, SCUDA_CHUNK,
};

/* Mutate f into out (buffer of at least f->h.length + 4096 bytes); returns
 * the payload length to send; *hdr gets the header to send. */
static uint32_t mutate(const struct frame *f, uint8_t *out, struct frame_header *hdr)
{
    *hdr = f->h;
    uint32_t len = f->h.length;
    memcpy(out, f->p, len);
    int rounds = 1 + (int)below(3);
    for (int k = 0; k < rounds; k++) {
        switch (below(12)) {
        case 0: /* flip bits */
        case 1:
            if (len) {
                int flips = 1 + (int)below(8);
                for (int i = 0; i < flips; i++) out[below(len)] ^= (uint8_t)(1u << below(8));
            }
            break;
        case 2: /* truncate */
            if (len) len = below(len);
            break;
        case 3: { /* extend */
            uint32_t extra = 1 + below(64);
            for (uint32_t i = 0; i < extra; i++) out[len + i] = (uint8_t)rnd();
            len += extra;
            break;
        }
        case 4: /* interesting value over an 8-byte field */
        case 5:
            if (len >= 8) {
                uint32_t at = below(len - 7);
                if (below(2)) at &= ~7u; /* aligned: hits fields more often */
                uint64_t v = interesting[below(sizeof interesting / sizeof interesting[0])];
                memcpy(out + at, &v, 8);
            }
            break;
        case 6: /* interesting value over a 4-byte field */
            if (len >= 4) {
                uint32_t v = (uint32_t)interesting[below(sizeof interesting / sizeof interesting[0])];
                memcpy(out + below(len - 3), &v, 4);
            }
            break;
        case 7: /* another op */
            hdr->op = below(4) ? corpus[below((uint32_t)ncorpus)].h.op : (uint16_t)below(OP_COUNT + 8);
            break;
        case 8: /* toggle one-way */
            hdr->flags ^= FRAME_ASYNC;
            break;
        case 9: { /* splice: the tail of another frame */
            const struct frame *g = &corpus[below((uint32_t)ncorpus)];
            uint32_t from = below(g->h.length + 1), at = below(len + 1);
            uint32_t n = g->h.length - from;
            if (n > 4096) n = 4096;
            memcpy(out + at, g->p + from, n);
            len = at + n;
            break;
        }
        case 10: /* context id */
            hdr->ctx = below(2) ? (uint32_t)rnd() : 0;
            break;
        case 11: /* a byte set to an extreme */
            if (len) out[below(len)] = below(2) ? 0xff : 0x00;
            break;
        }
    }
    hdr->length = len;
    return len;
}

/* ---- shapes of the ops the recording does not use ------------------------- */

/* For every op, the payload lengths (up to 128 bytes) at which a payload of
 * zeros decodes: the server answers something other than INVALID_VALUE.
 * Found by asking the server (ctx 0, so that the handler always runs). The
 * fuzzer then synthesizes frames of those shapes with interesting values. */
struct shape {
    uint16_t op;
    uint16_t len;
};
#define MAX_SHAPES 2048
static struct shape shapes[MAX_SHAPES];
static int nshapes;

static void discover_shapes(const char *addr)
{
    int fd = -1, timeouts = 0;
    uint32_t seq = 1u << 30;
    static uint8_t zeros[128];
    uint64_t t0 = h_now_ms();
    /* Pass 0 with zeros; pass 1 with 0x01 bytes (present flags set, odd
     * sizes) for the ops pass 0 found nothing for. */
    static uint8_t has_shape[OP_COUNT];
    for (int pass = 0; pass < 2; pass++)
    for (unsigned op = 1; op < OP_COUNT && nshapes < MAX_SHAPES; op++) {
        if (has_shape[op]) continue;
        memset(zeros, pass, sizeof zeros);
        if (fd < 0) {
            uint32_t status;
            fd = h_raw_connect(addr, NULL, &status);
            CHECK(fd >= 0, "discovery: handshake failed (status %u)", status);
        }
        uint32_t first = seq;
        int ok = 1;
        for (uint32_t len = 0; len <= sizeof zeros && ok; len++)
            ok = h_raw_send(fd, (uint16_t)op, 0, seq++, 0, zeros, len) == 0;
        int found = 0, answered = 0;
        while (ok && answered <= (int)sizeof zeros) {
            uint8_t hdr[FRAME_HEADER_LEN];
            if (io_read_full_timeout(fd, hdr, sizeof hdr, 500) != 0) { ok = 0; break; }
            struct frame_header h;
            frame_header_decode(hdr, &h);
            uint8_t body[4096];
            uint32_t r = CUDA_ERROR_INVALID_VALUE, left = h.length;
            for (int k = 0; left > 0; k++) {
                uint32_t n = left < sizeof body ? left : (uint32_t)sizeof body;
                if (io_read_full_timeout(fd, body, n, 500) != 0) { ok = 0; break; }
                if (k == 0 && n >= 4) memcpy(&r, body, 4);
                left -= n;
            }
            if (!ok || !(h.flags & FRAME_REPLY)) continue;
            answered++;
            if (r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED && found < 4 && nshapes < MAX_SHAPES) {
                shapes[nshapes].op = (uint16_t)op;
                shapes[nshapes].len = (uint16_t)(h.seq - first);
                nshapes++;
                found++;
                has_shape[op] = 1;
            }
        }
        if (!ok) { /* a call that does not return: start a new session */
            close(fd);
            fd = -1;
            if (++timeouts > 20) break;
        }
    }
    if (fd >= 0) close(fd);
    printf("discovered %d payload shapes over %d ops in %llu ms (%d sessions stuck)\n", nshapes, OP_COUNT - 1,
           (unsigned long long)(h_now_ms() - t0), timeouts);
}

/* A frame of a discovered shape, full of values chosen to hurt. */
static uint32_t synthesize(uint8_t *out, struct frame_header *h)
{
    const struct shape *sh = &shapes[below((uint32_t)nshapes)];
    memset(h, 0, sizeof *h);
    h->op = sh->op;
    h->flags = below(3) ? 0 : FRAME_ASYNC;
    h->seq = (uint32_t)rnd();
    h->ctx = corpus[0].h.ctx ? corpus[below((uint32_t)ncorpus)].h.ctx : 0;
    uint32_t len = sh->len;
    memset(out, 0, len);
    for (uint32_t at = 0; at < len;) {
        switch (below(6)) {
        case 0: at += 1 + below(8); break; /* zeros */
        case 1: out[at++] = (uint8_t)(below(2) ? 1 : rnd()); break;
        case 2: case 3: {
            uint64_t v = interesting[below(sizeof interesting / sizeof interesting[0])];
            size_t n = len - at < 8 ? len - at : 8;
            memcpy(out + at, &v, n);
            at += (uint32_t)n;
            break;
        }
        case 4: { /* a value from a recorded frame: a real handle or pointer */
            const struct frame *g = &corpus[below((uint32_t)ncorpus)];
            if (g->h.length >= 8) {
                size_t n = len - at < 8 ? len - at : 8;
                memcpy(out + at, g->p + (below(g->h.length - 7) & ~7u), n);
                at += (uint32_t)n;
            } else {
                at++;
            }
            break;
        }
        default: out[at++] = (uint8_t)rnd(); break;
        }
    }
    h->length = len;
    return len;
}

/* ---- connections ------------------------------------------------------------ */

struct trace {
    int port;          /* our local port: names the session in the server log */
    uint8_t *bytes;    /* everything sent after the handshake */
    size_t len, cap;
};

#define TRACE_KEEP 256
static struct trace traces[TRACE_KEEP];
static atomic_uint trace_next;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;

static void trace_add(struct trace *t, const void *p, size_t n)
{
    if (t->len + n > (8u << 20)) return; /* keep the first 8 MiB */
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2;
        t->bytes = realloc(t->bytes, t->cap);
        CHECK(t->bytes != NULL);
    }
    memcpy(t->bytes + t->len, p, n);
    t->len += n;
}

/* The server's side of one connection, parsed just enough to know which
 * requests have been answered. */
struct rx {
    uint8_t hdr[FRAME_HEADER_LEN];
    size_t hdr_got;
    uint64_t body_left;
    uint32_t replied[64]; /* recent reply seqs */
    unsigned nreplied;
};

static void drain(int fd, struct rx *rx)
{
    static _Thread_local uint8_t sink[1 << 16];
    for (;;) {
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n <= 0) return;
        for (size_t i = 0; i < (size_t)n;) {
            if (rx->body_left) {
                size_t k = (size_t)n - i < rx->body_left ? (size_t)n - i : (size_t)rx->body_left;
                rx->body_left -= k;
                i += k;
                continue;
            }
            rx->hdr[rx->hdr_got++] = sink[i++];
            if (rx->hdr_got == FRAME_HEADER_LEN) {
                struct frame_header h;
                frame_header_decode(rx->hdr, &h);
                rx->hdr_got = 0;
                rx->body_left = h.length;
                if (h.flags & FRAME_REPLY) rx->replied[rx->nreplied++ % 64] = h.seq;
            }
        }
    }
}

static int replied(const struct rx *rx, uint32_t seq)
{
    for (unsigned i = 0; i < 64 && i < rx->nreplied; i++)
        if (rx->replied[i] == seq) return 1;
    return 0;
}

/* Wait (at most timeout_ms) for the reply to seq, as the shim would. */
static int await_reply(int fd, struct rx *rx, uint32_t seq, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        drain(fd, rx);
        if (replied(rx, seq)) return 1;
        int left = (int)(deadline - h_now_ms());
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) > 0 && (p.revents & (POLLERR | POLLHUP))) return 0;
    }
}

/* Send all of buf, draining replies meanwhile; gives up after 2 s of no
 * progress (the session may be busy in a long call). */
static int send_all(int fd, const uint8_t *buf, size_t n, struct rx *rx)
{
    uint64_t stall = h_now_ms() + 2000;
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            buf += w;
            n -= (size_t)w;
            stall = h_now_ms() + 2000;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        drain(fd, rx);
        if (h_now_ms() > stall) return -1;
        struct pollfd p = {.fd = fd, .events = POLLOUT | POLLIN};
        poll(&p, 1, 20);
    }
    return 0;
}

static atomic_ullong stat_conns, stat_frames, stat_mutated, stat_synth, stat_refused;
static const char *server_addr;
static const char *argv0 = "fuzz_frames";
static uint32_t max_rate = 30; /* FUZZ_MUTATE: most frames mutated, percent */
static uint64_t deadline_ms;

static void one_connection(void)
{
    uint32_t status;
    int fd = h_raw_connect(server_addr, NULL, &status);
    if (fd < 0) {
        atomic_fetch_add(&stat_refused, 1);
        h_sleep_ms(50);
        return;
    }
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &ml);
    unsigned slot = atomic_fetch_add(&trace_next, 1) % TRACE_KEEP;
    pthread_mutex_lock(&trace_lock);
    struct trace *t = &traces[slot];
    t->port = ntohs(me.sin_port);
    t->len = 0;
    pthread_mutex_unlock(&trace_lock);

    /* How wild this connection is: some stay close to the recording so that
     * mutations land in a session with real state. */
    uint32_t rate = max_rate ? 1 + below(max_rate) : 0; /* percent of frames mutated */
    struct rx rx;
    memset(&rx, 0, sizeof rx);
    int in_step = 1;
    uint64_t conn_deadline = h_now_ms() + 3000;
    uint8_t *buf = malloc((1u << 16) + 8192 + FRAME_HEADER_LEN);
    CHECK(buf != NULL);
    for (int i = 0; i < ncorpus && h_now_ms() < deadline_ms; i++) {
        const struct frame *f = &corpus[i];
        struct frame_header h = f->h;
        uint32_t len = f->h.length;
        uint8_t *payload = f->p;
        uint32_t roll = max_rate ? below(100) : 100;
        if (roll < 2) continue; /* dropped */
        if (roll >= 2 + rate && roll < 2 + rate + rate / 3 && nshapes) {
            len = synthesize(buf + FRAME_HEADER_LEN, &h);
            payload = buf + FRAME_HEADER_LEN;
            atomic_fetch_add(&stat_synth, 1);
            i--; /* an extra frame: the recorded one still follows */
        } else if (roll < 2 + rate) {
            len = mutate(f, buf + FRAME_HEADER_LEN, &h);
            payload = buf + FRAME_HEADER_LEN;
            atomic_fetch_add(&stat_mutated, 1);
            if (below(40) == 0) h.length = (uint32_t)(h.length + below(64)) - 32; /* a lying header */
        }
        if (payload != buf + FRAME_HEADER_LEN) memcpy(buf + FRAME_HEADER_LEN, payload, len);
        frame_header_encode(&h, buf);
        trace_add(t, buf, FRAME_HEADER_LEN + len);
        if (send_all(fd, buf, FRAME_HEADER_LEN + len, &rx) != 0) break;
        atomic_fetch_add(&stat_frames, 1);
        /* A request the shim would wait for: wait for it too, so that the
         * frames after it meet the state they were recorded in. */
        if (!(h.flags & FRAME_ASYNC) && in_step) {
            /* Once one reply is late (a mutation made the session busy or
             * desynchronized the stream), stop waiting: just send. */
            in_step = await_reply(fd, &rx, h.seq, payload == f->p ? 300 : 20) || payload != f->p;
        }
        if (h_now_ms() > conn_deadline) break;
        if (max_rate && below(100) == 0) i -= (int)below(10); /* repeat a few */
        if (i < -1) i = -1;
        drain(fd, &rx);
    }
    free(buf);
    close(fd);
    atomic_fetch_add(&stat_conns, 1);
}

static void *fuzz_thread(void *arg)
{
    rng = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    while (h_now_ms() < deadline_ms) one_connection();
    return NULL;
}

/* A session died: save what its connection sent, for --replay. */
static void save_crash_traces(const struct h_server *s)
{
    char *log = h_server_log(s);
    static const char key[] = "died from signal";
    for (char *p = log; (p = strstr(p, key)); p += sizeof key) {
        /* "... session PID died from signal N" */
        char *line = p;
        while (line > log && line[-1] != '\n') line--;
        char *sp = strstr(line, "session ");
        if (!sp || sp > p) continue;
        int pid = atoi(sp + 8);
        /* find "127.0.0.1:PORT: session PID\n" */
        char needle[64];
        snprintf(needle, sizeof needle, ": session %d\n", pid);
        char *start = strstr(log, needle);
        if (!start) continue;
        char *colon = start;
        while (colon > log && colon[-1] != ':') colon--;
        int port = atoi(colon);
        for (int i = 0; i < TRACE_KEEP; i++) {
            if (traces[i].port != port || !traces[i].len) continue;
            char path[512], tag[32];
            snprintf(tag, sizeof tag, "crash-%d", pid);
            int fd = h_temp_file(tag, path, sizeof path);
            CHECK(write(fd, traces[i].bytes, traces[i].len) == (ssize_t)traces[i].len);
            close(fd);
            fprintf(stderr, "session %d (port %d) died; its %zu bytes are in %s\n"
                            "replay: %s --replay %s\n", pid, port, traces[i].len, path, argv0, path);
        }
    }
    free(log);
}

static int good_client(void *arg)
{
    (void)arg;
    workload_check();
    return 0;
}

static int replay(const char *path)
{
    h_begin("fuzz_replay", 60);
    struct h_server srv;
    h_server_start(&srv, "replay", NULL);
    size_t len;
    char *bytes = h_read_file(path, &len);
    CHECK(len > 0, "cannot read %s", path);
    uint32_t status;
    int fd = h_raw_connect(srv.addr, NULL, &status);
    CHECK(fd >= 0);
    struct rx rx;
    memset(&rx, 0, sizeof rx);
    (void)send_all(fd, (const uint8_t *)bytes, len, &rx);
    h_sleep_ms(2000);
    close(fd);
    h_sleep_ms(500);
    h_server_stop(&srv);
    printf("replay of %zu bytes: no session died\n", len);
    return 0;
}

/* ---- seeds for the libFuzzer targets --------------------------------------- */

static void write_file(const char *dir, const char *name, const struct frame *from, int n)
{
    char path[1024];
    int len = snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(len > 0 && (size_t)len < sizeof path, "path too long: %s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    for (int i = 0; i < n; i++) {
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_header_encode(&from[i].h, hdr);
        CHECK(fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr && fwrite(from[i].p, 1, from[i].h.length, f) == from[i].h.length);
    }
    CHECK(fclose(f) == 0);
}

/* --write-corpus DIR: the recording, as inputs of the libFuzzer session
 * target (DIR/session: the stream's first frames, which make the context,
 * then a window of the rest, at most 64 KiB each) and of the decode
 * target (DIR/frames: one frame each, make_corpus.sh turns them into
 * decoder inputs). The seed corpus in tests/fuzz/corpus/ is made this way. */
#define SEED_PROLOGUE 16
#define SEED_WINDOW 24
static int write_corpus(const char *dir)
{
    h_begin("fuzz_frames", 120);
    struct h_server srv;
    h_server_start(&srv, "corpus", NULL);
    record_corpus(srv.addr);
    h_server_stop(&srv);
    char sub[512];
    snprintf(sub, sizeof sub, "%s/session", dir);
    mkdir(sub, 0755);
    int files = 0;
    static struct frame seed[SEED_PROLOGUE + SEED_WINDOW];
    for (int at = SEED_PROLOGUE; at < ncorpus; at += SEED_WINDOW / 2) {
        int n = 0;
        size_t bytes = 0;
        for (int i = 0; i < SEED_PROLOGUE + SEED_WINDOW; i++) {
            int k = i < SEED_PROLOGUE ? i : at + i - SEED_PROLOGUE;
            if (k >= ncorpus || bytes + FRAME_HEADER_LEN + corpus[k].h.length > (64u << 10)) break;
            bytes += FRAME_HEADER_LEN + corpus[k].h.length;
            seed[n++] = corpus[k];
        }
        char name[64];
        snprintf(name, sizeof name, "recorded-%04d", files++);
        write_file(sub, name, seed, n);
    }
    snprintf(sub, sizeof sub, "%s/frames", dir);
    mkdir(sub, 0755);
    for (int i = 0; i < ncorpus; i++) {
        if (corpus[i].h.length > (64u << 10)) continue;
        char name[64];
        snprintf(name, sizeof name, "frame-%04d-op%u", i, corpus[i].h.op);
        write_file(sub, name, &corpus[i], 1);
    }
    printf("wrote %d session seeds and %d frames under %s\n", files, ncorpus, dir);
    return 0;
}

int main(int argc, char **argv)
{
    argv0 = argv[0];
    if (argc == 3 && strcmp(argv[1], "--replay") == 0) return replay(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    const char *env = getenv("FUZZ_SECONDS");
    unsigned seconds = env ? (unsigned)atoi(env) : 20;
    env = getenv("FUZZ_THREADS");
    int nthreads = env ? atoi(env) : 2;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 16) nthreads = 16;
    env = getenv("FUZZ_MUTATE");
    if (env) max_rate = (uint32_t)atoi(env) > 100 ? 100 : (uint32_t)atoi(env);
    env = getenv("FUZZ_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    h_begin("fuzz_frames", seconds + 60);
    printf("fuzz_frames: %u s, %d connections at a time, FUZZ_SEED=%llu\n", seconds, nthreads,
           (unsigned long long)seed);

    struct h_server srv;
    /* Connections that replay a client's opening and vanish would each
     * hold a session --resume-within seconds, waiting for a resume. */
    struct h_server_opts opt = {.extra_args = {"--max-sessions", "64", "--resume-within", "0"}};
    h_server_start(&srv, "main", &opt);
    server_addr = srv.addr;
    record_corpus(srv.addr);
    if (max_rate) discover_shapes(srv.addr);

    deadline_ms = h_now_ms() + seconds * 1000ull;
    pthread_t t[16];
    for (int i = 0; i < nthreads; i++)
        CHECK(pthread_create(&t[i], NULL, fuzz_thread, (void *)(uintptr_t)(seed + (uint64_t)i)) == 0);
    for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
    printf("sent %llu frames (%llu mutated, %llu synthesized) on %llu connections; %llu handshakes refused\n",
           (unsigned long long)stat_frames, (unsigned long long)stat_mutated, (unsigned long long)stat_synth,
           (unsigned long long)stat_conns, (unsigned long long)stat_refused);

    /* Sessions end when their connection closes; give them a moment. */
    h_sleep_ms(1000);
    if (h_server_log_count(&srv, "died from signal")) save_crash_traces(&srv);

    /* The parent still greets, and a normal client works. */
    uint32_t status;
    int fd = h_raw_connect(srv.addr, NULL, &status);
    CHECK(fd >= 0, "the server no longer completes a handshake (status %u)", status);
    close(fd);
    h_wait_ok(h_spawn(good_client, NULL, 30, -1, -1), 30000, "a normal client after fuzzing");
    h_server_stop(&srv);
    printf("PASS fuzz_frames\n");
    return 0;
}
