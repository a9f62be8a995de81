/* test_messages.c - the generated message codecs (messages.gen.h): round
 * trips, and decoders that refuse every truncated, overlong or oversized
 * payload without reading past it or allocating for a count it cannot
 * hold. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/messages.gen.h"

static struct msg_scuda_launch_req sample_launch(struct msg_launch_attr attrs[2], uint8_t params[24])
{
    memset(attrs, 0, 2 * sizeof *attrs);
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[0].value.cooperative = 1;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[1].value.priority = -3;
    for (int i = 0; i < 24; i++) params[i] = (uint8_t)(i * 7);
    return (struct msg_scuda_launch_req){
        .func = 0x10010, .grid = {4, 5, 6}, .block = {32, 2, 1}, .shared_bytes = 4096, .stream = 0x10020,
        .attrs = attrs, .attrs_count = 2, .params = {.raw = 0, .data = params, .data_len = 24},
    };
}

static int decode_launch(const void *p, size_t n, struct msg_scuda_launch_req *m, struct msg_arena *a)
{
    wire_reader r;
    wr_init(&r, p, n);
    return msg_scuda_launch_req_get(&r, a, m);
}

static void launch_round_trip(void)
{
    struct msg_launch_attr attrs[2];
    uint8_t params[24];
    struct msg_scuda_launch_req in = sample_launch(attrs, params), out;
    wire_buf b;
    wb_init(&b);
    msg_scuda_launch_req_put(&b, &in);
    struct msg_arena a;
    msg_arena_init(&a);
    CHECK(decode_launch(b.data, b.len, &out, &a) == 0);
    CHECK(out.func == in.func && out.stream == in.stream && out.shared_bytes == 4096);
    CHECK(out.grid[0] == 4 && out.grid[1] == 5 && out.grid[2] == 6 && out.block[0] == 32 && out.block[1] == 2);
    CHECK(out.attrs_count == 2 && out.attrs[0].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE &&
          out.attrs[0].value.cooperative == 1 && out.attrs[1].value.priority == -3);
    CHECK(out.params.raw == 0 && out.params.data_len == 24 && memcmp(out.params.data, params, 24) == 0);
    msg_arena_free(&a);

    /* every shorter payload is refused, and so is one byte more */
    for (size_t n = 0; n < b.len; n++) {
        msg_arena_init(&a);
        CHECK(decode_launch(b.data, n, &out, &a) == -1);
        msg_arena_free(&a);
    }
    wb_put_u8(&b, 0);
    msg_arena_init(&a);
    CHECK(decode_launch(b.data, b.len, &out, &a) == -1);
    msg_arena_free(&a);
    wb_free(&b);
}

/* An attribute count over the bound, or one the payload cannot hold, is
 * refused before anything is allocated for it. */
static void launch_counts(void)
{
    struct msg_launch_attr attrs[2];
    uint8_t params[24];
    struct msg_scuda_launch_req in = sample_launch(attrs, params), out;
    wire_buf b;
    wb_init(&b);
    msg_scuda_launch_req_put(&b, &in);
    size_t count_at = 8 + 12 + 12 + 4 + 8; /* func, grid, block, shared bytes, stream */
    uint32_t huge = 0xfffffff0u, over = LAUNCH_MAX_ATTRS + 1;
    struct msg_arena a;
    memcpy(b.data + count_at, &huge, 4);
    msg_arena_init(&a);
    CHECK(decode_launch(b.data, b.len, &out, &a) == -1);
    CHECK(a.used == 0 && a.chunks == NULL);
    msg_arena_free(&a);
    memcpy(b.data + count_at, &over, 4);
    msg_arena_init(&a);
    CHECK(decode_launch(b.data, b.len, &out, &a) == -1);
    msg_arena_free(&a);
    wb_free(&b);
}

/* A reply with more than the arena's own space: the rest comes from the
 * heap and goes with msg_arena_free (ASan checks the leak). Strings keep
 * NULL and "" apart. */
static void arena_overflow(void)
{
    enum { N = 300 };
    struct msg_param_slot *slots = malloc(N * sizeof *slots);
    CHECK(slots != NULL);
    if (!slots) return;
    for (uint32_t i = 0; i < N; i++) slots[i] = (struct msg_param_slot){8 * i, 8};
    struct msg_cuGraphKernelNodeGetParams_v2_rep in = {.layout = slots, .layout_count = N, .name = ""}, out;
    in.params.params = (struct msg_launch_params){.data = slots, .data_len = 8 * N};
    wire_buf b;
    wb_init(&b);
    msg_cuGraphKernelNodeGetParams_v2_rep_put(&b, &in);
    wire_reader r;
    wr_init(&r, b.data, b.len);
    struct msg_arena a;
    msg_arena_init(&a);
    CHECK(msg_cuGraphKernelNodeGetParams_v2_rep_get(&r, &a, &out) == 0);
    CHECK(out.layout_count == N && a.chunks != NULL);
    int same = 1;
    for (uint32_t i = 0; i < N; i++) same &= out.layout[i].offset == 8 * i && out.layout[i].size == 8;
    CHECK(same);
    CHECK(out.name != NULL && out.name[0] == '\0');
    msg_arena_free(&a);
    in.name = NULL;
    wb_reset(&b);
    msg_cuGraphKernelNodeGetParams_v2_rep_put(&b, &in);
    wr_init(&r, b.data, b.len);
    msg_arena_init(&a);
    CHECK(msg_cuGraphKernelNodeGetParams_v2_rep_get(&r, &a, &out) == 0 && out.name == NULL);
    msg_arena_free(&a);
    wb_free(&b);
    free(slots);
}

/* Bulk fields: a request's bytes follow the frame (only its length is
 * encoded here) and may have been received apart, into staging memory; a
 * reply's may have been received into the caller's sink. */
static void bulk_fields(void)
{
    uint8_t bytes[64];
    memset(bytes, 0x5a, sizeof bytes);
    struct msg_scuda_memcpy_htod_req in = {.dst = 0x7000, .stream = 0, .mode = 1, .data = bytes, .data_len = 64}, out;
    wire_buf b;
    wb_init(&b);
    msg_scuda_memcpy_htod_req_put(&b, &in);
    CHECK(b.len == 8 + 8 + 1 + 8); /* the head only: what op_entry.bulk_head says */
    wb_put_raw(&b, bytes, sizeof bytes); /* as the transport sends them */
    wire_reader r;
    struct msg_arena a;
    wr_init(&r, b.data, b.len);
    msg_arena_init(&a);
    CHECK(msg_scuda_memcpy_htod_req_get(&r, &a, &out) == 0);
    CHECK(out.dst == 0x7000 && out.mode == 1 && out.data_len == 64 && memcmp(out.data, bytes, 64) == 0);
    msg_arena_free(&a);
    wr_init(&r, b.data, 25); /* received apart: the head alone */
    msg_arena_init(&a);
    a.bulk_apart = 1;
    CHECK(msg_scuda_memcpy_htod_req_get(&r, &a, &out) == 0 && out.data == NULL && out.data_len == 64);
    msg_arena_free(&a);

    struct msg_scuda_memcpy_dtoh_rep rep;
    wr_init(&r, NULL, 0); /* the bytes went to the sink: nothing else in the reply */
    msg_arena_init(&a);
    a.bulk_apart = 1;
    a.bulk_len = 4096;
    CHECK(msg_scuda_memcpy_dtoh_rep_get(&r, &a, &rep) == 0 && rep.data == NULL && rep.data_len == 4096);
    msg_arena_free(&a);
    wb_free(&b);
}

int main(void)
{
    launch_round_trip();
    launch_counts();
    arena_overflow();
    bulk_fields();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
