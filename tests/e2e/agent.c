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
 *          session's server (no bulk join refused anywhere).
 * source:  SCUDA_SOURCE_ADDR binds the client's connections (the server
 *          sees that peer); a value that is no IP, or no address of this
 *          host, fails the client with a message naming the variable.
 * pool30:  the pool's acceptance: 30 clients, each from its own loopback
 *          address (SCUDA_SOURCE_ADDR, so `stick on src` tells them apart),
 *          spread over three servers by leastconn (at least 5 sessions
 *          each), every one with a working session; a server SIGKILLed is
 *          marked down within 5 s and new clients, even ones whose stick
 *          entry names it, work on the others (option redispatch); a
 *          server made full (its agent says drain) gets no new client
 *          within 5 s. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
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

/* Three stand-in servers (each with an agent) and HAProxy in front of
 * them, configured from tests/e2e/haproxy.cfg. */
struct pool {
    struct h_server srv[3];
    pid_t hp;
    char cfg[512], stats[600], log_path[512], front[64];
};

static void pool_start(struct pool *p, const char *const tags[3], const struct h_server_opts *opt)
{
    int ports[3], agents[3];
    for (int i = 0; i < 3; i++) {
        h_server_start(&p->srv[i], tags[i], opt);
        ports[i] = p->srv[i].port;
        agents[i] = agent_port_of(&p->srv[i]);
    }
    int fd = h_temp_file("haproxy.cfg", p->cfg, sizeof p->cfg);
    close(fd);
    snprintf(p->stats, sizeof p->stats, "%s.sock", p->cfg);
    unlink(p->stats);
    snprintf(p->front, sizeof p->front, "127.0.0.1:%d", hc_free_port());
    write_config(p->cfg, p->front, ports, agents, p->stats);
    int log_fd = h_temp_file("haproxy-log", p->log_path, sizeof p->log_path);
    p->hp = fork();
    CHECK(p->hp >= 0);
    if (p->hp == 0) {
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        execlp("haproxy", "haproxy", "-db", "-f", p->cfg, (char *)NULL);
        fprintf(stderr, "cannot run haproxy: %s (install the Debian package haproxy: scripts/deps.sh)\n",
                strerror(errno));
        _exit(127);
    }
    close(log_fd);
}

/* HAProxy down, and the servers not in `killed` (a bit per server). */
static void pool_stop(struct pool *p, unsigned killed)
{
    kill(p->hp, SIGTERM);
    if (h_wait(p->hp, 10000) == -1) kill(p->hp, SIGKILL);
    for (int i = 0; i < 3; i++)
        if (!(killed & (1u << i))) h_server_stop(&p->srv[i]);
    unlink(p->stats);
}

static void haproxy(void)
{
    struct pool p;
    static const char *const tags[3] = {"gpu1", "gpu2", "gpu3"};
    struct h_server_opts opt = {.extra_args = {"--agent", "127.0.0.1:0", "--max-sessions", "1"}};
    pool_start(&p, tags, &opt);
    /* Server 1 is made full by a client of its own: its agent says drain,
     * and HAProxy's weight for it falls to 0 while the others keep theirs. */
    setenv("SCUDA_SERVER", p.srv[0].addr, 1);
    CHECK(pipe(hold) == 0);
    pid_t h = h_spawn(holder, NULL, 60, -1, -1);
    close(hold[0]);
    int w1 = -1, w2 = -1;
    for (uint64_t end = h_now_ms() + 20000; h_now_ms() < end && !(w1 == 0 && w2 > 0); h_sleep_ms(200)) {
        CHECK(h_pid_alive(p.hp), "haproxy exited; its log: %s", p.log_path);
        w1 = haproxy_weight(p.stats, "gpu1");
        w2 = haproxy_weight(p.stats, "gpu2");
    }
    CHECK(w1 == 0 && w2 > 0, "HAProxy's weights: gpu1 %d (want 0: its agent says drain), gpu2 %d", w1, w2);
    /* A client through the frontend: its session and bulk connections. */
    setenv("SCUDA_SERVER", p.front, 1);
    setenv("SCUDA_BULK_STREAMS", "4", 1);
    h_wait_ok(h_spawn(striped, NULL, 60, -1, -1), 60000, "a striped client through HAProxy");
    unsetenv("SCUDA_BULK_STREAMS");
    for (int i = 0; i < 3; i++) {
        CHECK(h_server_log_count(&p.srv[i], "bulk join refused") == 0, "server %d refused a bulk join", i + 1);
    }
    close(hold[1]);
    h_wait_ok(h, 15000, "the holder");
    pool_stop(&p, 0);
    printf("ok HAProxy takes the agents' weights (a full server: 0), and a striped client through it works\n");
}

/* ---- SCUDA_SOURCE_ADDR ---------------------------------------------- */

static int source_client(void *arg)
{
    setenv("SCUDA_SOURCE_ADDR", arg, 1);
    h_cuda_setup();
    h_copy_round_trip(3);
    return 0;
}

/* 0 when the client cannot start (what these cases want). */
static int refused_client(void *arg)
{
    setenv("SCUDA_SOURCE_ADDR", arg, 1);
    int n = 0;
    return cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&n) != CUDA_SUCCESS ? 0 : 1;
}

static void expect_refused(const char *value, const char *want)
{
    char path[512];
    int fd = h_temp_file("source-err", path, sizeof path);
    h_wait_ok(h_spawn(refused_client, (void *)value, 30, -1, fd), 30000, "a client with a bad SCUDA_SOURCE_ADDR");
    close(fd);
    char *err = h_read_file(path, NULL);
    CHECK(strstr(err, want), "SCUDA_SOURCE_ADDR=%s: the client said '%s', not '%s'", value, err, want);
    free(err);
}

static void source(void)
{
    struct h_server srv;
    h_server_start(&srv, "source", NULL);
    h_wait_ok(h_spawn(source_client, "127.0.0.7", 30, -1, -1), 30000, "a client from 127.0.0.7");
    CHECK(h_wait_log(&srv, "127.0.0.7:", 1, 10000) >= 1, "the server did not see a client from 127.0.0.7");
    expect_refused("not-an-ip", "SCUDA_SOURCE_ADDR='not-an-ip' is not an IP address");
    expect_refused("192.0.2.1", "cannot use SCUDA_SOURCE_ADDR=192.0.2.1");
    expect_refused("::1", "SCUDA_SOURCE_ADDR=::1 is an IPv6 address");
    h_server_stop(&srv);
    printf("ok SCUDA_SOURCE_ADDR binds the client's connections; bad values name the variable\n");
}

/* ---- the pool's acceptance: 30 clients ------------------------------ */

#define POOL_CLIENTS 30
#define POOL_MAX_SESSIONS 12 /* 36 places: 30 clients fit with room to spare */
#define NOTICE_MS 5000       /* the acceptance: out of rotation within 5 s */

static int wave_hold[2], wave_done[2];

/* A client from 127.0.0.N (arg: N; N % 10 == 0 also copies 16 MiB
 * striped): its round trip, a byte on wave_done, then it keeps its
 * session until wave_hold closes, so that leastconn sees it. */
static int pool_client(void *arg)
{
    int n = (int)(intptr_t)arg;
    close(wave_hold[1]);
    close(wave_done[0]);
    char ip[32];
    snprintf(ip, sizeof ip, "127.0.0.%d", n);
    setenv("SCUDA_SOURCE_ADDR", ip, 1);
    if (n % 10 == 0) striped(NULL);
    else {
        h_cuda_setup();
        h_copy_round_trip((uint32_t)n);
    }
    CHECK(write(wave_done[1], "x", 1) == 1);
    char c;
    CHECK(read(wave_hold[0], &c, 1) == 0);
    return 0;
}

static int sessions_of(const struct h_server *s)
{
    pid_t pids[256];
    return h_server_sessions(s, pids, 256);
}

/* Start clients from 127.0.0.ips[i] through the frontend and wait until
 * every one has done its round trip (they keep their sessions). */
static void wave_start(const struct pool *p, const int *ips, int n, pid_t *pids)
{
    CHECK(pipe(wave_hold) == 0 && pipe(wave_done) == 0);
    setenv("SCUDA_SERVER", p->front, 1);
    setenv("SCUDA_BULK_STREAMS", "4", 1);
    for (int i = 0; i < n; i++) pids[i] = h_spawn(pool_client, (void *)(intptr_t)ips[i], 240, -1, -1);
    unsetenv("SCUDA_BULK_STREAMS");
    close(wave_hold[0]);
    close(wave_done[1]);
    int done = 0;
    for (uint64_t end = h_now_ms() + 180000; done < n && h_now_ms() < end;) {
        struct pollfd pf = {.fd = wave_done[0], .events = POLLIN};
        if (poll(&pf, 1, 500) <= 0) continue;
        char buf[64];
        ssize_t got = read(wave_done[0], buf, sizeof buf);
        if (got <= 0) break; /* every client gone */
        done += (int)got;
    }
    close(wave_done[0]);
    CHECK(done == n, "%d of %d clients through HAProxy did their round trip (haproxy log: %s)", done, n, p->log_path);
}

static void wave_end(const pid_t *pids, int n)
{
    close(wave_hold[1]);
    for (int i = 0; i < n; i++) h_wait_ok(pids[i], 30000, "a client through HAProxy");
}

/* Field `idx` (0-based) of server `name` in "show servers state", or -1. */
static int haproxy_field(const char *sock, const char *name, int idx)
{
    char *s = haproxy_ask(sock, "show servers state gpus\n");
    int v = -1;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        char f[8][64];
        if (sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]) == 8 &&
            strcmp(f[3], name) == 0)
            v = atoi(f[idx]);
    }
    free(s);
    return v;
}

/* Milliseconds from `since` until `done` holds for server `name`; fails
 * the test past 20 s (the acceptance's 5 s is checked by the caller, so
 * that the time is printed either way). */
static uint64_t ms_until(const struct pool *p, const char *name, int (*done)(const struct pool *, const char *),
                         uint64_t since, const char *what)
{
    for (uint64_t end = since + 20000; h_now_ms() < end; h_sleep_ms(50)) {
        CHECK(h_pid_alive(p->hp), "haproxy exited; its log: %s", p->log_path);
        if (done(p, name)) return h_now_ms() - since;
    }
    FAIL("HAProxy did not see %s %s within 20 s (haproxy log: %s)", name, what, p->log_path);
}

static int is_down(const struct pool *p, const char *name) { return haproxy_field(p->stats, name, 5) == 0; }
static int is_drained(const struct pool *p, const char *name) { return haproxy_weight(p->stats, name) == 0; }

/* Source addresses (last byte) that HAProxy's stick table sends to
 * server `id` (1-based), at most max. */
static int stuck_to(const struct pool *p, int id, int *ips, int max)
{
    char *s = haproxy_ask(p->stats, "show table gpus\n");
    int n = 0;
    for (char *line = strtok(s, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        const char *k = strstr(line, "key=127.0.0."), *sid = strstr(line, "server_id=");
        if (k && sid && atoi(sid + 10) == id) ips[n++] = atoi(k + 12);
    }
    free(s);
    return n;
}

static int is_up(const struct pool *p, const char *name)
{
    return haproxy_field(p->stats, name, 5) == 2 && haproxy_weight(p->stats, name) > 0;
}

/* A client that works and ends (arg: the last byte of its address). */
static int one_client(void *arg)
{
    char ip[32];
    snprintf(ip, sizeof ip, "127.0.0.%d", (int)(intptr_t)arg);
    setenv("SCUDA_SOURCE_ADDR", ip, 1);
    h_cuda_setup();
    h_copy_round_trip(5);
    return 0;
}

static void count_sessions(const struct pool *p, int out[3])
{
    for (int i = 0; i < 3; i++) out[i] = sessions_of(&p->srv[i]);
}

/* Phase 1: 30 clients at once; each server gets at least 5. Returns
 * how many addresses stick to gpu1 (in stale, at most 4). */
static int spread(struct pool *p, int *stale)
{
    int ips[POOL_CLIENTS], got[3];
    pid_t pids[POOL_CLIENTS];
    for (int i = 0; i < POOL_CLIENTS; i++) ips[i] = 10 + i;
    uint64_t t0 = h_now_ms();
    wave_start(p, ips, POOL_CLIENTS, pids);
    count_sessions(p, got);
    printf("  %d clients worked through HAProxy in %llu ms; sessions per server: %d %d %d\n", POOL_CLIENTS,
           (unsigned long long)(h_now_ms() - t0), got[0], got[1], got[2]);
    CHECK(got[0] + got[1] + got[2] == POOL_CLIENTS, "%d sessions for %d clients", got[0] + got[1] + got[2],
          POOL_CLIENTS);
    for (int i = 0; i < 3; i++) {
        CHECK(got[i] >= 5, "server %d got %d of %d sessions (want at least 5: leastconn)", i + 1, got[i], POOL_CLIENTS);
        CHECK(h_server_log_count(&p->srv[i], "bulk join refused") == 0, "server %d refused a bulk join", i + 1);
    }
    int n = stuck_to(p, 1, stale, 4);
    CHECK(n >= 2, "HAProxy's stick table sends %d addresses to gpu1, which had %d sessions", n, got[0]);
    wave_end(pids, POOL_CLIENTS);
    return n;
}

/* Phase 2: SIGKILL gpu1. A client whose stick entry names it, started at
 * once, is redispatched; HAProxy marks gpu1 down within 5 s; then more
 * clients (stuck to gpu1 and fresh) all work on gpu2 and gpu3. */
static void kill_one(struct pool *p, const int *stale, int nstale)
{
    int before[3], after[3];
    count_sessions(p, before);
    uint64_t killed_at = h_now_ms();
    h_server_kill(&p->srv[0]);
    pid_t early = h_spawn(one_client, (void *)(intptr_t)stale[0], 60, -1, -1);
    uint64_t down_ms = ms_until(p, "gpu1", is_down, killed_at, "down");
    printf("  gpu1 SIGKILLed: HAProxy marked it down after %llu ms\n", (unsigned long long)down_ms);
    CHECK(down_ms <= NOTICE_MS, "HAProxy took %llu ms to mark a dead server down (want at most %d)",
          (unsigned long long)down_ms, NOTICE_MS);
    h_wait_ok(early, 60000, "a client stuck to the dead server, started at its death (option redispatch)");
    int ips[8], n = 0;
    pid_t pids[8];
    for (int i = 1; i < nstale; i++) ips[n++] = stale[i];
    for (int i = 0; i < 3; i++) ips[n++] = 40 + i;
    wave_start(p, ips, n, pids);
    count_sessions(p, after);
    int moved = after[1] - before[1] + after[2] - before[2];
    CHECK(moved == n + 1, "%d new sessions on gpu2 and gpu3 for %d clients after gpu1's death", moved, n + 1);
    wave_end(pids, n);
    printf("  after gpu1's death %d clients (%d stuck to it) worked on gpu2 and gpu3\n", n + 1, nstale);
}

/* Phase 3: fill gpu2 with direct clients until its agent says drain;
 * HAProxy drains it within 5 s, and new clients all go to gpu3. */
static void drain_one(struct pool *p)
{
    int agent = agent_port_of(&p->srv[1]);
    expect_agent(agent, "up 100%\n"); /* the earlier clients' sessions ended */
    int base = sessions_of(&p->srv[1]);
    setenv("SCUDA_SERVER", p->srv[1].addr, 1);
    CHECK(pipe(hold) == 0);
    pid_t holders[POOL_MAX_SESSIONS];
    for (int i = 0; i < POOL_MAX_SESSIONS; i++) holders[i] = h_spawn(holder, NULL, 180, -1, -1);
    close(hold[0]);
    CHECK(h_wait_sessions(&p->srv[1], base + POOL_MAX_SESSIONS, 120000), "gpu2 did not get its %d holders",
          POOL_MAX_SESSIONS);
    uint64_t full_at = h_now_ms();
    uint64_t drain_ms = ms_until(p, "gpu2", is_drained, full_at, "drained");
    printf("  gpu2 full (its agent says drain): HAProxy drained it after %llu ms\n", (unsigned long long)drain_ms);
    CHECK(drain_ms <= NOTICE_MS, "HAProxy took %llu ms to drain a full server (want at most %d)",
          (unsigned long long)drain_ms, NOTICE_MS);
    int before[3], after[3], ips[6];
    pid_t pids[6];
    count_sessions(p, before);
    for (int i = 0; i < 6; i++) ips[i] = 50 + i;
    wave_start(p, ips, 6, pids);
    count_sessions(p, after);
    CHECK(after[1] == before[1] && after[2] - before[2] == 6,
          "after gpu2 drained, 6 new clients: %d sessions on gpu2 (want 0), %d on gpu3 (want 6)",
          after[1] - before[1], after[2] - before[2]);
    wave_end(pids, 6);
    close(hold[1]);
    for (int i = 0; i < POOL_MAX_SESSIONS; i++) h_wait_ok(holders[i], 30000, "a holder on gpu2");
    printf("  after gpu2 drained, 6 new clients all worked on gpu3\n");
}

static void pool30(void)
{
    struct pool p;
    static const char *const tags[3] = {"p30-gpu1", "p30-gpu2", "p30-gpu3"};
    static const char *const names[3] = {"gpu1", "gpu2", "gpu3"};
    char max[16];
    snprintf(max, sizeof max, "%d", POOL_MAX_SESSIONS);
    struct h_server_opts opt = {.extra_args = {"--agent", "127.0.0.1:0", "--max-sessions", max}};
    pool_start(&p, tags, &opt);
    for (int i = 0; i < 3; i++) ms_until(&p, names[i], is_up, h_now_ms(), "up");
    int stale[4];
    int nstale = spread(&p, stale);
    kill_one(&p, stale, nstale);
    drain_one(&p);
    pool_stop(&p, 1u);
    printf("ok 30 clients spread over a pool of 3 behind HAProxy; a dead and a drained server leave it within 5 s\n");
}

int main(void)
{
    h_begin("agent", 560);
    lines();
    haproxy();
    source();
    pool30();
    printf("PASS agent\n");
    return 0;
}
