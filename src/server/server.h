/* server.h - the SCUDA server's entry point, called by `scuda server`.
 *
 * The parent process listens, checks each client's handshake, and forks one
 * session process per connection. The parent never initializes CUDA: CUDA
 * state does not survive fork (docs/architecture.md, 2 Processes). */
#ifndef SCUDA_SERVER_H
#define SCUDA_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct tls_server;

struct server_options {
    const char *listen;       /* "HOST:PORT"; port 0 picks a free port */
    const char *driver_path;  /* real libcuda.so.1 to load in sessions; NULL = default search */
    const char *token;        /* shared secret; NULL = none (loopback only) */
    int max_sessions;         /* 0 = default (64) */
    uint64_t mem_quota;       /* device bytes per session; 0 = unlimited */
    int idle_timeout_s;       /* 0 = none */
    int print_port_fd;        /* if >= 0, the chosen port is written there as "PORT\n" */
    const char *module_cache_dir;  /* module images on disk (module_store.h); NULL = none */
    uint64_t module_cache_size;    /* the most bytes kept there; 0 = no disk cache */
    const struct tls_server *tls;  /* every connection speaks TLS with it (tls.h); NULL = plain TCP */
};

/* The module cache's bound when none is given. */
#define SCUDA_MODULE_CACHE_DEFAULT_SIZE (1ull << 30)

/* Runs until SIGINT/SIGTERM. Returns the process exit code. */
int server_run(const struct server_options *opt);

#endif
