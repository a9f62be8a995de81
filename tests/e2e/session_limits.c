/* session_limits.c - what one client can make its session grow to
 * (docs/operate.md, Session limits). Each part is a raw or shim client
 * that tries to grow its session past a limit:
 *
 *   --host-mem-quota 64M  host mirrors past it fail with OUT_OF_MEMORY, the
 *                         session's RSS stays under the quota, a freed
 *                         mirror makes room again;
 *   --host-mem-quota 20M  large copies still work, with fewer staging
 *                         buffers (the refusal is logged);
 *   --max-queued-calls 64 a flood of blocking calls (5000 synchronizes
 *                         behind a 3 s kernel, sent without waiting for
 *                         replies) is refused past the bound at once,
 *                         not queued;
 *   (no option)           a flood of 20000 unknown-op frames writes a
 *                         bounded number of log lines and a "dropped" count;
 *   --max-handles 64      creating events past it fails with OUT_OF_MEMORY. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/wire.h"
#include "harness.h"

#define MIB (1ull << 20)

/* The session's resident memory, from /proc (0 when it cannot be read). */
static uint64_t rss_bytes(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    char *s = h_read_file(path, NULL);
    const char *v = s ? strstr(s, "VmRSS:") : NULL;
    uint64_t kib = v ? strtoull(v + 6, NULL, 10) : 0;
    free(s);
    return kib * 1024;
}

static pid_t only_session(const struct h_server *srv)
{
    pid_t pid[4];
    CHECK(h_wait_sessions(srv, 1, 10000));
    CHECK(h_server_sessions(srv, pid, 4) == 1);
    return pid[0];
}

/* ---- host mirrors ---------------------------------------------------- */

static long mirror_create(int fd, uint64_t addr, uint64_t size, uint64_t *dev)
{
    wire_buf b;
    wb_init(&b);
    msg_scuda_host_mirror_create_req_put(&b, &(struct msg_scuda_host_mirror_create_req){addr, size});
    uint8_t *out = NULL;
    size_t out_len = 0;
    long r = h_raw_call(fd, OP_scuda_host_mirror_create, H_RAW_CTX, b.data, b.len, &out, &out_len);
    if (r == CUDA_SUCCESS) {
        CHECK(out_len >= 8);
        memcpy(dev, out, 8);
    }
    free(out);
    wb_free(&b);
    return r;
}

static long mirror_free(int fd, uint64_t dev)
{
    wire_buf b;
    wb_init(&b);
    msg_scuda_host_mirror_free_req_put(&b, &(struct msg_scuda_host_mirror_free_req){dev});
    long r = h_raw_call(fd, OP_scuda_host_mirror_free, H_RAW_CTX, b.data, b.len, NULL, NULL);
    wb_free(&b);
    return r;
}

/* An address the way a client's would be: in this process's mapping area
 * (under ThreadSanitizer, the only one it lets a process map at). */
static uint64_t client_address(uint64_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    munmap(p, size);
    return (uint64_t)(uintptr_t)p;
}

static void host_mirrors(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--host-mem-quota", "64M"}};
    h_server_start(&srv, "host-mem-quota", &opt);
    int fd = h_raw_session(srv.addr);
    pid_t session = only_session(&srv);
    uint64_t before = rss_bytes(session);
    uint64_t dev[4] = {0};
    /* 48 MiB fits; three more of 256 MiB each would take the session far past it. */
    CHECK(mirror_create(fd, client_address(48 * MIB), 48 * MIB, &dev[0]) == CUDA_SUCCESS);
    for (int i = 1; i < 4; i++) {
        long r = mirror_create(fd, client_address(256 * MIB), 256 * MIB, &dev[i]);
        CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "mirror %d past --host-mem-quota 64M: %ld, not OUT_OF_MEMORY", i, r);
    }
    uint64_t after = rss_bytes(session);
    CHECK(after < before + 64 * MIB, "the session grew from %llu to %llu bytes of RSS under a 64 MiB quota",
          (unsigned long long)before, (unsigned long long)after);
    /* Freed, the first mirror's bytes are the session's again. */
    CHECK(mirror_free(fd, dev[0]) == CUDA_SUCCESS);
    CHECK(mirror_create(fd, client_address(60 * MIB), 60 * MIB, &dev[1]) == CUDA_SUCCESS);
    CHECK(h_raw_call(fd, OP_scuda_ping, 0, NULL, 0, NULL, NULL) == CUDA_SUCCESS, "the session did not go on");
    close(fd);
    CHECK(h_wait_log(&srv, "--host-mem-quota", 1, 10000) >= 1, "the refusal was not logged with the option's name");
    h_server_stop(&srv);
    printf("ok --host-mem-quota 64M bounds host mirrors (RSS %llu -> %llu bytes)\n", (unsigned long long)before,
           (unsigned long long)after);
}

/* ---- staging under a small quota --------------------------------------- */

static int copy_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t n = 40 * MIB;
    uint8_t *src = malloc(n), *back = malloc(n);
    CHECK(src && back);
    h_pattern(src, n, 7);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, n));
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    /* Behind a busy stream every chunk's copy is still pending when the
     * next arrives: the session wants a staging buffer per chunk. */
    uint32_t ms = 500;
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
    CU(cuMemcpyHtoDAsync_v2(d, src, n, st));
    CU(cuStreamSynchronize(st));
    CU(cuMemcpyDtoH_v2(back, d, n));
    CHECK(h_diff(src, back, n) < 0, "a 40 MiB round trip under --host-mem-quota 20M came back different");
    CU(cuStreamDestroy_v2(st));
    free(src);
    free(back);
    return 0;
}

static void staging(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--host-mem-quota", "20M"}};
    h_server_start(&srv, "host-mem-quota-staging", &opt);
    setenv("SCUDA_BULK_STREAMS", "0", 1); /* every chunk through the session's staging buffers */
    h_wait_ok(h_spawn(copy_client, NULL, 30, -1, -1), 30000, "copies under --host-mem-quota 20M");
    CHECK(h_wait_log(&srv, "a staging buffer", 1, 10000) >= 1, "the third staging buffer was not refused");
    h_server_stop(&srv);
    printf("ok --host-mem-quota 20M: copies work with the staging buffers that fit\n");
}

/* ---- a flood of blocking calls ------------------------------------------- */

#define FLOOD 5000

struct replies {
    int fd;
    int ok, refused, other;
};

/* Replies come in any order (workers answer by sequence number): count
 * every reply's result until all FLOOD have come. */
static void *count_replies(void *arg)
{
    struct replies *c = arg;
    while (c->ok + c->refused + c->other < FLOOD) {
        uint8_t hdr[FRAME_HEADER_LEN], *p = NULL;
        struct frame_header h;
        if (io_read_full_timeout(c->fd, hdr, sizeof hdr, 20000) != 0) break;
        frame_header_decode(hdr, &h);
        if (h.length > (1u << 20) || !(p = malloc(h.length + 4)) ||
            io_read_full_timeout(c->fd, p, h.length, 20000) != 0) {
            free(p);
            break;
        }
        uint32_t r = 0;
        if (h.length >= 4) memcpy(&r, p, 4);
        free(p);
        if (!(h.flags & FRAME_REPLY) || h.seq < 1000) continue;
        if (r == CUDA_SUCCESS)
            c->ok++;
        else if (r == CUDA_ERROR_OUT_OF_MEMORY)
            c->refused++;
        else
            c->other++;
    }
    return NULL;
}

static void queued_calls(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--max-queued-calls", "64"}};
    h_server_start(&srv, "max-queued-calls", &opt);
    int fd = h_raw_session(srv.addr);
    pid_t session = only_session(&srv);
    size_t len = 0;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CHECK(h_raw_load(fd, H_RAW_CTX, 0x10000, 0, ptx, len + 1) == CUDA_SUCCESS);
    free(ptx);
    CHECK(h_raw_bind(fd, H_RAW_CTX, OP_scuda_module_get_function, 0x10000, 0x10010, "sleep_ms") == CUDA_SUCCESS);
    uint32_t ms = 3000;
    struct msg_launch_params lp = {.raw = 0, .data = &ms, .data_len = sizeof ms};
    CHECK(h_raw_launch(fd, 0x10010, &lp) == CUDA_SUCCESS);
    uint64_t before = rss_bytes(session);

    struct replies c = {.fd = fd};
    pthread_t reader;
    CHECK(pthread_create(&reader, NULL, count_replies, &c) == 0);
    wire_buf b;
    wb_init(&b);
    wb_put_u64(&b, 0); /* the NULL stream, busy for 3 s */
    uint64_t t0 = h_now_ms();
    for (uint32_t i = 0; i < FLOOD; i++)
        CHECK(h_raw_send(fd, OP_cuStreamSynchronize, 0, 1000 + i, H_RAW_CTX, b.data, (uint32_t)b.len) == 0);
    uint64_t sent_ms = h_now_ms() - t0;
    uint64_t during = rss_bytes(session);
    pthread_join(reader, NULL);
    wb_free(&b);
    close(fd);
    /* 64 on workers, 64 waiting for one: every other call is refused. */
    CHECK(c.refused >= FLOOD - 2 * 64 - 8 && c.ok + c.refused == FLOOD,
          "of %d synchronizes past --max-queued-calls 64: %d succeeded, %d refused, %d other", FLOOD, c.ok,
          c.refused, c.other);
    CHECK(h_wait_log(&srv, "--max-queued-calls", 1, 10000) >= 1, "the refusal was not logged with the option");
    h_server_stop(&srv);
    printf("ok --max-queued-calls 64: %d of %d refused (sent in %llu ms, RSS %llu -> %llu)\n", c.refused, FLOOD,
           (unsigned long long)sent_ms, (unsigned long long)before, (unsigned long long)during);
}

/* ---- a flood of unknown ops ------------------------------------------------ */

#define UNKNOWN_FLOOD 20000

static void log_flood(void)
{
    struct h_server srv;
    h_server_start(&srv, "log-flood", NULL);
    int fd = h_raw_session(srv.addr);
    pid_t session = only_session(&srv);
    uint8_t junk[8] = {0};
    uint64_t t0 = h_now_ms();
    for (uint32_t i = 0; i < UNKNOWN_FLOOD; i++)
        CHECK(h_raw_send(fd, 0x7ff0, FRAME_ASYNC, 10 + i, H_RAW_CTX, junk, sizeof junk) == 0);
    CHECK(h_raw_call(fd, OP_scuda_ping, 0, NULL, 0, NULL, NULL) == CUDA_SUCCESS, "the session did not go on");
    close(fd);
    char ended[64];
    snprintf(ended, sizeof ended, "session %d ended", (int)session);
    for (uint64_t deadline = h_now_ms() + 10000; h_now_ms() < deadline && !h_server_log_count(&srv, ended);)
        h_sleep_ms(20);
    uint64_t seconds = (h_now_ms() - t0) / 1000 + 1;
    int lines = h_server_log_count(&srv, "which this server does not know");
    /* the burst, 10 a second after it, and slack for a slow machine */
    CHECK(lines <= 100 + 10 * (int)seconds + 10, "%d frames of an unknown op wrote %d log lines in %llu s",
          UNKNOWN_FLOOD, lines, (unsigned long long)seconds);
    CHECK(lines >= 20, "the first lines of the flood were not written (%d)", lines);
    CHECK(h_wait_log(&srv, "log lines dropped", 1, 10000) >= 1, "no count of dropped lines");
    h_server_stop(&srv);
    printf("ok %d unknown-op frames: %d log lines and a dropped count\n", UNKNOWN_FLOOD, lines);
}

/* ---- handles ---------------------------------------------------------------- */

static int events_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUevent ev[100];
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < 100 && r == CUDA_SUCCESS; i++) r = cuEventCreate(&ev[i], 0);
    if (r == CUDA_SUCCESS) r = cuCtxSynchronize(); /* creations are one-way: their error comes here */
    CHECK(r == CUDA_ERROR_OUT_OF_MEMORY, "100 events under --max-handles 64: %s, not OUT_OF_MEMORY", h_cu_name(r));
    return 0;
}

static void max_handles(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--max-handles", "64"}};
    h_server_start(&srv, "max-handles", &opt);
    h_wait_ok(h_spawn(events_client, NULL, 20, -1, -1), 20000, "events under --max-handles 64");
    CHECK(h_wait_log(&srv, "--max-handles", 1, 10000) >= 1, "the refusal was not logged with the option");
    h_server_stop(&srv);
    printf("ok --max-handles 64 is enforced\n");
}

static int part(void *arg)
{
    ((void (*)(void))arg)();
    return 0;
}

int main(void)
{
    h_begin("session_limits", 110);
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = {{"host mirrors", host_mirrors},
                 {"staging", staging},
                 {"queued calls", queued_calls},
                 {"log flood", log_flood},
                 {"handles", max_handles}};
    enum { N = sizeof parts / sizeof parts[0] };
    /* One at a time: the RSS figures and the flood's timing must not
     * depend on the other parts' load. */
    int failed = 0;
    for (int i = 0; i < N; i++) {
        int st = h_wait(h_spawn(part, (void *)parts[i].fn, 60, -1, -1), 62000);
        if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "FAIL session_limits: %s\n", parts[i].name);
            failed++;
        }
    }
    CHECK(failed == 0, "%d of %d session limits not enforced as documented", failed, N);
    printf("PASS session_limits\n");
    return 0;
}
