/* probe.c - a server checked without CUDA, for `scuda run` and `scuda info`.
 *
 * The same dial and handshake a program's shim makes, up to the welcome,
 * but asking for a raw echo link (protocol.h) instead of a CUDA session:
 * the server's child never loads the driver, so the check costs a fork,
 * not a session. What it proves: the address resolves and answers, TLS
 * and the server's certificate check out, the builds can work together,
 * the token (or client certificate) is accepted and the server has room.
 * Each failure comes back with its own cause and fix, so a caller prints
 * it as it is instead of guessing. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"
#include "../common/why.h"

#include <stdio.h>

#include "common/config.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/protocol.h"
#include "common/transport.h"

#define PROBE_TIMEOUT_MS 5000

int cli_probe_server(const char *addr, char *why, size_t whylen)
{
    char err[1024];
    int fd = dial(addr, PROBE_TIMEOUT_MS, PREFACE_SESSION, err, sizeof err);
    if (fd == -2) return why_fail(why, whylen, "server %s: %s", addr, err);
    if (fd < 0) {
        snprintf(why, whylen, "cannot reach server %s: %s; check the address (--server, SCUDA_SERVER or "
                 "'scuda config') and that 'scuda server' runs there", addr, err);
        return -1;
    }
    uint8_t nonce[SCUDA_NONCE_LEN];
    int rc = hello_read_server(fd, PROBE_TIMEOUT_MS, nonce, err, sizeof err);
    if (rc != 0) {
        snprintf(why, whylen, "server %s: %s", addr, err);
        io_close(fd);
        return -1;
    }
    uint32_t status = WELCOME_INTERNAL;
    char msg[512];
    if (hello_send_client(fd, HELLO_RAW_ECHO, 0, scuda_token(), nonce, NULL, 0) != 0 ||
        hello_read_welcome(fd, 2 * PROBE_TIMEOUT_MS, &status, msg, sizeof msg) != 0) {
        snprintf(why, whylen, "server %s closed the connection in the handshake; its log says why", addr);
        io_close(fd);
        return -1;
    }
    io_close(fd);
    if (status == WELCOME_OK) return 0;
    /* The server's refusals name their cause and fix (admission.c). */
    snprintf(why, whylen, "server %s refused: %s", addr, msg[0] ? msg : "no reason given; see its log");
    return -1;
}
