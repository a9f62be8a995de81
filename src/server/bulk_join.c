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
#include "fd_pass.h"
#include "session.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/transport.h"

/* ---- in the session ------------------------------------------------------ */

/* Tell the parent what became of a join: it refuses bad ones itself. */
static void send_verdict(struct session *s, const struct join_note *note, int ok)
{
    struct join_verdict v = {.magic = JOIN_VERDICT_MAGIC, .ok = (uint32_t)ok};
    memcpy(v.nonce, note->nonce, SCUDA_NONCE_LEN);
    if (send(s->ctl_fd, &v, sizeof v, MSG_NOSIGNAL) != (ssize_t)sizeof v)
        LOG_DEBUG("bulk join verdict not delivered: %s", strerror(errno));
}

static void take_join(struct session *s, const struct join_note *note, int fd)
{
    char why[160];
    tcp_tune(fd, 10);
    if (note->pid != (uint32_t)getpid()) {
        snprintf(why, sizeof why, "this is session %d, not %u", (int)getpid(), note->pid);
    } else if (bulk_admit(s, note, fd, why, sizeof why) == 0) {
        /* Attached first, welcomed second: once the client holds every
         * welcome, every connection is ready for a striped copy. */
        if (hello_send_welcome(fd, WELCOME_OK, "bulk") != 0)
            LOG_INFO("bulk connection %u: the client left before its welcome", note->index);
        send_verdict(s, note, 1);
        return;
    }
    /* The reason is for the operator's log only; the client gets the
     * parent's one refusal for every bad join. */
    LOG_WARN("bulk join refused: %s", why);
    close(fd);
    send_verdict(s, note, 0);
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
