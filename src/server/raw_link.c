/* raw_link.c - see raw_link.h.
 *
 * Same listener, handshake, token and socket options as a CUDA session, so
 * what the client measures here is the ceiling a session could reach on
 * this link. Every wait is bounded: a client that goes quiet for
 * RAW_IDLE_S, or stops reading what it is sent, ends the child. */
#define _GNU_SOURCE
#include "raw_link.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../common/hello.h"
#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"

#define RAW_IDLE_S 30
#define RAW_BUF (1u << 20)

/* Send back whatever arrives. Returns 0 when the client closes. */
static int echo_loop(int fd, uint8_t *buf)
{
    for (;;) {
        ssize_t n = io_read_some(fd, buf, RAW_BUF, -1);
        if (n < 0 && errno == ECONNRESET) return 0;
        if (n < 0 || io_write_full(fd, buf, (size_t)n) != 0) return -1;
    }
}

/* Transfers of n bytes, each acknowledged with the count read. Returns 0
 * when the client ends (n = 0 or EOF between transfers). */
static int sink_loop(int fd, uint8_t *buf, uint64_t *total)
{
    for (;;) {
        uint64_t n;
        if (io_read_full(fd, &n, sizeof n) != 0) return errno == ECONNRESET ? 0 : -1;
        if (n == 0) return 0;
        if (n > RAW_SINK_MAX) {
            LOG_WARN("raw sink: transfer of %llu bytes refused (most %llu)", (unsigned long long)n,
                     (unsigned long long)RAW_SINK_MAX);
            errno = EMSGSIZE;
            return -1;
        }
        uint64_t got = 0;
        while (got < n) {
            size_t want = n - got < RAW_BUF ? (size_t)(n - got) : RAW_BUF;
            if (io_read_full(fd, buf, want) != 0) return -1;
            got += want;
        }
        *total += got;
        if (io_write_full(fd, &got, sizeof got) != 0) return -1;
    }
}

void raw_link_main(int fd, uint16_t hello_flags, int log_fd)
{
    scuda_log_set_role("raw");
    scuda_log_set_fd(log_fd);
    const char *mode = hello_flags & HELLO_RAW_ECHO ? "raw echo" : "raw sink";
    /* A client that goes quiet, or stops reading, must not hold the child
     * forever: every read and write gives up after RAW_IDLE_S. */
    io_set_timeout(fd, RAW_IDLE_S * 1000);

    uint8_t *buf = malloc(RAW_BUF);
    if (buf == NULL || hello_send_welcome(fd, WELCOME_OK, mode) != 0) {
        LOG_WARN("%s: could not start: %s", mode, buf ? strerror(errno) : "out of memory");
        _exit(1);
    }
    uint64_t total = 0;
    int rc = hello_flags & HELLO_RAW_ECHO ? echo_loop(fd, buf) : sink_loop(fd, buf, &total);
    if (rc != 0)
        LOG_INFO("%s: ends: %s", mode, errno == EAGAIN ? "client idle for 30 s" : strerror(errno));
    else
        LOG_INFO("%s: client done (%llu bytes sunk)", mode, (unsigned long long)total);
    _exit(rc == 0 ? 0 : 1);
}
