/* control.h - the server's local control socket (control.c;
 * docs/operate.md, "Moving a session").
 *
 * A unix socket, mode 0600, that only the server's owner (or root) can
 * use: `scuda migrate` asks through it that a session move to another
 * server. The parent routes the request down the session's pair with the
 * asker's connection, on which the session answers. */
#ifndef SCUDA_SERVER_CONTROL_H
#define SCUDA_SERVER_CONTROL_H

#include <sys/types.h>

/* The control request: one line, "migrate PID HOST:PORT\n". */
#define CONTROL_LINE_MAX 320

/* Listen on path (a stale socket there is replaced; a live one is another
 * server's, and this one then has none). Returns 0, or -1 (logged). */
int control_open(const char *path);
/* The listening fd, for the poll loop; -1 when none. */
int control_fd(void);
/* The listening socket is readable: take one request. */
void control_accept(void);
/* Remove the socket (at exit). */
void control_close(void);
/* Ask session pid to move to `to`; its one-line outcome goes to reply_fd
 * (passed to the session; the caller's copy stays the caller's). Returns
 * 0, or -1 when there is no such session. */
int control_send_move(pid_t pid, const char *to, int reply_fd);

#endif
