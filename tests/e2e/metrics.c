/* metrics.c - `scuda server --metrics ADDR` (docs/operate.md, "Pools").
 *
 * scrape:   a session of user alice on GPU 0 of --gpus 0,1 holds 1 MiB; a
 *           client with a bad token was refused. /metrics, with the admin
 *           token, shows one session, its memory, calls and user, the
 *           sessions per GPU and the refusal; /sessions lists it as JSON.
 *           No token, alice's token, a bad path or method get 401, 401,
 *           404 and 405. `promtool check metrics` accepts the page.
 * ps:       `scuda ps --server` with the admin token lists alice's session
 *           (client address, user, GPU 0, 1.0M); with alice's token it
 *           fails, naming the admin token.
 * hostile:  a request longer than 8 KiB gets 431 and a close; a silent
 *           connection is cut at the 3 s deadline; 40 connections at once
 *           leave the endpoint serving.
 * prometheus: a real Prometheus (tests/e2e/prometheus.yml) scrapes it
 *           with the admin token: its `up` for the job is 1 within 60 s. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/protocol.h"
#include "common/transport.h"
#include "harness.h"
#include "http_checks.h"

#define ADMIN_TOKEN "admin-token-0123456789"
#define ALICE_TOKEN "alice-token-0123456789"

static int metrics_port;

static int connect_metrics(void) { return hc_connect_loopback(metrics_port, "metrics"); }

/* Everything the server sends until it closes (10 s at most); malloc'd. */
static char *read_all(int fd) { return hc_read_until_close(fd, 10000); }

/* GET path with `token` (NULL: no Authorization). The whole answer. */
static char *http(const char *method, const char *path, const char *token)
{
    int fd = connect_metrics();
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", method, path,
                     token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
    CHECK(write(fd, req, (size_t)n) == n);
    char *a = read_all(fd);
    close(fd);
    return a;
}

static int status_of(const char *answer)
{
    int st = 0;
    return sscanf(answer, "HTTP/1.%*d %d", &st) == 1 ? st : -1;
}

static int hold[2];

static int holder(void *arg)
{
    (void)arg;
    close(hold[1]);
    setenv("SCUDA_TOKEN", ALICE_TOKEN, 1);
    h_cuda_setup();
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 1u << 20));
    CU(cuMemsetD8_v2(p, 1, 1u << 20));
    CU(cuCtxSynchronize());
    printf("allocated\n");
    fflush(stdout);
    char c;
    CHECK(read(hold[0], &c, 1) == 0);
    return 0;
}

static int bad_token(void *arg)
{
    (void)arg;
    setenv("SCUDA_TOKEN", "wrong-token", 1);
    return cuInit(0) == CUDA_SUCCESS ? 1 : 0;
}

static void start(struct h_server *srv, const char *tag)
{
    char path[512];
    int tfd = h_temp_file("tokens", path, sizeof path);
    const char *lines = "alice " ALICE_TOKEN "\nadmin " ADMIN_TOKEN "\n";
    CHECK(write(tfd, lines, strlen(lines)) == (ssize_t)strlen(lines));
    close(tfd);
    chmod(path, 0600);
    static char tokens[512];
    snprintf(tokens, sizeof tokens, "%s", path);
    struct h_server_opts opt = {.token_file = tokens,
                                .extra_args = {"--metrics", "127.0.0.1:0", "--gpus", "0,1", "--max-sessions-per-gpu",
                                               "2"}};
    h_server_start(srv, tag, &opt);
    metrics_port = 0;
    for (uint64_t end = h_now_ms() + 10000; !metrics_port && h_now_ms() < end; h_sleep_ms(20)) {
        char *log = h_server_log(srv);
        const char *at = strstr(log, "metrics on 127.0.0.1:0 (port ");
        if (at) metrics_port = atoi(at + strlen("metrics on 127.0.0.1:0 (port "));
        free(log);
    }
    CHECK(metrics_port > 0, "the server did not say its metrics port");
}

static void promtool_check(const char *body)
{
    char path[512];
    int fd = h_temp_file("metrics", path, sizeof path);
    CHECK(write(fd, body, strlen(body)) == (ssize_t)strlen(body));
    close(fd);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
    int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "`%s` failed (status %d): the page is not valid Prometheus text, or promtool is missing (install the "
          "Debian package prometheus: scripts/deps.sh)", cmd, st);
}

/* `scuda ps --server` with `token` in SCUDA_ADMIN_TOKEN: its exit status;
 * stdout and stderr together in *out. */
static int run_ps(const char *token, char **out)
{
    char path[512], cmd[1400];
    int fd = h_temp_file("ps", path, sizeof path);
    close(fd);
    snprintf(cmd, sizeof cmd, "env -u SCUDA_TOKEN -u SCUDA_TOKEN_FILE SCUDA_ADMIN_TOKEN=%s %s ps --server 127.0.0.1:%d "
                              "> %s 2>&1", token, SCUDA_BIN, metrics_port, path);
    int st = system(cmd);
    *out = h_read_file(path, NULL);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void ps(void)
{
    char *out;
    int rc = run_ps(ADMIN_TOKEN, &out);
    CHECK(rc == 0, "scuda ps failed (%d):\n%s", rc, out);
    const char *row = strstr(out, "\n");
    CHECK(row && strstr(row, " alice ") && strstr(row, " 127.0.0.1:") && strstr(row, " 1.0M ") && strstr(row, " 0 "),
          "scuda ps does not list alice's session on GPU 0 with 1.0M:\n%s", out);
    free(out);
    rc = run_ps(ALICE_TOKEN, &out);
    CHECK(rc == 1 && strstr(out, "401") && strstr(out, "admin token"), "scuda ps with a user's token (%d):\n%s", rc,
          out);
    free(out);
    printf("ok scuda ps lists the session; a user's token is refused\n");
}

static void scrape(void)
{
    CHECK(pipe(hold) == 0);
    char out_path[512];
    int out_fd = h_temp_file("holder", out_path, sizeof out_path);
    pid_t a = h_spawn(holder, NULL, 60, out_fd, -1);
    close(out_fd);
    close(hold[0]);
    int ready = 0;
    for (uint64_t end = h_now_ms() + 20000; !ready && h_now_ms() < end; h_sleep_ms(20)) {
        char *o = h_read_file(out_path, NULL);
        ready = strstr(o, "allocated") != NULL;
        free(o);
    }
    CHECK(ready, "the holder never allocated");
    h_wait_ok(h_spawn(bad_token, NULL, 15, -1, -1), 15000, "a client with a bad token");

    char *m = http("GET", "/metrics", NULL);
    CHECK(status_of(m) == 401, "no token: %.200s", m);
    free(m);
    m = http("GET", "/metrics", ALICE_TOKEN);
    CHECK(status_of(m) == 401, "a user's token, not admin's: %.200s", m);
    free(m);
    m = http("GET", "/nothing", ADMIN_TOKEN);
    CHECK(status_of(m) == 404, "a bad path: %.200s", m);
    free(m);
    m = http("POST", "/metrics", ADMIN_TOKEN);
    CHECK(status_of(m) == 405, "POST: %.200s", m);
    free(m);

    m = http("GET", "/metrics", ADMIN_TOKEN);
    CHECK(status_of(m) == 200, "the admin token: %.300s", m);
    const char *body = strstr(m, "\r\n\r\n");
    CHECK(body, "no body");
    body += 4;
    CHECK(strstr(body, "\nscuda_sessions 1\n"), "no `scuda_sessions 1`:\n%s", body);
    CHECK(strstr(body, ",user=\"alice\",gpu=\"0\"} 1048576\n") &&
              strstr(body, "scuda_session_device_memory_bytes{pid="),
          "alice's 1 MiB on GPU 0 is not there:\n%s", body);
    const char *calls = strstr(body, "\nscuda_session_calls_total{pid=");
    CHECK(calls && strchr(calls, '}') && atol(strchr(calls, '}') + 2) >= 3, "no calls counted:\n%s", body);
    CHECK(strstr(body, "scuda_gpu_sessions{gpu=\"0\"} 1\n") && strstr(body, "scuda_gpu_sessions{gpu=\"1\"} 0\n"),
          "sessions per GPU:\n%s", body);
    CHECK(strstr(body, "scuda_gpu_device_memory_bytes{gpu=\"0\"} 1048576\n"), "memory per GPU:\n%s", body);
    CHECK(strstr(body, "scuda_handshakes_refused_total{reason=\"bad_token\"} 1\n"), "the bad token:\n%s", body);
    promtool_check(body);
    free(m);

    m = http("GET", "/sessions", ADMIN_TOKEN);
    CHECK(status_of(m) == 200 && strstr(m, "\"user\":\"alice\"") && strstr(m, "\"gpu\":\"0\"") &&
              strstr(m, "\"device_memory\":1048576"),
          "/sessions:\n%s", m);
    free(m);
    ps();
    close(hold[1]);
    h_wait_ok(a, 15000, "the holder");
    printf("ok /metrics and /sessions show the session, its memory, its GPU and the refusal; promtool accepts it\n");
}

static void hostile(void)
{
    /* Too long: 431, then closed. */
    int fd = connect_metrics();
    char big[9000];
    memset(big, 'A', sizeof big);
    memcpy(big, "GET /metrics HTTP/1.0\r\nX: ", 26);
    ssize_t w = write(fd, big, sizeof big);
    (void)w;
    char *a = read_all(fd);
    CHECK(status_of(a) == 431, "a request of 9000 bytes: %.200s", a);
    free(a);
    close(fd);
    /* Silent: cut at the deadline (3 s), with no answer. */
    fd = connect_metrics();
    uint64_t t0 = h_now_ms();
    a = read_all(fd);
    uint64_t took = h_now_ms() - t0;
    CHECK(a[0] == '\0' && took >= 2500 && took < 9000, "a silent connection: %llu ms, '%.100s'",
          (unsigned long long)took, a);
    free(a);
    close(fd);
    /* A crowd of silent connections: the oldest go, a scrape still works. */
    int crowd[40];
    for (int i = 0; i < 40; i++) crowd[i] = connect_metrics();
    char *m = http("GET", "/metrics", ADMIN_TOKEN);
    CHECK(status_of(m) == 200, "a scrape after 40 silent connections: %.200s", m);
    free(m);
    for (int i = 0; i < 40; i++) close(crowd[i]);
    printf("ok a long request gets 431, a silent one is cut at 3 s, a crowd does not block a scrape\n");
}

static void prometheus(void)
{
    char tok[512], cfg[512], tsdb[600], query[256];
    int fd = h_temp_file("prom-token", tok, sizeof tok);
    CHECK(write(fd, ADMIN_TOKEN, strlen(ADMIN_TOKEN)) == (ssize_t)strlen(ADMIN_TOKEN));
    close(fd);
    char *tmpl = h_read_file(PROMETHEUS_YML, NULL);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", metrics_port);
    fd = h_temp_file("prometheus.yml", cfg, sizeof cfg);
    for (char *s = tmpl; *s;) {
        char *at = strchr(s, '@');
        if (!at) at = s + strlen(s);
        CHECK(write(fd, s, (size_t)(at - s)) == at - s);
        s = at;
        if (!*s) break;
        const char *val = strncmp(s, "@TARGET@", 8) == 0 ? target : strncmp(s, "@TOKEN_FILE@", 12) == 0 ? tok : "@";
        CHECK(write(fd, val, strlen(val)) == (ssize_t)strlen(val));
        s += strcmp(val, "@") == 0 ? 1 : strcmp(val, target) == 0 ? 8 : 12;
    }
    close(fd);
    free(tmpl);
    snprintf(tsdb, sizeof tsdb, "%s.tsdb", cfg);
    h_remove_tree(tsdb);
    int port = hc_free_port();
    char listen[64], log_path[512];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    int log_fd = h_temp_file("prometheus-log", log_path, sizeof log_path);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        char cfg_arg[600], tsdb_arg[700], listen_arg[100];
        snprintf(cfg_arg, sizeof cfg_arg, "--config.file=%s", cfg);
        snprintf(tsdb_arg, sizeof tsdb_arg, "--storage.tsdb.path=%s", tsdb);
        snprintf(listen_arg, sizeof listen_arg, "--web.listen-address=%s", listen);
        execlp("prometheus", "prometheus", cfg_arg, tsdb_arg, listen_arg, (char *)NULL);
        fprintf(stderr, "cannot run prometheus: %s (install the Debian package prometheus: scripts/deps.sh)\n",
                strerror(errno));
        _exit(127);
    }
    close(log_fd);
    /* Ask it, over its HTTP API, whether its last scrape of the job worked. */
    snprintf(query, sizeof query, "GET /api/v1/query?query=up%%7Bjob%%3D%%22scuda%%22%%7D HTTP/1.0\r\n\r\n");
    int up = 0;
    for (uint64_t end = h_now_ms() + 60000; !up && h_now_ms() < end && h_pid_alive(pid); h_sleep_ms(500)) {
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
        if (connect(s, (struct sockaddr *)&to, sizeof to) == 0 &&
            write(s, query, strlen(query)) == (ssize_t)strlen(query)) {
            char *a = read_all(s);
            up = strstr(a, "\"job\":\"scuda\"") && strstr(a, ",\"1\"]");
            free(a);
        }
        close(s);
    }
    kill(pid, SIGTERM);
    if (h_wait(pid, 10000) == -1) kill(pid, SIGKILL);
    if (!up) {
        char *l = h_read_file(log_path, NULL);
        fprintf(stderr, "prometheus log:\n%s\n", l);
        free(l);
    }
    CHECK(up, "Prometheus did not scrape /metrics within 60 s (up{job=\"scuda\"} is not 1)");
    h_remove_tree(tsdb);
    printf("ok a real Prometheus scrapes /metrics with the admin token\n");
}

int main(void)
{
    h_begin("metrics", 150);
    setenv("STANDIN_DEVICES", "2", 1);
    struct h_server srv;
    start(&srv, "metrics");
    scrape();
    hostile();
    prometheus();
    h_server_stop(&srv);
    printf("PASS metrics\n");
    return 0;
}
