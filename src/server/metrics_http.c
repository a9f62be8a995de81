/* metrics_http.c - the admin endpoint's HTTP/1.0 (metrics_http.h).
 *
 * One state machine per connection on a non-blocking socket: READ (the
 * request line and headers, up to a blank line), then WRITE (the whole
 * answer, built at once), then close. Only GET of two paths is served;
 * anything else gets a short error, and a client that is slow, silent or
 * too long is cut at its deadline or its size without an answer. */
#define _GNU_SOURCE
#include "metrics_http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bound_addr.h"
#include "metrics.h"
#include "../common/auth.h"
#include "../common/log.h"
#include "../common/transport.h"
#include "../common/clock.h"

static struct conn {
    int fd; /* -1: a free slot */
    uint64_t deadline_ms;
    char req[METRICS_REQUEST_MAX + 1];
    size_t req_len;
    char *out; /* the answer, once the request is read */
    size_t out_len, out_done;
} conns[METRICS_MAX_CONNS];

static int listen_fd = -1, needs_token;
static const struct token_set *const *tokens_now;


int metrics_http_open(const char *addr, const struct token_set *const *tokens, int *port, char *err, size_t errlen)
{
    for (int i = 0; i < METRICS_MAX_CONNS; i++) conns[i].fd = -1;
    tokens_now = tokens;
    char why[256];
    int fd = tcp_listen(addr, port, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "--metrics %s: %s; choose another address", addr, why);
        return -1;
    }
    needs_token = *tokens && (*tokens)->count > 0;
    if (!needs_token && !bound_is_loopback(fd)) {
        snprintf(err, errlen, "refusing to serve --metrics on %s without a token: it is not loopback, so anyone who can "
                              "reach it could list the sessions. Give users tokens with --token-file (an `admin` line "
                              "opens the endpoint), or listen on loopback (--metrics 127.0.0.1:9464)", addr);
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    listen_fd = fd;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0) close(c->fd);
    free(c->out);
    c->out = NULL;
    c->fd = -1;
}

void metrics_http_forget_in_child(void)
{
    if (listen_fd < 0) return; /* never opened: the table holds no connections (its fds are not even -1) */
    close(listen_fd);
    listen_fd = -1;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        if (conns[i].fd >= 0) {
            close(conns[i].fd);
            conns[i].fd = -1; /* the parent's buffers stay the parent's */
        }
}

/* ---- authentication ---- */

/* 1 when `given` (len bytes) is a token that opens the endpoint. Every
 * candidate is compared, by digest, in constant time: the time depends on
 * how many tokens there are, not on where a guess differs. */
static int token_ok(const char *given, size_t len)
{
    const struct token_set *t = *tokens_now;
    if (!t || t->count == 0) return 1;
    int has_admin = token_set_find(t, METRICS_ADMIN_USER) != NULL, ok = 0;
    uint8_t want[AUTH_SHA256_LEN], got[AUTH_SHA256_LEN];
    auth_sha256_digest(given, len, got);
    for (int i = 0; i < t->count; i++) {
        auth_sha256_digest(t->entries[i].token, strlen(t->entries[i].token), want);
        int eligible = !has_admin || strcmp(t->entries[i].name, METRICS_ADMIN_USER) == 0;
        ok |= eligible & auth_equal(want, got, sizeof want);
    }
    return ok && len > 0;
}

/* The value of header `name` in the request's headers (after the request
 * line), or NULL; *len gets its length. */
static const char *header(const char *headers, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (const char *h = headers; h && *h; h = strstr(h, "\r\n") ? strstr(h, "\r\n") + 2 : NULL) {
        if (strncasecmp(h, name, nl) != 0 || h[nl] != ':') continue;
        const char *v = h + nl + 1;
        while (*v == ' ' || *v == '\t') v++;
        *len = strcspn(v, "\r\n");
        while (*len && (v[*len - 1] == ' ' || v[*len - 1] == '\t')) (*len)--;
        return v;
    }
    return NULL;
}

static int authorized(const char *headers)
{
    size_t len = 0;
    const char *v = header(headers, "Authorization", &len);
    if (!needs_token) return 1;
    if (!v || len < 7 || strncasecmp(v, "Bearer ", 7) != 0) return 0;
    return token_ok(v + 7, len - 7);
}

/* ---- answers ---- */

static void answer(struct conn *c, const char *status, const char *type, const char *body, size_t body_len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status,
                     type, body_len, strncmp(status, "401", 3) == 0 ? "WWW-Authenticate: Bearer\r\n" : "");
    c->out = malloc((size_t)n + body_len);
    if (!c->out) {
        conn_close(c);
        return;
    }
    memcpy(c->out, head, (size_t)n);
    memcpy(c->out + n, body, body_len);
    c->out_len = (size_t)n + body_len;
    c->out_done = 0;
}

static void answer_text(struct conn *c, const char *status, const char *text)
{
    answer(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* The request is whole (it ends with a blank line): decide the answer. */
static void serve(struct conn *c)
{
    char method[8], path[64], version[16];
    char *eol = strstr(c->req, "\r\n");
    if (!eol || eol - c->req > 120 || sscanf(c->req, "%7s %63s %15s", method, path, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        answer_text(c, "400 Bad Request", "bad request: expected GET /metrics HTTP/1.0\n");
        return;
    }
    if (strcmp(method, "GET") != 0) {
        answer_text(c, "405 Method Not Allowed", "only GET is served\n");
        return;
    }
    int metrics = strcmp(path, "/metrics") == 0, sessions = strcmp(path, "/sessions") == 0;
    if (!metrics && !sessions) {
        answer_text(c, "404 Not Found", "not found: the paths are /metrics and /sessions\n");
        return;
    }
    if (!authorized(eol + 2)) {
        LOG_WARN("--metrics: a request for %s without a valid admin token was refused", path);
        answer_text(c, "401 Unauthorized", "send Authorization: Bearer TOKEN with the token of user \"admin\" in "
                                           "the server's token file (or, without one, any user's token)\n");
        return;
    }
    struct metrics_buf b = {0};
    if (metrics) metrics_render_prometheus(&b);
    else metrics_render_sessions_json(&b);
    if (b.failed) answer_text(c, "500 Internal Server Error", "out of memory\n");
    else answer(c, "200 OK", metrics ? "text/plain; version=0.0.4; charset=utf-8" : "application/json", b.text, b.len);
    metrics_buf_free(&b);
}

/* ---- the connections ---- */

static void accept_all(void)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        struct conn *slot = NULL;
        for (int i = 0; i < METRICS_MAX_CONNS && !slot; i++)
            if (conns[i].fd < 0) slot = &conns[i];
        if (!slot) { /* full: the oldest goes, as with handshakes */
            slot = &conns[0];
            for (int i = 1; i < METRICS_MAX_CONNS; i++)
                if (conns[i].deadline_ms < slot->deadline_ms) slot = &conns[i];
            conn_close(slot);
        }
        slot->fd = fd;
        slot->deadline_ms = now_ms() + METRICS_DEADLINE_MS;
        slot->req_len = 0;
        slot->out = NULL;
    }
}

static void on_readable(struct conn *c)
{
    ssize_t n = read(c->fd, c->req + c->req_len, METRICS_REQUEST_MAX - c->req_len);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        conn_close(c);
        return;
    }
    if (n < 0) return;
    c->req_len += (size_t)n;
    c->req[c->req_len] = '\0';
    if (memchr(c->req, '\0', c->req_len)) {
        conn_close(c); /* not text: no answer */
        return;
    }
    if (strstr(c->req, "\r\n\r\n")) serve(c);
    else if (c->req_len == METRICS_REQUEST_MAX) answer_text(c, "431 Request Header Fields Too Large", "request too long\n");
}

static void on_writable(struct conn *c)
{
    ssize_t n = send(c->fd, c->out + c->out_done, c->out_len - c->out_done, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        conn_close(c);
        return;
    }
    c->out_done += (size_t)n;
    if (c->out_done == c->out_len) {
        shutdown(c->fd, SHUT_WR);
        conn_close(c);
    }
}

int metrics_http_poll_count(void) { return listen_fd >= 0 ? 1 + METRICS_MAX_CONNS : 0; }

void metrics_http_poll_fill(struct pollfd *p)
{
    if (listen_fd < 0) return;
    p[0] = (struct pollfd){.fd = listen_fd, .events = POLLIN};
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        p[1 + i] = (struct pollfd){.fd = conns[i].fd, .events = conns[i].out ? POLLOUT : POLLIN};
}

void metrics_http_poll_done(const struct pollfd *p, int n)
{
    if (listen_fd < 0 || n < 1 + METRICS_MAX_CONNS) return;
    uint64_t now = now_ms();
    for (int i = 0; i < METRICS_MAX_CONNS; i++) {
        struct conn *c = &conns[i];
        if (c->fd < 0 || p[1 + i].fd != c->fd) continue;
        if (now >= c->deadline_ms) conn_close(c);
        else if (c->out && (p[1 + i].revents & (POLLOUT | POLLERR | POLLHUP))) on_writable(c);
        else if (!c->out && (p[1 + i].revents & (POLLIN | POLLERR | POLLHUP))) on_readable(c);
    }
    if (p[0].revents & POLLIN) accept_all();
}

int metrics_http_timeout_ms(int cap_ms)
{
    if (listen_fd < 0) return cap_ms; /* never opened: the zeroed table would read as fd 0, due at once */
    uint64_t now = now_ms(), next = now + (uint64_t)cap_ms;
    for (int i = 0; i < METRICS_MAX_CONNS; i++)
        if (conns[i].fd >= 0 && conns[i].deadline_ms < next) next = conns[i].deadline_ms;
    return next <= now ? 0 : (int)(next - now);
}
