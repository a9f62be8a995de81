/* tls.h - TLS 1.3 links on SCUDA connections, with OpenSSL
 * (docs/architecture.md, 9.12 TLS).
 *
 * A link is one connected socket's TLS: OpenSSL's handshake, then SCUDA's
 * sealed records (tls_records.h) with keys both ends derive from that
 * handshake through OpenSSL's exporter. After the handshake the SSL
 * object carries no byte: it only answers questions about the peer's
 * certificate. Once attached to its fd (tls_attach), every io_* call of
 * transport.h on that fd goes through the link: no other code reads or
 * writes a TLS connection.
 *
 * Threads: the client and the session use one connection from a sender
 * and a reader thread at once. The two directions share nothing but the
 * socket (tls_records.h), which is non-blocking: waits happen in poll().
 *
 * Fork: a process that hands a connection on (the server's parent once
 * it forked a session or passed a join on, a client that forked) frees
 * or abandons its copy of the link; nothing is sent on the socket. The
 * forked session goes on with the copy fork gave it, record numbers
 * included. */
#ifndef SCUDA_TLS_H
#define SCUDA_TLS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct tls_link;
struct tls_server;

/* "sha256:" and 64 lowercase hex digits: a certificate's SHA-256 over its
 * DER bytes, as `openssl x509 -noout -fingerprint -sha256` shows it. */
#define TLS_FP_LEN (7 + 64 + 1)

/* What a non-blocking step asks for next. */
enum tls_step { TLS_STEP_DONE = 0, TLS_STEP_WANT_READ = 1, TLS_STEP_WANT_WRITE = 2, TLS_STEP_ERROR = -1 };

/* ---- the server's side -------------------------------------------------- */

/* The server's certificate and key (PEM files), in a context every
 * accepted connection shares. NULL with the reason in err. */
struct tls_server *tls_server_new(const char *cert_file, const char *key_file, char *err, size_t errlen);
const char *tls_server_fingerprint(const struct tls_server *srv);
/* Ask every client for a certificate (optional) and check the ones that
 * come against the CAs in ca_file (--tls-client-ca). Returns 0, or -1
 * with the reason in err. */
int tls_server_client_ca(struct tls_server *srv, const char *ca_file, char *err, size_t errlen);
void tls_server_free(struct tls_server *srv);

/* A link for an accepted socket, not yet attached. keeps_socket: no
 * second TLS session follows on this socket, so reads may take more than
 * one record off it at a time (0 for a bulk join's first session). */
struct tls_link *tls_server_link(const struct tls_server *srv, int fd, int keeps_socket, char *err, size_t errlen);

/* One non-blocking step of the server's handshake: DONE (the record keys
 * derived too), WANT_READ or
 * WANT_WRITE (poll the fd for that, then step again) or ERROR (reason in
 * err). Drops into a poll loop of many connections as it is. */
int tls_accept_step(struct tls_link *l, char *err, size_t errlen);

/* The same to the end, every wait bounded by timeout_ms in all. */
int tls_accept(struct tls_link *l, int timeout_ms, char *err, size_t errlen);

/* The server's own certificate when none is given: "server-cert.pem" and
 * "server-key.pem" (mode 0600) in dir, made on the first start (a P-256
 * key and a self-signed certificate for 10 years, named after the host),
 * reused on later ones. Fills the two paths; *created says whether they
 * were made now. Returns 0, or -1 with the reason in err. */
int tls_self_signed(const char *dir, char *cert_path, char *key_path, size_t pathlen, int *created, char *err,
                    size_t errlen);

/* ---- the client's side -------------------------------------------------- */

/* A link for a connected socket, not yet attached. ca_file: verify the
 * server's chain against it and the certificate's name against host
 * (a DNS name or an IP address); NULL: the caller pins the certificate
 * itself after the handshake (tls_peer_fingerprint). keeps_socket: as
 * for tls_server_link. */
struct tls_link *tls_client_link(int fd, const char *ca_file, const char *host, int keeps_socket, char *err,
                                 size_t errlen);

/* The client's handshake within timeout_ms. Returns 0, or -1 with the
 * reason in err (with ca_file: why the chain or name was refused). */
int tls_connect(struct tls_link *l, int timeout_ms, char *err, size_t errlen);

/* The peer certificate's fingerprint ("sha256:HEX"). Returns 0, or -1
 * when there is none. */
int tls_peer_fingerprint(struct tls_link *l, char out[TLS_FP_LEN]);

/* Present this certificate (chain) and key when the server asks for one
 * (SCUDA_TLS_CERT, SCUDA_TLS_KEY). Returns 0, or -1 with the reason. */
int tls_client_cert(struct tls_link *l, const char *cert_file, const char *key_file, char *err, size_t errlen);

/* After the server's handshake: the user a client certificate names (its
 * subject CN) into out. 1 when the certificate verified against
 * --tls-client-ca and its CN is a valid user name; 0 when the client sent
 * none; -1 when it sent one that does not count (why says why). */
int tls_peer_user(struct tls_link *l, char *out, size_t outlen, char *why, size_t whylen);

/* The fingerprint of a certificate in a PEM file. */
int tls_file_fingerprint(const char *cert_file, char out[TLS_FP_LEN], char *err, size_t errlen);

/* "TLSv1.3 TLS_AES_128_GCM_SHA256 handshake, records sealed by SCUDA
 * (AES-128-GCM)" for logs. */
void tls_describe(struct tls_link *l, char *out, size_t outlen);

/* ---- links and their fds ------------------------------------------------ */

/* Bind l to its fd: from now on transport.h's io_* on fd use it. The fd is
 * made non-blocking. Returns 0, or -1 when fd is out of the table's range. */
int tls_attach(int fd, struct tls_link *l);
/* The link attached to fd, or NULL (a plain connection). */
struct tls_link *tls_of(int fd);
/* Detach fd's link and free it, without a close_notify. */
void tls_detach_free(int fd);
/* Detach fd's link and never touch it again: in a forked child, where
 * another thread of the parent may have been inside it. */
void tls_detach_abandon(int fd);
/* A link never attached. */
void tls_link_free(struct tls_link *l);

/* ---- I/O on a link (transport.c) ---------------------------------------- */

/* Before the handshake ended these fail with ENOTCONN (tls_input_ready
 * and tls_drained: a read would fail at once, nothing is held). */

/* Waits of the link's I/O give up after timeout_ms (ETIMEDOUT); -1: never. */
void tls_set_timeout(struct tls_link *l, int timeout_ms);
/* Read 1..cap bytes. timeout_ms: 0 = no wait (EAGAIN), -1 = the link's.
 * Returns n > 0, or -1 with errno (EOF: ECONNRESET; a record altered on
 * the way, or not SCUDA's: EPROTO, logged once per link). */
ssize_t tls_read_some(struct tls_link *l, void *buf, size_t cap, int timeout_ms);
/* Read exactly n bytes, each wait bounded by timeout_ms (-1: the link's). */
int tls_read_full(struct tls_link *l, void *buf, size_t n, int timeout_ms);
/* Write every byte of every iovec: the pieces are encrypted where they lie
 * into records of up to REC_MAX_PLAIN bytes, one send() each. */
int tls_writev(struct tls_link *l, const struct iovec *iov, int iovcnt);
/* Write what the socket takes now, never waiting: the bytes written, or -1
 * with errno (EAGAIN: none for now; call again with the same remaining
 * bytes). For the server's parent, which waits on no one. */
ssize_t tls_write_some(struct tls_link *l, const void *buf, size_t n);
/* 1 when a read would find bytes (or EOF, or an error) now, else 0. */
int tls_input_ready(struct tls_link *l);
/* Wait until tls_input_ready, at most timeout_ms (-1: forever). Returns 1,
 * 0 on timeout, -1 on a poll error. */
int tls_wait_input(struct tls_link *l, int timeout_ms);
/* 1 when the link holds nothing a read could return without the socket. */
int tls_drained(struct tls_link *l);

#endif
