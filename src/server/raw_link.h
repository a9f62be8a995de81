/* raw_link.h - the server's raw link modes (protocol.h: HELLO_RAW_ECHO,
 * HELLO_RAW_SINK), which `scuda bench` uses to measure the link itself.
 *
 * The parent forks a child for such a client after the usual handshake
 * and token check, exactly as for a session, but the child never loads
 * CUDA: it echoes bytes back (round trip) or reads and discards them and
 * acknowledges each transfer's total (one-stream bandwidth). */
#ifndef SCUDA_RAW_LINK_H
#define SCUDA_RAW_LINK_H

#include <stdint.h>

/* Runs in the forked child: sends the welcome, serves the mode given by
 * the client's hello flags until the client leaves or is idle for 30 s,
 * then exits the process. log_fd is the server's stderr. Never returns. */
void raw_link_main(int fd, uint16_t hello_flags, int log_fd) __attribute__((noreturn));

#endif
