/* bulk_join.c - see bulk_join.h. */
#define _GNU_SOURCE
#include "bulk_join.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulk.h"
#include "children.h"
#include "fd_pass.h"
#include "session.h"
#include "server.h"
#include "../common/auth.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/preface.h"
#include "../common/tls.h"
#include "../common/transport.h"

/* As long as the handshake itself may take (server.c). */
#define JOIN_REQUEST_TIMEOUT_MS 5000

/* ---- the join child ------------------------------------------------------ */

/* What the parent and the session need of a join: the request, and the
 * nonce its proof was made over. */
static void make_note(const struct join_request *jr, const uint8_t nonce[SCUDA_NONCE_LEN], struct join_note *note)
{
    memset(note, 0, sizeof *note);
    note->magic = JOIN_NOTE_MAGIC;
    note->pid = jr->pid;
    note->index = jr->index;
    memcpy(note->proof, jr->proof, SCUDA_PROOF_LEN);
    memcpy(note->nonce, nonce, SCUDA_NONCE_LEN);
}

void bulk_join_child(int fd, int ctl, const uint8_t nonce[SCUDA_NONCE_LEN], const char *peer)
{
    struct join_request jr;
    if (hello_read_join_request(fd, JOIN_REQUEST_TIMEOUT_MS, &jr) != 0) {
        LOG_INFO("%s: bulk join without a join request", peer);
        _exit(0);
    }
    struct join_note note;
    make_note(&jr, nonce, &note);
    struct tls_link *l = tls_of(fd);
    if (l && !tls_drained(l)) {
        /* Bytes after the request inside this TLS session: not our client,
         * which starts its second session right after it. */
        LOG_WARN("%s: bulk join refused: data after the join request", peer);
        _exit(0);
    }
    if (!children_known((pid_t)note.pid) || note.pid == (uint32_t)getpid()) {
        char msg[96];
        snprintf(msg, sizeof msg, "bulk join refused: no session %u on this server", note.pid);
        LOG_WARN("%s: %s", peer, msg);
        hello_send_welcome(fd, WELCOME_BAD_JOIN, msg);
        _exit(0);
    }
    /* The session runs a TLS session of its own on this socket (take_join):
     * this one ends here, without a close_notify; a refusal above was sent
     * inside it. */
    if (l) tls_detach_free(fd);
    if (fd_send(ctl, &note, sizeof note, fd, 0) != 0) {
        LOG_WARN("%s: cannot hand a bulk join to the server: %s", peer, strerror(errno));
        hello_send_welcome(fd, WELCOME_INTERNAL, "bulk join failed inside the server");
        _exit(1);
    }
    LOG_DEBUG("%s: bulk connection %u handed to session %u", peer, note.index, note.pid);
    _exit(0);
}

/* ---- in the session ------------------------------------------------------ */

/* Over TLS, the join child's TLS session ended with the join request, and
 * the client starts a second one with this session on the same socket: a
 * relay that let the first through could otherwise take the socket over
 * now. The client proves it is the first session's client by repeating
 * its join request inside the second: the request's proof crossed the
 * network only encrypted, so no one else can know it. Returns 0, or -1
 * with the reason in why. */
static int second_tls(struct session *s, const struct join_note *note, int fd, char *why, size_t whylen)
{
    char err[200];
    uint8_t go = JOIN_GO_BYTE;
    if (send(fd, &go, 1, MSG_NOSIGNAL) != 1) {
        snprintf(why, whylen, "the client left: %s", strerror(errno));
        return -1;
    }
    struct tls_link *l = tls_server_link(s->opt->tls, fd, 1, err, sizeof err);
    if (!l || tls_accept(l, JOIN_REQUEST_TIMEOUT_MS, err, sizeof err) != 0 || tls_attach(fd, l) != 0) {
        tls_link_free(l);
        snprintf(why, whylen, "the second TLS session failed: %.100s", err);
        return -1;
    }
    struct join_request again;
    uint8_t want[4 + 4 + SCUDA_PROOF_LEN], got[sizeof want];
    if (hello_read_join_request(fd, JOIN_REQUEST_TIMEOUT_MS, &again) != 0) {
        snprintf(why, whylen, "no join request in the second TLS session");
        return -1;
    }
    memcpy(want, &note->pid, 4);
    memcpy(want + 4, &note->index, 4);
    memcpy(want + 8, note->proof, SCUDA_PROOF_LEN);
    memcpy(got, &again.pid, 4);
    memcpy(got + 4, &again.index, 4);
    memcpy(got + 8, again.proof, SCUDA_PROOF_LEN);
    if (!auth_equal(want, got, sizeof want)) {
        snprintf(why, whylen, "the second TLS session is not the first one's client");
        return -1;
    }
    return 0;
}

static void take_join(struct session *s, const struct join_note *note, int fd)
{
    char why[160];
    tls_detach_free(fd); /* a fresh connection: nothing of an old fd number's */
    tcp_tune(fd, 10);
    if (note->pid != (uint32_t)getpid()) {
        snprintf(why, sizeof why, "this is session %d, not %u", (int)getpid(), note->pid);
    } else if (s->opt->tls && second_tls(s, note, fd, why, sizeof why) != 0) {
        LOG_WARN("bulk join refused: %s", why);
        io_close(fd);
        return;
    } else if (bulk_admit(s, note, fd, why, sizeof why) == 0) {
        /* Attached first, welcomed second: once the client holds every
         * welcome, every connection is ready for a striped copy. */
        if (hello_send_welcome(fd, WELCOME_OK, "bulk") != 0)
            LOG_INFO("bulk connection %u: the client left before its welcome", note->index);
        return;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "bulk join refused: %s", why);
    LOG_WARN("%s", msg);
    hello_send_welcome(fd, WELCOME_BAD_JOIN, msg);
    io_close(fd);
}

static void *join_main(void *arg)
{
    struct session *s = arg;
    for (;;) {
        struct join_note note;
        int fd;
        long n = fd_recv(s->ctl_fd, &note, sizeof note, &fd, 0);
        if (n < 0 && errno == EMSGSIZE) continue; /* fd_recv closed what came */
        if (n <= 0) {
            /* The parent is gone: no more joins; bulk connections that are
             * attached carry on. */
            LOG_DEBUG("no more bulk joins: %s", n == 0 ? "the server parent closed its end" : strerror(errno));
            return NULL;
        }
        if (n != (long)sizeof note || note.magic != JOIN_NOTE_MAGIC || fd < 0) {
            LOG_WARN("malformed bulk join from the server parent; ignored");
            if (fd >= 0) close(fd);
            continue;
        }
        take_join(s, &note, fd);
    }
}

int bulk_join_listen(struct session *s)
{
    if (s->ctl_fd < 0) return -1;
    pthread_t t;
    if (pthread_create(&t, NULL, join_main, s) != 0) return -1;
    pthread_detach(t);
    return 0;
}
