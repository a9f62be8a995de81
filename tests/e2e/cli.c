/* cli.c - the `scuda` command's contract with its user (docs/cli.md):
 * versions, the check before `scuda run`, exit codes, `scuda info --json`,
 * a known cause printed without a guessed hint, `scuda config`, the
 * server's log lines stamped with the time and sent to a file. Every case
 * runs the real `scuda` binary with its output captured. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/version.h"
#include "harness.h"

#ifndef SCUDA_BIN_PATH
#error "SCUDA_BIN_PATH (path of the scuda program) must be defined"
#endif

struct result {
    int status; /* exit status, -1 when it did not exit */
    char *out, *err;
};

/* Run `scuda ARGS...` with HOME=home (NULL: unchanged) and SCUDA_SERVER
 * unset; its output captured. */
static struct result scuda(const char *home, const char *const *args)
{
    char out_path[600], err_path[600];
    int out_fd = h_temp_file("cli.out", out_path, sizeof out_path);
    int err_fd = h_temp_file("cli.err", err_path, sizeof err_path);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        const char *argv[16] = {SCUDA_BIN_PATH};
        int n = 1;
        for (int i = 0; args[i] && n < 15; i++) argv[n++] = args[i];
        argv[n] = NULL;
        unsetenv("SCUDA_SERVER");
        unsetenv("LD_LIBRARY_PATH");
        if (home) setenv("HOME", home, 1);
        execv(SCUDA_BIN_PATH, (char **)argv);
        _exit(126);
    }
    close(out_fd);
    close(err_fd);
    int st = h_wait(pid, 30000);
    struct result r = {.status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1};
    r.out = h_read_file(out_path, NULL);
    r.err = h_read_file(err_path, NULL);
    return r;
}

static void result_free(struct result *r)
{
    free(r->out);
    free(r->err);
}

/* A loopback port nothing listens on: bound, then closed. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void versions(const struct h_server *srv)
{
    struct result r = scuda(NULL, (const char *[]){"--version", NULL});
    CHECK(r.status == 0 && strstr(r.out, "scuda " SCUDA_VERSION_STRING " (protocol v"), "scuda --version: %d %s%s",
          r.status, r.out, r.err);
    result_free(&r);
    r = scuda(NULL, (const char *[]){"version", "--server", srv->addr, NULL});
    CHECK(r.status == 0 && strstr(r.out, "SCUDA " SCUDA_VERSION_STRING) && strstr(r.out, "compatible: this client"),
          "scuda version --server: %d\n%s%s", r.status, r.out, r.err);
    result_free(&r);

    struct h_server old;
    setenv("SCUDA_TEST_OPSET", "older", 1);
    h_server_start(&old, "older", NULL);
    unsetenv("SCUDA_TEST_OPSET");
    r = scuda(NULL, (const char *[]){"version", "--server", old.addr, NULL});
    CHECK(r.status == 1 && strstr(r.out, "not compatible") && strstr(r.out, "upgrade the server"),
          "scuda version against an older server: %d\n%s%s", r.status, r.out, r.err);
    result_free(&r);
    h_server_stop(&old);
    printf("ok scuda --version, scuda version --server (compatible, and an older server)\n");
}

static void run_checks(const struct h_server *srv, const struct h_server *tokened)
{
    char dead[64], marker[600];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", closed_port());
    snprintf(marker, sizeof marker, "%s/cli.%d.ran", E2E_LOG_DIR, (int)getpid());
    unlink(marker);

    /* Nothing listens: exit 1, the cause named, CMD not run. */
    struct result r = scuda(NULL, (const char *[]){"run", "--server", dead, "--", "touch", marker, NULL});
    CHECK(r.status == 1 && strstr(r.err, "cannot reach server") && strstr(r.err, "was not run"),
          "scuda run against nothing: %d\n%s", r.status, r.err);
    CHECK(access(marker, F_OK) != 0, "CMD ran although the check failed");
    result_free(&r);
    /* --no-check: CMD runs, its status is ours. */
    r = scuda(NULL, (const char *[]){"run", "--no-check", "--server", dead, "--", "touch", marker, NULL});
    CHECK(r.status == 0 && access(marker, F_OK) == 0, "scuda run --no-check: %d\n%s", r.status, r.err);
    unlink(marker);
    result_free(&r);
    /* A bad --server is a usage error: 2. */
    r = scuda(NULL, (const char *[]){"run", "--server", "no port here", "--", "true", NULL});
    CHECK(r.status == 2, "a bad --server exited %d\n%s", r.status, r.err);
    result_free(&r);
    /* A wrong token: refused before CMD, with the server's own words. */
    setenv("SCUDA_TOKEN", "wrong", 1);
    r = scuda(NULL, (const char *[]){"run", "--check", "--server", tokened->addr, "--", "touch", marker, NULL});
    CHECK(r.status == 1 && strstr(r.err, "bad token") && access(marker, F_OK) != 0,
          "scuda run --check with a wrong token: %d\n%s", r.status, r.err);
    result_free(&r);
    /* scuda info: the known cause, and no guessed hint after it. */
    r = scuda(NULL, (const char *[]){"info", "--server", tokened->addr, NULL});
    CHECK(r.status == 1 && strstr(r.err, "bad token") && !strstr(r.err, "is running at"),
          "scuda info with a wrong token: %d\n%s", r.status, r.err);
    result_free(&r);
    unsetenv("SCUDA_TOKEN");
    /* A good server: the check passes and CMD runs. */
    r = scuda(NULL, (const char *[]){"run", "--server", srv->addr, "--", "touch", marker, NULL});
    CHECK(r.status == 0 && access(marker, F_OK) == 0, "scuda run against a good server: %d\n%s", r.status, r.err);
    unlink(marker);
    result_free(&r);
    printf("ok scuda run checks the server first: unreachable and wrong token exit 1 before CMD; "
           "--no-check; a bad --server exits 2\n");
}

static void info_json(const struct h_server *srv)
{
    struct result r = scuda(NULL, (const char *[]){"info", "--json", "--server", srv->addr, NULL});
    CHECK(r.status == 0, "scuda info --json: %d\n%s", r.status, r.err);
    CHECK(r.out[0] == '{' && strstr(r.out, "\"ok\": true") && strstr(r.out, "\"devices\": [{\"index\": 0") &&
              strstr(r.out, "\"rtt_us\": {\"min\": ") && strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
          "scuda info --json is not one object with a device and a round trip:\n%s", r.out);
    result_free(&r);
    char dead[64];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", closed_port());
    r = scuda(NULL, (const char *[]){"info", "--json", "--server", dead, NULL});
    CHECK(r.status == 1 && strstr(r.out, "\"ok\": false, \"error\": \"cannot reach server"),
          "scuda info --json without a server: %d\n%s", r.status, r.out);
    result_free(&r);
    printf("ok scuda info --json: one object; a failure is an object with the error, exit 1\n");
}

static void config(const struct h_server *srv)
{
    char home[600];
    snprintf(home, sizeof home, "%s/cli.%d.home", E2E_LOG_DIR, (int)getpid());
    h_remove_tree(home);
    CHECK(mkdir(home, 0700) == 0);
    struct result r = scuda(home, (const char *[]){srv->addr, NULL});
    CHECK(r.status == 0, "saving the server: %d\n%s", r.status, r.err);
    result_free(&r);
    r = scuda(home, (const char *[]){"config", NULL});
    char want[800];
    snprintf(want, sizeof want, "Saved:      %s in %s/.config/scuda/host", srv->addr, home);
    CHECK(r.status == 0 && strstr(r.out, want), "scuda config does not show the saved server:\n%s", r.out);
    result_free(&r);
    r = scuda(home, (const char *[]){"config", "--clear", NULL});
    CHECK(r.status == 0 && strstr(r.out, "Forgot the saved server"), "scuda config --clear: %d\n%s%s", r.status,
          r.out, r.err);
    result_free(&r);
    r = scuda(home, (const char *[]){"config", NULL});
    CHECK(r.status == 0 && strstr(r.out, "Saved:      none") && strstr(r.out, "Server:     none"),
          "the server is still saved after --clear:\n%s", r.out);
    result_free(&r);
    h_remove_tree(home);
    printf("ok scuda config shows the saved server; --clear forgets it\n");
}

/* "2025-11-26T06:27:14.046Z scuda[ROLE " at the start of a line of log. */
static int stamped_line(const char *log, const char *role)
{
    char want[64];
    snprintf(want, sizeof want, "Z scuda[%s ", role);
    for (const char *p = log; (p = strstr(p, want)) != NULL; p++) {
        const char *line = p - 23;
        if (line < log || (line > log && line[-1] != '\n')) continue;
        if (line[4] == '-' && line[7] == '-' && line[10] == 'T' && line[13] == ':' && line[16] == ':' &&
            line[19] == '.' && strncmp(line, "20", 2) == 0)
            return 1;
    }
    return 0;
}

static void server_log(const struct h_server *srv)
{
    char *log = h_server_log(srv);
    CHECK(stamped_line(log, "server") && stamped_line(log, "session"),
          "the server's log lines carry no time:\n%.2000s", log);
    free(log);

    char path[600];
    snprintf(path, sizeof path, "%s/cli.%d.server-log", E2E_LOG_DIR, (int)getpid());
    unlink(path);
    struct h_server filed;
    struct h_server_opts o = {.extra_args = {"--log-file", path, NULL}};
    h_server_start(&filed, "filed", &o);
    struct result r = scuda(NULL, (const char *[]){"info", "--server", filed.addr, NULL});
    CHECK(r.status == 0, "scuda info against the server with --log-file: %d\n%s", r.status, r.err);
    result_free(&r);
    h_server_stop(&filed);
    log = h_read_file(path, NULL);
    CHECK(log && stamped_line(log, "server") && stamped_line(log, "session") && strstr(log, "session started"),
          "--log-file %s lacks the parent's and the session's stamped lines:\n%.2000s", path, log ? log : "");
    free(log);
    unlink(path);
    printf("ok the server's log lines carry the time; --log-file takes the parent's and the sessions'\n");
}

int main(void)
{
    h_begin("cli", 110);
    unsetenv("SCUDA_TOKEN");
    struct h_server srv, tokened;
    h_server_start(&srv, "main", NULL);
    struct h_server_opts t = {.token = "right"};
    h_server_start(&tokened, "token", &t);
    versions(&srv);
    run_checks(&srv, &tokened);
    info_json(&srv);
    config(&srv);
    server_log(&srv);
    h_server_stop(&tokened);
    h_server_stop(&srv);
    printf("PASS cli\n");
    return 0;
}
