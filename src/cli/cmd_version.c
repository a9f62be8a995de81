/* cmd_version.c - `scuda --version` and `scuda version [--server HOST:PORT]`.
 *
 * This build's version, its protocol and op set (opset.h), and with
 * --server the same for a server, read from its server_hello: enough to
 * say which side to upgrade before a program is refused. Nothing past
 * the greeting is sent, so no token is needed to ask. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/opset.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/version.h"

static const char *const CMD = "scuda version";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda version [--server HOST:PORT]\n"
            "       scuda --version\n"
            "\n"
            "Print this build's version, protocol and op set; with --server, also the\n"
            "server's, and whether this client can use it (exit 1 when it cannot, or\n"
            "when the server cannot be reached).\n");
}

static void print_self(void)
{
    struct scuda_opset self;
    char d[128];
    opset_self(&self);
    opset_describe(&self, d, sizeof d);
    /* d is "VERSION (ops ...)": the protocol goes inside its brackets. */
    printf("scuda %s (protocol v%d, %s\n", SCUDA_VERSION_STRING, SCUDA_PROTOCOL_VERSION, d + strcspn(d, "(") + 1);
}

static int ask_server(const char *addr)
{
    char err[1024], d[128];
    int fd = dial(addr, 5000, PREFACE_SESSION, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "%s: %s %s: %s\n", CMD, fd == -2 ? "server" : "cannot reach server", addr, err);
        return 1;
    }
    uint8_t nonce[SCUDA_NONCE_LEN];
    struct scuda_opset server, self;
    int rc = hello_read_server_info(fd, 5000, nonce, &server, err, sizeof err);
    io_close(fd);
    if (rc != 0) {
        fprintf(stderr, "%s: server %s: %s\n", CMD, addr, err);
        return 1;
    }
    opset_describe(&server, d, sizeof d);
    printf("server %s: SCUDA %s, protocol v%d\n", addr, d, SCUDA_PROTOCOL_VERSION);
    /* The server's own rule: it serves a client whose ops are a prefix
     * of its own. Judged here from the client's side. */
    enum opset_verdict v = opset_judge('c', &server);
    if (v == OPSET_OK || v == OPSET_UNKNOWN) {
        printf("compatible: this client can use it%s\n",
               v == OPSET_UNKNOWN ? " (the server knows more ops; it judges at connect)" : "");
        return 0;
    }
    opset_self(&self);
    opset_refusal(v, &self, &server, err, sizeof err);
    printf("not compatible: %s\n", err);
    return 1;
}

int cmd_version(int argc, char **argv)
{
    const char *server = NULL;
    const struct cli_opt opts[] = {{"--server", NULL, &server, NULL}, {NULL}};
    int rc = cli_parse_options(argc, argv, CMD, opts, usage);
    if (rc >= 0) return rc;
    print_self();
    if (!server) return 0;
    int port;
    if (scuda_parse_hostport(server, NULL, 0, &port) != 0 || port == 0) {
        fprintf(stderr, "%s: '%s' is not a server address: expected HOST:PORT or [IPv6]:PORT, e.g. gpubox:14833.\n",
                CMD, server);
        return CLI_USAGE;
    }
    return ask_server(server);
}
