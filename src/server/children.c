/* children.c - see children.h. */
#define _GNU_SOURCE
#include "children.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulk_join.h"
#include "fd_pass.h"
#include "../common/log.h"

struct child {
    pid_t pid;
    int ctl;     /* the parent's end of the child's pair; -1 once closed */
    int is_join; /* it sent a join up: not a session */
};

static struct child *kids;
static int nkids, capkids;
static struct pollfd *pfds;
static int cappfds;
static int polled; /* children in the last poll set */

int children_pair(int ends[2])
{
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends);
}

void children_add(pid_t pid, int parent_end)
{
    if (nkids == capkids) {
        int cap = capkids ? 2 * capkids : 64;
        struct child *k = realloc(kids, (size_t)cap * sizeof *k);
        if (!k) {
            /* Without a place in the book the child cannot get joins; it
             * still runs, and its sessions stripe nothing. */
            LOG_WARN("child %d: out of memory for its control socket", (int)pid);
            close(parent_end);
            return;
        }
        kids = k;
        capkids = cap;
    }
    kids[nkids++] = (struct child){.pid = pid, .ctl = parent_end, .is_join = 0};
}

void children_forget_in_child(void)
{
    for (int i = 0; i < nkids; i++) {
        if (kids[i].ctl >= 0) close(kids[i].ctl);
        kids[i].ctl = -1;
    }
}

static void service_one(struct child *k);

int children_remove(pid_t pid)
{
    for (int i = 0; i < nkids; i++) {
        if (kids[i].pid != pid) continue;
        /* A join child sends its connection and exits at once: it can be
         * reaped before the parent has read what it sent, which is still
         * queued on the pair. Closing the pair unread would drop it. */
        if (kids[i].ctl >= 0) service_one(&kids[i]);
        int was_join = kids[i].is_join;
        if (kids[i].ctl >= 0) close(kids[i].ctl);
        kids[i] = kids[--nkids];
        return was_join;
    }
    return 0;
}

int children_sessions(void)
{
    int n = 0;
    for (int i = 0; i < nkids; i++) n += !kids[i].is_join;
    return n;
}

static struct child *find(pid_t pid)
{
    for (int i = 0; i < nkids; i++)
        if (kids[i].pid == pid && !kids[i].is_join) return &kids[i];
    return NULL;
}

int children_known(pid_t pid) { return find(pid) != NULL; }

struct pollfd *children_pollset(int lfd, nfds_t *n)
{
    if (cappfds < nkids + 1) {
        int cap = nkids + 64;
        struct pollfd *p = realloc(pfds, (size_t)cap * sizeof *p);
        if (!p) {
            /* Poll the listener alone this time; joins wait a round. */
            static struct pollfd only;
            only = (struct pollfd){.fd = lfd, .events = POLLIN};
            *n = 1;
            polled = 0;
            return &only;
        }
        pfds = p;
        cappfds = cap;
    }
    pfds[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < nkids; i++) pfds[1 + i] = (struct pollfd){.fd = kids[i].ctl, .events = POLLIN};
    *n = (nfds_t)nkids + 1;
    polled = nkids;
    return pfds;
}

/* A join child handed up a connection: pass it to the session it names.
 * Never blocks: a session that cannot take it now loses this join, and the
 * client sees its connection close (it then copies without striping). */
static void route(struct child *from, const struct join_note *note, int fd)
{
    from->is_join = 1;
    struct child *to = find((pid_t)note->pid);
    if (to == NULL || to == from || to->ctl < 0) {
        LOG_INFO("bulk join for session %u: no such session any more", note->pid);
    } else if (fd_send(to->ctl, note, sizeof *note, fd, MSG_DONTWAIT) != 0) {
        LOG_WARN("bulk join for session %u: cannot pass the connection on: %s", note->pid, strerror(errno));
    }
    close(fd);
}

/* Drain what one child sent. Its pair is closed at EOF (the child exited
 * or closed its end): poll would report it forever otherwise. */
static void service_one(struct child *k)
{
    for (;;) {
        struct join_note note;
        int fd;
        long n = fd_recv(k->ctl, &note, sizeof note, &fd, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n == 0 || (n < 0 && errno != EMSGSIZE)) {
            close(k->ctl);
            k->ctl = -1;
            return;
        }
        if (n == (long)sizeof note && note.magic == JOIN_NOTE_MAGIC && fd >= 0) {
            route(k, &note, fd);
        } else {
            LOG_WARN("child %d sent a malformed control message; ignored", (int)k->pid);
            if (fd >= 0) close(fd);
        }
    }
}

void children_service(void)
{
    for (int i = 0; i < polled && i < nkids; i++)
        if (kids[i].ctl >= 0 && pfds[1 + i].fd == kids[i].ctl && pfds[1 + i].revents) service_one(&kids[i]);
}
