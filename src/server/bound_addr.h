/* bound_addr.h - whether the server's listener is loopback only, judged
 * by the address it actually bound (getsockname), never by the name it
 * was given: a name can resolve anywhere, and a wildcard (0.0.0.0, ::)
 * reaches every interface. A listener that is not loopback needs a token. */
#ifndef SCUDA_SERVER_BOUND_ADDR_H
#define SCUDA_SERVER_BOUND_ADDR_H

#include <sys/socket.h>

/* 1 for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104; 0 for anything else,
 * wildcards and unknown families included. */
int sockaddr_is_loopback(const struct sockaddr *sa, socklen_t len);

/* The same for the address fd is bound to; 0 when getsockname fails. */
int bound_is_loopback(int fd);

#endif
