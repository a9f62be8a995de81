/* copy_checks.h - what the copy, sharing and migration tests share, so
 * that each says only what it checks:
 * - byte-exact round trips of one large copy (striping, tls_chunks),
 *   checked through small copies and canaries;
 * - a server with two users, alice and bob, each with a token file
 *   (ipc, shareable);
 * - a client function run in a child with its stdout (and stderr) kept in
 *   files, its stdout returned (migrate). */
#ifndef SCUDA_E2E_COPY_CHECKS_H
#define SCUDA_E2E_COPY_CHECKS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* ---- byte-exact round trips --------------------------------------------- */

/* How a test's round trips go: the device bytes are put and checked in
 * pieces of `piece` bytes (below every threshold under test: the main
 * connection, a path independent of the one under test); the host source
 * starts `source_offset` bytes into its buffer (1: an odd address);
 * `label` starts each failure's description ("striped " or ""). */
struct cc_round_trip {
    size_t piece;
    size_t source_offset;
    const char *label;
    /* If set, called after each of the round trip's two large copies is
     * checked, with the copy's description (e.g. to check how it went). */
    void (*checked)(const char *what);
};

/* n bytes from src to d, and from d to dst, in pieces of how->piece. */
void cc_put_pieces(const struct cc_round_trip *how, CUdeviceptr d, const uint8_t *src, size_t n);
void cc_get_pieces(const struct cc_round_trip *how, uint8_t *dst, CUdeviceptr d, size_t n);
/* got equals want, or a CHECK names the first byte that differs. */
void cc_expect_same(const uint8_t *got, const uint8_t *want, size_t n, const char *what);

/* n bytes to device offset off, then other bytes back from there to an
 * odd host address, with the bytes around both checked untouched;
 * through cuMemcpy*Async_v2 on st when async. */
void cc_round_trip(const struct cc_round_trip *how, size_t n, size_t off, CUstream st, int async, uint32_t seed);

/* ---- two users of one server -------------------------------------------- */

struct cc_users {
    char alice[512]; /* alice's token file: "alice <token>" */
    char bob[512];
};

/* A server `tag` that knows alice and bob (a token file of both), and a
 * token file for each. */
void cc_start_two_users(struct h_server *srv, const char *tag, const char *alice_token, const char *bob_token,
                        struct cc_users *u);
/* This process is the user of token_file (SCUDA_TOKEN_FILE), on device 0. */
void cc_as_user(const char *token_file);
/* alice's exporter, alice's importer and bob's importer (refused) in
 * three children at once, each within `seconds`: each must exit 0. */
void cc_run_share(int (*exporter)(void *), int (*importer)(void *), int (*bob)(void *), unsigned seconds);

/* ---- a client's output -------------------------------------------------- */

/* fn(arg) in a child (h_spawn, `seconds`), its stdout and stderr kept in
 * files named after tag; err_path (when not NULL) gets the stderr file's
 * path. Returns the child's stdout (malloc'd). */
char *cc_run_output(int (*fn)(void *), void *arg, const char *tag, unsigned seconds, char *err_path,
                    size_t err_cap);

/* ---- devices and migration ------------------------------------------------ */

/* Work runs on device dev: its primary context made current, a memset of
 * `byte` there reads back. */
void cc_work_on(CUdevice dev, unsigned char byte);

/* `scuda migrate` (the program at scuda_bin), run as a command: its exit
 * status, and its stdout and stderr in out. */
int cc_scuda_migrate(const char *scuda_bin, pid_t session, const char *to, const char *control, char *out,
                     size_t cap);

#endif
