/* metrics_http.h - the server's admin endpoint: a small HTTP/1.0
 * responder in the parent's poll loop (`scuda server --metrics ADDR`).
 *
 *   GET /metrics   Prometheus text format (metrics.h)
 *   GET /sessions  the sessions as JSON, for `scuda ps`
 *
 * Every request needs `Authorization: Bearer TOKEN` with an admin token
 * (metrics_http_open), compared in constant time. Requests are hostile
 * input: at most 8 KiB, one deadline of 3 s from accept for the request
 * and the answer, at most 16 connections at once (the oldest goes), no
 * keep-alive, and the parent never blocks on one. */
#ifndef SCUDA_SERVER_METRICS_HTTP_H
#define SCUDA_SERVER_METRICS_HTTP_H

#include <poll.h>
#include <stddef.h>

#include "../common/token_file.h"

#define METRICS_REQUEST_MAX 8192
#define METRICS_DEADLINE_MS 3000
#define METRICS_MAX_CONNS 16
/* The user whose token opens the endpoint, when the token file has one. */
#define METRICS_ADMIN_USER "admin"

/* Listen on addr ("HOST:PORT"; port 0 picks one, left in *port). Tokens:
 * the token of user "admin" when the set has one, else any user's; an
 * empty set (a loopback server) needs none, and then the endpoint must
 * be loopback too. Returns 0, or -1 with the cause and fix in err. */
int metrics_http_open(const char *addr, const struct token_set *const *tokens, int *port, char *err, size_t errlen);
/* Poll entries: the listener and one per connection. */
int metrics_http_poll_count(void);
void metrics_http_poll_fill(struct pollfd *p);
void metrics_http_poll_done(const struct pollfd *p, int n);
/* How long poll() may sleep before a deadline, at most cap_ms. */
int metrics_http_timeout_ms(int cap_ms);
/* In a forked child: close every socket of the endpoint. */
void metrics_http_forget_in_child(void);

#endif
