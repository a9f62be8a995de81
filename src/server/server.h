/* server.h - the SCUDA server's entry point, called by `scuda server`.
 *
 * The parent process listens, runs each client's handshake itself
 * (admission.h), and forks one session process per authenticated client. The parent never initializes CUDA: CUDA
 * state does not survive fork (docs/architecture.md, 2 Processes). */
#ifndef SCUDA_SERVER_H
#define SCUDA_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct tls_server;
struct token_set;

struct server_options {
    const char *listen;       /* "HOST:PORT"; port 0 picks a free port */
    const char *driver_path;  /* real libcuda.so.1 to load in sessions; NULL = default search */
    /* Users and their tokens (token_file.h); NULL or empty = none, which
     * only a loopback listener may have. token_file, when set, is where
     * they came from: SIGHUP reads it again. */
    const struct token_set *tokens;
    const char *token_file;
    int max_handshakes;       /* handshakes in progress; 0 = default (256) */
    int max_handshakes_per_source; /* of them, from one address; 0 = default (8) */
    int max_sessions;         /* 0 = default (64) */
    uint64_t mem_quota;       /* device bytes per session; 0 = unlimited */
    int idle_timeout_s;       /* 0 = none */
    int dead_after_s;         /* a client silent this long is dead (session.c, liveness); 0 = never */
    int resume_within_s;      /* a session whose connection broke waits this long for a resume; 0 = never */
    int print_port_fd;        /* if >= 0, the chosen port is written there as "PORT\n" */
    const char *module_cache_dir;  /* module images on disk (module_store.h); NULL = none */
    uint64_t module_cache_size;    /* the most bytes kept there; 0 = no disk cache */
    /* What one session may grow to (host_quota.h, handles.c, session.c); 0 = the default. */
    uint64_t host_mem_quota;       /* host bytes a client can make its session hold */
    uint64_t max_handles;          /* live virtual handles per session */
    uint64_t max_queued_calls;     /* blocking calls waiting for a worker */
    const struct tls_server *tls;  /* every connection speaks TLS with it (tls.h); NULL = plain TCP */
    int insecure;                  /* --insecure: plain TCP beyond loopback was asked for */
    /* Where device memory lands (device_window.h): 0 = the default window. */
    int driver_placed_memory;      /* --driver-placed-memory: no window, the driver places it */
    uint64_t window_base;          /* device 0's window */
    uint64_t window_size;          /* addresses per device */
    /* Where the driver's own mappings land (driver_va.h): 0 = the default arena. */
    int driver_va_off;             /* --driver-va-base off: the kernel places them */
    uint64_t driver_va_base;
    uint64_t driver_va_size;
    /* Moving sessions (docs/operate.md, "Moving a session"). */
    const char *control_path;      /* the control socket for `scuda migrate`; NULL = none */
    const char *peers;             /* --peer HOST:PORT[,...]: SIGTERM moves sessions there; NULL = none */
    /* Pools (gpu_pool.h, docs/operate.md "Pools"). */
    const char *gpus;              /* --gpus 0,2 or UUIDs; NULL = every GPU the driver shows */
    int max_sessions_per_gpu;      /* 0 = no per-GPU limit */
    const char *metrics;           /* --metrics HOST:PORT: /metrics and /sessions (metrics_http.h); NULL = none */
    const char *agent;             /* --agent HOST:PORT: HAProxy's agent-check (agent.h); NULL = none */
};

#define SCUDA_MAX_HANDLES_DEFAULT 1000000u
#define SCUDA_DEAD_AFTER_DEFAULT_S 10
#define SCUDA_MAX_QUEUED_CALLS_DEFAULT 4096u

/* The module cache's bound when none is given. */
#define SCUDA_MODULE_CACHE_DEFAULT_SIZE (1ull << 30)

/* Runs until SIGINT/SIGTERM; SIGHUP reloads the token file. Returns the
 * process exit code (1 when it cannot listen, or when the address it
 * bound is not loopback and it has no token). */
int server_run(const struct server_options *opt);

#endif
