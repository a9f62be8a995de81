/* log.c - see log.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

void scuda_log(enum scuda_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug"};
    if (!scuda_log_enabled(level)) return;

    char line[1024];
    int n = snprintf(line, sizeof line, "scuda[%s %d] %s: ", log_role, (int)getpid(), names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    /* One write() per line so that lines from several threads never interleave. */
    ssize_t w = write(log_fd, line, len);
    (void)w;
}

void scuda_log_unsupported_once(int *once_flag, const char *name)
{
    if (atomic_exchange_explicit((_Atomic int *)once_flag, 1, memory_order_relaxed)) return;
    scuda_log(SCUDA_LOG_WARN, "%s is not supported by SCUDA; returning CUDA_ERROR_NOT_SUPPORTED", name);
}
