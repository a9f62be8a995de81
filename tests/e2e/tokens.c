/* tokens.c - named tokens, their reload, and what a refusal reveals
 * (docs/operate.md, "Admission and tokens").
 *
 * start:   a malformed token file stops the server at start, naming the
 *          file and the line; a listener beyond loopback without a token
 *          does not start.
 * users:   alice and bob, each with a token in the server's file and a
 *          SCUDA_TOKEN_FILE of their own, run sessions the log names.
 * joins:   bad bulk joins (a pid that is no session, bob's try at
 *          alice's live session, a wrong secret for bob's own) get
 *          byte-identical refusals, none sooner than the refusal delay.
 * revoke:  alice leaves the file; after SIGHUP her running session ends,
 *          bob's goes on working, and alice is refused with the fix.
 * reload:  a malformed file on SIGHUP keeps the users loaded before. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/dial.h"
#include "common/hello.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "harness.h"
#include "server/bulk_join.h"

#ifndef SCUDA_BIN_PATH
#error "SCUDA_BIN_PATH (the scuda executable) must be defined"
#endif

#define ALICE "alice-t0ken-4f9c"
#define BOB "bob-t0ken-77e1"

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "%s: %s", path, strerror(errno));
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK(chmod(path, mode) == 0);
}

static void temp_path(const char *tag, char *path, size_t len)
{
    close(h_temp_file(tag, path, len));
}

/* ---- start ------------------------------------------------------------ */

/* Run `scuda server ARGS...` (it must exit at once); returns its exit
 * status and its stderr in *err (malloc'd). */
static int run_server_cmd(const char *const *args, char **err)
{
    char path[512];
    int fd = h_temp_file("start", path, sizeof path);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fd, 2);
        unsetenv("SCUDA_TOKEN");
        const char *argv[16] = {SCUDA_BIN_PATH, "server"};
        int n = 2;
        for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(SCUDA_BIN_PATH, (char **)argv);
        _exit(127);
    }
    close(fd);
    int st = h_wait(pid, 10000);
    *err = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st), "scuda server did not exit at once:\n%s", *err);
    return WEXITSTATUS(st);
}

static void start(void)
{
    char bad[512], *err;
    temp_path("bad-tokens", bad, sizeof bad);
    write_file(bad, "# users\nalice " ALICE "\nbob has three fields\n", 0600);
    const char *a1[] = {"--listen", "127.0.0.1:0", "--token-file", bad, NULL};
    int rc = run_server_cmd(a1, &err);
    CHECK(rc == 1 && strstr(err, bad) && strstr(err, "line 3"), "a malformed token file: status %d, stderr:\n%s", rc,
          err);
    free(err);
    const char *a2[] = {"--listen", "0.0.0.0:0", NULL};
    rc = run_server_cmd(a2, &err);
    CHECK(rc == 1 && strstr(err, "not loopback"), "0.0.0.0 without a token: status %d, stderr:\n%s", rc, err);
    free(err);
    unlink(bad);
    printf("ok a malformed token file, or no token beyond loopback, stops the server at start\n");
}

/* ---- users: a client that holds its session until told --------------- */

struct user_client {
    const char *token_file;
    int go[2];   /* a byte on it: make one more call (not EOF: other children hold go[1] too) */
    pid_t pid;
};

/* A session that works, waits, then makes one more call: exits 0 when
 * that call works, 20 when it fails as a lost server does. */
static int hold_session(void *arg)
{
    struct user_client *u = arg;
    close(u->go[1]);
    setenv("SCUDA_TOKEN_FILE", u->token_file, 1);
    unsetenv("SCUDA_TOKEN");
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 256));
    char c;
    CHECK(read(u->go[0], &c, 1) == 1);
    CUresult r = cuMemsetD32_v2(d, 7, 64);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
    if (r == CUDA_ERROR_DEVICE_UNAVAILABLE) return 20;
    CHECK(r == CUDA_SUCCESS, "the held session's next call: %s", h_cu_name(r));
    return 0;
}

static void user_start(struct user_client *u, const char *token_file)
{
    u->token_file = token_file;
    CHECK(pipe(u->go) == 0);
    u->pid = h_spawn(hold_session, u, 40, -1, -1);
    close(u->go[0]);
}

static int user_finish(struct user_client *u)
{
    CHECK(write(u->go[1], "g", 1) == 1);
    close(u->go[1]);
    int st = h_wait(u->pid, 15000);
    CHECK(st != -1 && WIFEXITED(st), "a held client hung or crashed");
    return WEXITSTATUS(st);
}

/* A fresh client with this token file: 0 when it works; else 10, and its
 * stderr in *err. */
static int one_call(void *arg)
{
    setenv("SCUDA_TOKEN_FILE", (const char *)arg, 1);
    unsetenv("SCUDA_TOKEN");
    if (cuInit(0) != CUDA_SUCCESS) return 10;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 64));
    return 0;
}

static int fresh_client(const char *token_file, char **err)
{
    char path[512];
    int fd = h_temp_file("fresh", path, sizeof path);
    pid_t pid = h_spawn(one_call, (void *)token_file, 15, -1, fd);
    close(fd);
    int st = h_wait(pid, 15000);
    *err = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st), "a client hung or crashed:\n%s", *err);
    return WEXITSTATUS(st);
}

/* The pid of the session whose log line names `user`. */
static pid_t session_of(const struct h_server *srv, const char *user)
{
    char key[96];
    snprintf(key, sizeof key, "(user %s): session ", user);
    for (uint64_t end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20)) {
        char *log = h_server_log(srv);
        const char *p = strstr(log, key);
        pid_t pid = p ? (pid_t)atoi(p + strlen(key)) : 0;
        free(log);
        if (pid > 0) return pid;
    }
    h_fail(__FILE__, __LINE__, "session_of", "no session of user %s in the log", user);
}

/* ---- joins -------------------------------------------------------------- */

/* A bulk join with `token` for session `pid`, with a made-up secret: every
 * byte the server sent back, until it closed. */
static size_t bad_join(const char *addr, const char *token, uint32_t pid, uint8_t *out, size_t cap,
                       uint64_t *took_ms)
{
    char err[256];
    /* As a bulk connection dials: the join's preface, TLS when the test
     * runs over TLS. */
    int fd = dial(addr, 5000, PREFACE_JOIN, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    uint8_t nonce[SCUDA_NONCE_LEN], req[BULK_JOIN_LEN], secret[BULK_SECRET_LEN];
    memset(secret, 0x5a, sizeof secret);
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "%s", err);
    hello_join_request(req, pid, 0, secret, nonce);
    uint64_t t0 = h_now_ms();
    CHECK(hello_send_client(fd, HELLO_BULK_JOIN, 0, token, nonce, req, sizeof req) == 0);
    size_t n = 0;
    for (;;) {
        CHECK(n < cap, "the refusal is too long");
        ssize_t r = 0;
        if (io_read_full_timeout(fd, out + n, 1, 5000) != 0) break;
        r = 1;
        n += (size_t)r;
    }
    *took_ms = h_now_ms() - t0;
    io_close(fd);
    return n;
}

static void joins(const struct h_server *srv, pid_t alice, pid_t bob)
{
    struct {
        uint32_t pid;
        const char *what;
    } cases[] = {
        {(uint32_t)getpid(), "a pid that is no session"},
        {(uint32_t)alice, "bob's join to alice's live session"},
        {(uint32_t)bob, "a wrong secret for bob's own session"},
        {0xfffffff0u, "a pid out of range"},
    };
    uint8_t first[1024];
    size_t first_len = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t got[1024];
        uint64_t took;
        size_t n = bad_join(srv->addr, BOB, cases[i].pid, got, sizeof got, &took);
        CHECK(n > 8, "%s: no refusal came back", cases[i].what);
        CHECK(took + 5 >= JOIN_REFUSAL_DELAY_MS, "%s: refused after %llu ms, before the refusal delay", cases[i].what,
              (unsigned long long)took);
        if (i == 0) {
            memcpy(first, got, n);
            first_len = n;
        }
        CHECK(n == first_len && memcmp(got, first, n) == 0, "%s: its refusal differs from %s's", cases[i].what,
              cases[0].what);
        printf("ok %s: the same %zu bytes, after %llu ms\n", cases[i].what, n, (unsigned long long)took);
    }
}

/* ---- the test ------------------------------------------------------------ */

int main(void)
{
    h_begin("tokens", 75);
    start();

    char server_file[512], alice_file[512], bob_file[512];
    temp_path("server-tokens", server_file, sizeof server_file);
    temp_path("alice-token", alice_file, sizeof alice_file);
    temp_path("bob-token", bob_file, sizeof bob_file);
    write_file(server_file, "# who may use the GPUs\n\nalice " ALICE "\n  bob\t" BOB "  \n", 0600);
    write_file(alice_file, "alice " ALICE "\n", 0600);
    write_file(bob_file, BOB "\n", 0644); /* a bare token; readable by others: warned */

    struct h_server srv;
    struct h_server_opts opt = {.token_file = server_file};
    h_server_start(&srv, "main", &opt);
    struct user_client a, b;
    user_start(&a, alice_file);
    user_start(&b, bob_file);
    pid_t alice = session_of(&srv, "alice"), bob = session_of(&srv, "bob");
    char *err;
    CHECK(fresh_client(bob_file, &err) == 0, "bob's second client failed:\n%s", err);
    CHECK(strstr(err, "can be read by other users"), "no warning about bob's readable token file:\n%s", err);
    free(err);
    printf("ok alice and bob have sessions, and the log names them\n");

    joins(&srv, alice, bob);

    /* Revoke alice. */
    write_file(server_file, "bob " BOB "\n", 0600);
    CHECK(kill(srv.pid, SIGHUP) == 0);
    char line[96];
    snprintf(line, sizeof line, "session %d ended: the token of user alice was revoked", (int)alice);
    for (uint64_t end = h_now_ms() + 10000; h_now_ms() < end && h_server_log_count(&srv, line) == 0;) h_sleep_ms(20);
    CHECK(h_server_log_count(&srv, line) == 1, "alice's session was not ended after SIGHUP");
    CHECK(user_finish(&a) == 20, "alice's running session still worked after her token was revoked");
    CHECK(fresh_client(alice_file, &err) == 10, "alice got in after her token was revoked");
    CHECK(strstr(err, "SCUDA_TOKEN_FILE") && strstr(err, "bad token"), "alice's refusal does not say the fix:\n%s",
          err);
    free(err);
    printf("ok after SIGHUP alice's session ended and alice is refused\n");

    /* A malformed file on reload changes nothing. */
    write_file(server_file, "bob " BOB "\nbob again-" BOB "\n", 0600);
    CHECK(kill(srv.pid, SIGHUP) == 0);
    for (uint64_t end = h_now_ms() + 10000; h_now_ms() < end && h_server_log_count(&srv, "keeping the") == 0;)
        h_sleep_ms(20);
    CHECK(h_server_log_count(&srv, "keeping the 1 user(s) loaded before"), "a bad reload was not logged");
    CHECK(h_server_log_count(&srv, "line 2"), "the bad reload's log does not name the line");
    CHECK(fresh_client(bob_file, &err) == 0, "bob was refused after a bad reload:\n%s", err);
    free(err);
    CHECK(user_finish(&b) == 0, "bob's running session stopped working when alice was revoked");
    printf("ok bob's session went on, and a bad reload kept the users\n");

    h_server_stop(&srv);
    unlink(server_file);
    unlink(alice_file);
    unlink(bob_file);
    printf("PASS tokens\n");
    return 0;
}
