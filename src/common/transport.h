/* transport.h - TCP sockets for SCUDA: connect with a deadline, listen,
 * full reads and writes that survive EINTR and short transfers, and the
 * socket options that bound how long a dead peer can go unnoticed.
 *
 * The one I/O path: every read, write and wait on a SCUDA connection, in
 * every process, goes through the io_* calls below. On an fd with a TLS
 * link attached (tls.h) they run through the link; on any other fd they
 * are the plain socket calls. */
#ifndef SCUDA_TRANSPORT_H
#define SCUDA_TRANSPORT_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Connect to "HOST:PORT" within timeout_ms, from SCUDA_SOURCE_ADDR when
 * set. Returns the fd, -1 with a human-readable reason in err ("connection
 * refused", "timed out after 5 s"), or -2 when SCUDA_SOURCE_ADDR is not
 * an address of this host (err: the whole message, variable and fix). */
int tcp_connect(const char *hostport, int timeout_ms, char *err, size_t errlen);

/* Listen on "HOST:PORT" (port 0 = any free port). *port_out gets the port. */
int tcp_listen(const char *hostport, int *port_out, char *err, size_t errlen);

/* TCP_NODELAY, keepalive probes and TCP_USER_TIMEOUT, so that a peer that
 * vanishes (host down, cable pulled) is detected within about
 * dead_peer_s seconds even while we block in a read. */
void tcp_tune(int fd, int dead_peer_s);

/* Returns 1 when the address is a loopback address (127/8, ::1, localhost). */
int addr_is_loopback(const char *hostport);

/* Read or write exactly n bytes. Return 0, or -1 on error/EOF (errno set;
 * EOF gives ECONNRESET). */
int io_read_full(int fd, void *buf, size_t n);
int io_write_full(int fd, const void *buf, size_t n);
/* Write every iovec completely. The array is modified. */
int io_writev_full(int fd, struct iovec *iov, int iovcnt);
/* Poll fd for input without sleeping for up to spin_ns: a reply or request
 * that is microseconds away then costs no wake-up from a blocking read
 * (several microseconds on each side of a round trip). Returns 1 when
 * input (or EOF, or an error) is there, 0 when the time ran out. */
int io_spin_for_input(int fd, unsigned spin_ns);
/* Read exactly n bytes, waiting at most timeout_ms for each chunk. */
int io_read_full_timeout(int fd, void *buf, size_t n, int timeout_ms);
/* One read of 1..cap bytes. timeout_ms: 0 = only what is there now
 * (EAGAIN otherwise), -1 = wait as long as the fd's timeout (io_set_timeout;
 * none by default), else at most that long (ETIMEDOUT). EOF gives -1 with
 * ECONNRESET. */
ssize_t io_read_some(int fd, void *buf, size_t cap, int timeout_ms);
/* Wait until a read would not block: 1, 0 after timeout_ms (-1: forever),
 * -1 on error. */
int io_wait_input(int fd, int timeout_ms);
/* Every later blocking read or write on fd gives up after timeout_ms. */
void io_set_timeout(int fd, int timeout_ms);
/* Close a connection and free its TLS link (no close_notify is sent). */
int io_close(int fd);
/* Close this process's copy of a connection another process keeps using
 * (after fork): its TLS link is left untouched, never freed. */
void io_forget(int fd);

#endif
