/* cmd_server.c - `scuda server [options]`, and its short form `scuda -l ADDR`.
 *
 * Checks the options, loads the users' tokens, and hands over to
 * server_run(), which refuses an unauthenticated listener beyond loopback
 * by the address it binds (docs/architecture.md, 3.9 Transports). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "common/protocol.h"
#include "common/tls.h"
#include "common/token_file.h"
#include "common/transport.h"
#include "server/server.h"

static const char *const CMD = "scuda server";

#define TOKEN_HINT                                                                                      \
    "  Make one with:  echo \"$USER $(head -c 32 /dev/urandom | base64)\" > ~/.scuda-tokens\n"         \
    "                  chmod 600 ~/.scuda-tokens\n"                                                        \
    "  then start the server with --token-file ~/.scuda-tokens (SIGHUP reads it again), and\n"         \
    "  give each user their token in SCUDA_TOKEN or a file named by SCUDA_TOKEN_FILE.\n"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: scuda server [--listen ADDR:PORT] [--driver PATH] [--token-file FILE]\n"
            "                    [--max-sessions N] [--mem-quota SIZE] [--idle-timeout S]\n"
            "                    [--dead-after S] [--resume-within S]\n"
            "                    [--max-handshakes N] [--max-handshakes-per-source N]\n"
            "                    [--module-cache DIR|off] [--module-cache-size SIZE]\n"
            "                    [--host-mem-quota SIZE] [--max-handles N] [--max-queued-calls N]\n"
            "                    [--tls] [--tls-cert FILE --tls-key FILE] [--state-dir DIR]\n"
            "                    [--insecure] [--port-fd FD] [--log-file FILE | --syslog]\n"
            "                    [--driver-placed-memory | --window-base ADDR --window-size SIZE]\n"
            "                    [--driver-va-base ADDR|off] [--driver-va-size SIZE]\n"
            "                    [--gpus LIST] [--max-sessions-per-gpu N] [--metrics ADDR:PORT]\n"
            "                    [--agent ADDR:PORT]\n"
            "       scuda -l ADDR:PORT [options]      (short for scuda server --listen)\n"
            "\n"
            "Serve this machine's GPUs to SCUDA clients.\n"
            "\n"
            "Options:\n"
            "  -l, --listen ADDR:PORT  address to listen on (default %s);\n"
            "                          port 0 picks a free port, which is printed\n"
            "  --driver PATH           the real libcuda.so.1 to use (default: the system's)\n"
            "  --token-file FILE       users and their tokens, one `NAME TOKEN` a line (a single\n"
            "                          bare token is user \"default\"); SIGHUP reads it again.\n"
            "                          Default: SCUDA_TOKEN as user \"default\". Required unless\n"
            "                          the address bound is loopback\n"
            "  --max-sessions N        most client connections at once (default 64)\n"
            "  --gpus LIST             serve only these GPUs: indices or UUIDs, comma-separated,\n"
            "                          as CUDA_VISIBLE_DEVICES takes them (e.g. 0,2); clients\n"
            "                          see them as devices 0..n-1 (default: every GPU)\n"
            "  --max-sessions-per-gpu N\n"
            "                          run each session on one GPU of --gpus, the least busy,\n"
            "                          with at most N sessions a GPU (needs --gpus)\n"
            "  --metrics ADDR:PORT     serve Prometheus metrics at http://ADDR:PORT/metrics and\n"
            "                          the sessions (scuda ps) at /sessions; requests need\n"
            "                          `Authorization: Bearer TOKEN` of user admin (or, with no\n"
            "                          admin line, any user's token)\n"
            "  --agent ADDR:PORT       answer HAProxy's agent-check there: \"up N%%\" with N the\n"
            "                          room left (session places, device memory), or \"drain\"\n"
            "  --max-handshakes N      most handshakes in progress (default 256)\n"
            "  --max-handshakes-per-source N\n"
            "                          most of them from one address (default 8)\n"
            "  --mem-quota SIZE        device memory per session: bytes, or with a K, M, G\n"
            "                          or T suffix (powers of 1024); default unlimited\n"
            "  --driver-placed-memory  let the driver place device memory, instead of each\n"
            "                          device's window (sessions then cannot move elsewhere)\n"
            "  --window-base ADDR      device 0's memory window, a multiple of 2M (default\n"
            "                          0x200000000000); device N's follows at ADDR + N * size\n"
            "  --window-size SIZE      addresses per device, like --mem-quota (default 4T)\n"
            "  --driver-va-base ADDR   where a session puts the driver's own mappings (its\n"
            "                          globals, managed memory, heaps), a multiple of 2M, so\n"
            "                          that they keep their addresses when a session moves\n"
            "                          (default 0x100000000000); off: the kernel places them\n"
            "  --driver-va-size SIZE   addresses for them, like --mem-quota (default 4T)\n"
            "  --idle-timeout S        end a session idle for S seconds (default: never)\n"
            "  --dead-after S          end a session whose client sent nothing, not even a ping,\n"
            "                          for S seconds (default: 10; 0 = never)\n"
            "  --resume-within S       a session whose connection broke waits S seconds for its\n"
            "                          client to resume it (default: 30; 0 = never)\n"
            "  --module-cache DIR      keep module images clients loaded in DIR, so the next\n"
            "                          process sends only their hashes (default:\n"
            "                          $XDG_CACHE_HOME/scuda/modules or ~/.cache/scuda/modules);\n"
            "                          off: no cache on disk\n"
            "  --module-cache-size SIZE\n"
            "                          most bytes kept there; the images used least\n"
            "                          recently go first (default 1G; 0: off)\n"
            "  --host-mem-quota SIZE   host memory a client can make its session hold (mirrors,\n"
            "                          buffers, queued calls), like --mem-quota (default 8G)\n"
            "  --max-handles N         live handles (streams, events, modules...) per session\n"
            "                          (default 1000000)\n"
            "  --max-queued-calls N    blocking calls per session waiting for a worker; more\n"
            "                          fail with CUDA_ERROR_OUT_OF_MEMORY (default 4096)\n"
            "  --tls                   speak TLS on loopback too (always on beyond loopback)\n"
            "  --tls-cert FILE, --tls-key FILE\n"
            "                          the server's TLS certificate (chain) and key, PEM;\n"
            "                          default: a self-signed one made on first start in\n"
            "                          the state directory\n"
            "  --tls-client-ca FILE    ask clients for a certificate; one that chains to these\n"
            "                          CAs (PEM) authenticates its client instead of a token,\n"
            "                          as the user its subject CN names (implies --tls)\n"
            "  --state-dir DIR         where that certificate lives (default:\n"
            "                          $XDG_STATE_HOME/scuda or ~/.local/state/scuda)\n"
            "  --insecure              plain TCP beyond loopback: calls and data cross the\n"
            "                          network in clear (logged as a warning)\n"
            "  --control PATH          the control socket for `scuda migrate` (mode 0600;\n"
            "                          default: control.sock in the state directory)\n"
            "  --peer HOST:PORT[,...]  on SIGTERM, move every session to these servers\n"
            "                          (round robin) before exiting: a drain\n"
            "  --log-file FILE         append the log (and everything on stderr) to FILE\n"
            "  --syslog                send the log to syslog (facility daemon)\n"
            "  --port-fd FD            also write the chosen port to FD as \"PORT\\n\"\n"
            "                          (for scripts that start the server on port 0)\n"
            "  -h, --help              show this help\n"
            "\n"
            "Environment: SCUDA_TOKEN, SCUDA_LOG, SCUDA_LOG_TIME (0: no time on lines),\n"
            "SCUDA_DRIVER_VA_LOG, XDG_CACHE_HOME, XDG_STATE_HOME.\n"
            "\n"
            "Examples:\n"
            "  scuda server\n"
            "  scuda server --listen 0.0.0.0:14833 --token-file ~/.scuda-token --mem-quota 40G\n"
            "  SCUDA_TOKEN=s3cret scuda -l 0.0.0.0:0\n",
            SCUDA_DEFAULT_ADDR);
}

/* ---- value parsers ---- */


/* ---- tokens (admission) ---- */

/* The users: the token file's, or SCUDA_TOKEN as user "default", or none.
 * Returns 0, or 1 after saying why (a malformed file names its line). */
static int load_tokens(const char *path, struct token_set *set)
{
    if (path == NULL) {
        const char *t = getenv("SCUDA_TOKEN"); /* not SCUDA_TOKEN_FILE: that is a client's */
        return t != NULL && *t && token_set_single(set, TOKEN_DEFAULT_USER, t) != 0 ? 1 : 0;
    }
    char err[PATH_MAX + 256];
    int shared = 0;
    if (token_set_load(path, set, &shared, err, sizeof err) != 0) {
        fprintf(stderr,
                "%s: %s.\n  It holds one `NAME TOKEN` a line ('#' comments allowed), or a single token.\n" TOKEN_HINT,
                CMD, err);
        return 1;
    }
    if (shared)
        fprintf(stderr, "%s: warning: token file %s can be read by other users; run: chmod 600 %s\n", CMD,
                path, path);
    return 0;
}

/* ---- options ---- */

struct args {
    struct server_options opt;
    /* TLS (settle_tls) */
    int tls, insecure;
    const char *tls_cert, *tls_key, *tls_client_ca, *state_dir;
    const char *token_file;
    struct token_set tokens;
    const char *log_file;     /* --log-file: the log (and stderr) appended there */
    int syslog;               /* --syslog */
    const char *module_cache; /* --module-cache as given; NULL: the default */
    char module_cache_default[4096];
};

/* ---- session limits: what one client can make its session grow to ---- */

/* Applies one of the session limit options at argv[*i]. Returns -1 when it
 * took the option, 0 when argv[*i] is none of them, or an exit code. */
static int apply_session_limits(int argc, char **argv, int *i, struct args *a)
{
    const char *v;
    long n;
    int r;
    if ((r = cli_option(argc, argv, i, CMD, "--host-mem-quota", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_bytes(v, &a->opt.host_mem_quota) == 0 && a->opt.host_mem_quota >= (1u << 20)) return -1;
        fprintf(stderr, "%s: --host-mem-quota '%s' is not a size of at least 1M: give bytes or a whole\n"
                        "  number with K, M, G or T, e.g. 8G or 512M.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--max-handles", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 16, 1L << 40, &n) == 0) {
            a->opt.max_handles = (uint64_t)n;
            return -1;
        }
        fprintf(stderr, "%s: --max-handles '%s' is not a number of at least 16.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--max-queued-calls", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 1, 1L << 30, &n) == 0) {
            a->opt.max_queued_calls = (uint64_t)n;
            return -1;
        }
        fprintf(stderr, "%s: --max-queued-calls '%s' is not a number from 1 to 1073741824.\n", CMD, v);
        return CLI_USAGE;
    }
    return 0;
}

/* ---- pools: which GPUs, how many sessions on each ---- */

/* Applies --gpus or --max-sessions-per-gpu at argv[*i]: as
 * apply_session_limits. The list is checked by the server (gpu_pool.c). */
static int apply_pool(int argc, char **argv, int *i, struct args *a)
{
    const char *v;
    long n;
    int r;
    if ((r = cli_option(argc, argv, i, CMD, "--gpus", NULL, &a->opt.gpus)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--metrics", NULL, &a->opt.metrics)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--agent", NULL, &a->opt.agent)) != 0)
        return r < 0 ? CLI_USAGE : -1;
    if ((r = cli_option(argc, argv, i, CMD, "--max-sessions-per-gpu", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 1, 100000, &n) == 0) {
            a->opt.max_sessions_per_gpu = (int)n;
            return -1;
        }
        fprintf(stderr, "%s: --max-sessions-per-gpu '%s' is not a number from 1 to 100000.\n", CMD, v);
        return CLI_USAGE;
    }
    return 0;
}

/* Applies one option at argv[*i]. Returns 0, or an exit code (CLI_USAGE). */
static int apply(int argc, char **argv, int *i, struct args *a)
{
    const char *v;
    long n;
    int r;

    /* Options that take their value as it is; it is checked in check(). */
    if ((r = cli_option(argc, argv, i, CMD, "--listen", "-l", &a->opt.listen)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--driver", NULL, &a->opt.driver_path)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--token-file", NULL, &a->token_file)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--module-cache", NULL, &a->module_cache)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--control", NULL, &a->opt.control_path)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--peer", NULL, &a->opt.peers)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--log-file", NULL, &a->log_file)) != 0)
        return r < 0 ? CLI_USAGE : 0;
    if (strcmp(argv[*i], "--syslog") == 0) return a->syslog = 1, 0;

    /* TLS */
    if ((r = cli_option(argc, argv, i, CMD, "--tls-cert", NULL, &a->tls_cert)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--tls-key", NULL, &a->tls_key)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--tls-client-ca", NULL, &a->tls_client_ca)) != 0 ||
        (r = cli_option(argc, argv, i, CMD, "--state-dir", NULL, &a->state_dir)) != 0)
        return r < 0 ? CLI_USAGE : 0;
    if (strcmp(argv[*i], "--tls") == 0) return a->tls = 1, 0;
    if (strcmp(argv[*i], "--insecure") == 0) return a->insecure = 1, 0;

    if ((r = cli_option(argc, argv, i, CMD, "--max-sessions", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 1, 100000, &n) == 0) {
            a->opt.max_sessions = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --max-sessions '%s' is not a number from 1 to 100000.\n", CMD, v);
        return CLI_USAGE;
    }
    /* admission: bounds on handshakes in progress */
    if ((r = cli_option(argc, argv, i, CMD, "--max-handshakes", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 1, 100000, &n) == 0) {
            a->opt.max_handshakes = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --max-handshakes '%s' is not a number from 1 to 100000.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--max-handshakes-per-source", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 1, 100000, &n) == 0) {
            a->opt.max_handshakes_per_source = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --max-handshakes-per-source '%s' is not a number from 1 to 100000.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--mem-quota", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_bytes(v, &a->opt.mem_quota) == 0) return 0;
        fprintf(stderr, "%s: --mem-quota '%s' is not a size: give bytes or a whole number with K, M, G or T,\n"
                        "  e.g. 40G or 1536M.\n", CMD, v);
        return CLI_USAGE;
    }
    if (strcmp(argv[*i], "--driver-placed-memory") == 0) return a->opt.driver_placed_memory = 1, 0;
    if ((r = cli_option(argc, argv, i, CMD, "--window-base", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        char *end;
        errno = 0;
        a->opt.window_base = strtoull(v, &end, 0);
        if (errno == 0 && *v && *end == 0 && a->opt.window_base && a->opt.window_base % (2u << 20) == 0) return 0;
        fprintf(stderr, "%s: --window-base '%s' is not an address that is a multiple of 2M, e.g. 0x200000000000.\n",
                CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--window-size", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_bytes(v, &a->opt.window_size) == 0 && a->opt.window_size >= (64u << 20) &&
            a->opt.window_size % (2u << 20) == 0)
            return 0;
        fprintf(stderr, "%s: --window-size '%s' is not a size of at least 64M, a multiple of 2M: give bytes or\n"
                        "  a whole number with K, M, G or T, e.g. 4T.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--driver-va-base", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (strcmp(v, "off") == 0) return a->opt.driver_va_off = 1, 0;
        char *end;
        errno = 0;
        a->opt.driver_va_base = strtoull(v, &end, 0);
        if (errno == 0 && *v && *end == 0 && a->opt.driver_va_base && a->opt.driver_va_base % (2u << 20) == 0 &&
            a->opt.driver_va_base < (1ull << 47))
            return 0;
        fprintf(stderr, "%s: --driver-va-base '%s' is not an address below 2^47 that is a multiple of 2M,\n"
                        "  e.g. 0x100000000000, or off.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--driver-va-size", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_bytes(v, &a->opt.driver_va_size) == 0 && a->opt.driver_va_size >= (1ull << 30) &&
            a->opt.driver_va_size % (2u << 20) == 0)
            return 0;
        fprintf(stderr, "%s: --driver-va-size '%s' is not a size of at least 1G, a multiple of 2M: give bytes or\n"
                        "  a whole number with K, M, G or T, e.g. 4T.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--module-cache-size", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_bytes(v, &a->opt.module_cache_size) == 0) return 0;
        fprintf(stderr, "%s: --module-cache-size '%s' is not a size: give bytes or a whole number with K, M,\n"
                        "  G or T, e.g. 2G or 512M (0 turns the cache off).\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--idle-timeout", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 0, INT_MAX, &n) == 0) {
            a->opt.idle_timeout_s = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --idle-timeout '%s' is not a number of seconds (0 = never).\n", CMD, v);
        return CLI_USAGE;
    }
    /* Liveness (docs/architecture.md, 3.10): a client silent this long is dead. */
    if ((r = cli_option(argc, argv, i, CMD, "--dead-after", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 0, 86400, &n) == 0) {
            a->opt.dead_after_s = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --dead-after '%s' is not a number of seconds from 0 (never) to 86400.\n", CMD, v);
        return CLI_USAGE;
    }
    /* Resume (docs/architecture.md, 3.11): how long a broken session waits. */
    if ((r = cli_option(argc, argv, i, CMD, "--resume-within", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 0, 3600, &n) == 0) {
            a->opt.resume_within_s = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --resume-within '%s' is not a number of seconds from 0 (never) to 3600.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = cli_option(argc, argv, i, CMD, "--port-fd", NULL, &v)) != 0) {
        if (r < 0) return CLI_USAGE;
        if (cli_parse_long(v, 0, INT_MAX, &n) == 0 && fcntl((int)n, F_GETFD) != -1) {
            a->opt.print_port_fd = (int)n;
            return 0;
        }
        fprintf(stderr, "%s: --port-fd '%s' is not an open file descriptor.\n", CMD, v);
        return CLI_USAGE;
    }
    if ((r = apply_session_limits(argc, argv, i, a)) != 0) return r < 0 ? 0 : r;
    if ((r = apply_pool(argc, argv, i, a)) != 0) return r < 0 ? 0 : r;
    return cli_unknown_option(CMD, argv[*i]);
}

/* Where the module cache lives. Whether it can be used there is the
 * server's to find out (it warns and goes on without it). */
static void settle_module_cache(struct args *a)
{
    if (a->module_cache != NULL) {
        a->opt.module_cache_dir = strcmp(a->module_cache, "off") == 0 ? NULL : a->module_cache;
    } else if (scuda_module_cache_default(a->module_cache_default, sizeof a->module_cache_default) == 0) {
        a->opt.module_cache_dir = a->module_cache_default;
    } else {
        fprintf(stderr, "%s: warning: no home directory for the module cache; it is off. "
                        "Set HOME or pass --module-cache DIR.\n", CMD);
        a->opt.module_cache_dir = NULL;
    }
}

/* ---- TLS ---- */

/* The certificate and key: given, or the server's own in its state
 * directory. Returns 0 with the paths set, or 1 after saying why. */
static int find_certificate(struct args *a, const char **cert, const char **key, char *cbuf, char *kbuf, size_t len)
{
    *cert = a->tls_cert;
    *key = a->tls_key;
    if (*cert) return 0;
    char dir[4096], err[4400];
    if (a->state_dir) snprintf(dir, sizeof dir, "%s", a->state_dir);
    else if (scuda_state_dir_default(dir, sizeof dir) != 0) {
        fprintf(stderr, "%s: no home directory for the server's TLS certificate: set HOME, pass --state-dir DIR,\n"
                        "  or give one with --tls-cert FILE --tls-key FILE.\n", CMD);
        return 1;
    }
    int created;
    if (tls_self_signed(dir, cbuf, kbuf, len, &created, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s. Fix the directory, choose another with --state-dir DIR, or give a\n"
                        "  certificate with --tls-cert FILE --tls-key FILE.\n", CMD, err);
        return 1;
    }
    if (created) fprintf(stderr, "%s: made a self-signed TLS certificate: %s (key %s, mode 0600)\n", CMD, cbuf, kbuf);
    *cert = cbuf;
    *key = kbuf;
    return 0;
}

/* TLS whenever the server listens beyond loopback (unless --insecure), and
 * on loopback with --tls or a certificate. Returns 0 or an exit code. */
static int settle_tls(struct args *a, const char *host, int port)
{
    /* By name here, to know whether a certificate is needed; the server
     * checks the address it binds (server.c) and refuses plain TCP beyond
     * loopback that --insecure did not ask for. */
    int loopback = addr_is_loopback(a->opt.listen);
    if ((a->tls_cert == NULL) != (a->tls_key == NULL)) {
        fprintf(stderr, "%s: --tls-cert and --tls-key go together: give both, or neither for a self-signed\n"
                        "  certificate.\n", CMD);
        return CLI_USAGE;
    }
    if (a->tls_client_ca) a->tls = 1; /* client certificates need TLS */
    if (a->insecure && (a->tls || a->tls_cert)) {
        fprintf(stderr, "%s: --insecure turns TLS off; it cannot go with --tls, --tls-cert or --tls-client-ca.\n",
                CMD);
        return CLI_USAGE;
    }
    if (!a->tls && !a->tls_cert && (loopback || a->insecure)) {
        a->opt.insecure = a->insecure; /* the server warns, once it knows the address it bound */
        return 0;
    }
    static char cbuf[4096], kbuf[4096];
    const char *cert, *key;
    if (find_certificate(a, &cert, &key, cbuf, kbuf, sizeof cbuf) != 0) return 1;
    char err[1024];
    struct tls_server *srv = tls_server_new(cert, key, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "%s: %s.\n", CMD, err);
        return 1;
    }
    if (a->tls_client_ca && tls_server_client_ca(srv, a->tls_client_ca, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s; give a PEM file of the CAs that sign your clients' certificates.\n", CMD, err);
        tls_server_free(srv);
        return 1;
    }
    if (a->tls_client_ca) LOG_INFO("TLS: client certificates signed by %s authenticate their clients",
                                   a->tls_client_ca);
    a->opt.tls = srv;
    const char *fp = tls_server_fingerprint(srv);
    char where[300];
    snprintf(where, sizeof where, port ? "%s:%d" : "%s:PORT", host, port);
    fprintf(stderr, "%s: TLS certificate %s %s\n"
                    "  clients pin it with `scuda trust %s` (compare the fingerprint it shows with this one)\n"
                    "  or SCUDA_TLS_FINGERPRINT=%s\n", CMD, cert, fp, where, fp);
    return 0;
}

/* Checks that need all the options. Returns 0 or an exit code. */
static int check(struct args *a)
{
    char host[256];
    int port;
    if (scuda_parse_hostport(a->opt.listen, host, sizeof host, &port) != 0) {
        fprintf(stderr, "%s: --listen '%s' is not an address: expected ADDR:PORT or [IPv6]:PORT,\n"
                        "  e.g. 127.0.0.1:14833, 0.0.0.0:0 or [::]:14833.\n", CMD, a->opt.listen);
        return CLI_USAGE;
    }
    if (a->opt.driver_path != NULL && access(a->opt.driver_path, R_OK) != 0) {
        fprintf(stderr, "%s: --driver %s: %s. Give the path of the real libcuda.so.1,\n"
                        "  e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1, or leave --driver out.\n",
                CMD, a->opt.driver_path, strerror(errno));
        return 1;
    }

    /* Whether a listener without a token is allowed is the server's to
     * judge, by the address it binds (server.c), never by this name. */
    if (load_tokens(a->token_file, &a->tokens) != 0) return 1;
    a->opt.tokens = &a->tokens;
    a->opt.token_file = a->token_file;
    return settle_tls(a, host, port);
}

/* Where the log goes, once the command line checked out (its errors
 * stay on the terminal). Returns 0 or an exit code. */
static int settle_log(const struct args *a)
{
    char err[512];
    if (a->log_file && a->syslog) {
        fprintf(stderr, "%s: --log-file and --syslog exclude each other: give one.\n", CMD);
        return CLI_USAGE;
    }
    if (a->log_file && scuda_log_to_file(a->log_file, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s; give a writable path, or leave --log-file out (stderr).\n", CMD, err);
        return 1;
    }
    if (a->syslog) scuda_log_to_syslog();
    return 0;
}

int cmd_server(int argc, char **argv)
{
    /* A server's log is read later, beside others: its lines carry the
     * time (SCUDA_LOG_TIME=0 drops it, e.g. under journald). */
    scuda_log_set_timestamps(1);
    struct args a;
    memset(&a, 0, sizeof a);
    a.opt.listen = SCUDA_DEFAULT_ADDR;
    a.opt.print_port_fd = -1;
    a.opt.dead_after_s = SCUDA_DEAD_AFTER_DEFAULT_S;
    a.opt.resume_within_s = SCUDA_RESUME_WITHIN_DEFAULT_S;
    a.opt.module_cache_size = SCUDA_MODULE_CACHE_DEFAULT_SIZE;

    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        }
        int rc = apply(argc, argv, &i, &a);
        if (rc != 0) return rc;
    }

    settle_module_cache(&a);
    static char control_default[4200];
    if (!a.opt.control_path) {
        char dir[4096];
        if (a.state_dir) snprintf(dir, sizeof dir, "%s", a.state_dir);
        else if (scuda_state_dir_default(dir, sizeof dir) != 0) dir[0] = '\0';
        if (dir[0]) {
            snprintf(control_default, sizeof control_default, "%s/control.sock", dir);
            a.opt.control_path = control_default;
        }
    }
    int rc = check(&a);
    if (rc == 0) rc = settle_log(&a);
    if (rc == 0) rc = server_run(&a.opt);
    token_set_free(&a.tokens);
    tls_server_free((struct tls_server *)a.opt.tls);
    return rc;
}
