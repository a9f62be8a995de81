/* bulk_join.c - see bulk_join.h. */
#define _GNU_SOURCE
#include "bulk_join.h"
#include "../common/why.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulk.h"
#include "fd_pass.h"
#include "migrate_switch.h"
#include "peer_link.h"
#include "resume.h"
#include "session.h"
#include "server.h"
#include "../common/auth.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/preface.h"
#include "../common/tls.h"
#include "../common/transport.h"

/* The session's own TLS session on a join: as long as a handshake may
 * take in the parent (admission.h). */
#define SECOND_TLS_TIMEOUT_MS 5000

/* ---- in the session ------------------------------------------------------ */

/* Tell the parent what became of a join: it refuses bad ones itself. */
static void send_verdict(struct session *s, const struct join_note *note, int ok)
{
    struct join_verdict v = {.magic = JOIN_VERDICT_MAGIC, .ok = (uint32_t)ok};
    memcpy(v.nonce, note->nonce, SCUDA_NONCE_LEN);
    if (send(s->ctl_fd, &v, sizeof v, MSG_NOSIGNAL) != (ssize_t)sizeof v)
        LOG_DEBUG("bulk join verdict not delivered: %s", strerror(errno));
}

/* A TLS session cannot move between processes: the parent's, in which
 * the join request came, ends with it (the parent frees it without a
 * close_notify once it has this verdict). This session then runs a TLS
 * session of its own on the socket, after a plain JOIN_GO_BYTE, and the
 * client proves it is the first session's client by repeating its join
 * request inside it: the proof crossed the network only encrypted, so a
 * relay that let the first session through cannot take the socket over
 * now. Returns 0 with the link attached, or -1 with the reason in why. */
static int second_tls(struct session *s, const struct join_note *note, int fd, char *why, size_t whylen)
{
    char err[200];
    uint8_t go = JOIN_GO_BYTE;
    if (send(fd, &go, 1, MSG_NOSIGNAL) != 1) return why_fail(why, whylen, "the client left: %s", strerror(errno));
    struct tls_link *l = tls_server_link(s->opt->tls, fd, 1, err, sizeof err);
    if (!l || tls_accept(l, SECOND_TLS_TIMEOUT_MS, err, sizeof err) != 0 || tls_attach(fd, l) != 0) {
        tls_link_free(l);
        snprintf(why, whylen, "the second TLS session failed: %.100s", err);
        return -1;
    }
    struct join_request again;
    uint8_t want[4 + 4 + SCUDA_PROOF_LEN], got[sizeof want];
    if (hello_read_join_request(fd, SECOND_TLS_TIMEOUT_MS, &again) != 0)
        return why_fail(why, whylen, "no join request in the second TLS session");
    memcpy(want, &note->pid, 4);
    memcpy(want + 4, &note->index, 4);
    memcpy(want + 8, note->proof, SCUDA_PROOF_LEN);
    memcpy(got, &again.pid, 4);
    memcpy(got + 4, &again.index, 4);
    memcpy(got + 8, again.proof, SCUDA_PROOF_LEN);
    if (!auth_equal(want, got, sizeof want))
        return why_fail(why, whylen, "the second TLS session is not the first one's client");
    return 0;
}

/* Attached first, welcomed second: once the client holds every welcome,
 * every connection is ready for a striped copy. */
static void welcome(const struct join_note *note, int fd)
{
    int peer = note->kind == JOIN_PEER;
    if (hello_send_welcome(fd, WELCOME_OK, peer ? "peer" : "bulk") != 0)
        LOG_INFO("%s %u: the client left before its welcome", peer ? "peer link" : "bulk connection", note->index);
    if (peer) peer_join_welcomed(note->index); /* a peer link is used by other threads only after this */
}

/* Make fd what the join asked for: a bulk connection or a peer link. */
static int admit_join(struct session *s, const struct join_note *note, int fd, char *why, size_t whylen)
{
    return note->kind == JOIN_PEER ? peer_join_admit(note, fd, why, whylen) : bulk_admit(s, note, fd, why, whylen);
}

/* A join over TLS whose proof is good: the socket is this session's from
 * here on, and so is every answer on it. */
static void take_tls_join(struct session *s, const struct join_note *note, int fd)
{
    char why[160];
    const char *what = note->kind == JOIN_PEER ? "peer join" : "bulk join";
    send_verdict(s, note, 1);
    if (second_tls(s, note, fd, why, sizeof why) != 0) {
        LOG_WARN("%s refused: %s", what, why);
    } else if (admit_join(s, note, fd, why, sizeof why) == 0) {
        welcome(note, fd);
        return;
    } else {
        /* Taken since the check (a second join of the same index): the
         * client proved the secret, so no one learns anything here. */
        LOG_WARN("%s refused: %s", what, why);
        hello_send_welcome(fd, WELCOME_BAD_JOIN, note->kind == JOIN_PEER ? PEER_REFUSAL : JOIN_REFUSAL);
    }
    io_close(fd);
}

/* A resume (slot RESUME_INDEX) whose proof is good: the connection is
 * the session's new main connection (resume.h). Over TLS it first runs
 * the session's own TLS session, as a bulk join does. */
static void take_resume(struct session *s, const struct join_note *note, int fd)
{
    char why[160];
    send_verdict(s, note, 1);
    if (s->opt->tls && second_tls(s, note, fd, why, sizeof why) != 0) {
        LOG_WARN("resume refused: %s", why);
        io_close(fd);
        return;
    }
    resume_offer(s, fd, note->received);
}

static void take_join(struct session *s, const struct join_note *note, int fd)
{
    char why[160];
    tls_detach_free(fd); /* a fresh connection: nothing of an old fd number's */
    tcp_tune(fd, 10);
    if (note->pid != (uint32_t)getpid()) {
        snprintf(why, sizeof why, "this is session %d, not %u", (int)getpid(), note->pid);
    } else if (note->kind == JOIN_RESUME) {
        if (resume_check(note, why, sizeof why) == 0) {
            take_resume(s, note, fd);
            return;
        }
    } else if (s->opt->tls) {
        if ((note->kind == JOIN_PEER ? peer_join_check(note, why, sizeof why) : bulk_check(note, why, sizeof why)) == 0) {
            take_tls_join(s, note, fd);
            return;
        }
    } else if (admit_join(s, note, fd, why, sizeof why) == 0) {
        welcome(note, fd);
        send_verdict(s, note, 1);
        return;
    }
    /* The reason is for the operator's log only; the client gets the
     * parent's one refusal for every bad join (over TLS, inside the
     * parent's TLS session). */
    LOG_WARN("%s refused: %s", note->kind == JOIN_RESUME ? "resume" : note->kind == JOIN_PEER ? "peer join" : "bulk join",
             why);
    close(fd);
    send_verdict(s, note, 0);
}

/* Until the session is open to every join (bulk_join_open_all), only
 * peer joins are taken: an import's memory links (migrate_links.h). The
 * rest wait, as they waited in the pair before the thread started. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int all;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

void bulk_join_open_all(void)
{
    pthread_mutex_lock(&gate.mu);
    gate.all = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
}

static void wait_open_all(void)
{
    pthread_mutex_lock(&gate.mu);
    while (!gate.all) pthread_cond_wait(&gate.cv, &gate.mu);
    pthread_mutex_unlock(&gate.mu);
}

static void *join_main(void *arg)
{
    struct session *s = arg;
    for (;;) {
        union {
            struct join_note join;
            struct migrate_note migrate;
        } m;
        struct join_note note;
        int fd;
        long n = fd_recv(s->ctl_fd, &m, sizeof m, &fd, 0);
        if (n == (long)sizeof m.migrate && m.migrate.magic == MIGRATE_NOTE_MAGIC && fd >= 0) {
            wait_open_all();
            m.migrate.to[sizeof m.migrate.to - 1] = '\0';
            migrate_request_post(m.migrate.to, fd); /* the dispatch thread runs it (migrate_switch.h) */
            continue;
        }
        if (n == (long)sizeof note) memcpy(&note, &m.join, sizeof note);
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
        if (note.kind != JOIN_PEER) wait_open_all();
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
