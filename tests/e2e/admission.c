/* admission.c - handshakes run in the server parent, bounded, with one
 * deadline from accept (docs/operate.md, "Admission and tokens").
 *
 * flood:      200 silent connections from 127.0.0.2, 8 stalled right
 *             after their preface (over TLS: inside their TLS handshake)
 *             from 127.0.0.4, and one that drips a byte every 4 s from
 *             127.0.0.3; a client from 127.0.0.1 still gets a working
 *             session within 1 s, and the drip and the stalled ones are
 *             cut at the 5 s deadline, not held by their bytes.
 * per_source: the 9th connection from one address (after the grace)
 *             drops that address's oldest, and nobody else's.
 * global:     at --max-handshakes, the source holding the most loses
 *             its oldest; a lone connection from another address stays.
 * idle:       with nothing to do (no handshake, no --metrics), the parent
 *             sleeps in poll(): under 0.2 s of CPU in 2 s. It once spun on
 *             a zero timeout, taking a whole core from the sessions.
 *
 * With E2E_TLS=1 (ctest e2e/admission_tls) the server requires TLS: the
 * parent runs every TLS handshake too, without waiting on any client. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hello.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "harness.h"

/* A TCP connection to srv from source address `src` (any 127/8 address
 * is this machine's). Returns the fd. */
static int connect_from(const char *src, const struct h_server *srv)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET};
    CHECK(inet_pton(AF_INET, src, &a.sin_addr) == 1);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", src, strerror(errno));
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    CHECK(connect(fd, (struct sockaddr *)&to, sizeof to) == 0, "connect from %s: %s", src, strerror(errno));
    return fd;
}

/* The preface (and TLS, for a TLS server), then the server's greeting:
 * the connection is then a pending handshake. */
static void read_greeting(int fd, const struct h_server *srv)
{
    h_transport(fd, srv, PREFACE_SESSION);
    uint8_t nonce[SCUDA_NONCE_LEN];
    char err[256];
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "no greeting: %s", err);
}

/* 1 when the server has closed fd (EOF or reset), 0 while it is open. */
static int closed_now(int fd)
{
    char c;
    ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* A connection that sends its preface and stops: over TLS, after the
 * first 5 bytes of a ClientHello record, so the server's TLS handshake
 * waits for the rest. */
static int stalled_from(const char *src, const struct h_server *srv)
{
    int fd = connect_from(src, srv);
    uint8_t pre[PREFACE_LEN], answer[PREFACE_LEN];
    preface_encode(pre, srv->tls ? PREFACE_TLS : PREFACE_PLAIN, PREFACE_SESSION);
    CHECK(write(fd, pre, sizeof pre) == (ssize_t)sizeof pre);
    CHECK(io_read_full_timeout(fd, answer, sizeof answer, 5000) == 0, "no answer to the preface");
    CHECK(preface_answer_decode(answer) == PREFACE_OK);
    static const uint8_t record_start[5] = {0x16, 0x03, 0x01, 0x02, 0x00}; /* a 512-byte handshake record */
    if (srv->tls) CHECK(write(fd, record_start, sizeof record_start) == (ssize_t)sizeof record_start);
    return fd;
}

/* The server's log files for `base`: apart for the TLS run, which may run
 * beside the plain one. */
static const char *tag(const char *base)
{
    static char buf[4][64];
    static int next;
    const char *tls = getenv("E2E_TLS");
    char *out = buf[next++ % 4];
    snprintf(out, sizeof buf[0], "%s%s", base, tls && strcmp(tls, "1") == 0 ? "-tls" : "");
    return out;
}

static int real_client(void *arg)
{
    (void)arg;
    uint64_t t0 = h_now_ms();
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 1024));
    CU(cuMemsetD32_v2(d, 0x5eed, 256));
    uint32_t v[256];
    CU(cuMemcpyDtoH_v2(v, d, sizeof v));
    uint64_t took = h_now_ms() - t0;
    for (int i = 0; i < 256; i++) CHECK(v[i] == 0x5eed, "word %d: %#x", i, v[i]);
    CHECK(took <= 1000, "a real client needed %llu ms next to a flood of silent connections",
          (unsigned long long)took);
    printf("the real client worked after %llu ms\n", (unsigned long long)took);
    return 0;
}

#define FLOOD 200

static void flood(void)
{
    struct h_server srv;
    h_server_start(&srv, tag("flood"), NULL);
    static int mute[FLOOD];
    for (int i = 0; i < FLOOD; i++) mute[i] = connect_from("127.0.0.2", &srv);
    int stalled[8];
    for (int i = 0; i < 8; i++) stalled[i] = stalled_from("127.0.0.4", &srv);
    int drip = connect_from("127.0.0.3", &srv);
    uint64_t drip_start = h_now_ms();
    read_greeting(drip, &srv);
    CHECK(io_write_full(drip, "S", 1) == 0); /* over TLS, a record of its own */
    h_wait_ok(h_spawn(real_client, NULL, 20, -1, -1), 20000, "a real client next to 200 silent connections");

    /* The drip: one byte every 4 s keeps no handshake alive past 5 s. */
    uint64_t closed_at = 0;
    while (!closed_at && h_now_ms() - drip_start < 12000) {
        uint64_t next = h_now_ms() + 4000 - (h_now_ms() - drip_start) % 4000;
        while (!closed_at && h_now_ms() < next) {
            struct pollfd p = {.fd = drip, .events = POLLIN};
            if (poll(&p, 1, 50) > 0 && closed_now(drip)) closed_at = h_now_ms();
        }
        if (!closed_at && io_write_full(drip, "C", 1) != 0) closed_at = h_now_ms();
    }
    uint64_t held = closed_at ? closed_at - drip_start : 0;
    CHECK(closed_at && held >= 4500 && held <= 7500,
          "a connection dripping a byte every 4 s was %s after %llu ms; the deadline is 5 s from accept",
          closed_at ? "closed" : "still open", (unsigned long long)(h_now_ms() - drip_start));
    printf("ok the drip was cut after %llu ms\n", (unsigned long long)held);
    CHECK(h_wait_log(&srv, "no handshake within 5000 ms", 1, 10000) >= 1, "the server did not log the deadline");
    /* Accepted before the drip, so past their deadline by now. */
    for (int i = 0; i < 8; i++)
        CHECK(h_raw_closed_within(stalled[i], 1000), "a connection stalled %s was still open after the deadline",
              srv.tls ? "in its TLS handshake" : "after its preface");
    printf("ok connections stalled %s were cut at the deadline\n", srv.tls ? "in their TLS handshake" : "after the preface");
    for (int i = 0; i < 8; i++) close(stalled[i]);
    for (int i = 0; i < FLOOD; i++) close(mute[i]);
    io_close(drip);
    h_server_stop(&srv);
    printf("ok 200 silent connections from one address cost a real client nothing\n");
}

static void per_source(void)
{
    struct h_server srv;
    h_server_start(&srv, tag("per-source"), NULL);
    int flood[9], other = connect_from("127.0.0.3", &srv);
    read_greeting(other, &srv);
    for (int i = 0; i < 8; i++) {
        flood[i] = connect_from("127.0.0.2", &srv);
        read_greeting(flood[i], &srv);
    }
    h_sleep_ms(1300); /* past the grace: these are stale now */
    flood[8] = connect_from("127.0.0.2", &srv);
    read_greeting(flood[8], &srv);
    CHECK(h_raw_closed_within(flood[0], 2000), "the 9th connection from 127.0.0.2 did not drop its oldest");
    for (int i = 1; i < 9; i++) CHECK(!closed_now(flood[i]), "127.0.0.2's connection %d was dropped too", i);
    CHECK(!closed_now(other), "a connection from 127.0.0.3 was dropped for 127.0.0.2's flood");
    CHECK(h_wait_log(&srv, "--max-handshakes-per-source reached", 1, 10000) >= 1, "the drop was not logged");
    for (int i = 0; i < 9; i++) io_close(flood[i]);
    io_close(other);
    h_server_stop(&srv);
    printf("ok the per-source bound drops the flooder's oldest, not others\n");
}

static void global(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--max-handshakes", "10", "--max-handshakes-per-source", "100"}};
    h_server_start(&srv, tag("global"), &opt);
    int many[9], lone, late;
    for (int i = 0; i < 9; i++) {
        many[i] = connect_from("127.0.0.2", &srv);
        read_greeting(many[i], &srv);
    }
    lone = connect_from("127.0.0.3", &srv);
    read_greeting(lone, &srv);
    late = connect_from("127.0.0.4", &srv);
    read_greeting(late, &srv);
    CHECK(h_raw_closed_within(many[0], 2000), "at --max-handshakes, the biggest source kept its oldest");
    CHECK(!closed_now(lone), "at --max-handshakes, a lone connection from another address was dropped");
    CHECK(!closed_now(late) && !closed_now(many[1]), "more than one handshake was dropped");
    for (int i = 0; i < 9; i++) io_close(many[i]);
    io_close(lone);
    io_close(late);
    h_server_stop(&srv);
    printf("ok at --max-handshakes the source holding the most loses its oldest\n");
}

/* CPU seconds the process has used (user + system), from /proc. */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the name may hold spaces */
    CHECK(p != NULL, "%s: no ')'", path);
    unsigned long long utime = 0, stime = 0;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
    CHECK(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) == 2,
          "%s: unreadable", path);
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

static void idle(void)
{
    struct h_server srv;
    h_server_start(&srv, tag("idle"), NULL);
    double before = cpu_seconds(srv.pid);
    usleep(2000 * 1000);
    double used = cpu_seconds(srv.pid) - before;
    CHECK(used < 0.2, "the idle server's parent used %.2f s of CPU in 2 s (a busy loop)", used);
    h_server_stop(&srv);
    printf("ok an idle server's parent used %.2f s of CPU in 2 s\n", used);
}

int main(void)
{
    h_begin("admission", 60);
    idle();
    per_source();
    global();
    flood();
    printf("PASS admission\n");
    return 0;
}
