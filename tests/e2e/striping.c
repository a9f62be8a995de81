/* striping.c - large copies over the bulk connections (SCUDA_BULK_STREAMS,
 * protocol.h "Bulk connections").
 *
 * Through the shim: striped copies are byte-exact for sizes and offsets
 * that are not multiples of a chunk, in both directions, synchronous and
 * on a stream, from several threads at once; a copy followed by a kernel
 * or a copy that depends on it sees its bytes; striping off (0 or 1) still
 * works; an asynchronous copy from page-locked memory runs in the
 * background (the call returns before its bytes are sent), in order with
 * the calls after it, also when its memory is freed at once, and not with
 * SCUDA_BULK_BACKGROUND=0; a bulk connection killed in the middle of a
 * copy fails that copy (one in the background at the next synchronizing
 * call), not the process, and later copies go over the main connection; when the
 * extra connections cannot be opened (a relay that lets one through) the
 * client says so once and copies over the main connection.
 *
 * With the raw protocol: joins with a wrong secret, for another session,
 * for an unknown session, a replayed proof, a wrong token, an index out of
 * range or taken already are all refused; a chunk or an announcement the
 * session cannot follow ends striping for that session, and the session
 * goes on; under --idle-timeout, so does a chunk half sent. So does a
 * compressed chunk that is hostile: over connections that did not
 * negotiate compression, not shorter than its chunk, or not decompressing
 * to exactly its length; and an announcement asking for compression over
 * connections that did not negotiate it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/compress.h"
#include "common/config.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "copy_checks.h"
#include "harness.h"
#include "server/bulk_join.h"

#ifndef LINKEM_BIN
#error "LINKEM_BIN (path of the linkem relay) must be defined"
#endif

#define MiB (1u << 20)

/* Private to the shim (src/client/bulk.c). */
extern int scuda_client_bulk_streams(void);
extern uint64_t scuda_client_bulk_background_copies(void);

static struct h_server srv;
/* Where the raw-protocol checks connect (the token server's for a while). */
static const char *raw_addr;
/* Added to the raw joins' HELLO_BULK_JOIN (HELLO_JOIN_ZSTD), and to the
 * raw announcements' mode byte (a compression policy). */
static uint16_t join_extra;
static uint8_t announce_mode;

/* ---- byte-exact copies -------------------------------------------------------- */

/* Small pieces stay below the striping threshold: they check the striped
 * copies through the main connection. */
#define PIECE (2u * MiB)
static const struct cc_round_trip striped = {.piece = PIECE, .source_offset = 0, .label = "striped "};

static void round_trip(size_t n, size_t off, CUstream st, int async, uint32_t seed)
{
    cc_round_trip(&striped, n, off, st, async, seed);
}

static void use_streams(const char *k)
{
    if (k) setenv("SCUDA_BULK_STREAMS", k, 1);
    else unsetenv("SCUDA_BULK_STREAMS");
}

static int exact_client(void *arg)
{
    (void)arg;
    use_streams("4");
    h_cuda_setup();
    CHECK(scuda_client_bulk_streams() == 0, "bulk connections before the first large copy");
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    static const size_t sizes[] = {8 * MiB, 8 * MiB + 1, 13 * MiB + 4097, 37 * MiB + 12345};
    static const size_t offs[] = {0, 3, 4097, 1};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        round_trip(sizes[i], offs[i], st, 0, 10 * i + 1);
        CHECK(scuda_client_bulk_streams() == 4, "%zu bytes: %d bulk connections, expected 4", sizes[i],
              scuda_client_bulk_streams());
        round_trip(sizes[i], offs[(i + 1) % 4], st, 1, 10 * i + 5);
    }
    /* Pinned host memory on the client is ordinary memory: striped too. */
    size_t n = 9 * MiB + 7;
    void *pin_src, *pin_dst;
    CU(cuMemAllocHost_v2(&pin_src, n));
    CU(cuMemAllocHost_v2(&pin_dst, n));
    h_pattern(pin_src, n, 77);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    CU(cuMemcpyHtoDAsync_v2(d, pin_src, n, st));
    CU(cuMemcpyDtoHAsync_v2(pin_dst, d, n, st));
    CU(cuStreamSynchronize(st));
    cc_expect_same(pin_dst, pin_src, n, "pinned striped round trip");
    CU(cuMemFree_v2(d));
    CU(cuMemFreeHost(pin_src));
    CU(cuMemFreeHost(pin_dst));
    CHECK(scuda_client_bulk_streams() == 4);
    return 0;
}

/* ---- ordering ---------------------------------------------------------------- */

static void launch_fill(CUdeviceptr out, uint32_t value, uint64_t count, CUstream st)
{
    CUfunction f = h_func("fill_u32");
    void *args[] = {&out, &value, &count};
    CU(cuLaunchKernel(f, 64, 1, 1, 128, 1, 1, 0, st, args, NULL));
}

static int order_client(void *arg)
{
    (void)arg;
    use_streams("3");
    h_cuda_setup();
    size_t n = 24 * MiB + 8, fill_off = 5 * MiB, fill_n = 3 * MiB;
    uint8_t *src = malloc(n), *want = malloc(n), *got = malloc(n);
    CHECK(src && want && got);
    CUdeviceptr a, b;
    CU(cuMemAlloc_v2(&a, n));
    CU(cuMemAlloc_v2(&b, n));
    CUstream s, other;
    CU(cuStreamCreate(&s, 0));
    CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));

    /* On one stream: copy in, a kernel over part of it, copy out. A kernel
     * that ran before the copy landed would be overwritten by it. */
    h_pattern(src, n, 5);
    memcpy(want, src, n);
    for (size_t i = 0; i < fill_n; i += 4) memcpy(want + fill_off + i, &(uint32_t){0xfeedf00d}, 4);
    CU(cuMemcpyHtoDAsync_v2(a, src, n, s));
    launch_fill(a + fill_off, 0xfeedf00d, fill_n / 4, s);
    memset(got, 0, n);
    CU(cuMemcpyDtoHAsync_v2(got, a, n, s));
    CU(cuStreamSynchronize(s));
    cc_expect_same(got, want, n, "async striped copy, kernel, striped copy on one stream");
    CHECK(scuda_client_bulk_streams() == 3);

    /* cuMemcpyHtoD is synchronous: a kernel on a non-blocking stream
     * launched after it must see its bytes. */
    h_pattern(src, n, 6);
    memcpy(want, src, n);
    for (size_t i = 0; i < fill_n; i += 4) memcpy(want + fill_off + i, &(uint32_t){0x0badcafe}, 4);
    CU(cuMemcpyHtoD_v2(b, src, n));
    launch_fill(b + fill_off, 0x0badcafe, fill_n / 4, other);
    CU(cuStreamSynchronize(other));
    cc_get_pieces(&striped, got, b, n);
    cc_expect_same(got, want, n, "sync striped copy, then a kernel on another stream");

    /* A device-to-device copy after a striped one, then out again. */
    h_pattern(src, n, 7);
    CU(cuMemcpyHtoDAsync_v2(a, src, n, s));
    CU(cuMemcpyDtoDAsync_v2(b, a, n, s));
    memset(got, 0, n);
    CU(cuMemcpyDtoHAsync_v2(got, b, n, s));
    CU(cuStreamSynchronize(s));
    cc_expect_same(got, src, n, "striped copy in, device-to-device, striped copy out");

    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(b));
    free(src);
    free(want);
    free(got);
    return 0;
}

/* ---- copies in the background ------------------------------------------------------ */

/* From page-locked memory, on a stream: in the background (unless
 * SCUDA_BULK_BACKGROUND=0, arg "off"), and every later call on the stream
 * sees the bytes. */
static int background_client(void *arg)
{
    int off = arg != NULL;
    if (off) setenv("SCUDA_BULK_BACKGROUND", "0", 1);
    use_streams("4");
    h_cuda_setup();
    enum { COPIES = 4 };
    size_t n = 24 * MiB + 12, fill_off = 3 * MiB, fill_n = 2 * MiB;
    uint8_t *pin[COPIES], *want[COPIES], *got = malloc(n);
    CUdeviceptr d[COPIES], e;
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CU(cuMemAlloc_v2(&e, n));
    for (int i = 0; i < COPIES; i++) {
        CU(cuMemAllocHost_v2((void **)&pin[i], n));
        CU(cuMemAlloc_v2(&d[i], n));
        want[i] = malloc(n);
        CHECK(want[i] != NULL);
        h_pattern(pin[i], n, 300 + (uint32_t)i);
        memcpy(want[i], pin[i], n);
        for (size_t k = 0; k < fill_n; k += 4) memcpy(want[i] + fill_off + k, &(uint32_t){0xa110c8ed + (uint32_t)i}, 4);
    }
    uint64_t before = scuda_client_bulk_background_copies();
    /* Back to back, nothing waited for: each copy, a kernel over part of
     * it, and a device-to-device copy of the last one. */
    for (int i = 0; i < COPIES; i++) {
        CU(cuMemcpyHtoDAsync_v2(d[i], pin[i], n, s));
        launch_fill(d[i] + fill_off, 0xa110c8ed + (uint32_t)i, fill_n / 4, s);
    }
    CU(cuMemcpyDtoDAsync_v2(e, d[COPIES - 1], n, s));
    /* Freed at once: the free waits for the bytes to leave. */
    CU(cuMemFreeHost(pin[0]));
    CU(cuStreamSynchronize(s));
    for (int i = 0; i < COPIES; i++) {
        memset(got, 0, n);
        CU(cuMemcpyDtoH_v2(got, d[i], n));
        cc_expect_same(got, want[i], n, off ? "a copy not in the background" : "a copy in the background");
    }
    memset(got, 0, n);
    CU(cuMemcpyDtoH_v2(got, e, n));
    cc_expect_same(got, want[COPIES - 1], n, "a device-to-device copy after copies in the background");
    uint64_t ran = scuda_client_bulk_background_copies() - before;
    CHECK(off ? ran == 0 : ran == COPIES, "%llu copies in the background, expected %d", (unsigned long long)ran,
          off ? 0 : COPIES);
    /* Pageable memory, or a synchronous copy: never in the background. */
    CU(cuMemcpyHtoDAsync_v2(d[1], want[1], n, s));
    CU(cuMemcpyHtoD_v2(d[2], pin[2], n));
    CHECK(scuda_client_bulk_background_copies() - before == ran, "a copy from pageable memory or a synchronous "
                                                                 "one ran in the background");
    CU(cuStreamSynchronize(s));
    for (int i = 1; i < COPIES; i++) CU(cuMemFreeHost(pin[i]));
    for (int i = 0; i < COPIES; i++) {
        CU(cuMemFree_v2(d[i]));
        free(want[i]);
    }
    CU(cuMemFree_v2(e));
    free(got);
    return 0;
}

/* ---- several threads at once ----------------------------------------------------- */

static void *thread_copies(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    size_t n = 10 * MiB + 333 * id;
    uint8_t *src = malloc(n), *got = malloc(n);
    CHECK(src && got);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    for (int rep = 0; rep < 3; rep++) {
        h_pattern(src, n, (uint32_t)(100 * id + rep));
        CU(cuMemcpyHtoDAsync_v2(d, src, n, st));
        memset(got, 0, n);
        CU(cuMemcpyDtoHAsync_v2(got, d, n, st));
        CU(cuStreamSynchronize(st));
        cc_expect_same(got, src, n, "a thread's striped round trip");
    }
    CU(cuMemFree_v2(d));
    free(src);
    free(got);
    return NULL;
}

static int threads_client(void *arg)
{
    (void)arg;
    use_streams("2");
    h_cuda_setup();
    pthread_t t[3];
    for (uintptr_t i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, thread_copies, (void *)(i + 1)) == 0);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK(scuda_client_bulk_streams() == 2);
    return 0;
}

/* ---- striping off ------------------------------------------------------------------ */

/* SCUDA_BULK_STREAMS=arg: "0" and "1" turn striping off, anything that
 * is not a count gets a warning and the default (4, over TLS 8). */
static int setting_client(void *arg)
{
    use_streams(arg);
    const char *tls = getenv("SCUDA_TLS");
    int dflt = tls && strcmp(tls, "1") == 0 ? SCUDA_BULK_STREAMS_TLS_DEFAULT : SCUDA_BULK_STREAMS_DEFAULT;
    int want = strcmp(arg, "0") == 0 || strcmp(arg, "1") == 0 ? 0 : dflt;
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    round_trip(17 * MiB + 5, 3, st, 0, 41);
    round_trip(17 * MiB + 5, 1, st, 1, 42);
    CHECK(scuda_client_bulk_streams() == want, "SCUDA_BULK_STREAMS=%s: %d bulk connections, expected %d",
          (const char *)arg, scuda_client_bulk_streams(), want);
    return 0;
}

static void run_setting(const char *k, int warns)
{
    char path[512], what[64];
    int err_fd = h_temp_file(k, path, sizeof path);
    pid_t pid = h_spawn(setting_client, (void *)k, 60, -1, err_fd);
    close(err_fd);
    snprintf(what, sizeof what, "SCUDA_BULK_STREAMS=%s", k);
    h_wait_ok(pid, 60000, what);
    char *err = h_read_file(path, NULL);
    CHECK(!warns == !strstr(err, "SCUDA_BULK_STREAMS=foo is not a number"), "%s: stderr:\n%s", what, err);
    free(err);
}

/* ---- a bulk connection killed in the middle of a copy --------------------------------- */

/* Socket fds of this process, by inode: the bulk connections are the ones
 * that appear with the first large copy. */
static int socket_fds(int *fds, unsigned long *inodes, int max)
{
    DIR *dir = opendir("/proc/self/fd");
    CHECK(dir != NULL);
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) && n < max;) {
        char link[300], target[64];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        unsigned long ino;
        if (sscanf(target, "socket:[%lu]", &ino) == 1) {
            fds[n] = atoi(e->d_name);
            inodes[n++] = ino;
        }
    }
    closedir(dir);
    return n;
}

static int new_sockets(const unsigned long *before, int nb, int *out, int max)
{
    int fds[256], n = 0;
    unsigned long ino[256];
    int m = socket_fds(fds, ino, 256);
    for (int i = 0; i < m && n < max; i++) {
        int seen = 0;
        for (int j = 0; j < nb; j++) seen |= ino[i] == before[j];
        if (!seen) out[n++] = fds[i];
    }
    return n;
}

struct copier {
    int d2h;
    int background; /* asynchronous copies from page-locked memory, each followed by a sync */
    CUdeviceptr d;
    uint8_t *host;
    size_t n;
    _Atomic int started;
    CUresult result;
    int copies;
};

static void *copy_until_error(void *arg)
{
    struct copier *c = arg;
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CU(cuCtxSetCurrent(ctx));
    c->result = CUDA_SUCCESS;
    for (c->copies = 0; c->copies < 400 && c->result == CUDA_SUCCESS; c->copies++) {
        atomic_store(&c->started, 1);
        if (c->background) {
            c->result = cuMemcpyHtoDAsync_v2(c->d, c->host, c->n, NULL);
            if (c->result == CUDA_SUCCESS) c->result = cuStreamSynchronize(NULL);
        } else {
            c->result = c->d2h ? cuMemcpyDtoH_v2(c->host, c->d, c->n) : cuMemcpyHtoD_v2(c->d, c->host, c->n);
        }
    }
    return NULL;
}

/* arg: NULL an H2D, 1 a D2H, 2 an H2D in the background. */
static int kill_client(void *arg)
{
    int d2h = (uintptr_t)arg == 1, background = (uintptr_t)arg == 2;
    use_streams("4");
    h_cuda_setup();
    int fds[256];
    unsigned long before[256];
    int nb = socket_fds(fds, before, 256);

    struct copier c = {.d2h = d2h, .background = background, .n = 48 * MiB + 5};
    if (background) CU(cuMemAllocHost_v2((void **)&c.host, c.n));
    else c.host = malloc(c.n);
    uint8_t *check = malloc(c.n);
    CHECK(c.host && check);
    h_pattern(c.host, c.n, 9);
    CU(cuMemAlloc_v2(&c.d, c.n));
    CU(cuMemcpyHtoD_v2(c.d, c.host, c.n)); /* opens the bulk connections */
    int bulk_fds[16];
    int nbulk = new_sockets(before, nb, bulk_fds, 16);
    CHECK(nbulk == 4 && scuda_client_bulk_streams() == 4, "%d new sockets, %d bulk connections", nbulk,
          scuda_client_bulk_streams());

    pthread_t t;
    CHECK(pthread_create(&t, NULL, copy_until_error, &c) == 0);
    while (!atomic_load(&c.started)) h_sleep_ms(1);
    h_sleep_ms(5);
    uint64_t t0 = h_now_ms();
    CHECK(shutdown(bulk_fds[2], SHUT_RDWR) == 0, "shutdown: %s", strerror(errno));
    pthread_join(t, NULL);
    printf("%s: copy %d after the kill failed with %s after %llu ms\n", d2h ? "D2H" : "H2D", c.copies,
           h_cu_name(c.result), (unsigned long long)(h_now_ms() - t0));
    CHECK(c.result == CUDA_ERROR_UNKNOWN, "a copy over a killed bulk connection returned %s", h_cu_name(c.result));
    CHECK(scuda_client_bulk_streams() == 0, "striping still on after a bulk connection died");

    /* The session goes on. A failed host-to-device copy is also reported,
     * like any asynchronous error, by the next synchronizing call. */
    CUresult r = cuCtxSynchronize();
    CHECK(r == CUDA_SUCCESS || (!d2h && r == CUDA_ERROR_UNKNOWN), "cuCtxSynchronize: %s", h_cu_name(r));
    CU(cuCtxSynchronize());
    /* Large copies now go over the main connection, and are exact. */
    h_pattern(c.host, c.n, 10);
    CU(cuMemcpyHtoD_v2(c.d, c.host, c.n));
    memset(check, 0, c.n);
    CU(cuMemcpyDtoH_v2(check, c.d, c.n));
    cc_expect_same(check, c.host, c.n, "a large copy after striping ended");
    CU(cuMemFree_v2(c.d));
    if (background) CU(cuMemFreeHost(c.host));
    else free(c.host);
    free(check);
    return 0;
}

/* d2h: 0 an H2D, 1 a D2H, 2 an H2D in the background. */
static void run_kill(int d2h)
{
    static const char *const tags[] = {"kill-h2d", "kill-d2h", "kill-h2d-background"};
    static const char *const whats[] = {"client whose bulk connection died in an H2D",
                                        "client whose bulk connection died in a D2H",
                                        "client whose bulk connection died in an H2D in the background"};
    char path[512];
    int err_fd = h_temp_file(tags[d2h], path, sizeof path);
    int before = h_server_log_count(&srv, "striping ends for this session");
    pid_t pid = h_spawn(kill_client, (void *)(uintptr_t)d2h, 60, -1, err_fd);
    close(err_fd);
    h_wait_ok(pid, 60000, whats[d2h]);
    char *err = h_read_file(path, NULL);
    CHECK(strstr(err, "failed during a copy") != NULL, "the client did not say why the copy failed:\n%s", err);
    free(err);
    CHECK(h_wait_log(&srv, "striping ends for this session", before + 1, 5000) > before,
          "the session did not log the end of striping");
    static const char *const copies[] = {"an H2D", "a D2H", "an H2D in the background"};
    printf("ok a bulk connection killed during %s: the copy fails, the session goes on\n", copies[d2h]);
}

/* ---- joins can't be forged ---------------------------------------------------------------- */

/* A session over the raw protocol, with its join secret. */
struct raw_session {
    int fd;
    uint32_t pid, k, seq;
    uint8_t secret[BULK_SECRET_LEN];
};

static long raw_call(struct raw_session *r, uint16_t op, const void *p, uint32_t len, uint8_t **out, size_t *olen)
{
    uint32_t seq = ++r->seq;
    CHECK(h_raw_send(r->fd, op, 0, seq, 0, p, len) == 0);
    return h_raw_call_reply(r->fd, seq, 10000, out, olen);
}

/* scuda_bulk_setup for k connections: its result, and when it succeeds
 * the session's pid and join secret in r (*chunk_max: its largest chunk). */
static long raw_setup(struct raw_session *r, uint32_t k, uint32_t *chunk_max)
{
    struct msg_scuda_bulk_setup_req m = {k};
    struct msg_scuda_bulk_setup_rep rep;
    wire_buf b;
    wb_init(&b);
    msg_scuda_bulk_setup_req_put(&b, &m);
    uint8_t *out = NULL;
    size_t olen = 0;
    long rc = raw_call(r, OP_scuda_bulk_setup, b.data, (uint32_t)b.len, &out, &olen);
    wb_free(&b);
    if (rc == CUDA_SUCCESS) {
        struct msg_arena a;
        wire_reader rd;
        msg_arena_init(&a);
        wr_init(&rd, out, olen);
        CHECK(msg_scuda_bulk_setup_rep_get(&rd, &a, &rep) == 0, "scuda_bulk_setup: a malformed reply (%zu bytes)",
              olen);
        msg_arena_free(&a);
        r->k = rep.k;
        r->pid = rep.pid;
        memcpy(r->secret, rep.secret, BULK_SECRET_LEN);
        *chunk_max = rep.chunk_max;
    }
    free(out);
    return rc;
}

static void raw_open(struct raw_session *r, const char *token, uint32_t k)
{
    memset(r, 0, sizeof *r);
    uint32_t status;
    r->fd = h_raw_connect(raw_addr, token, &status);
    CHECK(r->fd >= 0, "raw session: welcome status %u", status);
    uint32_t chunk_max = 0;
    long rc = raw_setup(r, k, &chunk_max);
    CHECK(rc == CUDA_SUCCESS, "scuda_bulk_setup: %ld", rc);
    CHECK(r->k == k && chunk_max >= BULK_CHUNK_MIN, "granted %u connections, chunks up to %u", r->k, chunk_max);
    rc = raw_setup(r, k, &chunk_max);
    CHECK(rc != CUDA_SUCCESS, "a second scuda_bulk_setup was granted");
}

static void raw_ping(struct raw_session *r, long want, const char *what)
{
    long rc = raw_call(r, OP_scuda_ping, NULL, 0, NULL, NULL);
    CHECK(rc == want, "%s: ping answered %ld, expected %ld", what, rc, want);
}

/* A context synchronize: unlike a ping, it reports an earlier one-way
 * call's error (protocol.h). */
static void raw_sync(struct raw_session *r, long want, const char *what)
{
    const uint64_t ctx = 0x100;
    struct msg_scuda_primary_ctx_retain_req retain = {.dev = 0, .ctx = ctx};
    struct msg_scuda_ctx_synchronize_req sync = {.ctx = ctx};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &retain);
    CHECK(raw_call(r, OP_scuda_primary_ctx_retain, b.data, (uint32_t)b.len, NULL, NULL) == CUDA_SUCCESS);
    wb_reset(&b);
    msg_scuda_ctx_synchronize_req_put(&b, &sync);
    long rc = raw_call(r, OP_scuda_ctx_synchronize, b.data, (uint32_t)b.len, NULL, NULL);
    wb_free(&b);
    CHECK(rc == want, "%s: synchronize answered %ld, expected %ld", what, rc, want);
}

/* Announce a striped copy of n bytes (device address 0, stream 0, mode
 * 0) on r's main connection: scuda_bulk_htod one-way, scuda_bulk_dtoh
 * with a reply (request r->seq). */
static void raw_announce(struct raw_session *r, uint16_t op, uint64_t n, uint32_t chunk, uint64_t id)
{
    struct msg_bulk_copy copy = {.mode = announce_mode, .n = n, .chunk = chunk, .id = id};
    wire_buf b;
    wb_init(&b);
    if (op == OP_scuda_bulk_htod) {
        struct msg_scuda_bulk_htod_req m = {copy};
        msg_scuda_bulk_htod_req_put(&b, &m);
    } else {
        struct msg_scuda_bulk_dtoh_req m = {copy};
        msg_scuda_bulk_dtoh_req_put(&b, &m);
    }
    uint16_t flags = op == OP_scuda_bulk_htod ? FRAME_ASYNC : 0;
    CHECK(h_raw_send(r->fd, op, flags, ++r->seq, 0, b.data, (uint32_t)b.len) == 0);
    wb_free(&b);
}

/* How a join proof is made up, for forging it. */
enum forge { HONEST, WRONG_SECRET, OLD_NONCE };

/* Join `pid` as connection `index`, with `secret`. Returns the fd when
 * welcomed (-1 if not); *status and msg say what the server answered. */
static int raw_join(const char *token, uint32_t pid, uint32_t index, const uint8_t *secret, enum forge how,
                    uint32_t *status, char *msg, size_t msglen)
{
    char err[256];
    int fd = dial(raw_addr, 5000, PREFACE_JOIN, err, sizeof err);
    CHECK(fd >= 0, "connect: %s", err);
    uint8_t nonce[SCUDA_NONCE_LEN], req[BULK_JOIN_LEN], key[BULK_SECRET_LEN];
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "%s", err);
    memcpy(key, secret, sizeof key);
    if (how == WRONG_SECRET) key[7] ^= 0x40;
    uint8_t proof_nonce[SCUDA_NONCE_LEN];
    memcpy(proof_nonce, nonce, sizeof nonce);
    if (how == OLD_NONCE) proof_nonce[0] ^= 1; /* a proof recorded on another connection */
    hello_join_request(req, pid, index, key, proof_nonce);
    CHECK(hello_send_client(fd, HELLO_BULK_JOIN | join_extra, 0, token, nonce, req, sizeof req) == 0);
    /* Over TLS: the session's own TLS session, the request again (bulk_join.c). */
    int second = dial_second_tls(fd, raw_addr, 5000, err, sizeof err);
    if (second < 0 || (tls_of(fd) && second == 0 && io_write_full(fd, req, sizeof req) != 0)) {
        snprintf(msg, msglen, "%s", err);
        io_close(fd);
        return -1;
    }
    if (hello_read_welcome(fd, 10000, status, msg, msglen) != 0 || *status != WELCOME_OK) {
        io_close(fd);
        return -1;
    }
    return fd;
}

static void expect_refused(const char *token, uint32_t pid, uint32_t index, const uint8_t *secret, enum forge how,
                           uint32_t want_status, const char *want_msg, const char *what)
{
    uint32_t status;
    char msg[256];
    int before = h_server_log_count(&srv, want_msg);
    int fd = raw_join(token, pid, index, secret, how, &status, msg, sizeof msg);
    CHECK(fd < 0, "%s: the join was welcomed", what);
    if (want_status == WELCOME_BAD_JOIN) {
        /* Every bad join gets the same words; the reason is the log's. */
        CHECK(status == want_status && strcmp(msg, JOIN_REFUSAL) == 0, "%s: status %u, \"%s\"; expected %u, \"%s\"",
              what, status, msg, want_status, JOIN_REFUSAL);
        CHECK(h_server_log_count(&srv, want_msg) > before, "%s: the server log does not say \"%s\"", what, want_msg);
    } else {
        CHECK(status == want_status && strstr(msg, want_msg), "%s: status %u, \"%s\"; expected %u, \"%s\"", what,
              status, msg, want_status, want_msg);
    }
    printf("ok refused: %s (\"%s\")\n", what, msg);
}

static int expect_welcomed(const char *token, uint32_t pid, uint32_t index, const uint8_t *secret, const char *what)
{
    uint32_t status;
    char msg[256];
    int fd = raw_join(token, pid, index, secret, HONEST, &status, msg, sizeof msg);
    CHECK(fd >= 0, "%s: refused: status %u, \"%s\"", what, status, msg);
    return fd;
}

static void joins(void)
{
    struct raw_session a, b;
    raw_open(&a, NULL, 2);
    uint8_t zeros[BULK_SECRET_LEN] = {0};
    expect_refused(NULL, a.pid, 0, a.secret, WRONG_SECRET, WELCOME_BAD_JOIN, "wrong join secret", "a wrong secret");
    expect_refused(NULL, a.pid, 0, zeros, HONEST, WELCOME_BAD_JOIN, "wrong join secret", "an all-zero secret");
    expect_refused(NULL, a.pid, 0, a.secret, OLD_NONCE, WELCOME_BAD_JOIN, "wrong join secret",
                   "a proof made for another connection's nonce");
    expect_refused(NULL, (uint32_t)getpid(), 0, a.secret, HONEST, WELCOME_BAD_JOIN, "no session",
                   "a pid that is no session of this server");
    expect_refused(NULL, a.pid, 2, a.secret, HONEST, WELCOME_BAD_JOIN, "connection 2 asked for",
                   "an index past the connections granted");
    expect_refused(NULL, a.pid, 0xffffffffu, a.secret, HONEST, WELCOME_BAD_JOIN, "asked for", "index 2^32-1");

    /* Another session: a's secret opens none of b's connections, and b's
     * not-yet-set-up session takes no joins at all. */
    uint32_t status;
    b.fd = h_raw_connect(raw_addr, NULL, &status);
    CHECK(b.fd >= 0);
    b.seq = 0;
    raw_ping(&b, CUDA_SUCCESS, "session b");
    CHECK(h_wait_sessions(&srv, 2, 5000));
    pid_t pids[256];
    int ns = h_server_sessions(&srv, pids, 256);
    b.pid = (uint32_t)pids[ns - 1];
    CHECK(b.pid != a.pid);
    expect_refused(NULL, b.pid, 0, a.secret, HONEST, WELCOME_BAD_JOIN, "not asked for bulk",
                   "a join to a session that asked for none");
    uint32_t chunk_max, b_pid = b.pid;
    CHECK(raw_setup(&b, 2, &chunk_max) == CUDA_SUCCESS && b.k == 2 && b.pid == b_pid);
    expect_refused(NULL, b.pid, 0, a.secret, HONEST, WELCOME_BAD_JOIN, "wrong join secret",
                   "another session's secret");

    int l0 = expect_welcomed(NULL, a.pid, 0, a.secret, "connection 0");
    expect_refused(NULL, a.pid, 0, a.secret, HONEST, WELCOME_BAD_JOIN, "joined already", "connection 0 again");
    int l1 = expect_welcomed(NULL, a.pid, 1, a.secret, "connection 1");
    raw_ping(&a, CUDA_SUCCESS, "session a after the refusals");
    raw_ping(&b, CUDA_SUCCESS, "session b after the refusals");
    printf("ok joins: only the session's own secret, fresh, for a free slot, gets in\n");

    /* A chunk header the session does not expect ends striping for the
     * session; the session itself goes on. */
    uint64_t id = 1;
    uint32_t chunk = 1 * MiB;
    raw_announce(&a, OP_scuda_bulk_htod, 3 * MiB, chunk, id);
    uint8_t head[BULK_CHUNK_HEAD] = {0};
    uint64_t bad_off = 12345;
    memcpy(head, &id, 8);
    memcpy(head + 8, &bad_off, 8);
    memcpy(head + 16, &chunk, 4);
    CHECK(io_write_full(l0, head, sizeof head) == 0);
    char c;
    CHECK(io_read_full_timeout(l1, &c, 1, 10000) != 0 && errno != ETIMEDOUT,
          "the session did not close its other bulk connection");
    raw_ping(&a, CUDA_SUCCESS, "a ping before the failed striped copy's error is reported");
    raw_sync(&a, CUDA_ERROR_UNKNOWN, "the failed striped copy's error");
    raw_sync(&a, CUDA_SUCCESS, "session a after striping ended");
    CHECK(h_server_log_count(&srv, "expected chunk at offset 0 of copy 1") == 1);
    expect_refused(NULL, a.pid, 1, a.secret, HONEST, WELCOME_BAD_JOIN, "striping has ended",
                   "a join after striping ended");
    io_close(l0);
    io_close(l1);

    /* An announcement out of bounds ends striping too. */
    int m0 = expect_welcomed(NULL, b.pid, 0, b.secret, "b's connection 0");
    int m1 = expect_welcomed(NULL, b.pid, 1, b.secret, "b's connection 1");
    raw_announce(&b, OP_scuda_bulk_dtoh, BULK_COPY_MAX + 1, chunk, id);
    long rc = h_raw_call_reply(b.fd, b.seq, 10000, NULL, NULL);
    CHECK(rc == CUDA_ERROR_INVALID_VALUE, "an announcement of 2^40+1 bytes: %ld", rc);
    CHECK(io_read_full_timeout(m0, &c, 1, 10000) != 0 && errno != ETIMEDOUT);
    raw_ping(&b, CUDA_SUCCESS, "session b after striping ended");
    CHECK(h_server_log_count(&srv, "copy size out of bounds") == 1);
    io_close(m0);
    io_close(m1);
    io_close(a.fd);
    io_close(b.fd);
    printf("ok a chunk or an announcement out of step ends striping, not the session\n");
}

/* With a token, a join must also prove the token. */
static void joins_with_token(void)
{
    struct h_server tsrv;
    struct h_server_opts opt = {.token = "t0ken"};
    h_server_start(&tsrv, "token", &opt);
    raw_addr = tsrv.addr;
    struct raw_session a;
    raw_open(&a, "t0ken", 2);
    expect_refused(NULL, a.pid, 0, a.secret, HONEST, WELCOME_BAD_TOKEN, "bad token", "the right secret, no token");
    expect_refused("t0kem", a.pid, 0, a.secret, HONEST, WELCOME_BAD_TOKEN, "bad token", "a wrong token");
    io_close(expect_welcomed("t0ken", a.pid, 0, a.secret, "the right secret and token"));
    io_close(a.fd);
    raw_addr = srv.addr;
    h_server_stop(&tsrv);
    setenv("SCUDA_SERVER", srv.addr, 1);
    printf("ok a join with a token server needs the token too\n");
}

/* Under --idle-timeout, a chunk half sent and then nothing ends striping
 * (the copy fails) instead of holding the session; the silent session
 * then ends as any idle one. */
static void half_chunk(void)
{
    struct h_server isrv;
    struct h_server_opts opt = {.extra_args = {"--idle-timeout", "1"}};
    h_server_start(&isrv, "idle", &opt);
    raw_addr = isrv.addr;
    struct raw_session a;
    raw_open(&a, NULL, 2);
    int l0 = expect_welcomed(NULL, a.pid, 0, a.secret, "connection 0");
    int l1 = expect_welcomed(NULL, a.pid, 1, a.secret, "connection 1");
    uint64_t id = 1;
    raw_announce(&a, OP_scuda_bulk_htod, 2 * MiB, 1 * MiB, id);
    uint8_t head[BULK_CHUNK_HEAD] = {0};
    memcpy(head, &id, 8);
    CHECK(io_write_full(l0, head, sizeof head / 2) == 0); /* half a chunk header, then silence */
    char c;
    int ended = io_read_full_timeout(l1, &c, 1, 6000) != 0 && errno != ETIMEDOUT;
    CHECK(ended, "a chunk half sent held the bulk connections past --idle-timeout 1");
    CHECK(h_server_log_count(&isrv, "timed out during copy 1") == 1);
    CHECK(h_raw_closed_within(a.fd, 5000), "the silent session outlived --idle-timeout 1");
    io_close(l0);
    io_close(l1);
    io_close(a.fd);
    raw_addr = srv.addr;
    h_server_stop(&isrv);
    setenv("SCUDA_SERVER", srv.addr, 1);
    printf("ok a chunk half sent ends striping under --idle-timeout\n");
}

/* ---- hostile compressed chunks ------------------------------------------------------------------ */

/* A session of two connections (joined with `extra`) and a striped copy
 * to the device of two 1 MiB chunks announced with `mode`; connection 0
 * then carries a header that says `packed` bytes follow, and those bytes.
 * Striping must end with `log` in the server's log, and the session go on. */
static void hostile_packed(uint16_t extra, uint8_t mode, uint32_t packed, const void *bytes, const char *log,
                           const char *what)
{
    struct raw_session a;
    raw_open(&a, NULL, 2);
    join_extra = extra;
    int l0 = expect_welcomed(NULL, a.pid, 0, a.secret, "connection 0");
    int l1 = expect_welcomed(NULL, a.pid, 1, a.secret, "connection 1");
    join_extra = 0;
    int before = h_server_log_count(&srv, log);
    uint64_t id = 1;
    announce_mode = mode;
    raw_announce(&a, OP_scuda_bulk_htod, 2 * MiB, 1 * MiB, id);
    announce_mode = 0;
    uint8_t head[BULK_CHUNK_HEAD];
    bulk_head_encode_packed(head, id, 0, 1 * MiB, packed);
    struct iovec iov[2] = {{head, sizeof head}, {(void *)bytes, bytes ? packed : 0}};
    (void)io_writev_full(l0, iov, bytes ? 2 : 1); /* the session may close it first */
    char c;
    CHECK(io_read_full_timeout(l1, &c, 1, 10000) != 0 && errno != ETIMEDOUT,
          "%s: the session did not close its other bulk connection", what);
    raw_sync(&a, CUDA_ERROR_UNKNOWN, what);
    raw_sync(&a, CUDA_SUCCESS, "the session after a hostile compressed chunk");
    CHECK(h_server_log_count(&srv, log) > before, "%s: the server log does not say \"%s\"", what, log);
    io_close(l0);
    io_close(l1);
    io_close(a.fd);
    printf("ok %s ends striping, not the session\n", what);
}

static void hostile_compression(void)
{
    static char zeros[64 << 10], frame[1024];
    size_t small = compress_chunk(frame, sizeof frame, zeros, sizeof zeros); /* a good frame of 64 KiB */
    CHECK(small > 0 && small < 100);
    static const char garbage[100] = "not a zstd frame";
    const uint8_t policy = COMPRESS_POLICY_ALWAYS << BULK_MODE_POLICY_SHIFT;
    hostile_packed(0, 0, 100, garbage, "expected chunk at offset 0 of copy 1, got something else",
                   "a compressed chunk over connections that did not negotiate it");
    hostile_packed(HELLO_JOIN_ZSTD, policy, 1 * MiB, NULL, "expected chunk at offset 0 of copy 1, got something else",
                   "a compressed chunk no shorter than its plain length");
    hostile_packed(HELLO_JOIN_ZSTD, policy, sizeof garbage, garbage, "does not decompress to its 1048576 bytes",
                   "a compressed chunk that is no zstd frame");
    hostile_packed(HELLO_JOIN_ZSTD, 0, (uint32_t)small, frame, "does not decompress to its 1048576 bytes",
                   "a zstd frame of 64 KiB for a chunk of 1 MiB");
    /* The announcement: refused before any chunk. */
    struct raw_session a;
    raw_open(&a, NULL, 2);
    int l0 = expect_welcomed(NULL, a.pid, 0, a.secret, "connection 0");
    int l1 = expect_welcomed(NULL, a.pid, 1, a.secret, "connection 1");
    announce_mode = policy;
    raw_announce(&a, OP_scuda_bulk_dtoh, 2 * MiB, 1 * MiB, 1);
    announce_mode = 0;
    long rc = h_raw_call_reply(a.fd, a.seq, 10000, NULL, NULL);
    CHECK(rc == CUDA_ERROR_INVALID_VALUE, "compression asked without zstd connections: %ld", rc);
    char c;
    CHECK(io_read_full_timeout(l0, &c, 1, 10000) != 0 && errno != ETIMEDOUT);
    CHECK(h_server_log_count(&srv, "compression asked over connections that did not negotiate it") == 1);
    raw_ping(&a, CUDA_SUCCESS, "the session after a compression it could not give");
    io_close(l0);
    io_close(l1);
    io_close(a.fd);
    printf("ok compression announced over connections that did not negotiate it ends striping\n");
}

/* ---- bulk connections that cannot be opened ------------------------------------------------ */

static int fallback_client(void *arg)
{
    (void)arg;
    use_streams(NULL); /* the default */
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, 0));
    round_trip(20 * MiB + 11, 5, st, 0, 61);
    round_trip(20 * MiB + 11, 1, st, 1, 62);
    CHECK(scuda_client_bulk_streams() == 0);
    return 0;
}

/* Through a relay that lets one connection through, as a strict firewall
 * would: the joins fail, the client says so once and copies anyway. */
static void fallback(void)
{
    char addr[64];
    const char *const args[] = {"--max-conns", "1", NULL};
    pid_t relay = h_start_linkem(LINKEM_BIN, srv.port, args, addr, sizeof addr);
    setenv("SCUDA_SERVER", addr, 1);
    char path[512];
    int err_fd = h_temp_file("fallback", path, sizeof path);
    pid_t pid = h_spawn(fallback_client, NULL, 60, -1, err_fd);
    close(err_fd);
    int st = h_wait(pid, 60000);
    kill(relay, SIGKILL);
    waitpid(relay, NULL, 0);
    setenv("SCUDA_SERVER", srv.addr, 1);
    char *err = h_read_file(path, NULL);
    CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "client through a one-connection relay: status %d; stderr:\n%s", st, err);
    int lines = 0;
    for (const char *p = err; (p = strstr(p, "cannot open bulk connection")); p++) lines++;
    CHECK(lines == 1, "%d lines about the bulk connections (expected 1):\n%s", lines, err);
    free(err);
    printf("ok bulk connections refused by the network: one log line, copies over the main connection\n");
}

int main(void)
{
    h_begin("striping", 290);
    h_server_start(&srv, "main", NULL);
    raw_addr = srv.addr;

    h_wait_ok(h_spawn(exact_client, NULL, 90, -1, -1), 90000, "byte-exact striped copies");
    printf("ok striped copies are byte-exact (sizes and offsets off the chunk grid, sync and async, pinned)\n");
    h_wait_ok(h_spawn(order_client, NULL, 60, -1, -1), 60000, "ordering");
    printf("ok a kernel or copy after a striped copy sees its bytes\n");
    h_wait_ok(h_spawn(background_client, NULL, 60, -1, -1), 60000, "copies in the background");
    h_wait_ok(h_spawn(background_client, "off", 60, -1, -1), 60000, "SCUDA_BULK_BACKGROUND=0");
    printf("ok copies from page-locked memory run in the background, in order (and not when turned off)\n");
    h_wait_ok(h_spawn(threads_client, NULL, 60, -1, -1), 60000, "three threads");
    printf("ok three threads' striped copies at once\n");
    run_setting("0", 0);
    run_setting("1", 0);
    run_setting("foo", 1);
    printf("ok striping off (0, 1) and a bad SCUDA_BULK_STREAMS: copies over the main connection\n");
    run_kill(0);
    run_kill(1);
    run_kill(2);
    joins();
    joins_with_token();
    half_chunk();
    hostile_compression();
    fallback();
    CHECK(h_server_log_count(&srv, "died from signal") == 0);
    h_server_stop(&srv);
    printf("PASS striping\n");
    return 0;
}
