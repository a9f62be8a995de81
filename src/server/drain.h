/* drain.h - `scuda server --peer HOST:PORT[,...]` stopped by SIGTERM moves
 * its sessions to its peers before it exits (drain.c; docs/operate.md,
 * "Moving a session"). */
#ifndef SCUDA_SERVER_DRAIN_H
#define SCUDA_SERVER_DRAIN_H

/* With the listener closed: ask each session in turn to move to the next
 * peer (round robin; the next one when a peer refuses), leave those that
 * cannot move (their reason is logged) to end with their clients, and
 * return once every moved session has ended. reap() collects children;
 * the moves are bounded by wait_s seconds each. */
void drain_sessions(const char *peers, int wait_s, void (*reap)(void));

#endif
