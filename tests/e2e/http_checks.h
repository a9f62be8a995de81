/* http_checks.h - what the tests of the server's plain TCP side doors
 * share (the HAProxy agent, agent.c; the metrics and admin endpoint,
 * metrics.c): loopback connections and answers read until the server
 * closes, every wait bounded. */
#ifndef SCUDA_E2E_HTTP_CHECKS_H
#define SCUDA_E2E_HTTP_CHECKS_H

#include <stdint.h>

/* A port free now on 127.0.0.1 (for a listener the test starts). */
int hc_free_port(void);
/* A connection to 127.0.0.1:port; the test fails, naming `what`, when
 * none is made. */
int hc_connect_loopback(int port, const char *what);
/* Everything read from fd until the peer closes, or ms pass: a
 * NUL-terminated, malloc'd string. */
char *hc_read_until_close(int fd, uint64_t ms);

#endif
