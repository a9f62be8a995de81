/* cmd_trust.c - `scuda trust [--yes] HOST:PORT`: connect to a server over
 * TLS, show the fingerprint of the certificate it presents, and pin it in
 * the known_hosts file (trust.h) once the user has compared it with the
 * one the server logged at start: after a y/N prompt on a terminal, or at
 * once with --yes. Nothing of SCUDA's handshake is sent: no token proof
 * reaches a server that is not trusted yet. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/dial.h"
#include "common/trust.h"

static const char *const CMD = "scuda trust";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda trust [--yes] [HOST:PORT]\n"
            "\n"
            "Pin the TLS certificate of a SCUDA server, so that clients connect to it.\n"
            "Shows the fingerprint the server presents; compare it with the one the server\n"
            "printed at start (\"TLS certificate ... sha256:...\"), then accept it. The pin goes\n"
            "to $XDG_CONFIG_HOME/scuda/known_hosts (or ~/.config/scuda/known_hosts) and\n"
            "replaces an older pin for the same address.\n"
            "\n"
            "  HOST:PORT   the server (default: --server's sources: SCUDA_SERVER, the saved host)\n"
            "  --yes       pin without asking (for scripts that checked the fingerprint)\n"
            "  -h, --help  show this help\n");
}

/* y/N on the terminal; anything but y or yes is no. */
static int ask(const char *key)
{
    fprintf(stderr, "Pin this certificate for %s? [y/N] ", key);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return strcmp(line, "y\n") == 0 || strcmp(line, "yes\n") == 0 || strcmp(line, "Y\n") == 0;
}

int cmd_trust(int argc, char **argv)
{
    int yes = 0;
    const char *given = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--yes") == 0 || strcmp(argv[i], "-y") == 0) yes = 1;
        else if (argv[i][0] == '-') return cli_unknown_option(CMD, argv[i]);
        else if (!given) given = argv[i];
        else {
            fprintf(stderr, "%s: one server at a time ('%s' and '%s').\n", CMD, given, argv[i]);
            return CLI_USAGE;
        }
    }
    char addr[512], key[300], fp[TLS_FP_LEN], err[1024];
    const char *source;
    if (scuda_resolve_server(given, addr, sizeof addr, &source) != 0 || trust_host_key(addr, key, sizeof key) != 0) {
        fprintf(stderr, "%s: no server address: give HOST:PORT, e.g. scuda trust gpubox:14833.\n", CMD);
        return CLI_USAGE;
    }
    int rc = dial_fingerprint(addr, 5000, fp, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "%s: %s %s: %s.\n", CMD, rc == -1 ? "cannot reach" : "no certificate from", addr, err);
        return 1;
    }
    char old[TLS_FP_LEN];
    int known = trust_known_lookup(key, old, err, sizeof err);
    printf("%s presents certificate %s\n", key, fp);
    if (known == 1 && strcmp(old, fp) == 0) {
        printf("already pinned: nothing to do\n");
        return 0;
    }
    if (known == 1) printf("this REPLACES the pinned %s\n", old);
    if (!yes) {
        if (!isatty(0)) {
            fprintf(stderr, "%s: not a terminal, so not asking: compare the fingerprint with the one the server\n"
                            "  logged at start, then run `scuda trust --yes %s`.\n", CMD, key);
            return 1;
        }
        if (!ask(key)) {
            fprintf(stderr, "%s: not pinned.\n", CMD);
            return 1;
        }
    }
    if (trust_known_pin(key, fp, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s.\n", CMD, err);
        return 1;
    }
    char path[4096] = "known_hosts";
    scuda_known_hosts_path(path, sizeof path);
    printf("pinned %s in %s\n", key, path);
    return 0;
}
