/* harness.h - end-to-end tests of the shim and `scuda server` over loopback.
 *
 * A test program is an ordinary CUDA driver API client linked against the
 * shim (build/lib/libcuda.so.1). The harness starts `scuda server` on
 * 127.0.0.1:0 with the CPU stand-in driver, in a process group of its own,
 * and always kills that group when the test ends: on success, on a failed
 * check, on the alarm that bounds every test, and (through
 * PR_SET_PDEATHSIG) when the test itself is killed.
 *
 * Client code runs in the test process after h_server_start() (which sets
 * SCUDA_SERVER), or in children made with h_spawn(), each with a time limit.
 *
 * E2E_DRIVER=PATH replaces the stand-in (e.g. the real libcuda.so.1).
 * E2E_TLS=1 runs every server with --tls and every client over TLS.
 *
 * The server's stderr (SCUDA_LOG=info) goes to a file in E2E_LOG_DIR; a
 * failing test prints its tail. Sanitizer reports of the server and its
 * sessions go to files next to it, and h_server_stop() fails the test when
 * there are any, or when a session died from a signal. */
#ifndef SCUDA_E2E_HARNESS_H
#define SCUDA_E2E_HARNESS_H

#include "common/messages.gen.h"
#include "common/transport.h" /* io_close: raw connections may carry a TLS link (E2E_TLS=1) */
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- checks ---------------------------------------------------------- */

/* Print where and what, then exit(1) (the exit handler stops the server). */
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) h_fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);          \
    } while (0)

/* A driver call that must succeed. */
#define CU(call)                                                                 \
    do {                                                                         \
        CUresult cu_r_ = (call);                                                 \
        if (cu_r_ != CUDA_SUCCESS) h_fail_cu(__FILE__, __LINE__, #call, cu_r_);  \
    } while (0)

/* A driver call that must return `want`. */
#define CU_EXPECT(want, call)                                                    \
    do {                                                                         \
        CUresult cu_r_ = (call), cu_w_ = (want);                                 \
        if (cu_r_ != cu_w_) h_fail_expect(__FILE__, __LINE__, #call, cu_r_, cu_w_); \
    } while (0)

/* A check that counts a failure and goes on, for a test that reports
 * every case before it fails (CHECK(h_soft_failures() == 0) at the end). */
#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) h_soft_fail(__FILE__, __LINE__, #cond, " " __VA_ARGS__);      \
    } while (0)

void h_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 4, 5)));
void h_soft_fail(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int h_soft_failures(void);
void h_fail_cu(const char *file, int line, const char *call, CUresult r) __attribute__((noreturn));
void h_fail_expect(const char *file, int line, const char *call, CUresult got, CUresult want)
    __attribute__((noreturn));
const char *h_cu_name(CUresult r); /* "CUDA_ERROR_..." without a server round trip */

/* Name the test (log file names) and bound it: after `seconds` the test
 * fails, printing where it was stuck. */
void h_begin(const char *name, unsigned seconds);
/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t h_now_ms(void);
void h_sleep_ms(unsigned ms);

/* ---- the server ------------------------------------------------------ */

struct h_server {
    pid_t pid;          /* the server parent; also its process group */
    int port;
    char addr[64];      /* "127.0.0.1:PORT" */
    char log_path[512]; /* its stderr */
    char san_prefix[512];
    char cache_dir[600]; /* its default module cache (emptied at start) */
    pid_t owner;        /* the process that started it (and cleans up) */
    int tls;            /* it speaks TLS (--tls, its certificate in E2E_LOG_DIR) */
    char fingerprint[80]; /* then its certificate's "sha256:HEX" */
};

struct h_server_opts {
    const char *token;          /* SCUDA_TOKEN for the server (NULL: unset) */
    const char *token_file;     /* --token-file (NULL: none) */
    const char *extra_args[8];  /* more options, NULL-terminated */
    int tls;                    /* --tls; clients get SCUDA_TLS=1 and SCUDA_TLS_FINGERPRINT */
    int own_cert;               /* a fresh certificate of its own, not the test's shared one */
};

/* Start `scuda server --listen 127.0.0.1:0 --driver STANDIN --port-fd N`,
 * wait for its port (10 s at most) and set SCUDA_SERVER (and, for a TLS
 * server, SCUDA_TLS=1 and SCUDA_TLS_FINGERPRINT). `tag` names the
 * log file (several servers per test need different tags). Its default
 * module cache is s->cache_dir, in E2E_LOG_DIR, emptied first: tests never
 * share one, nor touch the user's ~/.cache. */
void h_server_start(struct h_server *s, const char *tag, const struct h_server_opts *opt);
/* Stop it: SIGTERM to the group, SIGKILL after 2 s. Then fail the test if
 * the log says a session died from a signal, or a sanitizer wrote a report. */
void h_server_stop(struct h_server *s);
/* The same for a server one of whose sessions the test killed itself:
 * up to `killed` deaths by signal are the test's (the parent may reap them
 * before the stop or only at it). */
void h_server_stop_killed(struct h_server *s, int killed);
/* Kill the server's whole process group at once (SIGKILL), no checks. */
void h_server_kill(struct h_server *s);
/* The server's log so far (malloc'd, NUL-terminated; never NULL). */
char *h_server_log(const struct h_server *s);
int h_server_log_count(const struct h_server *s, const char *needle);
/* Wait until the log holds at least n lines with needle, for timeout_ms at
 * most; returns the count then. The server writes some lines after the
 * client has its answer (a refusal goes out, then is logged), so a test
 * that reads the log once its client is refused must wait for them. */
int h_wait_log(const struct h_server *s, const char *needle, int n, int timeout_ms);
/* Session process ids in the order the log announced them ("session PID"). */
int h_server_sessions(const struct h_server *s, pid_t *out, int max);
/* Wait until the log has at least n "session PID" lines (timeout_ms). */
int h_wait_sessions(const struct h_server *s, int n, int timeout_ms);
/* 1 while pid is a live process (a zombie counts as gone). */
int h_pid_alive(pid_t pid);
void h_dump_log(const struct h_server *s, size_t tail_bytes);

/* ---- child processes ------------------------------------------------- */

/* Fork a child that runs fn(arg) under an alarm of `seconds` and exits with
 * its return value (through exit(), so the shim's exit handlers run).
 * out_fd / err_fd, when >= 0, become its stdout / stderr. */
pid_t h_spawn(int (*fn)(void *), void *arg, unsigned seconds, int out_fd, int err_fd);

/* linkem (the path) between a client and the server on 127.0.0.1:port,
 * with extra arguments (NULL-terminated; NULL for none): its pid, its
 * address ("127.0.0.1:PORT") in addr. It dies with the test. */
pid_t h_start_linkem(const char *linkem, int port, const char *const *args, char *addr, size_t addrlen);
/* Wait for pid at most timeout_ms. Returns its wait status, or -1 after
 * killing it (SIGKILL) when the time ran out. */
int h_wait(pid_t pid, int timeout_ms);
/* Wait and require a clean exit with status 0. */
void h_wait_ok(pid_t pid, int timeout_ms, const char *what);
/* The same for a child whose stderr goes to stderr_path: on failure the
 * file is printed first (a sanitizer's report, say). */
void h_wait_ok_err(pid_t pid, int timeout_ms, const char *what, const char *stderr_path);
/* A temporary file for a child's output: returns an fd open for writing
 * and fills path (in E2E_LOG_DIR). */
int h_temp_file(const char *tag, char *path, size_t pathlen);
char *h_read_file(const char *path, size_t *len); /* malloc'd, NUL-terminated */
/* Run fn(arg) as a client with SCUDA_STATS=1 (h_spawn, within `seconds`),
 * require a clean exit, and return its stderr: the stats it printed
 * (malloc'd). */
char *h_client_stats(int (*fn)(void *), void *arg, unsigned seconds, const char *tag);
/* The count SCUDA_STATS printed for op `name` of `kind` ("sync" or
 * "async"); 0 when it has no line. */
unsigned h_stats_count(const char *stats, const char *kind, const char *name);
/* rm -rf path (no error when it is missing). */
void h_remove_tree(const char *path);

/* The common test: h_begin, a server (opt may be NULL), client() in a child
 * under a limit of `seconds`, the server stopped, "PASS name". */
void h_run_client_test(const char *name, unsigned seconds, const struct h_server_opts *opt, void (*client)(void));

/* ---- CUDA helpers ---------------------------------------------------- */

/* cuInit, device 0, its primary context made current. */
CUcontext h_cuda_setup(void);
/* The stand-in's kernels (tests/standin/kernels.ptx), loaded once. */
CUmodule h_module(void);
/* The same kernels loaded again, in the current context. */
CUmodule h_load_module(void);
const char *h_ptx_path(void);
CUfunction h_func(const char *name);
/* Fill n bytes with a pattern derived from seed. */
void h_pattern(void *p, size_t n, uint32_t seed);
/* Index of the first differing byte, or -1. */
long h_diff(const void *a, const void *b, size_t n);
/* A session that works: 4 KiB of pattern `seed` to a fresh allocation and
 * back, byte-exact (CHECKs; for client functions run by h_spawn). */
void h_copy_round_trip(uint32_t seed);

/* ---- raw protocol (for bad-input tests) ------------------------------ */

/* Connect and complete the handshake with `token` (NULL: zero proof).
 * Returns the fd, or -1; *status gets the welcome status. */
int h_raw_connect(const char *addr, const char *token, uint32_t *status);
/* Send one frame (header + payload). Returns 0 or -1. */
int h_raw_send(int fd, uint16_t op, uint16_t flags, uint32_t seq, uint32_t ctx, const void *payload,
               uint32_t len);
/* Read frames until the reply to `seq` (skipping output frames). Returns
 * the CUresult, or -1 on EOF/timeout. The reply payload after the CUresult
 * goes to out (malloc'd) when out != NULL. */
long h_raw_call_reply(int fd, uint32_t seq, int timeout_ms, uint8_t **out, size_t *out_len);
/* Send one request (current context id ctx) and wait up to 15 s for its
 * reply: as h_raw_call_reply. */
long h_raw_call(int fd, uint16_t op, uint32_t ctx, const void *payload, size_t len, uint8_t **out, size_t *out_len);
/* The context id raw sessions give device 0's primary context. */
#define H_RAW_CTX 0x200u
/* Retain device 0's primary context under H_RAW_CTX, as the shim does at
 * its first call (the test fails if it cannot). */
void h_raw_retain_ctx(int fd);
/* h_raw_connect without a token, then h_raw_retain_ctx: a session ready
 * for calls in context H_RAW_CTX. */
int h_raw_session(const char *addr);
/* Load an image (scuda_module_load) as module or library `id`; load one
 * by its digest (scuda_module_load_by_hash), setting *found (if not NULL)
 * to the reply's flag, or -1 when the reply does not decode; bind a
 * function or kernel of it by name (op OP_scuda_module_get_function or
 * OP_scuda_library_get_kernel) as `id`. All return the CUresult, or -1. */
long h_raw_load(int fd, uint32_t ctx, uint64_t id, int is_library, const void *image, size_t len);
long h_raw_load_by_hash(int fd, uint32_t ctx, uint64_t id, int is_library, const uint8_t digest[IMAGE_DIGEST_LEN],
                        uint64_t len, int *found);
long h_raw_bind(int fd, uint32_t ctx, uint16_t op, uint64_t parent, uint64_t id, const char *name);
/* Launch function `fid` on one thread of one block (stream 0, no
 * attributes) with parameters `p` (packed bytes, or a raw `extra`
 * buffer), in context H_RAW_CTX, waiting for the reply: the CUresult, or
 * -1. */
long h_raw_launch(int fd, uint64_t fid, const struct msg_launch_params *p);
/* On a socket already connected to srv (from a chosen source address,
 * say): the preface of `kind` (PREFACE_SESSION or PREFACE_JOIN) and, for
 * a TLS server, the TLS handshake, its link attached to fd; the server's
 * certificate is not checked (the test started it). The test fails if
 * either fails; the server's hello comes next. */
void h_transport(int fd, const struct h_server *srv, int kind);
/* 1 when the server closes the connection within timeout_ms (what it
 * sends meanwhile is read and dropped). */
int h_raw_closed_within(int fd, int timeout_ms);

#endif
