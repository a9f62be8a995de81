/* hello.h - the client's half of the SCUDA handshake (protocol.h), one
 * implementation for every kind of connection: the shim's main one
 * (conn.c), bulk joins (bulk.c), `scuda bench`'s raw link and the e2e
 * tests' raw sessions. Every wait is bounded. */
#ifndef SCUDA_HELLO_H
#define SCUDA_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

struct session_info;

/* Read the server_hello within timeout_ms and check its magic and version.
 * Fills nonce. Returns 0; -2 when the server speaks another protocol
 * version; -1 for anything else; the reason in err. */
int hello_read_server(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], char *err, size_t errlen);

/* Send a client_hello with `flags` and the proof of `token` (NULL: none)
 * over nonce, followed by `extra` (a join request; may be NULL when
 * extra_len is 0), in one write. Returns 0, or -1 (errno set). */
int hello_send_client(int fd, uint16_t flags, uint64_t device_mask, const char *token,
                      const uint8_t nonce[SCUDA_NONCE_LEN], const void *extra, size_t extra_len);

/* The join request that follows a HELLO_BULK_JOIN client_hello: joins
 * session `pid` as bulk connection `index`, proving the session's join
 * secret over this connection's nonce. */
void hello_join_request(uint8_t req[BULK_JOIN_LEN], uint32_t pid, uint32_t index,
                        const uint8_t secret[BULK_SECRET_LEN], const uint8_t nonce[SCUDA_NONCE_LEN]);

/* Read a session's welcome within timeout_ms: *status and its message in
 * msg and, when the status is WELCOME_OK, the session info in *si.
 * Returns 0; -1 when none came or the connection closed in it; -2 when it
 * is malformed; the reason then in msg. */
int hello_read_session_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen,
                               struct session_info *si);

/* The same for a welcome that carries no session info (a raw link's, a
 * bulk join's): a session's welcome is malformed here (-2, *status then
 * WELCOME_OK). */
int hello_read_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen);

#endif
