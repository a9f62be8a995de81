/* cmd_ps.c - `scuda ps [--server HOST:PORT]`: the sessions a server runs,
 * read from its admin endpoint (`scuda server --metrics`, GET /sessions,
 * metrics_http.h) with an admin token.
 *
 * The answer is the server's word, and read as hostile: bounded in size
 * and time, each field parsed by name with a length bound, and only
 * printable characters reach the terminal. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "common/transport.h"

static const char *const CMD = "scuda ps";

#define PS_DEFAULT_ADDR "127.0.0.1:9464"
#define PS_ANSWER_MAX (16u << 20)
#define PS_TIMEOUT_MS 5000

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda ps [--server HOST:PORT]\n"
            "\n"
            "List the sessions of a server: client address, user, GPU, device memory, age,\n"
            "bytes moved, and the age and size of the last snapshot on a standby (\"-\": none).\n"
            "HOST:PORT is the server's --metrics address (default %s).\n"
            "\n"
            "The token: SCUDA_ADMIN_TOKEN, else SCUDA_TOKEN or the file SCUDA_TOKEN_FILE names;\n"
            "the server takes the token of user `admin` of its token file (or, with no admin\n"
            "line, any user's).\n"
            "\n"
            "Example:\n"
            "  SCUDA_ADMIN_TOKEN=... scuda ps --server gpubox:9464\n",
            PS_DEFAULT_ADDR);
}

/* Everything the server sends until it closes, within PS_TIMEOUT_MS and
 * PS_ANSWER_MAX. Returns a malloc'd, NUL-terminated text, or NULL with why. */
static char *read_answer(int fd, char *why, size_t whylen)
{
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (buf) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = PS_TIMEOUT_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            snprintf(why, whylen, "no whole answer within %d ms", PS_TIMEOUT_MS);
            break;
        }
        if (len + 1 == cap) {
            char *b = cap < PS_ANSWER_MAX ? realloc(buf, cap * 2) : NULL;
            if (!b) {
                snprintf(why, whylen, "an answer over %u bytes", PS_ANSWER_MAX);
                break;
            }
            buf = b;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n == 0) {
            buf[len] = '\0';
            return buf;
        }
        if (n < 0 && errno != EINTR) {
            snprintf(why, whylen, "reading: %s", strerror(errno));
            break;
        }
        if (n > 0) len += (size_t)n;
    }
    free(buf);
    return NULL;
}

/* Where `key` starts in the object obj (a line that starts at obj + 1),
 * past the key; NULL when that line has none: a field one session lacks
 * is never read from the next one's line. */
static const char *field_at(const char *obj, const char *key)
{
    const char *v = strstr(obj, key), *eol = strchr(obj + 1, '\n');
    return v && (!eol || v < eol) ? v + strlen(key) : NULL;
}

/* The string field "name":"..." of one object (the line obj), printable
 * characters only, into out. */
static void field_str(const char *obj, const char *name, char *out, size_t outlen)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\":\"", name);
    const char *v = field_at(obj, key);
    size_t k = 0;
    if (v)
        for (; *v && *v != '"' && *v != '\n' && k + 1 < outlen; v++) {
            if (*v == '\\' && v[1]) v++;
            out[k++] = *v >= 0x20 && *v < 0x7f ? *v : '?';
        }
    out[k] = '\0';
    if (k == 0) snprintf(out, outlen, "-");
}

/* The number field "name":N of one object, or 0; *has says whether the
 * line has it (may be NULL). */
static unsigned long long field_num_has(const char *obj, const char *name, int *has)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *v = field_at(obj, key);
    if (has) *has = v != NULL;
    return v ? strtoull(v, NULL, 10) : 0;
}

static unsigned long long field_num(const char *obj, const char *name) { return field_num_has(obj, name, NULL); }

/* 1536 -> "1.5K" (powers of 1024). */
static const char *human(unsigned long long n, char *buf, size_t len)
{
    static const char unit[] = "BKMGTP";
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 5) v /= 1024, u++;
    snprintf(buf, len, u ? "%.1f%c" : "%.0f%c", v, unit[u]);
    return buf;
}

static const char *age(unsigned long long ms, char *buf, size_t len)
{
    unsigned long long s = ms / 1000;
    if (s < 120) snprintf(buf, len, "%llus", s);
    else if (s < 7200) snprintf(buf, len, "%llum", s / 60);
    else snprintf(buf, len, "%lluh%02llum", s / 3600, s / 60 % 60);
    return buf;
}

/* The last snapshot on a standby: its age and size, or "-" and "-" for a
 * session without one. */
static void snapshot_cells(const char *obj, char *when, char *size, size_t len)
{
    int has_age, has_size;
    unsigned long long ms = field_num_has(obj, "snapshot_age_ms", &has_age);
    unsigned long long bytes = field_num_has(obj, "snapshot_bytes", &has_size);
    if (has_age && has_size) {
        age(ms, when, len);
        human(bytes, size, len);
    } else {
        snprintf(when, len, "-");
        snprintf(size, len, "-");
    }
}

static void print_sessions(const char *body)
{
    printf("%-8s %-16s %-24s %-6s %10s %8s %10s %10s %9s %9s\n", "PID", "USER", "CLIENT", "GPU", "DEVICE-MEM", "AGE",
           "BYTES-IN", "BYTES-OUT", "SNAP-AGE", "SNAP-SIZE");
    int n = 0;
    for (const char *o = strstr(body, "\n{"); o; o = strstr(o + 1, "\n{")) {
        char user[33], peer[65], gpu[33], a[32], b[32], c[32], d[32], e[32], f[32];
        field_str(o, "user", user, sizeof user);
        field_str(o, "peer", peer, sizeof peer);
        field_str(o, "gpu", gpu, sizeof gpu);
        snapshot_cells(o, e, f, sizeof e);
        printf("%-8llu %-16s %-24s %-6s %10s %8s %10s %10s %9s %9s\n", field_num(o, "pid"), user, peer, gpu,
               human(field_num(o, "device_memory"), a, sizeof a), age(field_num(o, "age_ms"), b, sizeof b),
               human(field_num(o, "bytes_in"), c, sizeof c), human(field_num(o, "bytes_out"), d, sizeof d), e, f);
        n++;
    }
    if (n == 0) printf("(no sessions)\n");
}

int cmd_ps(int argc, char **argv)
{
    const char *addr = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        int r = cli_option(argc, argv, &i, CMD, "--server", NULL, &addr);
        if (r < 0) return CLI_USAGE;
        if (r == 0) return cli_unknown_option(CMD, argv[i]);
    }
    if (!addr) addr = PS_DEFAULT_ADDR;
    const char *token = getenv("SCUDA_ADMIN_TOKEN");
    if (!token || !*token) token = scuda_token();
    char err[512];
    int fd = tcp_connect(addr, PS_TIMEOUT_MS, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot reach %s: %s. Give the server's --metrics address with --server HOST:PORT.\n",
                CMD, addr, err);
        return 1;
    }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET /sessions HTTP/1.0\r\n%s%s%s\r\n", token ? "Authorization: Bearer " : "",
                     token ? token : "", token ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
        fprintf(stderr, "%s: cannot send the request to %s (a token over 900 bytes?)\n", CMD, addr);
        close(fd);
        return 1;
    }
    char *answer = read_answer(fd, err, sizeof err);
    close(fd);
    if (!answer) {
        fprintf(stderr, "%s: %s: %s; is it the server's --metrics address?\n", CMD, addr, err);
        return 1;
    }
    int status = 0;
    const char *body = strstr(answer, "\r\n\r\n");
    if (sscanf(answer, "HTTP/1.%*d %d", &status) != 1 || !body) {
        fprintf(stderr, "%s: %s did not answer in HTTP; give the server's --metrics address.\n", CMD, addr);
        free(answer);
        return 1;
    }
    if (status != 200) {
        fprintf(stderr, "%s: %s refused (HTTP %d)%s\n", CMD, addr, status,
                status == 401 ? ": bad or missing admin token; set SCUDA_ADMIN_TOKEN to the token of user admin "
                                "in the server's token file"
                              : "");
        free(answer);
        return 1;
    }
    print_sessions(body + 2);
    free(answer);
    return 0;
}
