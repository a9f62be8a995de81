/* e2e/migrate_hostile: an importing session against an exporter that
 * lies about the memory (migrate_landing.h, migrate_links.h).
 *
 * A raw client connects as a server moving a session here
 * (HELLO_MIGRATE_IN), replays a context and an 8 MiB allocation (two
 * chunks), then sends device bytes that are not the session's: a chunk
 * index past the end, an index for another address, a chunk twice, a
 * copy that ends with a chunk missing, a link slot that holds no link,
 * the parked copy's bytes for half an allocation, and a query for more
 * links than a migration gets. Each must be refused
 * with a verdict that names the fault, and never crash the session or
 * the server; a good copy of both chunks must be accepted. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/messages.gen.h"
#include "common/ops.gen.h"
#include "common/preface.h"
#include "common/protocol.h"
#include "common/session_info.h"
#include "common/transport.h"
#include "server/device_window.h"
#include "server/migrate_state.h"

#define SIZE (8u << 20) /* two chunks */
#define CTX_ID 0x1000    /* 1 and 2 are the special streams' */

static struct h_server B;
static uint32_t seq;

static int connect_as_exporter(void)
{
    char err[256];
    int fd = dial(B.addr, 5000, PREFACE_SESSION, err, sizeof err);
    CHECK(fd >= 0, "dial %s: %s", B.addr, err);
    uint8_t nonce[SCUDA_NONCE_LEN];
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "server hello: %s", err);
    CHECK(hello_send_client(fd, HELLO_MIGRATE_IN, ~0ull, NULL, nonce, NULL, 0) == 0);
    struct session_info *si = malloc(sizeof *si);
    uint32_t st = 0;
    CHECK(si && hello_read_session_welcome(fd, 30000, &st, err, sizeof err, si) == 0 && st == WELCOME_OK,
          "welcome: %s (status %u)", err, st);
    free(si);
    seq = 0;
    return fd;
}

static void send_item(int fd, const struct msg_migrate_item *it)
{
    wire_buf b;
    wb_init(&b);
    msg_put_migrate_item(&b, it);
    CHECK(!b.oom && h_raw_send(fd, OP_scuda_migrate, 0, seq++, 0, b.data, (uint32_t)b.len) == 0);
    wb_free(&b);
}

/* The next frame from the importer: an item (*it, 0) or its verdict
 * (*v, 1). Strings live in a. */
static int read_answer(int fd, struct msg_arena *a, struct msg_migrate_item *it, struct msg_migrate_verdict *v,
                       uint8_t **payload)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    struct frame_header h;
    CHECK(io_read_full_timeout(fd, hdr, sizeof hdr, 30000) == 0, "the importer answers");
    frame_header_decode(hdr, &h);
    CHECK(h.op == OP_scuda_migrate && h.length < (1u << 20));
    *payload = malloc(h.length + 1);
    CHECK(*payload && io_read_full_timeout(fd, *payload, h.length, 30000) == 0);
    wire_reader r;
    wr_init(&r, *payload, h.length);
    if (h.flags & FRAME_REPLY) {
        msg_get_migrate_verdict(&r, a, v);
        CHECK(wr_ok_end(&r), "a well-formed verdict");
        return 1;
    }
    msg_get_migrate_item(&r, a, it);
    CHECK(wr_ok_end(&r), "a well-formed item");
    return 0;
}

/* The context and the allocation, first in device 0's window; returns
 * its address. */
static uint64_t replay_objects(int fd)
{
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_CONTEXT, .id = CTX_ID, .a = 0, .b = 0, .c = 1});
    uint64_t base = WINDOW_BASE_DEFAULT;
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_ALLOC, .parent = CTX_ID, .id = 0, .a = base, .b = SIZE});
    return base;
}

static uint8_t chunk[MIGRATE_CHUNK];

static void send_bytes(int fd, uint64_t index, uint64_t addr)
{
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_BYTES, .id = index, .a = addr, .data = chunk,
                                             .data_len = MIGRATE_CHUNK});
}

/* The importer's verdict, a refusal naming `want` (NULL: success). */
static void expect_verdict(int fd, const char *want, const char *what)
{
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    struct msg_migrate_verdict v = {0};
    uint8_t *payload = NULL;
    CHECK(read_answer(fd, &a, &it, &v, &payload) == 1, "%s: a verdict, not an item", what);
    if (want)
        CHECK(v.result != CUDA_SUCCESS && v.why && strstr(v.why, want), "%s: refused with '%s' (got %u: %s)", what,
              want, v.result, v.why ? v.why : "");
    else
        CHECK(v.result == CUDA_SUCCESS, "%s: accepted (got %u: %s)", what, v.result, v.why ? v.why : "");
    free(payload);
    msg_arena_free(&a);
    io_close(fd);
}

int main(void)
{
    h_begin("migrate_hostile", 120);
    h_server_start(&B, "migrate-hostile-b", NULL);
    h_pattern(chunk, sizeof chunk, 7);

    int fd = connect_as_exporter();
    uint64_t base = replay_objects(fd);
    send_bytes(fd, 3, base + SIZE); /* past the end */
    expect_verdict(fd, "which is not where the session has it", "an index past the last chunk");

    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_bytes(fd, 1, base + MIGRATE_CHUNK); /* chunk 1 is at base */
    expect_verdict(fd, "which is not where the session has it", "an index for another address");

    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_bytes(fd, 1, base);
    send_bytes(fd, 1, base);
    expect_verdict(fd, "came twice", "a chunk twice");

    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_bytes(fd, 2, base + MIGRATE_CHUNK);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_END, .b = MIGRATE_CHUNK});
    expect_verdict(fd, "without 1 of the session's 2 chunks", "a chunk missing at the end");

    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_LINKS_USED, .a = 1u << 5});
    expect_verdict(fd, "holds no link", "a link slot with no link");

    /* The parked copy's bytes for a range that starts elsewhere: the
     * second chunk of the allocation is no range of its own. */
    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_BYTES_KEPT, .id = 2, .a = base + MIGRATE_CHUNK,
                                             .b = MIGRATE_CHUNK, .c = 1});
    expect_verdict(fd, "which is not the start of such a range", "kept bytes for half an allocation");

    /* More links than a migration gets: at most 4 grants, then a good
     * copy over the main connection is accepted. */
    fd = connect_as_exporter();
    base = replay_objects(fd);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_LINKS_QUERY, .a = 1000});
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_item it;
    struct msg_migrate_verdict v;
    uint8_t *payload = NULL;
    CHECK(read_answer(fd, &a, &it, &v, &payload) == 0 && it.kind == MIG_LINKS, "the query is answered");
    CHECK(it.a >= 1 && it.a <= 4 && it.data_len == it.a * 36, "%llu grants of 36 bytes (at most 4)",
          (unsigned long long)it.a);
    free(payload);
    msg_arena_free(&a);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_LINKS_USED, .a = 0});
    send_bytes(fd, 2, base + MIGRATE_CHUNK);
    send_bytes(fd, 1, base);
    send_item(fd, &(struct msg_migrate_item){.kind = MIG_END, .b = SIZE});
    expect_verdict(fd, NULL, "both chunks, in any order");

    CHECK(h_server_log_count(&B, "was not rebuilt") == 6, "six imports refused, and logged");
    /* The parent logs each end when it reaps the session: wait for them. */
    CHECK(h_wait_log(&B, "ended (status 1", 6, 10000) >= 6, "the refused sessions ended by themselves");
    CHECK(h_server_log_count(&B, "signal") == 0, "no session crashed");
    h_server_stop(&B);
    printf("PASS migrate_hostile\n");
    return 0;
}
