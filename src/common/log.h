/* log.h - leveled logging to stderr for the shim, the server and the CLI.
 *
 * The level comes from SCUDA_LOG (error, warn, info, debug; default warn).
 * Every line is prefixed with "scuda[<role> <pid>]" so that output from a
 * client, a server parent and its session processes can be told apart.
 * A server's lines also start with the time (UTC, ISO 8601, milliseconds),
 * and may go to a file or to syslog instead of stderr (`scuda server
 * --log-file`, `--syslog`); SCUDA_LOG_TIME=1 or 0 turns the time on or
 * off in any process. */
#ifndef SCUDA_LOG_H
#define SCUDA_LOG_H

#include <stddef.h>

enum scuda_log_level {
    SCUDA_LOG_ERROR = 0,
    SCUDA_LOG_WARN = 1,
    SCUDA_LOG_INFO = 2,
    SCUDA_LOG_DEBUG = 3,
};

/* Name the process ("client", "server", "session", "cli") for the prefix. */
void scuda_log_set_role(const char *role);

/* Redirect log output to this file descriptor (default 2). The server's
 * session processes capture fd 1 and 2 for device printf, so they keep a
 * duplicate of the original stderr for their own log. */
void scuda_log_set_fd(int fd);

/* Start every line with the time (default off: a program's stderr through
 * the shim looks as it would natively). SCUDA_LOG_TIME, when set to 0 or
 * 1, wins over this. Forked children keep the setting. */
void scuda_log_set_timestamps(int on);

/* Send the log, and everything else written to stderr (sessions log to a
 * copy of it, sanitizers and crashes write there), to `path`, appended,
 * mode 0640. Returns 0, or -1 with the reason in err. */
int scuda_log_to_file(const char *path, char *err, size_t errlen);

/* Send log lines to syslog (facility daemon, the pid in each line; syslog
 * stamps the time) instead of a file descriptor. */
void scuda_log_to_syslog(void);

int scuda_log_enabled(enum scuda_log_level level);

void scuda_log(enum scuda_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define LOG_ERROR(...) scuda_log(SCUDA_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) scuda_log(SCUDA_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) scuda_log(SCUDA_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) \
    do { if (scuda_log_enabled(SCUDA_LOG_DEBUG)) scuda_log(SCUDA_LOG_DEBUG, __VA_ARGS__); } while (0)

/* A rate limit on every line of this process (a token bucket): `burst`
 * lines at once, then `per_second`. A session process turns it on, since
 * nearly every line it writes is caused by its client, and a client must
 * not be able to fill the server's disk (an unknown op per frame, a refused
 * allocation in a loop). Lines over the limit are counted, not written; the
 * count is written as one "N log lines dropped" line at the next line that
 * passes, at most once a second, and by scuda_log_flush_dropped(). */
void scuda_log_set_rate_limit(unsigned burst, unsigned per_second);
/* Write the pending "N log lines dropped" line now, if any (at exit). */
void scuda_log_flush_dropped(void);

/* Log "NAME is not supported by SCUDA" once per name, at warn level.
 * `once_flag` is a static int owned by the caller; it makes the check
 * a single load on the hot path. */
void scuda_log_unsupported_once(int *once_flag, const char *name);

#endif
