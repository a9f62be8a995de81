/* harness.c - see harness.h. */
#define _GNU_SOURCE
#include "harness.h"
#include "common/hello.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/dial.h"
#include "common/ops.gen.h"
#include "common/preface.h"
#include "common/tls.h"
#include "common/protocol.h"
#include "common/session_info.h"
#include "common/transport.h"
#include "common/wire.h"

#ifndef SCUDA_BIN
#error "SCUDA_BIN (path of the scuda executable) must be defined"
#endif
#ifndef STANDIN_LIB
#error "STANDIN_LIB (path of libcuda-standin.so) must be defined"
#endif
#ifndef STANDIN_PTX
#error "STANDIN_PTX (path of the stand-in's kernels.ptx) must be defined"
#endif
#ifndef E2E_LOG_DIR
#error "E2E_LOG_DIR must be defined"
#endif

#define MAX_SERVERS 8

static const char *test_name = "e2e";
static unsigned time_limit_s;
static struct h_server *servers[MAX_SERVERS];

/* ---- failure and cleanup ------------------------------------------------ */

static void kill_servers_now(void)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (servers[i] && servers[i]->pid > 0 && servers[i]->owner == getpid()) {
            kill(-servers[i]->pid, SIGKILL);
            kill(servers[i]->pid, SIGKILL);
            waitpid(servers[i]->pid, NULL, 0);
            servers[i]->pid = 0;
        }
    }
}

/* Async-signal-safe tail of a file onto stderr. */
static void dump_tail_raw(const char *path, size_t tail)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t start = end > (off_t)tail ? end - (off_t)tail : 0;
    lseek(fd, start, SEEK_SET);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        ssize_t w = write(2, buf, (size_t)n);
        (void)w;
    }
    close(fd);
}

static void dump_all_logs(void)
{
    for (int i = 0; i < MAX_SERVERS; i++) {
        if (!servers[i] || servers[i]->owner != getpid()) continue;
        static const char head[] = "---- server log (tail) ----\n";
        ssize_t w = write(2, head, sizeof head - 1);
        (void)w;
        dump_tail_raw(servers[i]->log_path, 6000);
    }
}

static int sanitizer_reports(const struct h_server *s);

/* A session that a sanitizer stopped looks like a lost connection to the
 * client: show why. */
static void dump_sanitizer_reports(void)
{
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] && servers[i]->owner == getpid()) sanitizer_reports(servers[i]);
}

static void at_exit_cleanup(void) { kill_servers_now(); }

static void on_alarm(int sig)
{
    (void)sig;
    char msg[256];
    int n = snprintf(msg, sizeof msg, "FAIL %s: timed out after %u s\n", test_name, time_limit_s);
    ssize_t w = write(2, msg, (size_t)n);
    (void)w;
    dump_all_logs();
    kill_servers_now();
    _exit(124);
}

/* "FAIL test (file:line): cond: message" on stderr. */
static void say_failed(const char *file, int line, const char *cond, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "FAIL %s (%s:%d): %s", test_name, file, line, cond);
    while (fmt && *fmt == ' ') fmt++; /* CHECK prefixes a space */
    if (fmt && *fmt) {
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
    }
    fputc('\n', stderr);
}

static int soft_failures;

int h_soft_failures(void) { return soft_failures; }

void h_soft_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    soft_failures++;
    va_list ap;
    va_start(ap, fmt);
    say_failed(file, line, cond, fmt, ap);
    va_end(ap);
}

void h_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_failed(file, line, cond, fmt, ap);
    va_end(ap);
    dump_all_logs();
    dump_sanitizer_reports();
    exit(1);
}

const char *h_cu_name(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_ASSERT: return "CUDA_ERROR_ASSERT";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    case CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: {
        static __thread char buf[32];
        snprintf(buf, sizeof buf, "CUresult %d", (int)r);
        return buf;
    }
    }
}

void h_fail_cu(const char *file, int line, const char *call, CUresult r)
{
    h_fail(file, line, call, "returned %s (%d)", h_cu_name(r), (int)r);
}

void h_fail_expect(const char *file, int line, const char *call, CUresult got, CUresult want)
{
    h_fail(file, line, call, "returned %s (%d), expected %s (%d)", h_cu_name(got), (int)got, h_cu_name(want),
           (int)want);
}

void h_begin(const char *name, unsigned seconds)
{
    test_name = name;
    time_limit_s = seconds;
    setvbuf(stdout, NULL, _IOLBF, 0);
    atexit(at_exit_cleanup);
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    mkdir(E2E_LOG_DIR, 0755);
    /* The certificate this test's TLS servers share: made afresh. */
    char state_dir[520];
    snprintf(state_dir, sizeof state_dir, "%s/%s.state", E2E_LOG_DIR, name);
    h_remove_tree(state_dir);
    /* The clients' attribute cache (src/client/attr_store.h): the test's
     * own, empty at its start, so what one run kept never answers the next. */
    char attr_dir[520];
    snprintf(attr_dir, sizeof attr_dir, "%s/%s.attributes", E2E_LOG_DIR, name);
    h_remove_tree(attr_dir);
    setenv("SCUDA_ATTR_CACHE", attr_dir, 1);
    alarm(seconds);
}

uint64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void h_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- files ------------------------------------------------------------- */

char *h_read_file(const char *path, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    CHECK(buf != NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        for (;;) {
            if (n + 1 >= cap) {
                cap *= 2;
                buf = realloc(buf, cap);
                CHECK(buf != NULL);
            }
            ssize_t r = read(fd, buf + n, cap - n - 1);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            n += (size_t)r;
        }
        close(fd);
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

char *h_client_stats(int (*fn)(void *), void *arg, unsigned seconds, const char *tag)
{
    char path[1024];
    int fd = h_temp_file(tag, path, sizeof path);
    setenv("SCUDA_STATS", "1", 1);
    pid_t pid = h_spawn(fn, arg, seconds, -1, fd);
    unsetenv("SCUDA_STATS");
    close(fd);
    h_wait_ok_err(pid, (int)seconds * 1000, tag, path);
    return h_read_file(path, NULL);
}

unsigned h_stats_count(const char *stats, const char *kind, const char *name)
{
    for (const char *p = stats; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        char k[16], n[80];
        unsigned c;
        if (sscanf(p, " %15s %u %79s", k, &c, n) == 3 && strcmp(k, kind) == 0 && strcmp(n, name) == 0) return c;
    }
    return 0;
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void h_remove_tree(const char *path) { nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

int h_temp_file(const char *tag, char *path, size_t pathlen)
{
    char clean[64];
    size_t k = 0;
    for (const char *t = tag; *t && k < sizeof clean - 1; t++)
        clean[k++] = (char)((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') || (*t >= '0' && *t <= '9') ? *t : '-');
    clean[k] = '\0';
    snprintf(path, pathlen, "%s/%s.%s.%d.out", E2E_LOG_DIR, test_name, clean, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "%s: %s", path, strerror(errno));
    return fd;
}

/* ---- the server --------------------------------------------------------- */

void h_server_start(struct h_server *s, const char *tag, const struct h_server_opts *opt)
{
    static const struct h_server_opts none;
    if (!opt) opt = &none;
    memset(s, 0, sizeof *s);
    snprintf(s->log_path, sizeof s->log_path, "%s/%s.%s.server.log", E2E_LOG_DIR, test_name, tag);
    snprintf(s->san_prefix, sizeof s->san_prefix, "%s/%s.%s.sanitizer", E2E_LOG_DIR, test_name, tag);
    char cache_home[500];
    snprintf(cache_home, sizeof cache_home, "%s/%s.%s.cache", E2E_LOG_DIR, test_name, tag);
    snprintf(s->cache_dir, sizeof s->cache_dir, "%s/scuda/modules", cache_home);
    h_remove_tree(cache_home);
    /* TLS: asked for, or the whole suite over TLS (E2E_TLS=1). */
    s->tls = opt->tls || (getenv("E2E_TLS") && strcmp(getenv("E2E_TLS"), "1") == 0);
    /* One certificate for all of a test's servers (clients switch servers
     * with SCUDA_SERVER alone), unless a server is to have its own. */
    char state_dir[520];
    if (opt->own_cert) {
        snprintf(state_dir, sizeof state_dir, "%s/%s.%s.state", E2E_LOG_DIR, test_name, tag);
        h_remove_tree(state_dir);
    } else {
        snprintf(state_dir, sizeof state_dir, "%s/%s.state", E2E_LOG_DIR, test_name);
    }
    /* Old sanitizer reports of this test would fail it. */
    DIR *d = opendir(E2E_LOG_DIR);
    const char *base = strrchr(s->san_prefix, '/') + 1;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, base, strlen(base)) == 0) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", E2E_LOG_DIR, e->d_name);
            unlink(p);
        }
    }
    if (d) closedir(d);

    int log_fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(log_fd >= 0, "%s: %s", s->log_path, strerror(errno));
    int port_pipe[2];
    CHECK(pipe2(port_pipe, O_CLOEXEC) == 0);

    int slot = -1;
    for (int i = 0; i < MAX_SERVERS && slot < 0; i++)
        if (!servers[i]) slot = i;
    CHECK(slot >= 0, "too many servers");

    pid_t parent = getpid();
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        alarm(0);
        signal(SIGALRM, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(log_fd, 1);
        dup2(log_fd, 2);
        int pfd = port_pipe[1];
        fcntl(pfd, F_SETFD, 0);
        char fdstr[16];
        snprintf(fdstr, sizeof fdstr, "%d", pfd);
        /* E2E_SERVER_LOG=debug: a test that reads the server's debug lines. */
        const char *level = getenv("E2E_SERVER_LOG");
        setenv("SCUDA_LOG", level ? level : "info", 1);
        unsetenv("SCUDA_SERVER");
        setenv("XDG_CACHE_HOME", cache_home, 1);
        if (opt->token) setenv("SCUDA_TOKEN", opt->token, 1);
        else unsetenv("SCUDA_TOKEN");
        char san[1200];
        /* Leaks are looked for in whatever exits through exit(): the
         * parent at SIGTERM, children that fail early. Sessions end with
         * _exit(), which skips the check: the driver frees their state. */
        snprintf(san, sizeof san, "log_path=%s:abort_on_error=1:detect_leaks=1", s->san_prefix);
        setenv("ASAN_OPTIONS", san, 1);
        snprintf(san, sizeof san, "log_path=%s:print_stacktrace=1:halt_on_error=1:abort_on_error=1",
                 s->san_prefix);
        setenv("UBSAN_OPTIONS", san, 1);
        /* ThreadSanitizer keeps the test's own options (suppressions): a
         * session's stderr is captured for device printf, so its reports
         * go to files that h_server_stop() looks for, and the first ends
         * the process. */
        const char *tsan = getenv("TSAN_OPTIONS");
        snprintf(san, sizeof san, "%s%slog_path=%s:halt_on_error=1", tsan ? tsan : "", tsan && *tsan ? ":" : "",
                 s->san_prefix);
        setenv("TSAN_OPTIONS", san, 1);
        const char *argv[32];
        int n = 0;
        argv[n++] = SCUDA_BIN;
        argv[n++] = "server";
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        /* E2E_DRIVER runs the suite against another driver (the real one
         * on a GPU machine: kernels.ptx is real PTX). */
        const char *driver = getenv("E2E_DRIVER");
        argv[n++] = "--driver";
        argv[n++] = driver && *driver ? driver : STANDIN_LIB;
        argv[n++] = "--port-fd";
        argv[n++] = fdstr;
        if (opt->token_file) {
            argv[n++] = "--token-file";
            argv[n++] = opt->token_file;
        }
        if (s->tls) {
            argv[n++] = "--tls";
            argv[n++] = "--state-dir";
            argv[n++] = state_dir;
        }
        /* Its control socket (scuda migrate) next to its cache, never in
         * the user's state directory; a test's own --control comes later
         * and wins. */
        char control[1200];
        snprintf(control, sizeof control, "%s/control.sock", cache_home);
        argv[n++] = "--control";
        argv[n++] = control;
        for (int i = 0; i < 8 && opt->extra_args[i]; i++) argv[n++] = opt->extra_args[i];
        argv[n] = NULL;
        execv(SCUDA_BIN, (char **)argv);
        dprintf(2, "exec %s: %s\n", SCUDA_BIN, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    s->pid = pid;
    s->owner = getpid();
    servers[slot] = s;
    close(port_pipe[1]);
    close(log_fd);

    char buf[32] = "";
    size_t n = 0;
    uint64_t deadline = h_now_ms() + 10000;
    while (n < sizeof buf - 1 && !memchr(buf, '\n', n)) {
        int left = (int)(deadline - h_now_ms());
        struct pollfd p = {.fd = port_pipe[0], .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t r = read(port_pipe[0], buf + n, sizeof buf - 1 - n);
        if (r <= 0) break;
        n += (size_t)r;
        buf[n] = '\0';
    }
    close(port_pipe[0]);
    s->port = atoi(buf);
    CHECK(s->port > 0 && s->port < 65536, "the server did not report its port (got \"%s\")", buf);
    snprintf(s->addr, sizeof s->addr, "127.0.0.1:%d", s->port);
    setenv("SCUDA_SERVER", s->addr, 1);
    if (s->tls) {
        /* Printed before the port: the log holds it now. */
        char *log = h_server_log(s);
        const char *line = strstr(log, "TLS certificate ");
        const char *fp = line ? strstr(line, "sha256:") : NULL;
        CHECK(fp && strlen(fp) >= 71, "no TLS fingerprint in the server's log");
        snprintf(s->fingerprint, sizeof s->fingerprint, "%.71s", fp);
        free(log);
        setenv("SCUDA_TLS", "1", 1);
        setenv("SCUDA_TLS_FINGERPRINT", s->fingerprint, 1);
    }
}

char *h_server_log(const struct h_server *s) { return h_read_file(s->log_path, NULL); }

int h_server_log_count(const struct h_server *s, const char *needle)
{
    char *log = h_server_log(s);
    int n = 0;
    for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle)) n++;
    free(log);
    return n;
}

int h_wait_log(const struct h_server *s, const char *needle, int n, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    int got;
    while ((got = h_server_log_count(s, needle)) < n && h_now_ms() < deadline) h_sleep_ms(10);
    return got;
}

int h_server_sessions(const struct h_server *s, pid_t *out, int max)
{
    char *log = h_server_log(s);
    int n = 0;
    static const char key[] = ": session ";
    for (const char *p = log; (p = strstr(p, key)) && n < max;) {
        p += sizeof key - 1;
        char *end;
        long pid = strtol(p, &end, 10);
        if (end != p && *end == '\n' && pid > 0) out[n++] = (pid_t)pid;
    }
    free(log);
    return n;
}

int h_wait_sessions(const struct h_server *s, int n, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    pid_t pids[256];
    for (;;) {
        if (h_server_sessions(s, pids, 256) >= n) return 1;
        if (h_now_ms() > deadline) return 0;
        h_sleep_ms(10);
    }
}

int h_pid_alive(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    size_t len;
    char *st = h_read_file(path, &len);
    int alive = 0;
    if (len > 0) {
        const char *rp = strrchr(st, ')');
        alive = rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
    }
    free(st);
    return alive;
}

void h_dump_log(const struct h_server *s, size_t tail_bytes)
{
    fprintf(stderr, "---- %s (tail) ----\n", s->log_path);
    fflush(stderr);
    dump_tail_raw(s->log_path, tail_bytes);
}

void h_server_kill(struct h_server *s)
{
    if (s->pid <= 0) return;
    kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] == s) servers[i] = NULL;
    s->pid = 0;
}

static int sanitizer_reports(const struct h_server *s)
{
    int found = 0;
    const char *base = strrchr(s->san_prefix, '/') + 1;
    DIR *d = opendir(E2E_LOG_DIR);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, base, strlen(base)) != 0) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", E2E_LOG_DIR, e->d_name);
        fprintf(stderr, "---- sanitizer report %s ----\n", p);
        fflush(stderr);
        dump_tail_raw(p, 8000);
        found++;
    }
    if (d) closedir(d);
    return found;
}

void h_server_stop(struct h_server *s) { h_server_stop_killed(s, 0); }

void h_server_stop_killed(struct h_server *s, int killed)
{
    if (s->pid <= 0) return;
    /* Read the verdict before stopping: stopping kills sessions by signal. */
    int died = h_server_log_count(s, "died from signal");
    CHECK(h_pid_alive(s->pid), "the server parent is gone before the end of the test");
    kill(s->pid, SIGTERM);
    int status = -1;
    uint64_t deadline = h_now_ms() + 2000;
    while (waitpid(s->pid, &status, WNOHANG) == 0 && h_now_ms() < deadline) h_sleep_ms(5);
    kill(-s->pid, SIGKILL); /* sessions still running, and the parent if it hung */
    if (waitpid(s->pid, &status, WNOHANG) == 0) waitpid(s->pid, &status, 0);
    for (int i = 0; i < MAX_SERVERS; i++)
        if (servers[i] == s) servers[i] = NULL;
    s->pid = 0;
    int reports = sanitizer_reports(s);
    if (died > killed || reports) {
        h_dump_log(s, 8000);
        CHECK(died <= killed, "%d session(s) died from a signal, %d killed by the test (see %s)", died, killed,
              s->log_path);
        CHECK(reports == 0, "the server or a session wrote %d sanitizer report(s)", reports);
    }
}

/* ---- children ------------------------------------------------------------ */

static void child_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: client child timed out\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    dump_all_logs();
    kill_servers_now();
    _exit(124);
}

pid_t h_spawn(int (*fn)(void *), void *arg, unsigned seconds, int out_fd, int err_fd)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid != 0) return pid;
    struct sigaction sa = {0};
    sa.sa_handler = child_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
    if (out_fd >= 0) dup2(out_fd, 1);
    if (err_fd >= 0) dup2(err_fd, 2);
    int rc = fn(arg);
    exit(rc);
}

int h_wait(pid_t pid, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return -1;
        if (h_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        h_sleep_ms(2);
    }
}

/* A child whose stderr went to a file failed: show the file (a
 * sanitizer's report lands there, and the CI keeps only this output). */
static void show_stderr_file(const char *path)
{
    size_t n = 0;
    char *text = path ? h_read_file(path, &n) : NULL;
    if (!text) return;
    const char *from = n > 16384 ? text + n - 16384 : text;
    fprintf(stderr, "---- the child's stderr (%s%s) ----\n%s\n", path, n > 16384 ? ", last 16 KiB" : "", from);
    free(text);
}

void h_wait_ok_err(pid_t pid, int timeout_ms, const char *what, const char *stderr_path)
{
    int st = h_wait(pid, timeout_ms);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) show_stderr_file(stderr_path);
    CHECK(st != -1, "%s: still running after %d ms (killed)", what, timeout_ms);
    CHECK(!WIFSIGNALED(st), "%s: died from signal %d", what, WTERMSIG(st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: exit status %d", what, WEXITSTATUS(st));
}

void h_wait_ok(pid_t pid, int timeout_ms, const char *what) { h_wait_ok_err(pid, timeout_ms, what, NULL); }

static void (*test_client)(void);

static int run_test_client(void *arg)
{
    (void)arg;
    test_client();
    return 0;
}

void h_run_client_test(const char *name, unsigned seconds, const struct h_server_opts *opt, void (*client)(void))
{
    h_begin(name, seconds + 5);
    struct h_server srv;
    h_server_start(&srv, "main", opt);
    test_client = client;
    h_wait_ok(h_spawn(run_test_client, NULL, seconds, -1, -1), (int)seconds * 1000, "client");
    h_server_stop(&srv);
    printf("PASS %s\n", name);
}

/* ---- CUDA helpers ------------------------------------------------------- */

CUcontext h_cuda_setup(void)
{
    CU(cuInit(0));
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    return ctx;
}

const char *h_ptx_path(void) { return STANDIN_PTX; }

static CUmodule the_module;
static pid_t the_module_pid;

CUmodule h_load_module(void)
{
    size_t len;
    char *ptx = h_read_file(STANDIN_PTX, &len);
    CHECK(len > 0, "cannot read %s", STANDIN_PTX);
    CUmodule m;
    CU(cuModuleLoadData(&m, ptx));
    free(ptx);
    return m;
}

CUmodule h_module(void)
{
    if (the_module && the_module_pid == getpid()) return the_module;
    the_module = h_load_module();
    the_module_pid = getpid();
    return the_module;
}

CUfunction h_func(const char *name)
{
    CUfunction f;
    CUresult r = cuModuleGetFunction(&f, h_module(), name);
    CHECK(r == CUDA_SUCCESS, "cuModuleGetFunction(%s): %s", name, h_cu_name(r));
    return f;
}

void h_pattern(void *p, size_t n, uint32_t seed)
{
    uint8_t *b = p;
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (uint8_t)(x >> 7);
    }
}

void h_copy_round_trip(uint32_t seed)
{
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    uint8_t src[4096], back[4096];
    h_pattern(src, sizeof src, seed);
    CU(cuMemcpyHtoD_v2(d, src, sizeof src));
    CU(cuMemcpyDtoH_v2(back, d, sizeof back));
    CHECK(h_diff(src, back, sizeof src) < 0, "the copy came back different");
    CU(cuMemFree_v2(d));
}

long h_diff(const void *a, const void *b, size_t n)
{
    const uint8_t *x = a, *y = b;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) return (long)i;
    return -1;
}

/* ---- raw protocol ---------------------------------------------------------- */

void h_transport(int fd, const struct h_server *srv, int kind)
{
    uint8_t pre[PREFACE_LEN], answer[PREFACE_LEN];
    preface_encode(pre, srv->tls ? PREFACE_TLS : PREFACE_PLAIN, kind);
    CHECK(io_write_full(fd, pre, sizeof pre) == 0, "preface: %s", strerror(errno));
    CHECK(io_read_full_timeout(fd, answer, sizeof answer, 5000) == 0, "no answer to the preface: %s",
          strerror(errno));
    CHECK(preface_answer_decode(answer) == PREFACE_OK, "the preface was refused (%d)", preface_answer_decode(answer));
    if (!srv->tls) return;
    char err[256];
    tls_detach_free(fd); /* nothing of an old fd number's */
    struct tls_link *l = tls_client_link(fd, NULL, "127.0.0.1", 0, err, sizeof err);
    CHECK(l != NULL, "%s", err);
    CHECK(tls_connect(l, 5000, err, sizeof err) == 0, "TLS handshake: %s", err);
    CHECK(tls_attach(fd, l) == 0);
}

int h_raw_connect(const char *addr, const char *token, uint32_t *status)
{
    char err[256];
    if (status) *status = UINT32_MAX;
    /* As the shim connects: the preface, TLS when the test runs over TLS,
     * no Nagle delay between a frame and the next. */
    int fd = dial(addr, 5000, PREFACE_SESSION, err, sizeof err);
    if (fd < 0) return -1;
    uint8_t nonce[SCUDA_NONCE_LEN];
    if (hello_read_server(fd, 5000, nonce, err, sizeof err) != 0) goto fail;
    if (hello_send_client(fd, 0, ~0ull, token, nonce, NULL, 0) != 0) goto fail;
    struct session_info *si = malloc(sizeof *si); /* tens of KiB: not on a test thread's stack */
    uint32_t st = UINT32_MAX;
    int rc = si ? hello_read_session_welcome(fd, 30000, &st, err, sizeof err, si) : -1;
    free(si);
    if (status) *status = st;
    if (rc != 0 || st != WELCOME_OK) goto fail;
    return fd;
fail:
    io_close(fd);
    return -1;
}

int h_raw_send(int fd, uint16_t op, uint16_t flags, uint32_t seq, uint32_t ctx, const void *payload, uint32_t len)
{
    struct frame_header h = {.length = len, .op = op, .flags = flags, .seq = seq, .ctx = ctx};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)payload, len}};
    return io_writev_full(fd, iov, len ? 2 : 1);
}

long h_raw_call_reply(int fd, uint32_t seq, int timeout_ms, uint8_t **out, size_t *out_len)
{
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    for (;;) {
        uint8_t hdr[FRAME_HEADER_LEN];
        if (io_read_full_timeout(fd, hdr, sizeof hdr, timeout_ms) != 0) return -1;
        struct frame_header h;
        frame_header_decode(hdr, &h);
        if (h.length > SCUDA_MAX_FRAME + 64u) return -1;
        uint8_t *p = malloc(h.length ? h.length : 1);
        if (!p) return -1;
        if (io_read_full_timeout(fd, p, h.length, timeout_ms) != 0) {
            free(p);
            return -1;
        }
        if ((h.flags & FRAME_REPLY) && h.seq == seq && h.length >= 4) {
            uint32_t r;
            memcpy(&r, p, 4);
            if (out) {
                memmove(p, p + 4, h.length - 4);
                *out = p;
                if (out_len) *out_len = h.length - 4;
            } else {
                free(p);
            }
            return (long)r;
        }
        free(p);
    }
}

static _Atomic uint32_t raw_seq = 1;

long h_raw_call(int fd, uint16_t op, uint32_t ctx, const void *payload, size_t len, uint8_t **out, size_t *out_len)
{
    uint32_t seq = raw_seq++;
    if (h_raw_send(fd, op, 0, seq, ctx, payload, (uint32_t)len) != 0) return -1;
    return h_raw_call_reply(fd, seq, 15000, out, out_len);
}

void h_raw_retain_ctx(int fd)
{
    struct msg_scuda_primary_ctx_retain_req m = {.dev = 0, .ctx = H_RAW_CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &m);
    long r = h_raw_call(fd, OP_scuda_primary_ctx_retain, 0, b.data, b.len, NULL, NULL);
    wb_free(&b);
    CHECK(r == CUDA_SUCCESS, "raw session: retaining the primary context returned %ld", r);
}

int h_raw_session(const char *addr)
{
    uint32_t status;
    int fd = h_raw_connect(addr, NULL, &status);
    CHECK(fd >= 0, "raw session: handshake failed (status %u)", status);
    h_raw_retain_ctx(fd);
    return fd;
}

long h_raw_load(int fd, uint32_t ctx, uint64_t id, int is_library, const void *image, size_t len)
{
    struct msg_scuda_module_load_req m = {.head = {.id = id, .is_library = (uint8_t)is_library},
                                          .image = image, .image_len = len};
    wire_buf b;
    wb_init(&b);
    msg_scuda_module_load_req_put(&b, &m);
    wb_put_raw(&b, image, len); /* the bulk bytes follow the fields, as the shim sends them */
    long r = h_raw_call(fd, OP_scuda_module_load, ctx, b.data, b.len, NULL, NULL);
    wb_free(&b);
    return r;
}

long h_raw_load_by_hash(int fd, uint32_t ctx, uint64_t id, int is_library, const uint8_t digest[IMAGE_DIGEST_LEN],
                        uint64_t len, int *found)
{
    struct msg_scuda_module_load_by_hash_req m = {.head = {.id = id, .is_library = (uint8_t)is_library},
                                                  .image_len = len};
    memcpy(m.digest, digest, IMAGE_DIGEST_LEN);
    wire_buf b;
    wb_init(&b);
    msg_scuda_module_load_by_hash_req_put(&b, &m);
    uint8_t *out = NULL;
    size_t n = 0;
    long r = h_raw_call(fd, OP_scuda_module_load_by_hash, ctx, b.data, b.len, &out, &n);
    wb_free(&b);
    if (found) {
        struct msg_scuda_module_load_by_hash_rep rep;
        struct msg_arena a;
        wire_reader rd;
        msg_arena_init(&a);
        wr_init(&rd, out, n);
        *found = msg_scuda_module_load_by_hash_rep_get(&rd, &a, &rep) == 0 ? rep.found : -1;
        msg_arena_free(&a);
    }
    free(out);
    return r;
}

long h_raw_bind(int fd, uint32_t ctx, uint16_t op, uint64_t parent, uint64_t id, const char *name)
{
    struct msg_bind_by_name by_name = {.parent = parent, .id = id, .name = name};
    wire_buf b;
    wb_init(&b);
    if (op == OP_scuda_module_get_function)
        msg_scuda_module_get_function_req_put(&b, &(struct msg_scuda_module_get_function_req){by_name});
    else
        msg_scuda_library_get_kernel_req_put(&b, &(struct msg_scuda_library_get_kernel_req){by_name});
    long r = h_raw_call(fd, op, ctx, b.data, b.len, NULL, NULL);
    wb_free(&b);
    return r;
}

int h_raw_closed_within(int fd, int timeout_ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)timeout_ms;
    char buf[4096];
    for (;;) {
        int left = (int)(deadline - h_now_ms());
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    }
}

long h_raw_launch(int fd, uint64_t fid, const struct msg_launch_params *p)
{
    struct msg_scuda_launch_req m = {.func = fid, .grid = {1, 1, 1}, .block = {1, 1, 1}, .params = *p};
    wire_buf b;
    wb_init(&b);
    msg_scuda_launch_req_put(&b, &m);
    long r = h_raw_call(fd, OP_scuda_launch, H_RAW_CTX, b.data, b.len, NULL, NULL);
    wb_free(&b);
    return r;
}

/* LeakSanitizer in the test programs: a client that forks while another
 * of its threads has used OpenSSL (e2e/fork over TLS) leaves that
 * thread's OpenSSL error state behind in the child, reachable only from a
 * thread the child does not have. libcrypto has no frame pointers, so its
 * allocations show no caller to tell that apart from anything else it
 * allocates: its allocations are not leak-checked here. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libcrypto.so\n"; }

pid_t h_start_linkem(const char *linkem, int port, const char *const *args, char *addr, size_t addrlen)
{
    int out[2];
    CHECK(pipe(out) == 0);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    const char *argv[32] = {linkem, "--listen", "127.0.0.1:0", "--connect", target};
    size_t n = 5;
    for (; args && *args && n < 31; args++) argv[n++] = *args;
    argv[n] = NULL;
    pid_t relay = fork();
    CHECK(relay >= 0);
    if (relay == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        execv(linkem, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    /* linkem prints its port, then a newline, once it listens. */
    char line[16] = "";
    CHECK(io_read_full_timeout(out[0], line, 1, 10000) == 0, "linkem did not start");
    for (size_t i = 1; i < sizeof line - 1 && line[i - 1] != '\n'; i++)
        CHECK(io_read_full_timeout(out[0], line + i, 1, 5000) == 0);
    close(out[0]);
    snprintf(addr, addrlen, "127.0.0.1:%d", atoi(line));
    return relay;
}
