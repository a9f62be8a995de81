/* cmd_config.c - `scuda config [--clear]`: what the client side will use.
 *
 * The server a program run here would reach and where that comes from
 * (--server, SCUDA_SERVER or the file `scuda HOST:PORT` saved), the token's
 * source, and the shims; --clear removes the saved server, so that a
 * stale address stops being used. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"

static const char *const CMD = "scuda config";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda config [--clear]\n"
            "\n"
            "Show the server 'scuda run' and 'scuda info' would use and where it comes\n"
            "from, the token's source and the shim directory.\n"
            "\n"
            "Options:\n"
            "  --clear     forget the server saved by 'scuda HOST:PORT'\n"
            "  -h, --help  show this help\n");
}

static int clear_saved(const char *path)
{
    if (unlink(path) == 0) {
        printf("Forgot the saved server: removed %s.\n", path);
        return 0;
    }
    if (errno == ENOENT) {
        printf("No saved server (%s does not exist).\n", path);
        return 0;
    }
    fprintf(stderr, "%s: cannot remove %s: %s. Check its directory's permissions.\n", CMD, path, strerror(errno));
    return 1;
}

static const char *token_source(void)
{
    const char *t = getenv("SCUDA_TOKEN"), *f = getenv("SCUDA_TOKEN_FILE");
    if (t && t[0]) return "SCUDA_TOKEN";
    if (f && f[0]) return "SCUDA_TOKEN_FILE";
    return "none (a server beyond loopback will refuse this client: set SCUDA_TOKEN or SCUDA_TOKEN_FILE)";
}

static void show(const char *path)
{
    char addr[1024], libdir[PATH_MAX];
    const char *source = NULL;
    int rc = scuda_resolve_server(NULL, addr, sizeof addr, &source);
    if (rc == 0) printf("Server:     %s (from %s)\n", addr, source);
    else if (rc == -2) printf("Server:     too long to use (from %s)\n", source);
    else printf("Server:     none (the shim uses this machine's driver, if any)\n");
    FILE *f = fopen(path, "r");
    char line[1024] = "";
    if (f) {
        while (fgets(line, sizeof line, f) && (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')) line[0] = 0;
        fclose(f);
        line[strcspn(line, "\r\n")] = '\0';
    }
    if (line[0]) printf("Saved:      %s in %s\n", line, path);
    else printf("Saved:      none (save one with 'scuda HOST:PORT')\n");
    printf("Token:      %s\n", token_source());
    /* cli_shim_dir prints its own error when the shims are missing. */
    if (cli_shim_dir(CMD, libdir, sizeof libdir) == 0) printf("Shims:      %s\n", libdir);
}

int cmd_config(int argc, char **argv)
{
    int clear = 0;
    const struct cli_opt opts[] = {{"--clear", NULL, NULL, &clear}, {NULL}};
    int rc = cli_parse_options(argc, argv, CMD, opts, usage);
    if (rc >= 0) return rc;
    char path[4096];
    if (scuda_host_file_path(path, sizeof path) != 0) {
        fprintf(stderr, "%s: cannot find the home directory: set HOME.\n", CMD);
        return 1;
    }
    if (clear) return clear_saved(path);
    show(path);
    return 0;
}
