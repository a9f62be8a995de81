/* http_checks.c - see http_checks.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "http_checks.h"

int hc_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

int hc_connect_loopback(int port, const char *what)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    CHECK(connect(fd, (struct sockaddr *)&to, sizeof to) == 0, "connect to %s: %s", what, strerror(errno));
    return fd;
}

char *hc_read_until_close(int fd, uint64_t ms)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    CHECK(buf);
    for (uint64_t end = h_now_ms() + ms; h_now_ms() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0) continue;
        if (len + 4096 > cap) CHECK((buf = realloc(buf, cap *= 2)));
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0) break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}
