/* log.c - see log.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* -1 until SCUDA_LOG is read. Any thread may read it first; all settle the
 * same value, so a relaxed atomic (a plain load) is enough. */
static _Atomic int log_level = -1;
static int log_fd = 2;
static const char *log_role = "scuda";

static int parse_level(const char *s)
{
    if (s == NULL || *s == '\0') return SCUDA_LOG_WARN;
    if (!strcasecmp(s, "error") || !strcmp(s, "0")) return SCUDA_LOG_ERROR;
    if (!strcasecmp(s, "warn") || !strcmp(s, "1")) return SCUDA_LOG_WARN;
    if (!strcasecmp(s, "info") || !strcmp(s, "2")) return SCUDA_LOG_INFO;
    if (!strcasecmp(s, "debug") || !strcmp(s, "3")) return SCUDA_LOG_DEBUG;
    return SCUDA_LOG_WARN;
}

int scuda_log_enabled(enum scuda_log_level level)
{
    int enabled = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (enabled < 0) {
        enabled = parse_level(getenv("SCUDA_LOG"));
        atomic_store_explicit(&log_level, enabled, memory_order_relaxed);
    }
    return (int)level <= enabled;
}

void scuda_log_set_role(const char *role) { log_role = role; }
void scuda_log_set_fd(int fd) { log_fd = fd; }

/* ---- where lines go, and their time --------------------------------------- */

static int log_time; /* set before threads start (server) or never */
static _Atomic int log_syslog;

void scuda_log_set_timestamps(int on)
{
    const char *env = getenv("SCUDA_LOG_TIME");
    log_time = env && (env[0] == '0' || env[0] == '1') && env[1] == '\0' ? env[0] == '1' : on;
}

int scuda_log_to_file(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s for the log: %s", path, strerror(errno));
        return -1;
    }
    /* Onto stderr itself: sessions log to a copy of stderr they take
     * before capturing device printf, and a crash writes there too. */
    int rc = fd == 2 ? 0 : dup2(fd, 2);
    if (rc < 0) snprintf(err, errlen, "cannot send stderr to %s: %s", path, strerror(errno));
    if (fd != 2) close(fd);
    return rc < 0 ? -1 : 0;
}

void scuda_log_to_syslog(void)
{
    openlog("scuda", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    atomic_store(&log_syslog, 1);
}

/* "2025-11-26T06:27:14.046Z " into out (at least 26 bytes). The date is
 * computed here rather than with gmtime_r, which takes glibc's time zone
 * lock: a line may be written from a signal handler. */
static int format_time(char *out, size_t outlen)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    long long secs = t.tv_sec, days = secs / 86400, rem = secs % 86400;
    /* Civil date from days since 1970-01-01 (H. Hinnant's algorithm). */
    long long z = days + 719468, era = z / 146097, doe = z - era * 146097;
    long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    long long d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9, y = yoe + era * 400 + (m <= 2);
    return snprintf(out, outlen, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03ldZ ", y, m, d, rem / 3600,
                    rem / 60 % 60, rem % 60, t.tv_nsec / 1000000);
}

/* ---- the rate limit ------------------------------------------------------ */

/* Off (burst 0) unless a process asks: the shim and the CLI log little,
 * and each line there is the user's own doing. */
static struct {
    pthread_mutex_t lock;
    double burst, per_second, tokens;
    double last_ns;      /* when tokens were last refilled */
    double reported_ns;  /* when the last "dropped" line was written */
    unsigned long long dropped;
} rate = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* Read before the lock: a process without a limit never takes it (the
 * shim logs from its fault handler). */
static _Atomic int rate_on;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

void scuda_log_set_rate_limit(unsigned burst, unsigned per_second)
{
    pthread_mutex_lock(&rate.lock);
    rate.burst = rate.tokens = burst;
    rate.per_second = per_second;
    rate.last_ns = rate.reported_ns = now_ns();
    pthread_mutex_unlock(&rate.lock);
    atomic_store(&rate_on, burst > 0);
}

static void write_line(const char *line, size_t len)
{
    /* One write() per line so that lines from several threads never interleave. */
    ssize_t w = write(log_fd, line, len);
    (void)w;
}

static void write_dropped(unsigned long long n)
{
    char line[256];
    int len = snprintf(line, sizeof line,
                       "scuda[%s %d] warn: %llu log lines dropped (rate limit: %.0f lines at once, then %.0f a "
                       "second)\n",
                       log_role, (int)getpid(), n, rate.burst, rate.per_second);
    if (len > 0) write_line(line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}

/* Whether a line may be written now; writes the count of dropped lines
 * first when it is due. */
static int rate_admit(void)
{
    if (!atomic_load(&rate_on)) return 1;
    pthread_mutex_lock(&rate.lock);
    double t = now_ns();
    rate.tokens += (t - rate.last_ns) * rate.per_second / 1e9;
    if (rate.tokens > rate.burst) rate.tokens = rate.burst;
    rate.last_ns = t;
    int ok = rate.tokens >= 1;
    if (!ok) {
        rate.dropped++;
    } else {
        rate.tokens -= 1;
        if (rate.dropped && t - rate.reported_ns >= 1e9) {
            write_dropped(rate.dropped);
            rate.dropped = 0;
            rate.reported_ns = t;
        }
    }
    pthread_mutex_unlock(&rate.lock);
    return ok;
}

void scuda_log_flush_dropped(void)
{
    if (!atomic_load(&rate_on)) return;
    pthread_mutex_lock(&rate.lock);
    if (rate.dropped) write_dropped(rate.dropped);
    rate.dropped = 0;
    rate.reported_ns = now_ns();
    pthread_mutex_unlock(&rate.lock);
}

/* ---- lines ------------------------------------------------------------------ */

void scuda_log(enum scuda_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (!scuda_log_enabled(level) || !rate_admit()) return;

    char line[1024];
    int syslogged = atomic_load(&log_syslog);
    int t = log_time && !syslogged ? format_time(line, sizeof line) : 0;
    int n = t + snprintf(line + t, sizeof line - (size_t)t, "scuda[%s %d] %s: ", log_role, (int)getpid(),
                         names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    if (syslogged) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        line[len] = '\0';
        syslog(prio[level], "%s", line);
        return;
    }
    line[len++] = '\n';
    write_line(line, len);
}

void scuda_log_unsupported_once(int *once_flag, const char *name)
{
    if (atomic_exchange_explicit((_Atomic int *)once_flag, 1, memory_order_relaxed)) return;
    scuda_log(SCUDA_LOG_WARN, "%s is not supported by SCUDA; returning CUDA_ERROR_NOT_SUPPORTED", name);
}
