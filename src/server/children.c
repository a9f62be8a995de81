/* children.c - see children.h. */
#define _GNU_SOURCE
#include "children.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admission.h"
#include "bulk_join.h"
#include "../common/log.h"

struct child {
    struct child_info info;
    int ctl; /* the parent's end of the child's pair; -1 once closed */
};

static struct child *kids;
static int nkids, capkids;

int children_pair(int ends[2])
{
    return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends);
}

void children_add(pid_t pid, int parent_end, const char *user)
{
    if (nkids == capkids) {
        int cap = capkids ? 2 * capkids : 64;
        struct child *k = realloc(kids, (size_t)cap * sizeof *k);
        if (!k) {
            /* Out of the book, the child cannot be counted or revoked:
             * end it rather than let it run unaccounted. */
            LOG_ERROR("session %d: out of memory for the book of children; ending it", (int)pid);
            kill(pid, SIGKILL);
            close(parent_end);
            return;
        }
        kids = k;
        capkids = cap;
    }
    struct child *c = &kids[nkids++];
    memset(c, 0, sizeof *c);
    c->info.pid = pid;
    snprintf(c->info.user, sizeof c->info.user, "%s", user);
    c->ctl = parent_end;
}

void children_forget_in_child(void)
{
    for (int i = 0; i < nkids; i++) {
        if (kids[i].ctl >= 0) close(kids[i].ctl);
        kids[i].ctl = -1;
    }
}

static void service_one(struct child *k);

int children_remove(pid_t pid, struct child_info *out)
{
    for (int i = 0; i < nkids; i++) {
        if (kids[i].info.pid != pid) continue;
        /* Verdicts it sent before it ended are still queued: take them. */
        if (kids[i].ctl >= 0) service_one(&kids[i]);
        if (kids[i].ctl >= 0) close(kids[i].ctl);
        if (out) *out = kids[i].info;
        kids[i] = kids[--nkids];
        return 1;
    }
    return 0;
}

int children_sessions(void) { return nkids; }

int children_ctl_of(pid_t pid, const char *user)
{
    for (int i = 0; i < nkids; i++)
        if (kids[i].info.pid == pid && !kids[i].info.ended_by_server && strcmp(kids[i].info.user, user) == 0)
            return kids[i].ctl;
    return -1;
}

int children_ctl_any(pid_t pid)
{
    for (int i = 0; i < nkids; i++)
        if (kids[i].info.pid == pid && !kids[i].info.ended_by_server) return kids[i].ctl;
    return -1;
}

int children_list(pid_t *out, int max)
{
    int n = 0;
    for (int i = 0; i < nkids && n < max; i++)
        if (kids[i].ctl >= 0 && !kids[i].info.ended_by_server) out[n++] = kids[i].info.pid;
    return n;
}

int children_end_user(const char *user, const char *why)
{
    int n = 0;
    for (int i = 0; i < nkids; i++) {
        struct child_info *c = &kids[i].info;
        if (c->ended_by_server || strcmp(c->user, user) != 0) continue;
        LOG_WARN("session %d of user %s: ending it: %s", (int)c->pid, user, why);
        c->ended_by_server = 1;
        kill(c->pid, SIGTERM);
        n++;
    }
    return n;
}

int children_poll_count(void) { return nkids; }

void children_poll_fill(struct pollfd *p)
{
    for (int i = 0; i < nkids; i++) p[i] = (struct pollfd){.fd = kids[i].ctl, .events = POLLIN};
}

/* Drain what one child sent. Its pair is closed at EOF (the child exited
 * or closed its end): poll would report it forever otherwise. */
static void service_one(struct child *k)
{
    for (;;) {
        struct join_verdict v;
        ssize_t n = recv(k->ctl, &v, sizeof v, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        if (n <= 0) {
            close(k->ctl);
            k->ctl = -1;
            return;
        }
        if (n == (ssize_t)sizeof v && v.magic == JOIN_VERDICT_MAGIC)
            admission_join_verdict(v.nonce, v.ok != 0);
        else
            LOG_WARN("session %d sent a malformed control message; ignored", (int)k->info.pid);
    }
}

void children_poll_done(const struct pollfd *p, int n)
{
    /* The set was filled in book order and nothing was added or removed
     * since: entry i is child i, as long as its fd still matches. */
    for (int i = 0; i < n && i < nkids; i++)
        if (kids[i].ctl >= 0 && p[i].fd == kids[i].ctl && p[i].revents) service_one(&kids[i]);
}
