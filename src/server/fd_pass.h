/* fd_pass.h - one message and one file descriptor over a Unix socket
 * (SCM_RIGHTS). The server hands a bulk connection from the child that
 * accepted it, through the parent, to the session it joins (server.c,
 * children.c, bulk_join.c). The sockets are SOCK_SEQPACKET, so a message
 * arrives whole or not at all. */
#ifndef SCUDA_SERVER_FD_PASS_H
#define SCUDA_SERVER_FD_PASS_H

#include <stddef.h>

/* Send len bytes and fd. flags as for sendmsg (MSG_DONTWAIT...).
 * Returns 0, or -1 (errno set). */
int fd_send(int sock, const void *msg, size_t len, int fd, int flags);

/* Receive one message into msg (at most len bytes) and the fd that came
 * with it (-1 when none; the fd is close-on-exec). Returns the message's
 * length, 0 at EOF, -1 on error (errno; EAGAIN when nothing is waiting
 * and flags has MSG_DONTWAIT). A message longer than len is an error
 * (EMSGSIZE), and so is one that carried more than one fd; any fd that came
 * with a refused message is closed. */
long fd_recv(int sock, void *msg, size_t len, int *fd, int flags);

#endif
