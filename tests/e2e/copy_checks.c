/* copy_checks.c - see copy_checks.h. */
#define _GNU_SOURCE
#include "copy_checks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Canary bytes around a copy's destination. */
#define GUARD 4096

/* ---- byte-exact round trips --------------------------------------------- */

void cc_put_pieces(const struct cc_round_trip *how, CUdeviceptr d, const uint8_t *src, size_t n)
{
    for (size_t off = 0; off < n; off += how->piece)
        CU(cuMemcpyHtoD_v2(d + off, src + off, n - off < how->piece ? n - off : how->piece));
}

void cc_get_pieces(const struct cc_round_trip *how, uint8_t *dst, CUdeviceptr d, size_t n)
{
    for (size_t off = 0; off < n; off += how->piece)
        CU(cuMemcpyDtoH_v2(dst + off, d + off, n - off < how->piece ? n - off : how->piece));
}

void cc_expect_same(const uint8_t *got, const uint8_t *want, size_t n, const char *what)
{
    long at = h_diff(got, want, n);
    CHECK(at < 0, "%s: byte %ld of %zu is 0x%02x, expected 0x%02x", what, at, n, got[at], want[at]);
}

static void to_device(CUdeviceptr d, const uint8_t *from, size_t n, CUstream st, int async)
{
    if (async) {
        CU(cuMemcpyHtoDAsync_v2(d, from, n, st));
        CU(cuStreamSynchronize(st));
    } else {
        CU(cuMemcpyHtoD_v2(d, from, n));
    }
}

static void to_host(uint8_t *to, CUdeviceptr d, size_t n, CUstream st, int async)
{
    if (async) {
        CU(cuMemcpyDtoHAsync_v2(to, d, n, st));
        CU(cuStreamSynchronize(st));
    } else {
        CU(cuMemcpyDtoH_v2(to, d, n));
    }
}

void cc_round_trip(const struct cc_round_trip *how, size_t n, size_t off, CUstream st, int async, uint32_t seed)
{
    char what[128];
    const char *mode = async ? "async" : "sync";
    size_t total = off + n + GUARD;
    uint8_t *src = malloc(how->source_offset + n), *img = malloc(total), *back = malloc(total);
    uint8_t *out = malloc(n + 2 * GUARD);
    CHECK(src && img && back && out);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, total));
    memset(img, 0xa5, total);
    cc_put_pieces(how, d, img, total);

    uint8_t *from = src + how->source_offset;
    h_pattern(from, n, seed);
    to_device(d + off, from, n, st, async);
    memcpy(img + off, from, n);
    cc_get_pieces(how, back, d, total);
    snprintf(what, sizeof what, "%sH2D of %zu bytes at offset %zu (%s)", how->label, n, off, mode);
    cc_expect_same(back, img, total, what);
    if (how->checked) how->checked(what);

    /* The other way: fresh bytes put in pieces, then one D2H to an odd
     * host address. */
    h_pattern(img, total, seed + 1);
    cc_put_pieces(how, d, img, total);
    memset(out, 0xcd, n + 2 * GUARD);
    uint8_t *dst = out + GUARD - 1;
    to_host(dst, d + off, n, st, async);
    snprintf(what, sizeof what, "%sD2H of %zu bytes at offset %zu (%s)", how->label, n, off, mode);
    cc_expect_same(dst, img + off, n, what);
    for (size_t i = 0; i < GUARD - 1; i++) CHECK(out[i] == 0xcd, "%s wrote before its buffer", what);
    for (size_t i = GUARD - 1 + n; i < n + 2 * GUARD; i++) CHECK(out[i] == 0xcd, "%s wrote past its end", what);
    if (how->checked) how->checked(what);

    CU(cuMemFree_v2(d));
    free(src);
    free(img);
    free(back);
    free(out);
}

/* ---- two users of one server -------------------------------------------- */

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0 && fchmod(fd, 0600) == 0, "%s: %s", path, strerror(errno));
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

void cc_start_two_users(struct h_server *srv, const char *tag, const char *alice_token, const char *bob_token,
                        struct cc_users *u)
{
    char server_file[512], file_tag[128], text[512];
    snprintf(file_tag, sizeof file_tag, "%s-tokens", tag);
    close(h_temp_file(file_tag, server_file, sizeof server_file));
    snprintf(file_tag, sizeof file_tag, "%s-alice", tag);
    close(h_temp_file(file_tag, u->alice, sizeof u->alice));
    snprintf(file_tag, sizeof file_tag, "%s-bob", tag);
    close(h_temp_file(file_tag, u->bob, sizeof u->bob));
    snprintf(text, sizeof text, "alice %s\nbob %s\n", alice_token, bob_token);
    write_file(server_file, text);
    snprintf(text, sizeof text, "alice %s\n", alice_token);
    write_file(u->alice, text);
    snprintf(text, sizeof text, "bob %s\n", bob_token);
    write_file(u->bob, text);
    struct h_server_opts opt = {.token_file = server_file};
    h_server_start(srv, tag, &opt);
}

void cc_as_user(const char *token_file)
{
    setenv("SCUDA_TOKEN_FILE", token_file, 1);
    unsetenv("SCUDA_TOKEN");
    h_cuda_setup();
}

void cc_run_share(int (*exporter)(void *), int (*importer)(void *), int (*bob)(void *), unsigned seconds)
{
    pid_t e = h_spawn(exporter, NULL, seconds, -1, -1);
    pid_t i = h_spawn(importer, NULL, seconds, -1, -1);
    pid_t b = h_spawn(bob, NULL, seconds, -1, -1);
    int ms = (int)seconds * 1000;
    h_wait_ok(i, ms, "alice's importer");
    h_wait_ok(b, ms, "bob's importer");
    h_wait_ok(e, ms, "alice's exporter");
}

/* ---- a client's output -------------------------------------------------- */

char *cc_run_output(int (*fn)(void *), void *arg, const char *tag, unsigned seconds, char *err_path,
                    size_t err_cap)
{
    char path[512], errtag[128], errfile[512];
    int fd = h_temp_file(tag, path, sizeof path);
    snprintf(errtag, sizeof errtag, "%s-stderr", tag);
    int efd = h_temp_file(errtag, errfile, sizeof errfile);
    if (err_path) snprintf(err_path, err_cap, "%s", errfile);
    h_wait_ok(h_spawn(fn, arg, seconds, fd, efd), (int)(seconds + 5) * 1000, tag);
    close(fd);
    close(efd);
    size_t len;
    return h_read_file(path, &len);
}

/* ---- devices and migration ------------------------------------------------ */

void cc_work_on(CUdevice dev, unsigned char byte)
{
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 4096));
    CU(cuMemsetD8_v2(p, byte, 4096));
    unsigned char back[16];
    CU(cuMemcpyDtoH_v2(back, p, sizeof back));
    CHECK(back[0] == byte && back[15] == byte, "device %d: a memset of %u read back %u %u", (int)dev, byte, back[0],
          back[15]);
}

int cc_scuda_migrate(const char *scuda_bin, pid_t session, const char *to, const char *control, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s migrate --session %d --to %s --control %s 2>&1", scuda_bin, (int)session, to,
             control);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
