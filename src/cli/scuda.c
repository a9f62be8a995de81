/* scuda.c - main() of the `scuda` command: picks the subcommand.
 *
 *   scuda server [options]        serve this machine's GPUs (cmd_server.c)
 *   scuda -l ADDR:PORT [options]  short for scuda server --listen ADDR:PORT
 *   scuda run [...] -- CMD        run CMD against a server (cmd_run.c)
 *   scuda info [...]              show the server's GPUs (cmd_info.c)
 *   scuda bench [...]             measure SCUDA against the raw link (cmd_bench.c)
 *   scuda trust HOST:PORT         pin a server's TLS certificate (cmd_trust.c)
 *   scuda migrate --session PID --to HOST:PORT
 *                                 move a session to another server (cmd_migrate.c)
 *   scuda HOST:PORT               save the default server (cmd_save.c)
 *   scuda config [--clear]        show or forget it (cmd_config.c)
 *   scuda version, --version      this build's and a server's (cmd_version.c)
 *   scuda ps [--server ADDR]      a server's sessions, from its --metrics endpoint (cmd_ps.c) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "common/config.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda COMMAND [ARGS...]\n"
            "\n"
            "Run CUDA programs on a GPU in another machine.\n"
            "\n"
            "Commands:\n"
            "  run [--server HOST:PORT] -- CMD [ARGS...]\n"
            "                       run CMD with its CUDA calls sent to the server\n"
            "  info [--server HOST:PORT]\n"
            "                       show the server's GPUs, driver version and round trip\n"
            "  bench [--server HOST:PORT] [--json FILE] [--quick]\n"
            "                       measure latency, launches, copies against the raw link\n"
            "  trust [--yes] HOST:PORT\n"
            "                       pin the server's TLS certificate (after checking it)\n"
            "  migrate --session PID --to HOST:PORT\n"
            "                       move a session of a server here to another server\n"
            "  server [--listen ADDR:PORT] [options]\n"
            "                       serve this machine's GPUs\n"
            "  -l ADDR:PORT         short for 'scuda server --listen ADDR:PORT'\n"
            "  HOST:PORT            save HOST:PORT as the default server\n"
            "  config [--clear]     show the server, token and shims in use; forget the saved server\n"
            "  version [--server HOST:PORT]\n"
            "                       this build's version (also --version); a server's, and\n"
            "                       whether they work together\n"
            "  help [COMMAND]       show this help, or a command's\n"
            "\n"
            "Run 'scuda COMMAND --help' for a command's options.\n"
            "\n"
            "Environment:\n"
            "  SCUDA_SERVER   server for 'run' and 'info' (HOST:PORT[,HOST:PORT...])\n"
            "  SCUDA_TOKEN    shared secret; must match the server's\n"
            "  SCUDA_TLS=1    TLS on loopback too (always on elsewhere); SCUDA_TLS_FINGERPRINT,\n"
            "                 SCUDA_TLS_CA or `scuda trust` say which server to trust;\n"
            "                 SCUDA_INSECURE=1 allows plain TCP beyond loopback\n"
            "  SCUDA_LOG      log level: error, warn (default), info, debug\n"
            "  SCUDA_LIB_DIR  directory holding SCUDA's libcuda.so.1 (default: ../lib\n"
            "                 next to the scuda executable)\n"
            "\n"
            "Examples:\n"
            "  scuda server --listen 0.0.0.0:14833 --token-file ~/.scuda-token   (GPU machine)\n"
            "  scuda gpubox:14833                                                (client, once)\n"
            "  scuda info\n"
            "  scuda run -- python train.py\n");
}

/* `scuda help CMD` is `scuda CMD --help`. */
static int help(const char *name)
{
    char *argv[] = {(char *)name, "--help", NULL};
    if (name == NULL) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "run") == 0) return cmd_run(2, argv);
    if (strcmp(name, "info") == 0) return cmd_info(2, argv);
    if (strcmp(name, "bench") == 0) return cmd_bench(2, argv);
    if (strcmp(name, "server") == 0) return cmd_server(2, argv);
    if (strcmp(name, "trust") == 0) return cmd_trust(2, argv);
    if (strcmp(name, "migrate") == 0) return cmd_migrate(2, argv);
    if (strcmp(name, "version") == 0) return cmd_version(2, argv);
    if (strcmp(name, "config") == 0) return cmd_config(2, argv);
    if (strcmp(name, "ps") == 0) return cmd_ps(2, argv);
    fprintf(stderr, "scuda: no command '%s'. Run 'scuda --help' for the list.\n", name);
    return CLI_USAGE;
}

static int is_listen_flag(const char *a)
{
    return strcmp(a, "-l") == 0 || strcmp(a, "--listen") == 0 || strncmp(a, "--listen=", 9) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *c = argv[1];

    if (cli_is_help(c)) return help(argc > 2 ? argv[2] : NULL);
    if (strcmp(c, "server") == 0) return cmd_server(argc - 1, argv + 1);
    if (strcmp(c, "run") == 0) return cmd_run(argc - 1, argv + 1);
    if (strcmp(c, "info") == 0) return cmd_info(argc - 1, argv + 1);
    if (strcmp(c, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
    if (strcmp(c, "trust") == 0) return cmd_trust(argc - 1, argv + 1);
    if (strcmp(c, "migrate") == 0) return cmd_migrate(argc - 1, argv + 1);
    if (strcmp(c, "version") == 0) return cmd_version(argc - 1, argv + 1);
    if (strcmp(c, "--version") == 0 || strcmp(c, "-V") == 0) return cmd_version(1, argv + 1);
    if (strcmp(c, "config") == 0) return cmd_config(argc - 1, argv + 1);
    if (strcmp(c, "ps") == 0) return cmd_ps(argc - 1, argv + 1);
    /* The short form: argv[0] stands in for "server" and -l is its alias. */
    if (is_listen_flag(c)) return cmd_server(argc, argv);

    /* A lone HOST:PORT. The colon is required, so that a mistyped command
     * name ("scuda inf") is reported rather than saved as a host name. */
    if (argc == 2 && c[0] != '-' && strchr(c, ':') != NULL && scuda_parse_hostport(c, NULL, 0, NULL) == 0)
        return cmd_save(c);

    if (c[0] == '-')
        fprintf(stderr, "scuda: unknown option '%s'. Run 'scuda --help' for usage.\n", c);
    else if (strchr(c, ':') != NULL && argc == 2)
        fprintf(stderr, "scuda: '%s' is not a server address: expected HOST:PORT or [IPv6]:PORT, e.g. gpubox:14833.\n",
                c);
    else
        fprintf(stderr,
                "scuda: unknown command '%s'. Run 'scuda --help' for the list of commands.\n"
                "  To save a default server, give HOST:PORT alone, e.g. 'scuda gpubox:14833'.\n",
                c);
    return CLI_USAGE;
}
