/* version_skew.c - a client and a server whose op sets differ (opset.h).
 *
 * The test builds honour SCUDA_TEST_OPSET (opset.c): a process that sets
 * it claims one driver op fewer ("older"), one more ("newer"), or another
 * last op ("diverged"), as a build of other code would. Then:
 *   - a server older than the client refuses it at connect, and the client
 *     refuses that server by itself before any proof: both logs name both
 *     versions and say to upgrade the server;
 *   - a newer client is refused by the server's own check (a raw hello
 *     that skips the client's judgement);
 *   - diverged registries are refused on both sides ("different op
 *     registries");
 *   - an older client is served: its ops are a prefix of the server's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dial.h"
#include "common/hello.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/version.h"
#include "harness.h"

/* A shim client in a child: cuInit, a copy round trip. Exits 10 when
 * cuInit is refused. */
static int client(void *skew)
{
    if (skew) setenv("SCUDA_TEST_OPSET", skew, 1);
    else unsetenv("SCUDA_TEST_OPSET");
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS) {
        printf("cuInit: %s\n", h_cu_name(r));
        return 10;
    }
    h_cuda_setup();
    h_copy_round_trip(7);
    return 0;
}

/* Run client(skew) against the current SCUDA_SERVER; returns its exit
 * status and its stderr (malloc'd). */
static int run_client(const char *skew, const char *tag, char **err)
{
    char path[512];
    int fd = h_temp_file(tag, path, sizeof path);
    pid_t pid = h_spawn(client, (void *)skew, 30, -1, fd);
    close(fd);
    int st = h_wait(pid, 30000);
    *err = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st), "%s: the client hung or crashed; stderr:\n%s", tag, *err);
    return WEXITSTATUS(st);
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* Both versions in one message: the version string twice (both builds
 * are this one's) and both op counts. */
static void names_both(const char *msg, const char *counts_a, const char *counts_b, const char *what)
{
    CHECK(count_of(msg, "SCUDA " SCUDA_VERSION_STRING) >= 2, "%s: both versions not named:\n%s", what, msg);
    CHECK(strstr(msg, counts_a) && strstr(msg, counts_b), "%s: both op sets (%s, %s) not named:\n%s", what,
          counts_a, counts_b, msg);
}

static void counts(int driver_delta, char *out, size_t outlen)
{
    struct scuda_opset self;
    unsetenv("SCUDA_TEST_OPSET");
    opset_self(&self);
    snprintf(out, outlen, "ops %u+%u", self.driver_ops + driver_delta, (unsigned)self.nvml_ops);
}

static void older_server(void)
{
    char mine[64], older[64];
    counts(0, mine, sizeof mine);
    counts(-1, older, sizeof older);
    struct h_server srv;
    setenv("SCUDA_TEST_OPSET", "older", 1); /* inherited by the server alone */
    h_server_start(&srv, "older", NULL);
    unsetenv("SCUDA_TEST_OPSET");

    /* The client's own judgement, before the welcome: -2 from the hello. */
    char err[512];
    int fd = dial(srv.addr, 5000, PREFACE_SESSION, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    uint8_t nonce[SCUDA_NONCE_LEN];
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == -2, "an older server was not refused: %s", err);
    names_both(err, mine, older, "the client's refusal");
    CHECK(strstr(err, "upgrade the server"), "the refusal does not say what to upgrade: %s", err);
    io_close(fd);

    /* Through the shim: cuInit fails, its log says why. */
    char *cerr;
    int st = run_client(NULL, "older_server", &cerr);
    CHECK(st == 10, "a client of an older server was not refused (status %d); stderr:\n%s", st, cerr);
    names_both(cerr, mine, older, "the shim's log");
    CHECK(strstr(cerr, "upgrade the server"), "the shim's log does not say what to upgrade:\n%s", cerr);
    free(cerr);

    /* The server refused both too, and said why. */
    uint64_t until = h_now_ms() + 5000;
    while (h_server_log_count(&srv, "lacks calls") < 2 && h_now_ms() < until) h_sleep_ms(20);
    char *log = h_server_log(&srv);
    CHECK(count_of(log, "refused: server SCUDA") >= 2, "the server did not log both refusals:\n%s", log);
    names_both(strstr(log, "refused: server SCUDA"), mine, older, "the server's log");
    CHECK(h_server_log_count(&srv, "session started") == 0, "a session started on a refused connection");
    free(log);
    h_server_stop(&srv);
    printf("ok an older server: refused at connect by the client and by the server, both versions named\n");
}

/* A raw client that skips the client's judgement: the server's check
 * alone refuses it. Returns the welcome's message. */
static void raw_refused(const struct h_server *srv, const char *skew, char *msg, size_t msglen)
{
    setenv("SCUDA_TEST_OPSET", skew, 1);
    char err[512];
    int fd = dial(srv->addr, 5000, PREFACE_SESSION, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    uint8_t nonce[SCUDA_NONCE_LEN];
    struct scuda_opset server;
    CHECK(hello_read_server_info(fd, 5000, nonce, &server, err, sizeof err) == 0, "%s", err);
    CHECK(hello_send_client(fd, 0, ~0ull, NULL, nonce, NULL, 0) == 0);
    uint32_t status = 0;
    CHECK(hello_read_welcome(fd, 5000, &status, msg, msglen) == 0, "no welcome: %s", msg);
    CHECK(status == WELCOME_BAD_VERSION, "a %s client got welcome status %u (%s)", skew, status, msg);
    io_close(fd);
    unsetenv("SCUDA_TEST_OPSET");
}

static void skewed_clients(void)
{
    char mine[64], newer[64], msg[512];
    counts(0, mine, sizeof mine);
    counts(1, newer, sizeof newer);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);

    raw_refused(&srv, "newer", msg, sizeof msg);
    names_both(msg, mine, newer, "the server's refusal of a newer client");
    CHECK(strstr(msg, "upgrade the server"), "no upgrade advice: %s", msg);
    char *cerr;
    int st = run_client("newer", "newer_client", &cerr);
    CHECK(st == 10 && strstr(cerr, "upgrade the server"), "a newer client through the shim: status %d:\n%s", st,
          cerr);
    free(cerr);
    printf("ok a newer client: refused by the server's own check, and through the shim\n");

    raw_refused(&srv, "diverged", msg, sizeof msg);
    CHECK(strstr(msg, "different op registries"), "diverged registries: %s", msg);
    st = run_client("diverged", "diverged_client", &cerr);
    CHECK(st == 10 && strstr(cerr, "different op registries"), "a diverged client through the shim: status %d:\n%s",
          st, cerr);
    free(cerr);
    /* The server answers a refusal, then logs it: wait for the lines. */
    CHECK(h_wait_log(&srv, "different op registries", 2, 10000) >= 2, "the server did not log the diverged refusals");
    printf("ok diverged op registries: refused on both sides\n");

    st = run_client("older", "older_client", &cerr);
    CHECK(st == 0, "an older client was not served (status %d):\n%s", st, cerr);
    free(cerr);
    CHECK(h_wait_log(&srv, "session started", 1, 10000) >= 1, "no session for the older client");
    h_server_stop(&srv);
    printf("ok an older client is served: its ops are a prefix of the server's\n");
}

int main(void)
{
    h_begin("version_skew", 110);
    older_server();
    skewed_clients();
    printf("PASS version_skew\n");
    return 0;
}
