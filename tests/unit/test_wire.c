/* test_wire.c - the bounded encoder/decoder: round trips, and readers that
 * must refuse to run past the end of short or malformed payloads. */
#include <stdio.h>

#include "check.h"
#include <string.h>

#include "common/protocol.h"
#include "common/wire.h"


static void round_trip(void)
{
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 7);
    wb_put_u16(&b, 0xbeef);
    wb_put_u32(&b, 0xdeadbeefu);
    wb_put_u64(&b, 0x0123456789abcdefull);
    wb_put_i32(&b, -5);
    wb_put_f64(&b, 2.5);
    wb_put_str(&b, "hello");
    wb_put_str(&b, NULL);
    wb_put_str(&b, "");
    char big[1000];
    memset(big, 'x', sizeof big);
    wb_put_blob(&b, big, sizeof big); /* grows past the inline space */
    CHECK(!b.oom);

    wire_reader r;
    wr_init(&r, b.data, b.len);
    CHECK(wr_u8(&r) == 7);
    CHECK(wr_u16(&r) == 0xbeef);
    CHECK(wr_u32(&r) == 0xdeadbeefu);
    CHECK(wr_u64(&r) == 0x0123456789abcdefull);
    CHECK(wr_i32(&r) == -5);
    CHECK(wr_f64(&r) == 2.5);
    const char *s = wr_str(&r);
    CHECK(s && strcmp(s, "hello") == 0);
    CHECK(wr_str(&r) == NULL && !r.bad); /* NULL stays NULL */
    s = wr_str(&r);
    CHECK(s && *s == '\0');                /* and "" stays "" */
    size_t n;
    const void *p = wr_blob(&r, &n);
    CHECK(n == sizeof big && p && memcmp(p, big, n) == 0);
    CHECK(wr_ok_end(&r));
    wb_free(&b);
}

static void short_payloads(void)
{
    uint8_t three[3] = {1, 2, 3};
    wire_reader r;
    wr_init(&r, three, sizeof three);
    CHECK(wr_u32(&r) == 0 && r.bad); /* short read gives zero and marks bad */
    CHECK(wr_u8(&r) == 0);           /* and stays bad */
    CHECK(!wr_ok_end(&r));

    /* A blob whose length claims more than the payload holds. */
    wire_buf b;
    wb_init(&b);
    wb_put_u64(&b, 1u << 30);
    wb_put_raw(&b, "abc", 3);
    wr_init(&r, b.data, b.len);
    size_t n = 99;
    CHECK(wr_blob(&r, &n) == NULL && n == 0 && r.bad);

    /* A string without its NUL. */
    wb_reset(&b);
    wb_put_u8(&b, 1);
    wb_put_blob(&b, "abc", 3);
    wr_init(&r, b.data, b.len);
    CHECK(wr_str(&r) == NULL && r.bad);

    /* Trailing bytes are not a clean end. */
    wb_reset(&b);
    wb_put_u32(&b, 1);
    wb_put_u8(&b, 0);
    wr_init(&r, b.data, b.len);
    wr_u32(&r);
    CHECK(!wr_ok_end(&r));
    wb_free(&b);
}

static void frame_headers(void)
{
    struct frame_header h = {.length = 123456, .op = 77, .flags = FRAME_ASYNC | FRAME_BULK, .seq = 0xfffffff0u,
                             .ctx = 0x10010};
    uint8_t raw[FRAME_HEADER_LEN];
    frame_header_encode(&h, raw);
    struct frame_header g;
    frame_header_decode(raw, &g);
    CHECK(g.length == h.length && g.op == h.op && g.flags == h.flags && g.seq == h.seq && g.ctx == h.ctx);
    CHECK(raw[0] == (123456 & 0xff)); /* little-endian on the wire */
}

int main(void)
{
    round_trip();
    short_payloads();
    frame_headers();
    printf("test_wire: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
