/* cmd_run.c - `scuda run [--server HOST:PORT] -- CMD [ARGS...]`.
 *
 * Puts the shim's directory first on LD_LIBRARY_PATH, so that CMD's
 * libcuda.so.1 (and libnvidia-ml.so.1) is SCUDA's, tells the shim the
 * server through SCUDA_SERVER, and execs CMD. The exec replaces this
 * process, so CMD's exit status is ours and its signals reach it directly.
 *
 * Before the exec it checks the server (probe.c: connect, TLS, versions,
 * token), unless --no-check: the shim contacts nobody until CMD's first
 * CUDA call, so without the check a wrong address or token would pass
 * unnoticed by a CMD that never calls CUDA, and surface late in one that
 * does. A failed check exits 1 with its cause, and CMD does not run. */
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

static const char *const CMD = "scuda run";

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda run [--server HOST:PORT] [--check | --no-check] [--] CMD [ARGS...]\n"
            "\n"
            "Run CMD with its CUDA calls sent to a SCUDA server.\n"
            "\n"
            "Options:\n"
            "  --server HOST:PORT  server to use (default: SCUDA_SERVER, then the address\n"
            "                      saved by 'scuda HOST:PORT' in ~/.config/scuda/host)\n"
            "  --check             connect and authenticate before running CMD; stop with\n"
            "                      status 1 and the cause if that fails (the default)\n"
            "  --no-check          run CMD at once; the shim connects at its first CUDA call\n"
            "  -h, --help          show this help\n"
            "\n"
            "Options end at '--' or at the first word that does not start with '-'.\n"
            "With no server configured, CMD still runs: the shim then uses this\n"
            "machine's own driver if it has one, or says how to configure a server.\n"
            "\n"
            "Environment: SCUDA_SERVER, SCUDA_TOKEN, SCUDA_LOG, SCUDA_LIB_DIR; sets TRITON_LIBCUDA_PATH.\n"
            "\n"
            "Examples:\n"
            "  scuda run --server gpubox:14833 -- python train.py\n"
            "  SCUDA_TOKEN=$(cat token) scuda run ./saxpy\n");
}

/* LD_LIBRARY_PATH = dir[:old]. Skipped when dir is already first, so that
 * nested `scuda run` calls do not grow the variable. */
static int prepend_library_path(const char *dir)
{
    const char *old = getenv("LD_LIBRARY_PATH");
    if (old == NULL || old[0] == '\0') return setenv("LD_LIBRARY_PATH", dir, 1);

    size_t n = strlen(dir);
    if (strncmp(old, dir, n) == 0 && (old[n] == ':' || old[n] == '\0')) return 0;

    size_t len = n + 1 + strlen(old) + 1;
    char *v = malloc(len);
    if (v == NULL) return -1;
    snprintf(v, len, "%s:%s", dir, old);
    int rc = setenv("LD_LIBRARY_PATH", v, 1);
    free(v);
    return rc;
}

/* Returns the index of CMD in argv, or -1 after printing an error, or -2
 * when --help was printed. */
static int parse(int argc, char **argv, const char **server, int *check)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) return i + 1;
        if (a[0] != '-') return i; /* first word of CMD */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return -2;
        }
        if (strcmp(a, "--check") == 0 || strcmp(a, "--no-check") == 0) {
            *check = a[2] == 'c';
            continue;
        }
        int r = cli_option(argc, argv, &i, CMD, "--server", NULL, server);
        if (r < 0) return -1;
        if (r == 0) {
            cli_unknown_option(CMD, a);
            return -1;
        }
    }
    return i;
}

int cmd_run(int argc, char **argv)
{
    const char *server = NULL;
    int check = 1;
    int first = parse(argc, argv, &server, &check);
    if (first == -2) return 0;
    if (first < 0) return CLI_USAGE;
    if (first >= argc) {
        fprintf(stderr,
                "%s: no command given. Usage: scuda run [--server HOST:PORT] -- CMD [ARGS...]\n"
                "  e.g. scuda run -- python train.py\n",
                CMD);
        return CLI_USAGE;
    }

    char libdir[PATH_MAX], addr[1024];
    const char *source = NULL;
    if (cli_shim_dir(CMD, libdir, sizeof libdir) != 0) return 1;
    int have_server = cli_export_server(CMD, server, addr, sizeof addr, &source);
    if (have_server < 0) return have_server == -CLI_USAGE ? CLI_USAGE : 1;
    char why[2048];
    if (have_server && check && cli_probe_server(addr, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n  %s was not run (--no-check runs it anyway).\n", CMD, why, argv[first]);
        return 1;
    }
    if (prepend_library_path(libdir) != 0) {
        fprintf(stderr, "%s: cannot set LD_LIBRARY_PATH: %s\n", CMD, strerror(errno));
        return 1;
    }
    /* Triton links its launchers against libcuda.so from the first
     * directory ldconfig knows for libcuda.so.1, which is the machine's own
     * (absent or hidden) driver; point it at the shim instead. */
    setenv("TRITON_LIBCUDA_PATH", libdir, 0);

    execvp(argv[first], argv + first);

    /* Exit codes as a shell gives them: 127 not found, 126 not runnable. */
    int e = errno;
    if (e == ENOENT) {
        fprintf(stderr, "%s: %s: command not found. Check the name or PATH, or give the program's path.\n",
                CMD, argv[first]);
        return 127;
    }
    fprintf(stderr, "%s: cannot run %s: %s.%s\n", CMD, argv[first], strerror(e),
            e == EACCES ? " Check that it is executable (chmod +x)." : "");
    return 126;
}
