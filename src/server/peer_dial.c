/* peer_dial.c - a session dials another server's session with a grant
 * (peer_link.h): the bulk join's handshake (dial.c, client/bulk.c), but
 * from a server, which has no token of the client's and no trust store of
 * its own: the grant is the credential, and over TLS the certificate the
 * client was told (scuda_peer_grant's fingerprint) is pinned. */
#define _GNU_SOURCE
#include "peer_link.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../common/config.h"
#include "../common/hello.h"
#include "../common/preface.h"
#include "../common/tls.h"
#include "../common/transport.h"
#include "../common/why.h"

#define PEER_DIAL_TIMEOUT_MS 5000
#define PEER_DEAD_S 10

static int read_preface_answer(int fd, char *err, size_t errlen)
{
    uint8_t in[PREFACE_LEN];
    if (io_read_full_timeout(fd, in, sizeof in, PEER_DIAL_TIMEOUT_MS) != 0)
        return why_fail(err, errlen, "no answer to the connection preface");
    int st = preface_answer_decode(in);
    if (st == PREFACE_OK) return 0;
    return why_fail(err, errlen, "the server refused the preface (status %d: %s)", st,
                    st == PREFACE_NEED_TLS ? "it requires TLS, but the grant named no certificate"
                    : st == PREFACE_NO_TLS ? "it offers no TLS, but the grant named a certificate"
                                           : "another SCUDA version?");
}

/* A TLS session on fd whose server presents the certificate fp. keeps:
 * as for tls_client_link (0 for the join's first session, which a second
 * one follows on the same socket). Returns 0 with the link attached, or
 * -1 with err. */
static int secure(int fd, const char *host, const char *fp, int keeps, char *err, size_t errlen)
{
    char got[TLS_FP_LEN];
    struct tls_link *l = tls_client_link(fd, NULL, host, keeps, err, errlen);
    if (!l) return -1;
    if (tls_connect(l, PEER_DIAL_TIMEOUT_MS, err, errlen) != 0) goto fail;
    if (tls_peer_fingerprint(l, got) != 0 || strcmp(got, fp) != 0) {
        why_fail(err, errlen, "the server's certificate is not the one the grant named (%s)", fp);
        goto fail;
    }
    if (tls_attach(fd, l) != 0) {
        why_fail(err, errlen, "cannot attach the TLS link");
        goto fail;
    }
    return 0;
fail:
    tls_link_free(l);
    return -1;
}

/* Over TLS the granting session takes the socket over with a TLS session
 * of its own after JOIN_GO_BYTE (bulk_join.c, second_tls), in which the
 * request is repeated. Returns 0 (welcome next), or -1 with err. */
static int second_session(int fd, const char *host, const char *fp, const uint8_t *req, size_t len, char *err,
                          size_t errlen)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint8_t c = 0;
    int rc;
    do rc = poll(&p, 1, PEER_DIAL_TIMEOUT_MS); while (rc < 0 && errno == EINTR);
    if (rc <= 0 || recv(fd, &c, 1, MSG_PEEK) != 1) return why_fail(err, errlen, "no answer to the peer join");
    if (c != JOIN_GO_BYTE) return 0; /* a refusal, inside the first session */
    if (recv(fd, &c, 1, 0) != 1) return why_fail(err, errlen, "the connection closed during the peer join");
    tls_detach_free(fd);
    if (secure(fd, host, fp, 1, err, errlen) != 0) return -1;
    if (io_write_full(fd, req, len) != 0) return why_fail(err, errlen, "the connection closed in the second TLS session");
    return 0;
}

static int join(int fd, const char *host, uint32_t pid, uint32_t link, const uint8_t secret[PEER_SECRET_LEN],
                const char *fp, char *err, size_t errlen)
{
    uint8_t nonce[SCUDA_NONCE_LEN], req[BULK_JOIN_LEN];
    if (hello_read_server(fd, PEER_DIAL_TIMEOUT_MS, nonce, err, errlen) != 0) return -1;
    hello_join_request(req, pid, link, secret, nonce);
    if (hello_send_client(fd, HELLO_PEER_JOIN, 0, NULL, nonce, req, sizeof req) != 0)
        return why_fail(err, errlen, "the connection closed during the handshake");
    if (*fp && second_session(fd, host, fp, req, sizeof req, err, errlen) != 0) return -1;
    uint32_t status;
    char msg[256];
    if (hello_read_welcome(fd, PEER_DIAL_TIMEOUT_MS, &status, msg, sizeof msg) != 0)
        return why_fail(err, errlen, "%s", msg);
    if (status != WELCOME_OK || strcmp(msg, "peer") != 0) return why_fail(err, errlen, "refused: %.200s", msg);
    return 0;
}

int peer_dial(const char *addr, uint32_t pid, uint32_t link, const uint8_t secret[PEER_SECRET_LEN], const char *fp,
              char *err, size_t errlen)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(addr, host, sizeof host, &port) != 0) {
        why_fail(err, errlen, "bad address '%s'", addr);
        return -1;
    }
    int fd = tcp_connect(addr, PEER_DIAL_TIMEOUT_MS, err, errlen);
    if (fd < 0) return -1;
    tls_detach_free(fd); /* a fresh connection: nothing of an old fd number's */
    tcp_tune(fd, PEER_DEAD_S);
    uint8_t pre[PREFACE_LEN];
    preface_encode(pre, *fp ? PREFACE_TLS : PREFACE_PLAIN, PREFACE_JOIN);
    int rc = io_write_full(fd, pre, sizeof pre) != 0 ? why_fail(err, errlen, "the connection closed at once")
                                                   : read_preface_answer(fd, err, errlen);
    if (rc == 0 && *fp) rc = secure(fd, host, fp, 0, err, errlen);
    if (rc == 0) rc = join(fd, host, pid, link, secret, fp, err, errlen);
    if (rc == 0) return fd;
    io_close(fd);
    return -1;
}
