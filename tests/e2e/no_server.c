/* no_server.c - SCUDA_SERVER names an address where no server answers.
 *
 * cuInit must fail with CUDA_ERROR_NO_DEVICE within a bounded time and say
 * on stderr which address it tried; later calls fail the same way instead
 * of crashing or hanging. Cases: a closed port (connection refused), a
 * malformed address, a port that accepts TCP connections but never speaks
 * (the greeting times out), and fake servers that answer wrongly: another
 * protocol version, not SCUDA at all, a welcome with garbage session info,
 * a welcome that claims 4 GiB. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hello.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "harness.h"

struct client_arg {
    char addr[64];
    unsigned limit_ms;
};

static int client(void *p)
{
    const struct client_arg *a = p;
    setenv("SCUDA_SERVER", a->addr, 1);
    uint64_t t0 = h_now_ms();
    CUresult r = cuInit(0);
    uint64_t took = h_now_ms() - t0;
    CHECK(r == CUDA_ERROR_NO_DEVICE, "cuInit returned %s", h_cu_name(r));
    CHECK(took <= a->limit_ms, "cuInit took %llu ms (limit %u)", (unsigned long long)took, a->limit_ms);
    /* Everything after fails the same way, at once. */
    CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuInit(0));
    CUdeviceptr d;
    CUresult m = cuMemAlloc_v2(&d, 16);
    CHECK(m != CUDA_SUCCESS, "cuMemAlloc succeeded without a server");
    int count = -1;
    CUresult c = cuDeviceGetCount(&count);
    CHECK(c != CUDA_SUCCESS || count == 0, "cuDeviceGetCount: %s, count %d", h_cu_name(c), count);
    fprintf(stdout, "cuInit failed in %llu ms\n", (unsigned long long)took);
    return 0;
}

/* Runs the client against addr; its stderr must mention `mention`. */
static void run_case(const char *addr, unsigned limit_ms, const char *mention, const char *tag)
{
    struct client_arg a;
    snprintf(a.addr, sizeof a.addr, "%s", addr);
    a.limit_ms = limit_ms;
    char err_path[512];
    int err_fd = h_temp_file(tag, err_path, sizeof err_path);
    pid_t pid = h_spawn(client, &a, limit_ms / 1000 + 5, -1, err_fd);
    close(err_fd);
    h_wait_ok(pid, (int)limit_ms + 5000, tag);
    char *err = h_read_file(err_path, NULL);
    CHECK(strstr(err, mention) != NULL, "%s: stderr does not mention \"%s\":\n%s", tag, mention, err);
    printf("ok %s: NO_DEVICE within %u ms; stderr: %s", tag, limit_ms, err);
    free(err);
}

static int bound_port(int *fd_out, int do_listen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    if (do_listen) CHECK(listen(fd, 8) == 0);
    socklen_t len = sizeof sa;
    CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    *fd_out = fd;
    return ntohs(sa.sin_port);
}

/* ---- servers that answer, but wrongly ------------------------------------ */

enum fake { FAKE_VERSION, FAKE_MAGIC, FAKE_BAD_INFO, FAKE_HUGE_WELCOME };

struct fake_server {
    int lfd;
    enum fake mode;
};

/* A server_hello the client must refuse: another version, or not SCUDA's
 * magic. Built by hand: hello.c writes only good ones. */
static void send_bad_server_hello(int fd, enum fake mode)
{
    uint8_t hello[SERVER_HELLO_LEN] = {0};
    uint32_t magic = mode == FAKE_MAGIC ? 0x50545448u /* "HTTP" */ : SCUDA_MAGIC;
    uint16_t version = mode == FAKE_VERSION ? 99 : SCUDA_PROTOCOL_VERSION;
    memcpy(hello, &magic, 4);
    memcpy(hello + 4, &version, 2);
    (void)io_write_full(fd, hello, sizeof hello);
}

/* Welcome OK, then a session info that is garbage, or a length of almost
 * 4 GiB. By hand too: the point is a welcome hello.c would never send. */
static void send_bad_welcome(int fd, enum fake mode)
{
    uint8_t w[8 + 64];
    uint32_t status = 0, len = mode == FAKE_HUGE_WELCOME ? 0xfffffff0u : 64;
    memcpy(w, &status, 4);
    memcpy(w + 4, &len, 4);
    memset(w + 8, 0xff, 64);
    w[8] = 0; /* message: absent */
    (void)io_write_full(fd, w, sizeof w);
}

static int fake_main(void *arg)
{
    struct fake_server *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    if (fd < 0) return 1;
    if (f->mode == FAKE_VERSION || f->mode == FAKE_MAGIC) {
        send_bad_server_hello(fd, f->mode);
    } else {
        /* A good greeting, so that the client goes on to the welcome. */
        uint8_t nonce[SCUDA_NONCE_LEN];
        struct client_hello ch;
        if (hello_send_server(fd, 0, nonce) == 0 && hello_read_client(fd, 5000, &ch) == 0)
            send_bad_welcome(fd, f->mode);
    }
    h_sleep_ms(1500);
    close(fd);
    return 0;
}

static void fake_case(enum fake mode, const char *mention, const char *tag)
{
    struct fake_server f = {.mode = mode};
    int port = bound_port(&f.lfd, 1);
    /* A process, not a thread: the client is forked from this one, and a
     * fork of a threaded process is unsafe (ASan's allocator lock, and
     * ThreadSanitizer refuses the child's threads). */
    pid_t fake = h_spawn(fake_main, &f, 10, -1, -1);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    run_case(addr, 3000, mention, tag);
    h_wait_ok(fake, 10000, "the fake server");
    close(f.lfd);
}

int main(void)
{
    h_begin("no_server", 25);
    unsetenv("SCUDA_TOKEN");

    /* A port that was free a moment ago: bound (so nobody else takes it)
     * but not listening, so connections are refused. */
    int closed_fd;
    int port = bound_port(&closed_fd, 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    run_case(addr, 5000, addr, "refused");
    close(closed_fd);

    run_case("127.0.0.1:notaport", 5000, "127.0.0.1:notaport", "malformed");

    /* Accepts (the kernel completes the handshake from the backlog) but
     * never sends the server hello. */
    int mute_fd;
    port = bound_port(&mute_fd, 1);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    run_case(addr, 8000, addr, "mute");
    close(mute_fd);

    /* Something answers, but not a usable SCUDA server. */
    fake_case(FAKE_VERSION, "protocol", "other protocol version");
    fake_case(FAKE_MAGIC, "not a SCUDA server", "not a SCUDA server");
    fake_case(FAKE_BAD_INFO, "127.0.0.1", "garbage session info");
    fake_case(FAKE_HUGE_WELCOME, "127.0.0.1", "4 GiB welcome");

    printf("PASS no_server\n");
    return 0;
}
