/* transport.c - see transport.h. */
#define _GNU_SOURCE
#include "transport.h"
#include "why.h"
#include "config.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int resolve(const char *hostport, int passive, struct addrinfo **res, char *err, size_t errlen)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(hostport, host, sizeof host, &port) != 0)
        return why_fail(err, errlen, "bad address '%s' (expected HOST:PORT)", hostport);
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    int rc = getaddrinfo(host, portstr, &hints, res);
    if (rc != 0) return why_fail(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
    return 0;
}

/* SCUDA_SOURCE_ADDR=IP: the local address every client connection
 * leaves from. A pool behind HAProxy keeps a session's connections on one
 * server by source address (`stick on src`); several addresses of one
 * host give several sessions, each on its own server, and a multi-homed
 * host picks its interface. 1 with *src filled, 0 when unset or empty,
 * -1 when the value is not an IP address (err says so). */
static int source_addr(struct sockaddr_storage *src, socklen_t *len, char *err, size_t errlen)
{
    const char *v = getenv("SCUDA_SOURCE_ADDR");
    if (!v || !*v) return 0;
    memset(src, 0, sizeof *src);
    struct sockaddr_in *v4 = (struct sockaddr_in *)src;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)src;
    if (inet_pton(AF_INET, v, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        *len = sizeof *v4;
        return 1;
    }
    if (inet_pton(AF_INET6, v, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        *len = sizeof *v6;
        return 1;
    }
    snprintf(err, errlen, "SCUDA_SOURCE_ADDR='%.64s' is not an IP address; set it to an address of this host "
                          "(e.g. 10.0.0.5, as `ip addr` shows) or unset it", v);
    return -1;
}

/* Bind fd to SCUDA_SOURCE_ADDR before its connect: 0, or -1 (err names
 * the variable and the fix). The port stays the kernel's choice. */
static int bind_source(int fd, int family, char *err, size_t errlen)
{
    struct sockaddr_storage src;
    socklen_t len = 0;
    int has = source_addr(&src, &len, err, errlen);
    if (has <= 0) return has;
    const char *v = getenv("SCUDA_SOURCE_ADDR");
    if (src.ss_family != family) {
        snprintf(err, errlen, "SCUDA_SOURCE_ADDR=%.64s is an IPv%d address and the server's is not; set an address "
                              "of the server's family, or unset it", v, family == AF_INET ? 6 : 4);
        return -1;
    }
    /* Pick the port at connect, as an unbound socket does: many
     * connections from one address to different servers then share
     * ports instead of running out. */
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&src, len) != 0) {
        snprintf(err, errlen, "cannot use SCUDA_SOURCE_ADDR=%.64s: %s; set it to an address of this host (as "
                              "`ip addr` shows) or unset it", v, strerror(errno));
        return -1;
    }
    return 0;
}

/* fd, -1 (the server cannot be reached: err is the socket's reason) or
 * -2 (SCUDA_SOURCE_ADDR cannot be used: err is the whole message). */
static int connect_one(const struct addrinfo *ai, int timeout_ms, char *err, size_t errlen)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) return why_fail(err, errlen, "socket: %s", strerror(errno));
    if (bind_source(fd, ai->ai_family, err, errlen) != 0) {
        close(fd);
        return -2;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        snprintf(err, errlen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int rc;
    do rc = poll(&p, 1, timeout_ms); while (rc < 0 && errno == EINTR);
    if (rc == 0) {
        snprintf(err, errlen, "timed out after %d ms", timeout_ms);
        close(fd);
        return -1;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
    if (rc < 0 || soerr != 0) {
        snprintf(err, errlen, "%s", strerror(rc < 0 ? errno : soerr));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int tcp_connect(const char *hostport, int timeout_ms, char *err, size_t errlen)
{
    struct addrinfo *res;
    if (resolve(hostport, 0, &res, err, errlen) != 0) return -1;
    int fd = -1, rc = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_one(ai, timeout_ms, err, errlen);
        if (fd == -2) rc = -2;
    }
    freeaddrinfo(res);
    return fd >= 0 ? fd : rc;
}

int tcp_listen(const char *hostport, int *port_out, char *err, size_t errlen)
{
    struct addrinfo *res;
    if (resolve(hostport, 1, &res, err, errlen) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
            snprintf(err, errlen, "cannot listen on %s: %s", hostport, strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0 && port_out) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &len);
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

void tcp_tune(int fd, int dead_peer_s)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int idle = dead_peer_s / 2 > 0 ? dead_peer_s / 2 : 1;
    int intvl = 1, cnt = dead_peer_s - idle > 0 ? dead_peer_s - idle : 1;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    /* Unacknowledged data older than this kills the connection: covers a
     * peer that disappears while we are sending. */
    unsigned user_timeout_ms = (unsigned)dead_peer_s * 1000u;
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

int addr_is_loopback(const char *hostport)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(hostport, host, sizeof host, &port) != 0) return 0;
    if (!strcmp(host, "localhost") || !strcmp(host, "::1")) return 1;
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int io_spin_for_input(int fd, unsigned spin_ns)
{
    struct tls_link *l = tls_of(fd);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (l) {
            /* Bytes SSL already holds never show in a peek at the socket. */
            if (tls_input_ready(l)) return 1;
        } else {
            char c;
            ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
            if (r > 0 || r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        uint64_t ns = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec;
        if (ns >= spin_ns) return 0;
    }
}

int io_read_full(int fd, void *buf, size_t n)
{
    struct tls_link *l = tls_of(fd);
    if (l) return tls_read_full(l, buf, n, -1);
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = ECONNRESET;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int io_write_full(int fd, const void *buf, size_t n)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = n};
    return io_writev_full(fd, &iov, 1);
}

int io_writev_full(int fd, struct iovec *iov, int iovcnt)
{
    struct tls_link *l = tls_of(fd);
    if (l) return tls_writev(l, iov, iovcnt);
    while (iovcnt > 0) {
        /* MSG_NOSIGNAL: a dead peer must give EPIPE, not kill the process. */
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)(iovcnt > 1024 ? 1024 : iovcnt)};
        ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        size_t left = (size_t)w;
        while (iovcnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            iov->iov_base = (char *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* poll() for input; 1 ready, 0 timed out, -1 error. */
static int poll_in(int fd, int timeout_ms)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, timeout_ms);
        if (rc < 0 && errno == EINTR) continue;
        return rc;
    }
}

int io_read_full_timeout(int fd, void *buf, size_t n, int timeout_ms)
{
    struct tls_link *l = tls_of(fd);
    if (l) return tls_read_full(l, buf, n, timeout_ms);
    char *p = buf;
    while (n > 0) {
        int rc = poll_in(fd, timeout_ms);
        if (rc == 0) { errno = ETIMEDOUT; return -1; }
        if (rc < 0) return -1;
        ssize_t r = read(fd, p, n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (r <= 0) {
            if (r == 0) errno = ECONNRESET;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

ssize_t io_read_some(int fd, void *buf, size_t cap, int timeout_ms)
{
    struct tls_link *l = tls_of(fd);
    if (l) return tls_read_some(l, buf, cap, timeout_ms);
    for (;;) {
        if (timeout_ms > 0) {
            int rc = poll_in(fd, timeout_ms);
            if (rc == 0) errno = ETIMEDOUT;
            if (rc <= 0) return -1;
        }
        ssize_t n = recv(fd, buf, cap, timeout_ms == 0 ? MSG_DONTWAIT : 0);
        if (n > 0) return n;
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno != EINTR) return -1;
    }
}

int io_wait_input(int fd, int timeout_ms)
{
    struct tls_link *l = tls_of(fd);
    return l ? tls_wait_input(l, timeout_ms) : poll_in(fd, timeout_ms);
}

void io_set_timeout(int fd, int timeout_ms)
{
    struct tls_link *l = tls_of(fd);
    if (l) {
        tls_set_timeout(l, timeout_ms);
        return;
    }
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int io_close(int fd)
{
    tls_detach_free(fd);
    return close(fd);
}

void io_forget(int fd)
{
    tls_detach_abandon(fd);
    close(fd);
}
