/* children.h - the server parent's book of its children (server.c).
 *
 * A child is forked only after its client authenticated (admission.c):
 * every child is a session or a raw link, and counts against
 * --max-sessions. Each has a SOCK_SEQPACKET socketpair with the parent,
 * and the name of the user its client proved to be. Bulk joins go down a
 * session's pair with their connection (SCM_RIGHTS); the session's
 * verdict on each comes back up it (bulk_join.h). No child holds any
 * other child's pair. */
#ifndef SCUDA_SERVER_CHILDREN_H
#define SCUDA_SERVER_CHILDREN_H

#include <poll.h>
#include <sys/types.h>

#include "../common/token_file.h"

/* What the book knew of a child. */
struct child_info {
    pid_t pid;
    char user[TOKEN_NAME_MAX];
    int ended_by_server; /* the parent ended it (its user's token was revoked) */
};

/* A socketpair for the next child: ends[0] the parent's, ends[1] the
 * child's. Returns 0, or -1 (errno set). */
int children_pair(int ends[2]);
/* In the parent, after fork: remember the child, its pair and its user. */
void children_add(pid_t pid, int parent_end, const char *user);
/* In a child, right after fork: close every parent end inherited. */
void children_forget_in_child(void);
/* The child was reaped: forget it. Returns 1 and fills *out (when not
 * NULL) if it was in the book, else 0. */
int children_remove(pid_t pid, struct child_info *out);
/* Children alive: sessions and raw links. */
int children_sessions(void);
/* The parent's end of the pair of child `pid` whose user is `user`, or -1
 * (no such child, another user's, or its pair is closed). */
int children_ctl_of(pid_t pid, const char *user);
/* The same for whoever asks on the server's own control socket (control.c):
 * any user's child. */
int children_ctl_any(pid_t pid);
/* The pids of the children with an open pair, at most max. */
int children_list(pid_t *out, int max);
/* End every child of `user` (SIGTERM), logging `why`. Returns how many. */
int children_end_user(const char *user, const char *why);

/* Poll entries, one per child's pair: how many, and fill them. */
int children_poll_count(void);
void children_poll_fill(struct pollfd *p);
/* After poll() on what children_poll_fill wrote: take what children sent
 * (bulk join verdicts, handed to admission_join_verdict). */
void children_poll_done(const struct pollfd *p, int n);

#endif
