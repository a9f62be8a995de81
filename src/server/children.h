/* children.h - the server parent's book of its children (server.c).
 *
 * Every accepted connection gets a child, forked before its handshake, and
 * a SOCK_SEQPACKET socketpair between the two. A child that turns out to
 * be a bulk join (protocol.h, HELLO_BULK_JOIN) sends its connection up
 * its pair with the session it wants; the parent passes it down the pair
 * of the child with that pid (SCM_RIGHTS) and stops counting the join
 * child as a session. Sessions keep their end of the pair to receive
 * joins; no child holds any other child's pair. */
#ifndef SCUDA_SERVER_CHILDREN_H
#define SCUDA_SERVER_CHILDREN_H

#include <poll.h>
#include <sys/types.h>

/* A socketpair for the next child: ends[0] the parent's, ends[1] the
 * child's. Returns 0, or -1 (errno set). */
int children_pair(int ends[2]);
/* In the parent, after fork: remember the child and its pair. */
void children_add(pid_t pid, int parent_end);
/* In a child, right after fork: close every parent end inherited from the
 * parent (the book's pids stay readable, for children_known). */
void children_forget_in_child(void);
/* The child was reaped: forget it. Returns 1 when it was a bulk join. */
int children_remove(pid_t pid);
/* Children that may be sessions (raw link children count as sessions,
 * as before; joins do not). */
int children_sessions(void);
/* 1 when pid is a child that is not a known join (in a child: as the
 * book was at fork). */
int children_known(pid_t pid);

/* The poll set: [0] is lfd, then one entry per child's pair (fd -1 for a
 * pair already closed). *n gets the number of entries. Valid until the
 * next children_* call that adds or removes a child. */
struct pollfd *children_pollset(int lfd, nfds_t *n);
/* After poll() on that set: take what children sent and route the joins. */
void children_service(void);

#endif
