/* half_frames.c - --idle-timeout covers a frame half sent.
 *
 * Under --idle-timeout 1, a raw client sends part of a frame and goes
 * silent: three bytes of a header; a header and ten of the hundred bytes
 * it promises; the head of a large host-to-device copy (which the session
 * reads straight into pinned memory). Each session must close the
 * connection within a few seconds, and say so in the log. A session whose
 * call is still running is not idle: a client that waits in a synchronize
 * behind a 2.5 s kernel, with half a frame sent meanwhile, gets its reply;
 * only then does the silence count. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/wire.h"
#include "harness.h"

#define MOD_ID 0x10000
#define SLEEP_ID 0x10010

static struct h_server srv;

static void send_header(int fd, uint16_t op, uint32_t length, uint32_t seq)
{
    struct frame_header h = {.length = length, .op = op, .seq = seq, .ctx = H_RAW_CTX};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    CHECK(io_write_full(fd, hdr, sizeof hdr) == 0);
}

/* Send `part` (the first bytes of a frame), then nothing: the session must
 * close within 5 s and log it. */
static void expect_closed(const char *what, const void *part, size_t len)
{
    int fd = h_raw_session(srv.addr), logged = h_server_log_count(&srv, "idle for");
    CHECK(io_write_full(fd, part, len) == 0);
    uint64_t t0 = h_now_ms();
    int closed = h_raw_closed_within(fd, 5000);
    EXPECT(closed, "%s: the session still holds the connection after 5 s", what);
    EXPECT(h_server_log_count(&srv, "idle for") > logged, "%s: no log line", what);
    io_close(fd);
    printf("%s %s: closed after %llu ms\n", closed ? "ok" : "FAILED", what, (unsigned long long)(h_now_ms() - t0));
}

static void partial_frames(void)
{
    uint8_t hdr[FRAME_HEADER_LEN + 10];
    struct frame_header h = {.length = 100, .op = OP_scuda_ping, .seq = 1, .ctx = H_RAW_CTX};
    frame_header_encode(&h, hdr);
    memset(hdr + FRAME_HEADER_LEN, 7, 10);
    expect_closed("three bytes of a header", hdr, 3);
    expect_closed("a header and 10 of its 100 bytes", hdr, sizeof hdr);
    /* a 4 MiB host-to-device copy: header, its head (the fields before
     * the bytes and their length), 10 bytes */
    wire_buf head;
    wb_init(&head);
    msg_scuda_memcpy_htod_req_put(&head, &(struct msg_scuda_memcpy_htod_req){.data_len = 4u << 20});
    uint8_t htod[FRAME_HEADER_LEN + 64 + 10] = {0};
    CHECK(head.len <= 64);
    h = (struct frame_header){.length = (uint32_t)head.len + (4u << 20), .op = OP_scuda_memcpy_htod, .seq = 2,
                              .ctx = H_RAW_CTX};
    frame_header_encode(&h, htod);
    memcpy(htod + FRAME_HEADER_LEN, head.data, head.len);
    expect_closed("a large copy's first bytes", htod, FRAME_HEADER_LEN + head.len + 10);
    wb_free(&head);
}

/* ---- a busy session is not idle ------------------------------------------------- */

static void launch_sleep(int fd, uint32_t ms)
{
    struct msg_launch_params p = {.data = &ms, .data_len = 4}; /* sleep_ms(u32 ms) */
    CHECK(h_raw_launch(fd, SLEEP_ID, &p) == CUDA_SUCCESS);
}

static void busy_is_not_idle(void)
{
    int fd = h_raw_session(srv.addr);
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CHECK(h_raw_load(fd, H_RAW_CTX, MOD_ID, 0, ptx, len + 1) == CUDA_SUCCESS);
    free(ptx);
    CHECK(h_raw_bind(fd, H_RAW_CTX, OP_scuda_module_get_function, MOD_ID, SLEEP_ID, "sleep_ms") == CUDA_SUCCESS);
    launch_sleep(fd, 2500);
    struct msg_scuda_ctx_synchronize_req m = {.ctx = H_RAW_CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_ctx_synchronize_req_put(&b, &m);
    uint64_t t0 = h_now_ms();
    CHECK(h_raw_send(fd, OP_scuda_ctx_synchronize, 0, 101, H_RAW_CTX, b.data, (uint32_t)b.len) == 0);
    wb_free(&b);
    h_sleep_ms(200);
    send_header(fd, OP_scuda_ping, 100, 102); /* half a frame while the synchronize runs */
    long r = h_raw_call_reply(fd, 101, 10000, NULL, NULL);
    EXPECT(r == CUDA_SUCCESS, "the synchronize behind a 2.5 s kernel got %ld: the busy session was closed", r);
    EXPECT(h_now_ms() - t0 >= 2000, "the synchronize returned before the kernel ended");
    int closed = h_raw_closed_within(fd, 5000);
    EXPECT(closed, "after the synchronize, the half frame held the session");
    io_close(fd);
    printf("%s a session with a call running keeps its half frame until the call ends\n",
           r == CUDA_SUCCESS && closed ? "ok" : "FAILED");
}

int main(void)
{
    h_begin("half_frames", 50);
    struct h_server_opts opt = {.extra_args = {"--idle-timeout", "1"}};
    h_server_start(&srv, "main", &opt);
    partial_frames();
    busy_is_not_idle();
    h_server_stop(&srv);
    CHECK(h_soft_failures() == 0, "%d checks failed", h_soft_failures());
    printf("PASS half_frames\n");
    return 0;
}
