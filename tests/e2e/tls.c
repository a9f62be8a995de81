/* tls.c - TLS on SCUDA's connections (docs/operate.md, TLS;
 * docs/architecture.md, 9.12 TLS), end to end against the stand-in:
 *
 *   - a relay on the path, without the token, sees none of a copy's bytes
 *     (and, as a control, does see them over plain TCP), and bytes it
 *     injects end the connection with a TLS error instead of running;
 *   - a client that does not know the server's certificate refuses and
 *     sends nothing (the server sees no hello, no proof);
 *   - a changed certificate is refused, naming both fingerprints and the
 *     fix; `scuda trust` pins a server and the next connection works;
 *   - a plain client and a TLS server (and the reverse) fail at once with
 *     the fix; a server beyond loopback requires TLS; --insecure warns. */
#define _GNU_SOURCE
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "common/transport.h"

#define PATTERN_BYTES (64u << 10)
#define PATTERN_SEED 4242
/* How long a log line may lag behind what the client saw (a loaded CI
 * machine, a TSan build). */
#define LOG_WAIT_MS 10000

/* ---- a relay that records what it carries and can inject ------------------ */

/* A process of its own (threads in the test process would be copied into
 * every client it forks, which ThreadSanitizer refuses): it relays each
 * connection in a child, appends every byte it carries, both ways, to a
 * file, and on SIGUSR1 writes a forged frame towards the server and says
 * so on a pipe. */
static struct {
    pid_t pid;
    int port;
    char target[64];
    char seen_path[512];
    int injected_pipe[2];
} relay;

static volatile sig_atomic_t inject_now;
static void on_usr1(int sig) { (void)sig; inject_now = 1; }

/* What a relay that knows SCUDA's frames would slip in: a cuMemAlloc. */
static void inject_call(int sfd)
{
    uint8_t frame[FRAME_HEADER_LEN + 8];
    struct frame_header h = {.length = 8, .op = OP_cuMemAlloc, .seq = 999, .ctx = H_RAW_CTX};
    frame_header_encode(&h, frame);
    uint64_t size = 1 << 20;
    memcpy(frame + FRAME_HEADER_LEN, &size, 8);
    if (write(sfd, frame, sizeof frame) == (ssize_t)sizeof frame) (void)!write(relay.injected_pipe[1], "i", 1);
}

static void relay_conn(int cfd, int seen_fd)
{
    char err[256];
    int sfd = tcp_connect(relay.target, 5000, err, sizeof err);
    if (sfd < 0) _exit(1);
    struct pollfd p[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    static uint8_t buf[1 << 16];
    for (;;) {
        int rc = poll(p, 2, 20);
        if (inject_now) {
            inject_now = 0;
            inject_call(sfd);
        }
        if (rc <= 0) continue;
        int from = p[0].revents ? 0 : 1;
        ssize_t n = read(p[from].fd, buf, sizeof buf);
        if (n <= 0 || write(seen_fd, buf, (size_t)n) != n || write(p[1 - from].fd, buf, (size_t)n) != n) break;
    }
    _exit(0);
}

static void relay_start(const char *target)
{
    char err[256];
    snprintf(relay.target, sizeof relay.target, "%s", target);
    snprintf(relay.seen_path, sizeof relay.seen_path, "%s/tls.relay.bytes", E2E_LOG_DIR);
    int lfd = tcp_listen("127.0.0.1:0", &relay.port, err, sizeof err);
    CHECK(lfd >= 0, "%s", err);
    CHECK(pipe(relay.injected_pipe) == 0);
    relay.pid = fork();
    CHECK(relay.pid >= 0);
    if (relay.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        alarm(0);
        signal(SIGUSR1, on_usr1);
        signal(SIGCHLD, SIG_IGN);
        setpgid(0, 0);
        for (;;) {
            int cfd = accept(lfd, NULL, NULL);
            if (cfd < 0) continue;
            int seen_fd = open(relay.seen_path, O_WRONLY | O_APPEND | O_CREAT, 0600);
            if (fork() == 0) relay_conn(cfd, seen_fd);
            close(cfd);
            close(seen_fd);
        }
    }
    setpgid(relay.pid, relay.pid);
    close(lfd);
}

static void relay_stop(void)
{
    kill(-relay.pid, SIGKILL);
    waitpid(relay.pid, NULL, 0);
}

static void relay_reset(void) { unlink(relay.seen_path); }

/* Whether any 32-byte piece of the copy's pattern crossed the relay. */
static int relay_saw_pattern(void)
{
    uint8_t *pat = malloc(PATTERN_BYTES);
    h_pattern(pat, PATTERN_BYTES, PATTERN_SEED);
    size_t len = 0;
    char *seen = h_read_file(relay.seen_path, &len);
    int found = 0;
    for (size_t off = 0; off + 32 <= PATTERN_BYTES && !found; off += 4096)
        found = memmem(seen, len, pat + off, 32) != NULL;
    free(seen);
    free(pat);
    return found;
}

/* ---- clients -------------------------------------------------------------- */

static int go_pipe[2], done_pipe[2];

/* A 64 KiB pattern to the device and back; then, told to, one more call,
 * which must find the connection gone (the relay injected bytes). */
static int copy_client(void *arg)
{
    int expect_cut = arg != NULL;
    h_cuda_setup();
    uint8_t *src = malloc(PATTERN_BYTES), *back = calloc(1, PATTERN_BYTES);
    h_pattern(src, PATTERN_BYTES, PATTERN_SEED);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, PATTERN_BYTES));
    CU(cuMemcpyHtoD_v2(d, src, PATTERN_BYTES));
    CU(cuMemcpyDtoH_v2(back, d, PATTERN_BYTES));
    CHECK(h_diff(src, back, PATTERN_BYTES) < 0, "the copy came back different");
    if (expect_cut) {
        char c = 'c';
        CHECK(write(done_pipe[1], &c, 1) == 1);
        CHECK(read(go_pipe[0], &c, 1) == 1);
        CUresult r = cuCtxSynchronize();
        CHECK(r == CUDA_ERROR_DEVICE_UNAVAILABLE, "after the injection: %s", h_cu_name(r));
    }
    free(src);
    free(back);
    return 0;
}

/* cuInit must fail; its stderr goes to a file the caller reads. */
static int refused_client(void *arg)
{
    (void)arg;
    CHECK(cuInit(0) == CUDA_ERROR_NO_DEVICE, "cuInit worked, but the server should have been refused");
    return 0;
}

/* Run fn in a child with stderr to a file; returns that stderr. */
static char *run_capture(const char *tag, int (*fn)(void *), void *arg)
{
    char path[512];
    int err_fd = h_temp_file(tag, path, sizeof path);
    h_wait_ok(h_spawn(fn, arg, 30, -1, err_fd), 30000, tag);
    close(err_fd);
    return h_read_file(path, NULL);
}

static char *run_refused(const char *tag)
{
    uint64_t t0 = h_now_ms();
    char *err = run_capture(tag, refused_client, NULL);
    CHECK(h_now_ms() - t0 < 4000, "%s: refused only after %llu ms", tag, (unsigned long long)(h_now_ms() - t0));
    return err;
}

static void set_config_home(const char *tag)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tls.%s.config", E2E_LOG_DIR, tag);
    h_remove_tree(dir);
    setenv("XDG_CONFIG_HOME", dir, 1);
}

static void use_tls(const struct h_server *srv, int with_fingerprint)
{
    setenv("SCUDA_SERVER", srv->addr, 1);
    setenv("SCUDA_TLS", "1", 1);
    if (with_fingerprint) setenv("SCUDA_TLS_FINGERPRINT", srv->fingerprint, 1);
    else unsetenv("SCUDA_TLS_FINGERPRINT");
}

/* ---- the cases ------------------------------------------------------------ */

static void relay_cases(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.token = "t0ken", .tls = 1};
    h_server_start(&srv, "relay", &opt);
    relay_start(srv.addr);
    char via[64];
    snprintf(via, sizeof via, "127.0.0.1:%d", relay.port);
    setenv("SCUDA_TOKEN", "t0ken", 1);
    use_tls(&srv, 1);
    setenv("SCUDA_SERVER", via, 1);

    CHECK(pipe(go_pipe) == 0 && pipe(done_pipe) == 0);
    relay_reset();
    /* Its session ends at the altered bytes; its resumes through the same
     * relay fail until SCUDA_RESUME_WITHIN runs out (e2e/resume). */
    setenv("SCUDA_RESUME_WITHIN", "2", 1);
    pid_t pid = h_spawn(copy_client, (void *)1, 30, -1, -1);
    unsetenv("SCUDA_RESUME_WITHIN");
    char c;
    CHECK(read(done_pipe[0], &c, 1) == 1, "the client did not finish its copies");
    CHECK(!relay_saw_pattern(), "the relay read the copy's bytes through TLS");
    printf("ok a relay sees none of a 64 KiB copy's bytes over TLS\n");

    /* The relay's connection children share its process group. */
    CHECK(kill(-relay.pid, SIGUSR1) == 0);
    struct pollfd pi = {.fd = relay.injected_pipe[0], .events = POLLIN};
    CHECK(poll(&pi, 1, 10000) == 1 && read(relay.injected_pipe[0], &c, 1) == 1, "the relay did not inject");
    CHECK(h_wait_log(&srv, "failed authentication: connection closed", 1, LOG_WAIT_MS) == 1,
          "the session did not refuse injected bytes");
    CHECK(write(go_pipe[1], "g", 1) == 1);
    h_wait_ok(pid, 30000, "client after the injection");
    printf("ok bytes a relay injects end the connection with a TLS error, not a call\n");
    h_server_stop(&srv);

    /* The control: over plain TCP the same relay reads the bytes, so the
     * check above can fail. */
    struct h_server plain;
    h_server_start(&plain, "relay-plain", &(struct h_server_opts){.token = "t0ken"});
    relay_stop();
    relay_start(plain.addr);
    snprintf(via, sizeof via, "127.0.0.1:%d", relay.port);
    unsetenv("SCUDA_TLS");
    unsetenv("SCUDA_TLS_FINGERPRINT");
    setenv("SCUDA_SERVER", via, 1);
    relay_reset();
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, -1), 30000, "plain copy through the relay");
    CHECK(relay_saw_pattern(), "control: the relay did not see plain bytes (the check cannot fail)");
    printf("ok control: over plain TCP the relay does see them\n");
    h_server_stop(&plain);
    relay_stop();
    unsetenv("SCUDA_TOKEN");
}

static void trust_cases(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.tls = 1, .own_cert = 1};
    h_server_start(&srv, "trust", &opt);

    /* Unknown: refused before a single byte of the SCUDA handshake. */
    set_config_home("unknown");
    use_tls(&srv, 0);
    char *err = run_refused("unknown");
    CHECK(strstr(err, "unknown server") && strstr(err, srv.fingerprint) && strstr(err, "scuda trust"),
          "the refusal should name the fingerprint and `scuda trust`:\n%s", err);
    free(err);
    h_sleep_ms(200);
    CHECK(h_server_log_count(&srv, "accepted") == 0 && h_server_log_count(&srv, "bad token") == 0,
          "the server saw a hello from a client that does not trust it");
    printf("ok an unknown server is refused, with its fingerprint, and gets no hello\n");

    /* `scuda trust --yes` pins it, and the next connection works. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s trust --yes %s >/dev/null 2>&1", SCUDA_BIN_PATH, srv.addr);
    CHECK(system(cmd) == 0, "scuda trust failed: %s", cmd);
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, -1), 30000, "a client of a pinned server");
    printf("ok `scuda trust` pins the server and the next connection works\n");

    /* A changed certificate: another server at a pinned address. */
    struct h_server other;
    h_server_start(&other, "trust-other", &opt);
    char key[96], line[256], path[600];
    snprintf(key, sizeof key, "%s", other.addr);
    snprintf(line, sizeof line, "%s %s\n", key, srv.fingerprint); /* the old server's pin */
    snprintf(path, sizeof path, "%s/scuda/known_hosts", getenv("XDG_CONFIG_HOME"));
    FILE *f = fopen(path, "a");
    CHECK(f && fputs(line, f) >= 0 && fclose(f) == 0);
    use_tls(&other, 0);
    err = run_refused("changed");
    CHECK(strstr(err, "CHANGED") && strstr(err, srv.fingerprint) && strstr(err, other.fingerprint) &&
              strstr(err, "scuda trust"),
          "the refusal should name both fingerprints and how to replace the pin:\n%s", err);
    free(err);
    printf("ok a changed certificate is refused with the old and new fingerprints\n");

    /* The pin's other form: SCUDA_TLS_FINGERPRINT, wrong. */
    setenv("SCUDA_TLS_FINGERPRINT", srv.fingerprint, 1);
    err = run_refused("wrong-fp");
    CHECK(strstr(err, "SCUDA_TLS_FINGERPRINT") && strstr(err, other.fingerprint), "%s", err);
    free(err);
    printf("ok a wrong SCUDA_TLS_FINGERPRINT is refused\n");
    h_server_stop(&other);

    /* A plain client and a TLS server. */
    unsetenv("SCUDA_TLS");
    setenv("SCUDA_SERVER", srv.addr, 1);
    err = run_refused("plain-client");
    CHECK(strstr(err, "requires TLS") && strstr(err, "SCUDA_TLS=1"), "%s", err);
    free(err);
    /* The server answers the preface first and logs after: the client may
     * be gone before the line is written. */
    CHECK(h_wait_log(&srv, "requires TLS", 1, LOG_WAIT_MS) == 1, "the server did not log the plain client");
    printf("ok a plain client and a TLS server: both say why, at once\n");
    h_server_stop(&srv);
    unsetenv("XDG_CONFIG_HOME");
}

static void plain_server_cases(void)
{
    /* A TLS client and a plain server. */
    struct h_server srv;
    h_server_start(&srv, "plain", NULL);
    setenv("SCUDA_TLS", "1", 1);
    setenv("SCUDA_SERVER", srv.addr, 1);
    char *err = run_refused("tls-client");
    CHECK(strstr(err, "does not offer TLS") && strstr(err, "--tls"), "%s", err);
    free(err);
    unsetenv("SCUDA_TLS");
    unsetenv("SCUDA_TLS_FINGERPRINT");
    h_server_stop(&srv);
    printf("ok a TLS client and a plain server: refused at once, with the fix\n");

    /* Beyond loopback: TLS without being asked; --insecure warns. */
    char state[512];
    snprintf(state, sizeof state, "%s/tls.wide.state", E2E_LOG_DIR);
    struct h_server_opts wide = {.token = "t0ken", .extra_args = {"--listen", "0.0.0.0:0", "--state-dir", state}};
    h_server_start(&srv, "wide", &wide);
    CHECK(h_server_log_count(&srv, "TLS certificate") >= 1, "a server beyond loopback without TLS");
    setenv("SCUDA_TOKEN", "t0ken", 1);
    setenv("SCUDA_SERVER", srv.addr, 1);
    err = run_refused("wide-plain");
    CHECK(strstr(err, "requires TLS"), "%s", err);
    free(err);
    h_server_stop(&srv);
    printf("ok a server beyond loopback requires TLS\n");

    struct h_server_opts insecure = {.token = "t0ken", .extra_args = {"--listen", "0.0.0.0:0", "--insecure"}};
    h_server_start(&srv, "insecure", &insecure);
    char *log = h_server_log(&srv);
    CHECK(strstr(log, "warn") && strstr(log, "--insecure: plain TCP on 0.0.0.0") && strstr(log, "in clear"),
          "--insecure should warn, naming what is exposed:\n%s", log);
    free(log);
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, -1), 30000, "a plain client of an --insecure server");
    h_server_stop(&srv);
    unsetenv("SCUDA_TOKEN");
    printf("ok --insecure serves plain TCP beyond loopback and says so loudly\n");
}

/* A v4 client's TLS preface (its version byte was 0): refused before its
 * handshake, with a status that says so, and the server's log says why.
 * A v4 client would otherwise read our records as garbage. */
static void old_client_refused(void)
{
    struct h_server srv;
    h_server_start(&srv, "v4", &(struct h_server_opts){.tls = 1});
    char err[256];
    int fd = tcp_connect(srv.addr, 5000, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    uint8_t pre[PREFACE_LEN] = {0}, answer[PREFACE_LEN];
    uint32_t magic = PREFACE_MAGIC;
    memcpy(pre, &magic, 4);
    pre[4] = PREFACE_TLS;
    CHECK(write(fd, pre, sizeof pre) == (ssize_t)sizeof pre);
    CHECK(io_read_full_timeout(fd, answer, sizeof answer, 5000) == 0, "no answer to a v4 preface");
    CHECK(preface_answer_decode(answer) == PREFACE_VERSION, "a v4 TLS client got status %d",
          preface_answer_decode(answer));
    close(fd);
    char why[96];
    snprintf(why, sizeof why, "a TLS client of protocol v4, and this server speaks v%d", SCUDA_PROTOCOL_VERSION);
    CHECK(h_wait_log(&srv, why, 1, LOG_WAIT_MS) == 1, "the server did not log why it refused a v4 client");
    h_server_stop(&srv);
    printf("ok a v4 TLS client is refused at its preface, and the server says why\n");
}

int main(void)
{
    h_begin("tls", 110);
    unsetenv("E2E_TLS"); /* each case chooses its transport */
    relay_cases();
    trust_cases();
    plain_server_cases();
    old_client_refused();
    printf("PASS tls\n");
    return 0;
}
