/* agent.c - `scuda server --agent ADDR` and a real HAProxy in front of a
 * pool (docs/operate.md, "Pools"; deploy/haproxy/haproxy.cfg).
 *
 * lines:   with --max-sessions 2 the agent says "up 100%" idle, "up 50%"
 *          with one session and "drain" with two; a session that holds
 *          3 MiB of its GPU's 4 MiB lowers the room to 25%.
 * haproxy: three stand-in servers behind HAProxy (tests/e2e/haproxy.cfg):
 *          the agent's answers reach HAProxy (a full server shows as
 *          drained in its stats, the others keep a weight); a client through the frontend copies 16 MiB
 *          round trip with striping: its bulk connections reached the
 *          session's server (no bulk join refused anywhere). */
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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "http_checks.h"

#define FAIL(...) h_fail(__FILE__, __LINE__, "", " " __VA_ARGS__)

static int port_in_log(const struct h_server *s, const char *prefix)
{
    for (uint64_t end = h_now_ms() + 10000; h_now_ms() < end; h_sleep_ms(20)) {
        char *log = h_server_log(s);
        const char *at = strstr(log, prefix);
        int port = at ? atoi(at + strlen(prefix)) : 0;
        free(log);
        if (port > 0) return port;
    }
    FAIL("the server did not say its agent port");
}

static int agent_port_of(const struct h_server *s) { return port_in_log(s, "agent on 127.0.0.1:0 (port "); }

/* What the agent at port says, whole (it closes after its line). */
static void agent_says(int port, char *out, size_t len)
{
    int fd = hc_connect_loopback(port, "the agent");
    char *all = hc_read_until_close(fd, 5000);
    close(fd);
    snprintf(out, len, "%s", all);
    free(all);
}

/* Wait until the agent says `want` (sessions start and end asynchronously). */
static void expect_agent(int port, const char *want)
{
    char line[64] = "";
    for (uint64_t end = h_now_ms() + 15000; h_now_ms() < end; h_sleep_ms(50)) {
        agent_says(port, line, sizeof line);
        if (strcmp(line, want) == 0) return;
    }
    FAIL("the agent says '%s', not '%s'", line, want);
}

static int hold[2];
static size_t hold_bytes;

static int holder(void *arg)
{
    (void)arg;
    close(hold[1]);
    h_cuda_setup();
    if (hold_bytes) {
        CUdeviceptr p;
        CU(cuMemAlloc_v2(&p, hold_bytes));
        CU(cuCtxSynchronize());
    }
    char c;
    CHECK(read(hold[0], &c, 1) == 0);
    return 0;
}

static void lines(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--agent", "127.0.0.1:0", "--max-sessions", "2"}};
    h_server_start(&srv, "lines", &opt);
    int port = agent_port_of(&srv);
    expect_agent(port, "up 100%\n");
    CHECK(pipe(hold) == 0);
    pid_t a = h_spawn(holder, NULL, 40, -1, -1);
    expect_agent(port, "up 50%\n");
    pid_t b = h_spawn(holder, NULL, 40, -1, -1);
    close(hold[0]);
    expect_agent(port, "drain\n");
    close(hold[1]);
    h_wait_ok(a, 15000, "holder a");
    h_wait_ok(b, 15000, "holder b");
    expect_agent(port, "up 100%\n");
    h_server_stop(&srv);

    /* Memory: STANDIN_MEM_MB=4, a session holding 3 MiB of it. */
    setenv("STANDIN_MEM_MB", "4", 1);
    struct h_server_opts mopt = {.extra_args = {"--agent", "127.0.0.1:0", "--max-sessions", "4"}};
    h_server_start(&srv, "memory", &mopt);
    port = agent_port_of(&srv);
    CHECK(pipe(hold) == 0);
    hold_bytes = 3u << 20;
    a = h_spawn(holder, NULL, 40, -1, -1);
    close(hold[0]);
    expect_agent(port, "up 25%\n"); /* places: 75% free; memory: 25% */
    close(hold[1]);
    h_wait_ok(a, 15000, "the memory holder");
    hold_bytes = 0;
    h_server_stop(&srv);
    unsetenv("STANDIN_MEM_MB");
    printf("ok the agent says up 100%%, up 50%%, drain by sessions, and up 25%% by memory\n");
}

/* `cmd` on HAProxy's stats socket: the answer (malloc'd). */
static char *haproxy_ask(const char *sock, const char *cmd)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    char *out = calloc(1, 65536);
    CHECK(out);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, cmd, strlen(cmd)) == (ssize_t)strlen(cmd)) {
        size_t got = 0;
        for (uint64_t end = h_now_ms() + 3000; got < 65535 && h_now_ms() < end;) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, 200) <= 0) continue;
            ssize_t n = read(fd, out + got, 65535 - got);
            if (n <= 0) break;
            got += (size_t)n;
        }
    }
    close(fd);
    return out;
}

/* The weight HAProxy gives server `name` now ("show servers state": the
 * 7th field is srv_admin_state, the 8th srv_uweight): 0 when drained (the
 * agent's "drain" sets an admin drain flag, 0x08 or 0x10), -1 when the
 * server is not listed. */
static int haproxy_weight(const char *sock, const char *name)
{
    char *s = haproxy_ask(sock, "show servers state gpus\n");
    int w = -1;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        char f[8][64];
        if (sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]) == 8 &&
            strcmp(f[3], name) == 0)
            w = (atoi(f[6]) & 0x18) ? 0 : atoi(f[7]);
    }
    free(s);
    return w;
}

static int striped(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t n = 16u << 20;
    unsigned char *a = malloc(n), *b = malloc(n);
    CHECK(a && b);
    h_pattern(a, n, 7);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    CU(cuMemcpyHtoD_v2(d, a, n));
    CU(cuMemcpyDtoH_v2(b, d, n));
    CHECK(h_diff(a, b, n) == -1, "the 16 MiB round trip through HAProxy differs");
    free(a);
    free(b);
    return 0;
}

static void write_config(const char *path, const char *front, const int *srv_ports, const int *agent_ports,
                         const char *stats)
{
    char *t = h_read_file(HAPROXY_CFG, NULL);
    FILE *f = fopen(path, "w");
    CHECK(f, "%s: %s", path, strerror(errno));
    for (char *s = t; *s; s++) {
        char v[600];
        if (*s != '@') {
            fputc(*s, f);
            continue;
        }
        int len = 0;
        if (strncmp(s, "@FRONT@", 7) == 0) snprintf(v, sizeof v, "%s", front), len = 7;
        else if (strncmp(s, "@STATS@", 7) == 0) snprintf(v, sizeof v, "%s", stats), len = 7;
        else if (s[1] == 'S' && s[3] == '@') snprintf(v, sizeof v, "127.0.0.1:%d", srv_ports[s[2] - '1']), len = 4;
        else if (s[1] == 'A' && s[3] == '@') snprintf(v, sizeof v, "%d", agent_ports[s[2] - '1']), len = 4;
        else FAIL("unknown placeholder in %s: %.10s", HAPROXY_CFG, s);
        fputs(v, f);
        s += len - 1;
    }
    fclose(f);
    free(t);
}

static void haproxy(void)
{
    struct h_server srv[3];
    int ports[3], agents[3];
    static const char *const tags[3] = {"gpu1", "gpu2", "gpu3"};
    struct h_server_opts opt = {.extra_args = {"--agent", "127.0.0.1:0", "--max-sessions", "1"}};
    for (int i = 0; i < 3; i++) {
        h_server_start(&srv[i], tags[i], &opt);
        ports[i] = srv[i].port;
        agents[i] = agent_port_of(&srv[i]);
    }
    char cfg[512], stats[600], log_path[512], front[64];
    int fd = h_temp_file("haproxy.cfg", cfg, sizeof cfg);
    close(fd);
    snprintf(stats, sizeof stats, "%s.sock", cfg);
    unlink(stats);
    snprintf(front, sizeof front, "127.0.0.1:%d", hc_free_port());
    write_config(cfg, front, ports, agents, stats);
    int log_fd = h_temp_file("haproxy-log", log_path, sizeof log_path);
    pid_t hp = fork();
    CHECK(hp >= 0);
    if (hp == 0) {
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execlp("haproxy", "haproxy", "-db", "-f", cfg, (char *)NULL);
        fprintf(stderr, "cannot run haproxy: %s (install the Debian package haproxy: scripts/deps.sh)\n",
                strerror(errno));
        _exit(127);
    }
    close(log_fd);
    /* Server 1 is made full by a client of its own: its agent says drain,
     * and HAProxy's weight for it falls to 0 while the others keep theirs. */
    setenv("SCUDA_SERVER", srv[0].addr, 1);
    CHECK(pipe(hold) == 0);
    pid_t h = h_spawn(holder, NULL, 60, -1, -1);
    close(hold[0]);
    int w1 = -1, w2 = -1;
    for (uint64_t end = h_now_ms() + 20000; h_now_ms() < end && !(w1 == 0 && w2 > 0); h_sleep_ms(200)) {
        CHECK(h_pid_alive(hp), "haproxy exited; its log: %s", log_path);
        w1 = haproxy_weight(stats, "gpu1");
        w2 = haproxy_weight(stats, "gpu2");
    }
    CHECK(w1 == 0 && w2 > 0, "HAProxy's weights: gpu1 %d (want 0: its agent says drain), gpu2 %d", w1, w2);
    /* A client through the frontend: its session and bulk connections. */
    setenv("SCUDA_SERVER", front, 1);
    setenv("SCUDA_BULK_STREAMS", "4", 1);
    h_wait_ok(h_spawn(striped, NULL, 60, -1, -1), 60000, "a striped client through HAProxy");
    unsetenv("SCUDA_BULK_STREAMS");
    for (int i = 0; i < 3; i++) {
        CHECK(h_server_log_count(&srv[i], "bulk join refused") == 0, "server %d refused a bulk join", i + 1);
    }
    close(hold[1]);
    h_wait_ok(h, 15000, "the holder");
    kill(hp, SIGTERM);
    if (h_wait(hp, 10000) == -1) kill(hp, SIGKILL);
    for (int i = 0; i < 3; i++) h_server_stop(&srv[i]);
    unlink(stats);
    printf("ok HAProxy takes the agents' weights (a full server: 0), and a striped client through it works\n");
}

int main(void)
{
    h_begin("agent", 170);
    lines();
    haproxy();
    printf("PASS agent\n");
    return 0;
}
