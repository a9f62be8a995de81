/* shim_env.c - where the shim is, and which server it should use.
 *
 * `scuda run` and `scuda info` both load the shim (one through the dynamic
 * linker, one with dlopen) and hand it the server through SCUDA_SERVER, so
 * both find and prepare it here, the same way. */
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

/* Next to the scuda executable: <dir>/../lib/scuda, the layout `cmake
 * --install` and the packages produce (bin/scuda, lib/scuda/libcuda.so.1:
 * never lib/ itself, where the shim would shadow a real driver), else
 * <dir>/../lib, a build tree's. */
static int default_dir(const char *cmd, char *dir, size_t dirlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr,
                "%s: cannot find the scuda executable through /proc/self/exe (%s).\n"
                "  Set SCUDA_LIB_DIR to the directory that holds SCUDA's libcuda.so.1.\n",
                cmd, n < 0 ? strerror(errno) : "empty link");
        return -1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) *slash = '\0';
    char lib[PATH_MAX + 32];
    snprintf(lib, sizeof lib, "%s/../lib/scuda/libcuda.so.1", exe);
    int m = snprintf(dir, dirlen, access(lib, R_OK) == 0 ? "%s/../lib/scuda" : "%s/../lib", exe);
    return m < 0 || (size_t)m >= dirlen ? -1 : 0;
}

int cli_shim_dir(const char *cmd, char *out, size_t outlen)
{
    char dir[PATH_MAX], lib[PATH_MAX + 16];
    const char *env = getenv("SCUDA_LIB_DIR");
    int from_env = env != NULL && env[0] != '\0';

    if (from_env)
        snprintf(dir, sizeof dir, "%s", env);
    else if (default_dir(cmd, dir, sizeof dir) != 0)
        return -1;

    snprintf(lib, sizeof lib, "%s/libcuda.so.1", dir);
    if (access(lib, R_OK) != 0) {
        int e = errno;
        if (from_env)
            fprintf(stderr,
                    "%s: SCUDA_LIB_DIR=%s does not hold SCUDA's driver shim: %s: %s.\n"
                    "  Point SCUDA_LIB_DIR at the directory with SCUDA's libcuda.so.1, or unset it.\n",
                    cmd, env, lib, strerror(e));
        else
            fprintf(stderr,
                    "%s: SCUDA's driver shim is missing: %s: %s.\n"
                    "  Install SCUDA so that lib/scuda/ sits beside bin/ (cmake --install), or set\n"
                    "  SCUDA_LIB_DIR to the directory that holds SCUDA's libcuda.so.1.\n",
                    cmd, lib, strerror(e));
        return -1;
    }

    /* Absolute and canonical: CMD may chdir, and a relative entry in
     * LD_LIBRARY_PATH would then point elsewhere. */
    char real[PATH_MAX];
    if (realpath(dir, real) == NULL) snprintf(real, sizeof real, "%s", dir);
    if (strlen(real) >= outlen) {
        fprintf(stderr, "%s: the shim directory path is too long: %s\n", cmd, real);
        return -1;
    }
    memcpy(out, real, strlen(real) + 1);
    return 0;
}

static const char *fix_for(const char *source)
{
    if (strcmp(source, "--server") == 0) return "Fix the --server value.";
    if (strcmp(source, "SCUDA_SERVER") == 0) return "Fix or unset SCUDA_SERVER.";
    return "Fix that file, or save a new address with 'scuda HOST:PORT'.";
}

int cli_export_server(const char *cmd, const char *cli_value, char *addr, size_t addrlen,
                      const char **source)
{
    int rc = scuda_resolve_server(cli_value, addr, addrlen, source);
    if (rc == -1) return 0;
    int bad = strcmp(*source, "--server") == 0 ? -CLI_USAGE : -1; /* the command line's own: a usage error */
    if (rc == -2) {
        fprintf(stderr, "%s: the server address from %s is too long. %s\n", cmd, *source, fix_for(*source));
        return bad;
    }

    int port;
    if (scuda_parse_hostport(addr, NULL, 0, &port) != 0 || port == 0) {
        fprintf(stderr,
                "%s: '%s' (from %s) is not a server address: expected HOST:PORT or [IPv6]:PORT\n"
                "  with a port from 1 to 65535, e.g. gpubox:14833. %s\n",
                cmd, addr, *source, fix_for(*source));
        return bad;
    }

    /* SCUDA_SERVER itself is left as it is: the shim reads the same list,
     * and entries after the first are kept for failover. */
    if (strcmp(*source, "SCUDA_SERVER") != 0 && setenv("SCUDA_SERVER", addr, 1) != 0) {
        fprintf(stderr, "%s: cannot set SCUDA_SERVER: %s\n", cmd, strerror(errno));
        return -1;
    }
    return 1;
}
