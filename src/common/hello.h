/* hello.h - the client's half of the SCUDA handshake (protocol.h), one
 * implementation for every kind of connection. Every wait is bounded. */
#ifndef SCUDA_HELLO_H
#define SCUDA_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

/* Read the server_hello within timeout_ms and check its magic and version.
 * Fills nonce. Returns 0; -2 when the server speaks another protocol
 * version; -1 for anything else; the reason in err. Used by every client
 * connection: the shim's main one (conn.c), bulk joins, `scuda bench`'s raw
 * link and the e2e tests' raw sessions. */
int hello_read_server(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], char *err, size_t errlen);

/* Send a client_hello with `flags` and the proof of `token` (NULL: none)
 * over nonce, followed by `extra` (a join request; may be NULL when
 * extra_len is 0), in one write. Returns 0, or -1 (errno set). */
int hello_send_client(int fd, uint16_t flags, uint64_t device_mask, const char *token,
                      const uint8_t nonce[SCUDA_NONCE_LEN], const void *extra, size_t extra_len);

/* Read a welcome that carries no session info, { u32 status, u32 length,
 * message }, within timeout_ms. Returns 0 with *status and the message in
 * msg; -1 when none came or it is not of that form (a reason in msg; a
 * server that answered with a session's welcome instead gives -1 too,
 * *status then WELCOME_OK). */
int hello_read_welcome(int fd, int timeout_ms, uint32_t *status, char *msg, size_t msglen);

#endif
