/* agent.h - `scuda server --agent ADDR`: HAProxy's agent-check, answered
 * in the parent's poll loop (deploy/haproxy/haproxy.cfg; docs/operate.md,
 * "Pools").
 *
 * Each connection gets one line and is closed: "up N%" with N the room
 * left (the smaller of the free session places and the free device memory,
 * as far as the parent knows them), or "drain" when there is none (HAProxy
 * then sends only connections that stick to this server: bulk joins and
 * resumes of its sessions). The parent never reads from an agent
 * connection and never waits on one. */
#ifndef SCUDA_SERVER_AGENT_H
#define SCUDA_SERVER_AGENT_H

#include <poll.h>
#include <stddef.h>

/* Listen on addr; max_sessions is --max-sessions. *port gets the port.
 * Returns 0, or -1 with the cause and fix in err. */
int agent_open(const char *addr, int max_sessions, int *port, char *err, size_t errlen);
/* The room left, 0..100 (percent). */
int agent_room(void);
/* The line an agent-check gets now ("up 40%\n", "drain\n"), into out. */
void agent_line(char *out, size_t len);
int agent_poll_count(void);
void agent_poll_fill(struct pollfd *p);
void agent_poll_done(const struct pollfd *p, int n);
void agent_forget_in_child(void);

#endif
