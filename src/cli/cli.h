/* cli.h - the `scuda` command: subcommands and the helpers they share.
 *
 * Each subcommand lives in cmd_<name>.c and takes argv with argv[0] = its
 * own name. It returns the process exit code: 0 success, 1 failure,
 * CLI_USAGE for a bad command line. Every error message says what went
 * wrong and how to fix it. */
#ifndef SCUDA_CLI_H
#define SCUDA_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_USAGE 2

int cmd_server(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_migrate(int argc, char **argv); /* `scuda migrate --session PID --to HOST:PORT` */
int cmd_trust(int argc, char **argv); /* `scuda trust HOST:PORT`: pin a server's TLS certificate */
int cmd_save(const char *addr); /* `scuda HOST:PORT` */
int cmd_version(int argc, char **argv); /* `scuda version [--server HOST:PORT]`, `scuda --version` */
int cmd_config(int argc, char **argv);  /* `scuda config [--clear]`: the saved server */
int cmd_ps(int argc, char **argv);      /* `scuda ps [--server HOST:PORT]`: a server's sessions */

/* ---- args.c: option parsing ---- */

/* "-h", "--help" or "help". */
int cli_is_help(const char *arg);

/* Match argv[*i] against "--name VALUE", "--name=VALUE" or, when alias is
 * non-NULL, "ALIAS VALUE". Returns 1 and sets *value (advancing *i past a
 * separate VALUE), 0 when argv[*i] is something else, or -1 after printing
 * "<cmd>: --name needs a value" when the value is missing or empty. */
int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name, const char *alias,
               const char **value);

/* Print "<cmd>: unknown option 'ARG'" and where to find the usage. */
int cli_unknown_option(const char *cmd, const char *arg);

/* One option of a subcommand: a flag ("--name" or "ALIAS" sets *flag to
 * 1) when flag is set, else "--name VALUE" into *value (cli_option). */
struct cli_opt {
    const char *name;
    const char *alias; /* NULL: none */
    const char **value;
    int *flag;
};

/* The option loop of a subcommand that takes no other words: each of
 * argv[1..] is help (prints usage to stdout, returns 0), one of opts (a
 * list ending in {NULL}), or an error (returns CLI_USAGE after saying
 * why). Returns -1 when every word was an option: the command goes on. */
int cli_parse_options(int argc, char **argv, const char *cmd, const struct cli_opt *opts, void (*usage)(FILE *));

/* Parse a decimal integer in [min, max] with nothing after it. */
int cli_parse_long(const char *s, long min, long max, long *out);
/* A size: "123", "512K", "40G", "1TiB", "8MB" (powers of 1024). Returns 0,
 * or -1 when s is not one. */
int cli_parse_bytes(const char *s, uint64_t *out);

/* ---- shim_env.c: the environment the shim reads ---- */

/* The directory that holds the shim's libcuda.so.1: env SCUDA_LIB_DIR, else
 * <directory of the scuda executable>/../lib. Returns 0, or -1 after
 * printing why (and how to fix it) when libcuda.so.1 is not there. */
int cli_shim_dir(const char *cmd, char *out, size_t outlen);

/* Resolve the server (--server, SCUDA_SERVER, host file; see config.h),
 * check that it parses, and put it in SCUDA_SERVER for the shim. Returns
 * 1 with addr and *source set, 0 when none is configured, -1 after
 * printing an error, CLI_USAGE negated (-2) when the bad address is the
 * command line's own --server. */
int cli_export_server(const char *cmd, const char *cli_value, char *addr, size_t addrlen,
                      const char **source);

/* ---- probe.c: a server checked without CUDA ---- */

/* Connect to addr as a program would and authenticate (TLS, versions,
 * token, room), then hang up. Returns 0, or -1 with the cause and its fix
 * in why ("cannot reach server ...", "server ... refused: bad token; ..."). */
int cli_probe_server(const char *addr, char *why, size_t whylen);

#endif
