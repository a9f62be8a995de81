/* test_bound_addr.c - loopback is judged by the address bound: 127/8,
 * ::1 and v4-mapped 127/8 are; wildcards and everything else are not. */
#include "server/bound_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int failures;

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static int v4(const char *a)
{
    struct sockaddr_in s = {.sin_family = AF_INET};
    inet_pton(AF_INET, a, &s.sin_addr);
    return sockaddr_is_loopback((struct sockaddr *)&s, sizeof s);
}

static int v6(const char *a)
{
    struct sockaddr_in6 s = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, a, &s.sin6_addr);
    return sockaddr_is_loopback((struct sockaddr *)&s, sizeof s);
}

/* Bind a socket to addr and judge what it bound. */
static int bound(int family, const char *addr)
{
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET) {
        struct sockaddr_in *s = (struct sockaddr_in *)&ss;
        s->sin_family = AF_INET;
        inet_pton(AF_INET, addr, &s->sin_addr);
        len = sizeof *s;
    } else {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
        s->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &s->sin6_addr);
        len = sizeof *s;
    }
    int r = bind(fd, (struct sockaddr *)&ss, len) == 0 ? bound_is_loopback(fd) : -1;
    close(fd);
    return r;
}

int main(void)
{
    check("127.0.0.1", v4("127.0.0.1") == 1);
    check("127.5.6.7", v4("127.5.6.7") == 1);
    check("0.0.0.0 (every interface)", v4("0.0.0.0") == 0);
    check("10.0.0.5", v4("10.0.0.5") == 0);
    check("128.0.0.1", v4("128.0.0.1") == 0);
    check("::1", v6("::1") == 1);
    check(":: (every interface)", v6("::") == 0);
    check("::ffff:127.0.0.1", v6("::ffff:127.0.0.1") == 1);
    check("::ffff:10.0.0.5", v6("::ffff:10.0.0.5") == 0);
    check("fe80::1", v6("fe80::1") == 0);
    struct sockaddr_in shortsa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &shortsa.sin_addr);
    check("a truncated address is not loopback", sockaddr_is_loopback((struct sockaddr *)&shortsa, 4) == 0);
    struct sockaddr_un_like { sa_family_t f; char path[32]; } un = {AF_UNIX, "x"};
    check("another family is not loopback", sockaddr_is_loopback((struct sockaddr *)&un, sizeof un) == 0);
    check("bound to 127.0.0.1", bound(AF_INET, "127.0.0.1") == 1);
    check("bound to 0.0.0.0", bound(AF_INET, "0.0.0.0") == 0);
    int b6 = bound(AF_INET6, "::");
    check("bound to :: (or no IPv6 here)", b6 == 0 || b6 == -1);
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
