/* bound_addr.c - see bound_addr.h. */
#include "bound_addr.h"

#include <netinet/in.h>
#include <string.h>

int sockaddr_is_loopback(const struct sockaddr *sa, socklen_t len)
{
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

int bound_is_loopback(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) return 0;
    return sockaddr_is_loopback((struct sockaddr *)&ss, len);
}
