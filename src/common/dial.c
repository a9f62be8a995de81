/* dial.c - see dial.h. */
#define _GNU_SOURCE
#include "dial.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "protocol.h"
#include "transport.h"
#include "trust.h"

#define DEAD_PEER_S 10

/* The server's answer to our preface: 0 when it agrees, else -2 and why. */
static int read_answer(int fd, const char *addr, int timeout_ms, char *err, size_t errlen)
{
    uint8_t in[PREFACE_LEN];
    if (io_read_full_timeout(fd, in, sizeof in, timeout_ms) != 0) {
        snprintf(err, errlen, "%s; check the address and port, and that the server runs SCUDA protocol v4 or later",
                 errno == ETIMEDOUT ? "no answer to the connection preface in time"
                                    : "the connection closed at its first bytes (an older server, or not SCUDA)");
        return -2;
    }
    switch (preface_answer_decode(in)) {
    case PREFACE_OK: return 0;
    case PREFACE_NEED_TLS:
        snprintf(err, errlen, "this server requires TLS; set SCUDA_TLS=1 (and pin its certificate with "
                              "`scuda trust %s`)", addr);
        return -2;
    case PREFACE_NO_TLS:
        snprintf(err, errlen, "this server does not offer TLS (it serves plain TCP: on loopback, or started with "
                              "--insecure); start it with --tls, or on loopback unset SCUDA_TLS (elsewhere "
                              "SCUDA_INSECURE=1 allows plain TCP)");
        return -2;
    case PREFACE_VERSION:
        snprintf(err, errlen, "the server speaks another SCUDA protocol version over TLS than this client (v%d); "
                              "use a client and server of the same SCUDA version", SCUDA_PROTOCOL_VERSION);
        return -2;
    case PREFACE_BAD:
        snprintf(err, errlen, "the server did not take this client's connection preface: an older SCUDA server "
                              "(before v%d), or not SCUDA; use a client and server of the same SCUDA version",
                 SCUDA_PROTOCOL_VERSION);
        return -2;
    case -2:
        snprintf(err, errlen, "the server speaks an older SCUDA protocol (before v4, without TLS); use a client "
                              "and server of the same SCUDA version");
        return -2;
    default:
        snprintf(err, errlen, "not a SCUDA server, or a newer one; use a client and server of the same SCUDA "
                              "version");
        return -2;
    }
}

/* SCUDA_TLS_CERT and SCUDA_TLS_KEY, when set: both or neither. */
static int use_client_cert(struct tls_link *l, char *err, size_t errlen)
{
    const char *cert = scuda_tls_cert(), *key = scuda_tls_key();
    if (!cert && !key) return 0;
    if (!cert || !key) {
        snprintf(err, errlen, "SCUDA_TLS_CERT and SCUDA_TLS_KEY go together: set both (a client certificate and "
                              "its key, PEM) or neither");
        return -1;
    }
    return tls_client_cert(l, cert, key, err, errlen);
}

/* The client's TLS handshake, after the preface's answer when
 * read_preface_answer (it cannot be pipelined with the ClientHello:
 * OpenSSL reads the socket right after writing it, answer included).
 * ca: SCUDA_TLS_CA, or NULL. On failure err says why. */
static struct tls_link *handshake(int fd, const char *addr, const char *ca, int timeout_ms, int keeps_socket,
                                  int read_preface_answer, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(addr, host, sizeof host, &port) != 0) {
        snprintf(err, errlen, "bad address '%s'", addr);
        return NULL;
    }
    if (read_preface_answer && read_answer(fd, addr, timeout_ms, err, errlen) != 0) return NULL;
    struct tls_link *l = tls_client_link(fd, ca, host, keeps_socket, err, errlen);
    if (!l) return NULL;
    if (use_client_cert(l, err, errlen) != 0) {
        tls_link_free(l);
        return NULL;
    }
    if (tls_connect(l, timeout_ms, err, errlen) != 0) {
        tls_link_free(l);
        return NULL;
    }
    return l;
}

/* Whether the server is the one configured; 0, or -2 (err says why). */
static int check_server(struct tls_link *l, const char *addr, char *err, size_t errlen)
{
    if (scuda_tls_ca() && !scuda_tls_fingerprint()) return 0; /* OpenSSL checked chain and name */
    char fp[TLS_FP_LEN];
    if (tls_peer_fingerprint(l, fp) != 0) {
        snprintf(err, errlen, "the server presented no certificate");
        return -2;
    }
    return trust_check(addr, fp, err, errlen) == 0 ? 0 : -2;
}

/* TLS on fd, the server checked, the link attached. 0, or -2 (err says
 * why; fd is left to the caller). */
static int secure(int fd, const char *addr, int timeout_ms, int keeps_socket, int answer, char *err, size_t errlen)
{
    struct tls_link *l = handshake(fd, addr, scuda_tls_ca(), timeout_ms, keeps_socket, answer, err, errlen);
    if (!l) return -2;
    int rc = check_server(l, addr, err, errlen);
    if (rc == 0 && tls_attach(fd, l) != 0) {
        snprintf(err, errlen, "fd %d is beyond what TLS links can be kept for; raise no file limits above 65536", fd);
        rc = -2;
    }
    if (rc != 0) tls_link_free(l);
    return rc;
}

int dial(const char *addr, int timeout_ms, int kind, char *err, size_t errlen)
{
    int tls = scuda_tls_for(addr);
    int fd = tcp_connect(addr, timeout_ms, err, errlen);
    if (fd < 0) return fd; /* -2: SCUDA_SOURCE_ADDR, err says what to do */
    /* A link left on this fd number by a connection closed without
     * io_close must not carry this one. */
    tls_detach_free(fd);
    tcp_tune(fd, DEAD_PEER_S);
    uint8_t pre[PREFACE_LEN];
    preface_encode(pre, tls ? PREFACE_TLS : PREFACE_PLAIN, kind);
    int rc;
    if (io_write_full(fd, pre, sizeof pre) != 0) {
        snprintf(err, errlen, "the connection closed at once: %s", strerror(errno));
        rc = -1;
    } else if (!tls) {
        rc = read_answer(fd, addr, timeout_ms, err, errlen);
    } else {
        /* A join's first session is dropped for a second one on the same
         * socket: it must read exactly its own records. */
        rc = secure(fd, addr, timeout_ms, kind != PREFACE_JOIN, 1, err, errlen);
    }
    if (rc == 0) return fd;
    io_close(fd);
    return rc;
}

int dial_second_tls(int fd, const char *addr, int timeout_ms, char *err, size_t errlen)
{
    if (!tls_of(fd)) return 0;
    /* The first session's link holds nothing unread: the server has sent
     * nothing in it since the handshake. Look at the socket itself. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint8_t c = 0;
    int rc;
    do rc = poll(&p, 1, timeout_ms); while (rc < 0 && errno == EINTR);
    if (rc <= 0 || recv(fd, &c, 1, MSG_PEEK) != 1) {
        snprintf(err, errlen, "no answer to the bulk join within %d ms", timeout_ms);
        return -2;
    }
    if (c != JOIN_GO_BYTE) return 1;
    if (recv(fd, &c, 1, 0) != 1) {
        snprintf(err, errlen, "the connection closed during the bulk join");
        return -2;
    }
    tls_detach_free(fd);
    return secure(fd, addr, timeout_ms, 1, 0, err, errlen);
}

int dial_fingerprint(const char *addr, int timeout_ms, char fp[TLS_FP_LEN], char *err, size_t errlen)
{
    int fd = tcp_connect(addr, timeout_ms, err, errlen);
    if (fd < 0) return fd; /* -2: SCUDA_SOURCE_ADDR, err says what to do */
    tls_detach_free(fd); /* as in dial() */
    uint8_t pre[PREFACE_LEN];
    preface_encode(pre, PREFACE_TLS, PREFACE_SESSION);
    struct tls_link *l = NULL;
    int rc = -2;
    if (io_write_full(fd, pre, sizeof pre) != 0)
        snprintf(err, errlen, "the connection closed at once: %s", strerror(errno));
    else if ((l = handshake(fd, addr, NULL /* only the fingerprint is wanted */, timeout_ms, 0, 1, err, errlen)))
        rc = tls_peer_fingerprint(l, fp) == 0 ? 0 : (snprintf(err, errlen, "the server presented no certificate"), -2);
    tls_link_free(l);
    close(fd);
    return rc;
}
