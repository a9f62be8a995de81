/* transport_phase.c - see transport_phase.h. */
#define _GNU_SOURCE
#include "transport_phase.h"

#include "../common/protocol.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

enum { READ_PREFACE, WRITE_ANSWER, ACCEPT_TLS, FINISHED, REFUSED };

void transport_phase_init(struct transport_phase *tp, int fd, const struct tls_server *tls)
{
    memset(tp, 0, sizeof *tp);
    tls_detach_free(fd); /* a fresh connection: nothing of an old fd number's */
    tp->fd = fd;
    tp->tls = tls;
    tp->state = READ_PREFACE;
}

/* The answer to a complete preface, and what follows it. */
static int decide(struct transport_phase *tp, char *err, size_t errlen)
{
    int status;
    if (preface_decode(tp->preface, &tp->client_tls, &tp->kind) != 0) {
        status = PREFACE_BAD;
        snprintf(err, errlen, "no SCUDA preface (a client older than protocol v4, or not SCUDA)");
    } else if (tp->client_tls && preface_version(tp->preface) != SCUDA_PROTOCOL_VERSION) {
        status = PREFACE_VERSION;
        snprintf(err, errlen, "refused: a TLS client of protocol v%d, and this server speaks v%d (its records after "
                 "the handshake differ); use a client and server of the same SCUDA version",
                 preface_version(tp->preface) ? preface_version(tp->preface) : 4, SCUDA_PROTOCOL_VERSION);
    } else if (tp->tls && !tp->client_tls) {
        status = PREFACE_NEED_TLS;
        snprintf(err, errlen, "refused: a plain TCP client, and this server requires TLS (the client must set "
                              "SCUDA_TLS=1)");
    } else if (!tp->tls && tp->client_tls) {
        status = PREFACE_NO_TLS;
        snprintf(err, errlen, "refused: a TLS client, and this server serves plain TCP (start it with --tls)");
    } else {
        status = PREFACE_OK;
    }
    preface_answer_encode(tp->answer, status);
    tp->state = WRITE_ANSWER;
    return status == PREFACE_OK ? 0 : -1;
}

/* Non-blocking I/O: bytes moved, 0 when the socket has none for now,
 * -1 on EOF or error. */
static ssize_t move(int fd, void *p, size_t n, int out)
{
    ssize_t r;
    do r = out ? send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(fd, p, n, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (r == 0 && !out) errno = ECONNRESET;
    return r > 0 ? r : -1;
}

static int start_tls(struct transport_phase *tp, char *err, size_t errlen)
{
    if (!tp->client_tls) {
        tp->state = FINISHED;
        return TLS_STEP_DONE;
    }
    /* A join's first TLS session is followed by a second on the same
     * socket (bulk_join.c): it must read exactly its own records. */
    tp->link = tls_server_link(tp->tls, tp->fd, tp->kind != PREFACE_JOIN, err, errlen);
    if (!tp->link) return TLS_STEP_ERROR;
    tp->state = ACCEPT_TLS;
    return TLS_STEP_WANT_READ;
}

int transport_phase_step(struct transport_phase *tp, char *err, size_t errlen)
{
    switch (tp->state) {
    case READ_PREFACE: {
        ssize_t r = move(tp->fd, tp->preface + tp->got, PREFACE_LEN - tp->got, 0);
        if (r < 0) {
            snprintf(err, errlen, "closed before its preface: %s", strerror(errno));
            return TLS_STEP_ERROR;
        }
        tp->got += (size_t)r;
        if (tp->got < PREFACE_LEN) return TLS_STEP_WANT_READ;
        if (decide(tp, tp->refusal, sizeof tp->refusal) != 0) tp->state = REFUSED;
        else tp->state = WRITE_ANSWER;
        return TLS_STEP_WANT_WRITE;
    }
    case WRITE_ANSWER:
    case REFUSED: {
        ssize_t r = move(tp->fd, tp->answer + tp->sent, PREFACE_LEN - tp->sent, 1);
        if (r < 0) {
            snprintf(err, errlen, "closed before the preface's answer: %s", strerror(errno));
            return TLS_STEP_ERROR;
        }
        tp->sent += (size_t)r;
        if (tp->sent < PREFACE_LEN) return TLS_STEP_WANT_WRITE;
        if (tp->state == REFUSED) {
            snprintf(err, errlen, "%s", tp->refusal);
            return TLS_STEP_ERROR;
        }
        return start_tls(tp, err, errlen);
    }
    case ACCEPT_TLS: {
        int st = tls_accept_step(tp->link, err, errlen);
        if (st != TLS_STEP_DONE) return st;
        if (tls_attach(tp->fd, tp->link) != 0) {
            snprintf(err, errlen, "fd %d is beyond the TLS link table", tp->fd);
            return TLS_STEP_ERROR;
        }
        tp->link = NULL; /* the fd owns it now */
        tp->state = FINISHED;
        return TLS_STEP_DONE;
    }
    default: return TLS_STEP_DONE;
    }
}

void transport_phase_abort(struct transport_phase *tp)
{
    tls_link_free(tp->link);
    tp->link = NULL;
}
