/* dial.h - open a connection to a SCUDA server as every client does (the
 * shim's main and bulk connections, the NVML shim, `scuda bench`,
 * `scuda trust`, the e2e tests): TCP, the preface, and when TLS is on
 * (config.h, scuda_tls_for) the TLS handshake and the server's
 * authentication, all before a single byte of the SCUDA handshake. An
 * unknown or changed server is refused before anything is sent to it. */
#ifndef SCUDA_DIAL_H
#define SCUDA_DIAL_H

#include <stddef.h>

#include "preface.h"
#include "tls.h"

/* Connect to addr within timeout_ms. kind: PREFACE_SESSION, or
 * PREFACE_JOIN for a bulk join (dial_second_tls follows). Returns the fd,
 * ready for hello_read_server; -1 when the server cannot be reached (err:
 * the socket's reason); -2 when it was reached but refused or not trusted
 * (err: the whole message, cause and fix). */
int dial(const char *addr, int timeout_ms, int kind, char *err, size_t errlen);

/* A bulk join's second TLS session on fd, once its join request went out
 * in the first: after the session's JOIN_GO_BYTE the first link is
 * dropped (no close_notify) and a new handshake runs, the server checked
 * as in dial(). Returns 0 (plain connections: nothing to do); 1 when the
 * server answered inside the first session instead (a refusal: read the
 * welcome as usual); -2 with the message in err. */
int dial_second_tls(int fd, const char *addr, int timeout_ms, char *err, size_t errlen);

/* Connect over TLS without checking the server and return the
 * fingerprint of the certificate it presents (`scuda trust`). Nothing of
 * SCUDA's handshake is sent. Returns 0, -1 or -2 as dial(). */
int dial_fingerprint(const char *addr, int timeout_ms, char fp[TLS_FP_LEN], char *err, size_t errlen);

#endif
