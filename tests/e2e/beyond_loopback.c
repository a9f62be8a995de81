/* beyond_loopback.c - a server on an address other machines can reach
 * speaks TLS, or plain TCP only with --insecure and a warning
 * (docs/operate.md, TLS), and "loopback" means the address the server
 * bound, never the name it was given (src/server/bound_addr.c).
 *
 * The test makes a network of its own: a private network namespace with
 * a veth pair whose end scuda0 holds 10.99.0.1/24, and a private mount
 * namespace whose /etc/hosts it rewrites, so that `localhost` can resolve
 * to 10.99.0.1 or to the wildcard 0.0.0.0. Both namespaces belong to
 * this process alone: the kernel removes them, interfaces included, when
 * it and its children exit, however the test ends (a failed check, the
 * alarm, ctest killing it). Nothing on the machine changes.
 *
 *   - 10.99.0.1 under the name `localhost` (loopback by its name): the
 *     server refuses to start in plain TCP, and without a token;
 *     --insecure starts it, with the warning, and a plain client copies
 *     over 10.99.0.1;
 *   - 10.99.0.1 by its address: TLS without being asked; a plain client
 *     is refused, naming why, on both sides; a TLS client works;
 *     --insecure serves plain TCP, with the warning;
 *   - the wildcard (0.0.0.0, also under the name `localhost`): the same
 *     refusal, the same warning, and TLS on 0.0.0.0:0 by default.
 *
 * Making namespaces needs root, as CI runs; elsewhere the test asks for
 * a user namespace, which many kernels give to ordinary users. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SCUDA_BIN_PATH
#error "SCUDA_BIN_PATH (path of the scuda executable) must be defined"
#endif

#define ADDR "10.99.0.1"
#define TOKEN "t0ken"

static char dir[512];        /* this test's files, in E2E_LOG_DIR */
static char hosts_path[600]; /* what /etc/hosts shows in this process */

/* ---- a network of our own -------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) && close(fd) == 0, "%s: %s", path,
          strerror(errno));
}

/* Without root, a user namespace maps us to its root, which may then
 * make the other two (where the kernel allows unprivileged users that). */
static int enter_as_user_namespace_root(void)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0) return -1;
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    write_file("/proc/self/gid_map", map);
    return 0;
}

static void sh(const char *cmd)
{
    char full[1024];
    /* `ip` lives in /usr/sbin, which an ordinary user's PATH may lack. */
    snprintf(full, sizeof full, "PATH=\"$PATH:/usr/sbin:/sbin\"; %s >>'%s/ip.log' 2>&1", cmd, dir);
    CHECK(system(full) == 0, "failed (see %s/ip.log; is iproute2 installed? scripts/deps.sh): %s", dir, cmd);
}

static void enter_private_network(void)
{
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
        int err = errno;
        CHECK(enter_as_user_namespace_root() == 0,
              "cannot make a network namespace (%s; as a user namespace: %s): run this test as root, as CI "
              "does, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)",
              strerror(err), strerror(errno));
    }
    /* Mounts made from here on stay in this namespace: the machine's
     * /etc/hosts is never touched. */
    CHECK(mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0, "making / private: %s", strerror(errno));
    sh("ip link set lo up");
    sh("ip link add scuda0 type veth peer name scuda1");
    sh("ip addr add " ADDR "/24 dev scuda0 && ip link set scuda0 up && ip link set scuda1 up");
    snprintf(hosts_path, sizeof hosts_path, "%s/hosts", dir);
    write_file(hosts_path, "127.0.0.1 localhost\n");
    CHECK(mount(hosts_path, "/etc/hosts", NULL, MS_BIND, NULL) == 0, "bind-mounting %s on /etc/hosts: %s",
          hosts_path, strerror(errno));
}

/* Make `localhost` mean addr, for this process and its children (the
 * bind mount shows the file itself, rewritten in place). */
static void localhost_is(const char *addr)
{
    char line[128];
    snprintf(line, sizeof line, "%s localhost\n", addr);
    write_file(hosts_path, line);
}

/* ---- servers ------------------------------------------------------------ */

/* Run `scuda server ARGS...` expecting it to refuse to start: its stderr
 * (malloc'd) once it has exited with a failure. */
static char *server_refuses(const char *tag, const char *token, const char *listen, ...)
{
    char path[512];
    int err_fd = h_temp_file(tag, path, sizeof path);
    char state[600];
    snprintf(state, sizeof state, "%s/state", dir);
    const char *argv[16] = {SCUDA_BIN_PATH, "server", "--listen", listen, "--module-cache", "off", "--state-dir",
                            state};
    int n = 8;
    va_list ap;
    va_start(ap, listen);
    for (const char *a; n < 15 && (a = va_arg(ap, const char *));) argv[n++] = a;
    va_end(ap);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(err_fd, 1);
        dup2(err_fd, 2);
        if (token) setenv("SCUDA_TOKEN", token, 1);
        else unsetenv("SCUDA_TOKEN");
        execv(SCUDA_BIN_PATH, (char **)argv);
        _exit(127);
    }
    close(err_fd);
    int st = h_wait(pid, 10000);
    char *out = h_read_file(path, NULL);
    CHECK(st != -1, "%s: the server started on %s; it should have refused:\n%s", tag, listen, out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127, "%s: exit status %d:\n%s", tag,
          WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
    return out;
}

/* Start a server with a token on `listen`; clients go to 10.99.0.1. A
 * server speaking TLS is trusted by the fingerprint it printed. */
static void server_on(struct h_server *srv, const char *tag, const char *listen, int insecure)
{
    static char state[600];
    snprintf(state, sizeof state, "%s/state", dir);
    struct h_server_opts opt = {.token = TOKEN,
                                .extra_args = {"--listen", listen, "--state-dir", state, insecure ? "--insecure" : NULL}};
    h_server_start(srv, tag, &opt);
    char addr[64];
    snprintf(addr, sizeof addr, ADDR ":%d", srv->port);
    setenv("SCUDA_SERVER", addr, 1);
    setenv("SCUDA_TOKEN", TOKEN, 1);
    unsetenv("SCUDA_INSECURE");
    unsetenv("SCUDA_TLS_FINGERPRINT");
    char *log = h_server_log(srv);
    const char *line = strstr(log, "TLS certificate ");
    const char *fp = line ? strstr(line, "sha256:") : NULL;
    if (fp && strlen(fp) >= 71) {
        snprintf(srv->fingerprint, sizeof srv->fingerprint, "%.71s", fp);
        setenv("SCUDA_TLS_FINGERPRINT", srv->fingerprint, 1);
    }
    free(log);
}

/* ---- clients ------------------------------------------------------------ */

static int copy_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    h_copy_round_trip(11);
    return 0;
}

static int refused_client(void *arg)
{
    (void)arg;
    CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE, "cuInit worked, but the client should have been refused");
    return 0;
}

/* A client that speaks plain TCP to 10.99.0.1 (SCUDA_INSECURE=1): works,
 * and warns on its side too. */
static void plain_client_works(const char *what)
{
    char path[512];
    int err_fd = h_temp_file("plain-client", path, sizeof path);
    setenv("SCUDA_INSECURE", "1", 1);
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, err_fd), 30000, what);
    unsetenv("SCUDA_INSECURE");
    close(err_fd);
    char *err = h_read_file(path, NULL);
    CHECK(strstr(err, "SCUDA_INSECURE=1: plain TCP to " ADDR), "%s: the client should warn:\n%s", what, err);
    free(err);
}

/* The same client, refused: its stderr (malloc'd). */
static char *plain_client_refused(const char *tag)
{
    char path[512];
    int err_fd = h_temp_file(tag, path, sizeof path);
    setenv("SCUDA_INSECURE", "1", 1);
    h_wait_ok(h_spawn(refused_client, NULL, 30, -1, err_fd), 30000, tag);
    unsetenv("SCUDA_INSECURE");
    close(err_fd);
    return h_read_file(path, NULL);
}

/* The server's log holds the --insecure warning. */
static void check_warned(const struct h_server *srv, const char *what)
{
    char *log = h_server_log(srv);
    CHECK(strstr(log, "warn") && strstr(log, "--insecure: plain TCP on") && strstr(log, "in clear"),
          "%s: --insecure should warn, naming what is exposed:\n%s", what, log);
    free(log);
}

/* ---- cases -------------------------------------------------------------- */

/* `localhost` resolves to addr, which is not loopback: refused in plain
 * TCP and without a token, by the address bound; --insecure warns. */
static void name_says_loopback(const char *addr, const char *tag)
{
    localhost_is(addr);
    char what[128];
    snprintf(what, sizeof what, "localhost:0 resolving to %s", addr);

    char *err = server_refuses(tag, TOKEN, "localhost:0", (char *)NULL);
    CHECK(strstr(err, "refusing to serve plain TCP on localhost:0") && strstr(err, "not loopback") &&
              strstr(err, "--tls") && strstr(err, "--insecure"),
          "%s: the refusal should name the address bound and the fixes:\n%s", what, err);
    free(err);
    err = server_refuses(tag, NULL, "localhost:0", "--insecure", (char *)NULL);
    CHECK(strstr(err, "refusing to serve on localhost:0 without a token") && strstr(err, "not loopback"), "%s:\n%s",
          what, err);
    free(err);
    printf("ok %s: no plain TCP without --insecure, no server without a token\n", what);

    struct h_server srv;
    server_on(&srv, tag, "localhost:0", 1);
    CHECK(srv.fingerprint[0] == '\0', "%s: --insecure should serve plain TCP", what);
    check_warned(&srv, what);
    plain_client_works(what);
    h_server_stop(&srv);
    printf("ok %s with --insecure: plain TCP, and the warning\n", what);
}

/* Given by its address, `listen` speaks TLS: a plain client is refused,
 * a TLS one works; --insecure serves plain TCP and warns. */
static void address_given(const char *listen, const char *tag)
{
    struct h_server srv;
    server_on(&srv, tag, listen, 0);
    CHECK(srv.fingerprint[0] != '\0', "%s without --insecure: no TLS certificate in the log", listen);
    char *err = plain_client_refused(tag);
    CHECK(strstr(err, "requires TLS"), "a plain client of %s should be told that TLS is required:\n%s", listen, err);
    free(err);
    /* The server answers the preface first and logs after. */
    CHECK(h_wait_log(&srv, "a plain TCP client, and this server requires TLS", 1, 10000) == 1,
          "%s: the server did not log the plain client", listen);
    CHECK(h_server_log_count(&srv, "accepted") == 0, "%s: a plain client got in", listen);
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, -1), 30000, "a TLS client");
    CHECK(h_server_log_count(&srv, "accepted") == 1, "%s: the TLS client was not accepted", listen);
    h_server_stop(&srv);
    printf("ok %s: TLS without being asked; a plain client is refused, a TLS one works\n", listen);

    server_on(&srv, tag, listen, 1);
    CHECK(srv.fingerprint[0] == '\0', "%s --insecure should serve plain TCP", listen);
    check_warned(&srv, listen);
    plain_client_works(listen);
    h_server_stop(&srv);
    printf("ok %s with --insecure: plain TCP, and the warning\n", listen);
}

int main(void)
{
    h_begin("beyond_loopback", 110);
    unsetenv("E2E_TLS"); /* each case chooses its transport */
    unsetenv("SCUDA_TLS");
    snprintf(dir, sizeof dir, "%s/beyond_loopback.d", E2E_LOG_DIR);
    h_remove_tree(dir);
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    char config[600];
    snprintf(config, sizeof config, "%s/config", dir);
    setenv("XDG_CONFIG_HOME", config, 1); /* no known_hosts of the user's */
    enter_private_network();

    name_says_loopback(ADDR, "named-addr");
    address_given(ADDR ":0", "addr");
    name_says_loopback("0.0.0.0", "named-any");
    address_given("0.0.0.0:0", "any");
    printf("PASS beyond_loopback\n");
    return 0;
}
