/* fd_pass.c - see fd_pass.h. */
#define _GNU_SOURCE
#include "fd_pass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int fd_send(int sock, const void *msg, size_t len, int fd, int flags)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space, .msg_controllen = sizeof ctl.space};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    ssize_t w;
    do w = sendmsg(sock, &m, flags | MSG_NOSIGNAL); while (w < 0 && errno == EINTR);
    if (w < 0) return -1;
    if ((size_t)w != len) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

/* Every fd the message carried: the first in *fd, any more closed. */
static int take_fds(struct msghdr *m, int *fd)
{
    int extra = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
            if (*fd < 0) {
                *fd = f;
            } else {
                close(f);
                extra = 1;
            }
        }
    }
    return extra;
}

long fd_recv(int sock, void *msg, size_t len, int *fd, int flags)
{
    union {
        struct cmsghdr h;
        char space[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = msg, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.space, .msg_controllen = sizeof ctl.space};
    *fd = -1;
    ssize_t r;
    do r = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC); while (r < 0 && errno == EINTR);
    if (r <= 0) return r;
    int extra = take_fds(&m, fd);
    if (extra || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        errno = EMSGSIZE;
        return -1;
    }
    return r;
}
