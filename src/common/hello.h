/* hello.h - both ends of the SCUDA handshake (protocol.h): the only code
 * that encodes or decodes a server_hello, a client_hello, a join request
 * or a welcome. The client's half serves every kind of connection: the
 * shim's main one (conn.c), bulk joins (bulk.c), `scuda bench`'s raw link
 * and the e2e tests' raw sessions. The server's half serves its forked
 * children (server.c), sessions, raw links and bulk joins. Every wait is
 * bounded. */
#ifndef SCUDA_HELLO_H
#define SCUDA_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "opset.h"
#include "protocol.h"

struct session_info;

/* ---- the client's half ---------------------------------------------------- */

/* Read the server_hello within timeout_ms and check its magic and version.
 * Fills nonce and *server (its build and op set). Returns 0; -2 when the
 * server speaks another protocol version; -1 for anything else; the
 * reason in err. Nothing is judged: `scuda version --server` shows what
 * any server says. */
int hello_read_server_info(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], struct scuda_opset *server,
                           char *err, size_t errlen);

/* The same, with the server_hello's flags (HELLO_SERVER_*) in *flags:
 * what the server says it takes. */
int hello_read_server_flags(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], uint16_t *flags,
                            struct scuda_opset *server, char *err, size_t errlen);

/* hello_read_server_info, then the client's judgement of the server
 * (opset.h): a server that cannot serve this build is told so (a
 * client_hello without a proof, so that its log names both versions) and
 * refused here, -2, with both versions and what to upgrade in err. */
int hello_read_server(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], char *err, size_t errlen);
/* The same, with the server_hello's flags in *flags. */
int hello_read_server_judged(int fd, int timeout_ms, uint8_t nonce[SCUDA_NONCE_LEN], uint16_t *flags, char *err,
                             size_t errlen);

/* The visible request that follows a HELLO_VISIBLE_DEVICES client_hello:
 * `value` (the client's CUDA_VISIBLE_DEVICES, possibly empty). Returns 0,
 * or -1 with the cause and the fix in err when it is longer than
 * VISIBLE_MAX bytes or not printable ASCII. */
int hello_visible_request(uint8_t req[VISIBLE_REQ_LEN], const char *value, char *err, size_t errlen);

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

/* The resume request that follows a HELLO_RESUME client_hello: a join
 * request for RESUME_INDEX of session `pid`, proving the session's resume
 * secret over this connection's nonce, then `received`, the count of the
 * session's frames the client has read whole (protocol.h, "Resume"). */
void hello_resume_request(uint8_t req[RESUME_REQ_LEN], uint32_t pid, const uint8_t secret[RESUME_SECRET_LEN],
                          const uint8_t nonce[SCUDA_NONCE_LEN], uint64_t received);

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

/* ---- the server's half ---------------------------------------------------- */

/* A client_hello, decoded. */
struct client_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t flags;       /* HELLO_*: what the connection is for */
    uint32_t build;       /* the client's SCUDA_VERSION_PACKED */
    uint64_t device_mask; /* the devices it asks for */
    uint8_t proof[SCUDA_PROOF_LEN];
    struct scuda_opset opset; /* its op registries (version = build) */
};

/* A join request, decoded (see hello_join_request). */
struct join_request {
    uint32_t pid;
    uint32_t index;
    uint8_t proof[SCUDA_PROOF_LEN];
};

/* The server's half without sockets, for the parent's non-blocking
 * handshakes (server/admission.c): each message as bytes. */

/* A server_hello with `flags` and a fresh nonce (left in nonce). */
void hello_encode_server(uint16_t flags, uint8_t nonce[SCUDA_NONCE_LEN], uint8_t out[SERVER_HELLO_LEN]);
/* Decode CLIENT_HELLO_LEN bytes; nothing in them is checked. */
void hello_decode_client(const uint8_t in[CLIENT_HELLO_LEN], struct client_hello *ch);
/* Decode BULK_JOIN_LEN bytes; the proof is the session's to check. */
void hello_decode_join_request(const uint8_t in[BULK_JOIN_LEN], struct join_request *jr);
/* Decode RESUME_REQ_LEN bytes: the join request part, then *received. */
void hello_decode_resume_request(const uint8_t in[RESUME_REQ_LEN], struct join_request *jr, uint64_t *received);
/* Decode VISIBLE_REQ_LEN bytes into out (NUL-terminated). Returns 0, or
 * -1 when they are not a visible request as hello_visible_request makes
 * one (a length beyond VISIBLE_MAX, a byte that is not printable ASCII,
 * padding that is not zero): the bytes come from the network. */
int hello_decode_visible_request(const uint8_t in[VISIBLE_REQ_LEN], char out[VISIBLE_MAX + 1]);
/* A welcome without session info into out (cap bytes). Returns its
 * length, or -1 when it does not fit. */
long hello_encode_welcome(uint32_t status, const char *msg, uint8_t *out, size_t cap);

struct token_set;
/* The index in `tokens` of the user whose token made ch's proof over
 * nonce, or -1. Every token is tried, whatever matched, and each
 * comparison takes the same time wherever the proofs differ: the time
 * depends only on how many tokens there are. With no tokens (NULL or
 * empty), the proof of no token (zeros) gives 0 and anything else -1. */
int hello_find_user(const struct client_hello *ch, const struct token_set *tokens,
                    const uint8_t nonce[SCUDA_NONCE_LEN]);

/* Whether this server serves the client of ch (its op set, opset.h): 0,
 * or -1 with the refusal in msg, which names both versions and what to
 * upgrade. Checked before the token: a client that told the server it
 * refuses it sends no proof. */
int hello_check_client_ops(const struct client_hello *ch, char *msg, size_t msglen);

/* Send a server_hello with `flags` (HELLO_SERVER_*) and a fresh nonce,
 * which is left in nonce: each connection gets its own, so a recorded
 * proof is worth nothing on the next. Returns 0, or -1 (errno set). */
int hello_send_server(int fd, uint16_t flags, uint8_t nonce[SCUDA_NONCE_LEN]);

/* Read a client_hello within timeout_ms into *ch. Nothing in it is
 * checked: the server answers each fault its own way (server.c). Returns
 * 0, or -1 when none came in time or the connection closed in it. */
int hello_read_client(int fd, int timeout_ms, struct client_hello *ch);

/* 1 when ch carries the proof of `token` (NULL: none) over nonce, else 0.
 * The comparison takes the same time wherever the proofs differ. */
int hello_proof_ok(const struct client_hello *ch, const char *token, const uint8_t nonce[SCUDA_NONCE_LEN]);

/* Read the join request that follows a HELLO_BULK_JOIN client_hello,
 * within timeout_ms, into *jr; the proof is the session's to check.
 * Returns 0, or -1 when none came in time or the connection closed in it. */
int hello_read_join_request(int fd, int timeout_ms, struct join_request *jr);

/* Send a welcome without session info: a refusal, a raw link's, a bulk
 * join's. Returns 0, or -1 (errno set) when the client is gone. */
int hello_send_welcome(int fd, uint32_t status, const char *msg);

/* A session's welcome: the same, then its session info (si; NULL in a
 * refusal). */
int hello_send_session_welcome(int fd, uint32_t status, const char *msg, const struct session_info *si);

#endif
