/* wire.c - see wire.h. Values are stored little-endian; the hosts we build
 * for (x86-64, aarch64) are little-endian, which a static assert checks. */
#include "wire.h"
#include "protocol.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "SCUDA's wire format assumes a little-endian host");

void wb_init(wire_buf *b)
{
    b->data = b->inline_space;
    b->len = 0;
    b->cap = sizeof b->inline_space;
    b->oom = 0;
}

void wb_free(wire_buf *b)
{
    if (b->data != b->inline_space) free(b->data);
    wb_init(b);
}

void wb_reset(wire_buf *b) { b->len = 0; b->oom = 0; }

uint8_t *wb_reserve(wire_buf *b, size_t n)
{
    if (b->oom) return NULL;
    if (n > SIZE_MAX / 2 - b->len) { b->oom = 1; return NULL; }
    if (b->len + n > b->cap) {
        size_t cap = b->cap * 2;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = malloc(cap);
        if (d == NULL) { b->oom = 1; return NULL; }
        memcpy(d, b->data, b->len);
        if (b->data != b->inline_space) free(b->data);
        b->data = d;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

void wb_put_raw(wire_buf *b, const void *p, size_t n)
{
    if (n == 0) return;
    uint8_t *d = wb_reserve(b, n);
    if (d) memcpy(d, p, n);
}

void wb_put_u8(wire_buf *b, uint8_t v) { wb_put_raw(b, &v, 1); }
void wb_put_u16(wire_buf *b, uint16_t v) { wb_put_raw(b, &v, 2); }
void wb_put_u32(wire_buf *b, uint32_t v) { wb_put_raw(b, &v, 4); }
void wb_put_u64(wire_buf *b, uint64_t v) { wb_put_raw(b, &v, 8); }
void wb_put_i32(wire_buf *b, int32_t v) { wb_put_raw(b, &v, 4); }
void wb_put_i64(wire_buf *b, int64_t v) { wb_put_raw(b, &v, 8); }
void wb_put_f32(wire_buf *b, float v) { wb_put_raw(b, &v, 4); }
void wb_put_f64(wire_buf *b, double v) { wb_put_raw(b, &v, 8); }

void wb_put_blob(wire_buf *b, const void *p, size_t n)
{
    wb_put_u64(b, n);
    wb_put_raw(b, p, n);
}

void wb_put_str(wire_buf *b, const char *s)
{
    wb_put_u8(b, s != NULL);
    if (s) wb_put_blob(b, s, strlen(s) + 1);
}

void wr_init(wire_reader *r, const void *p, size_t n)
{
    r->p = p;
    r->left = n;
    r->bad = 0;
}

const void *wr_view(wire_reader *r, size_t n)
{
    if (r->bad || n > r->left) { r->bad = 1; return NULL; }
    const void *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

void wr_raw(wire_reader *r, void *dst, size_t n)
{
    const void *p = wr_view(r, n);
    if (p) memcpy(dst, p, n);
    else if (n) memset(dst, 0, n);
}

#define READ_SCALAR(type, name) \
    type name(wire_reader *r) { type v; wr_raw(r, &v, sizeof v); return v; }
READ_SCALAR(uint8_t, wr_u8)
READ_SCALAR(uint16_t, wr_u16)
READ_SCALAR(uint32_t, wr_u32)
READ_SCALAR(uint64_t, wr_u64)
READ_SCALAR(int32_t, wr_i32)
READ_SCALAR(int64_t, wr_i64)
READ_SCALAR(float, wr_f32)
READ_SCALAR(double, wr_f64)

const void *wr_blob(wire_reader *r, size_t *len)
{
    uint64_t n = wr_u64(r);
    if (r->bad || n > r->left) { r->bad = 1; *len = 0; return NULL; }
    *len = (size_t)n;
    return n ? wr_view(r, (size_t)n) : NULL;
}

const char *wr_str(wire_reader *r)
{
    if (!wr_u8(r)) return NULL;
    size_t n;
    const char *s = wr_blob(r, &n);
    if (s == NULL || n == 0 || s[n - 1] != '\0') { r->bad = 1; return NULL; }
    return s;
}

int wr_ok_end(const wire_reader *r) { return !r->bad && r->left == 0; }

void frame_header_encode(const struct frame_header *h, uint8_t out[FRAME_HEADER_LEN])
{
    memcpy(out + 0, &h->length, 4);
    memcpy(out + 4, &h->op, 2);
    memcpy(out + 6, &h->flags, 2);
    memcpy(out + 8, &h->seq, 4);
    memcpy(out + 12, &h->ctx, 4);
}

void frame_header_decode(const uint8_t in[FRAME_HEADER_LEN], struct frame_header *h)
{
    memcpy(&h->length, in + 0, 4);
    memcpy(&h->op, in + 4, 2);
    memcpy(&h->flags, in + 6, 2);
    memcpy(&h->seq, in + 8, 4);
    memcpy(&h->ctx, in + 12, 4);
}
