/* cmd_save.c - `scuda HOST:PORT`: remember the server for later commands.
 *
 * The address goes to ~/.config/scuda/host, the last place the shim and
 * the CLI look (config.h), so --server and SCUDA_SERVER still win. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/config.h"

int cmd_save(const char *addr)
{
    char err[512], path[4096];
    if (scuda_save_server(addr, err, sizeof err) != 0) {
        fprintf(stderr, "scuda: cannot save the server address: %s\n", err);
        return 1;
    }
    if (scuda_host_file_path(path, sizeof path) != 0) path[0] = '\0';
    printf("Saved server %s to %s.\n"
           "'scuda run' and 'scuda info' use it when neither --server nor SCUDA_SERVER is given.\n",
           addr, path);

    const char *env = getenv("SCUDA_SERVER");
    if (env != NULL && env[0] != '\0')
        fprintf(stderr, "scuda: note: SCUDA_SERVER=%s is set here and takes precedence; unset it to use %s.\n",
                env, addr);
    return 0;
}
