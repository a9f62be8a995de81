/* wire.h - bounded encoding and decoding of frame payloads.
 *
 * A wire_buf grows as values are appended. A wire_reader never reads past
 * its end: a short or malformed payload sets `bad` and every later read
 * returns zeros, so decoders check `bad` once at the end instead of after
 * every field. */
#ifndef SCUDA_WIRE_H
#define SCUDA_WIRE_H

#include <stddef.h>
#include <stdint.h>

typedef struct wire_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom;               /* an allocation failed; contents are incomplete */
    uint8_t inline_space[256];
} wire_buf;

void wb_init(wire_buf *b);
void wb_free(wire_buf *b);
void wb_reset(wire_buf *b);
/* Reserve n bytes at the end and return a pointer to them (NULL on oom). */
uint8_t *wb_reserve(wire_buf *b, size_t n);
void wb_put_raw(wire_buf *b, const void *p, size_t n); /* n bytes, no length */
void wb_put_u8(wire_buf *b, uint8_t v);
void wb_put_u16(wire_buf *b, uint16_t v);
void wb_put_u32(wire_buf *b, uint32_t v);
void wb_put_u64(wire_buf *b, uint64_t v);
void wb_put_i32(wire_buf *b, int32_t v);
void wb_put_i64(wire_buf *b, int64_t v);
void wb_put_f32(wire_buf *b, float v);
void wb_put_f64(wire_buf *b, double v);
/* u64 length, then the bytes. p may be NULL only when n == 0. */
void wb_put_blob(wire_buf *b, const void *p, size_t n);
/* A C string: u8 present flag, then a blob including the NUL.
 * NULL is encoded as absent, so "" and NULL stay distinct. */
void wb_put_str(wire_buf *b, const char *s);

typedef struct wire_reader {
    const uint8_t *p;
    size_t left;
    int bad; /* a read ran past the end or a value was out of bounds */
} wire_reader;

void wr_init(wire_reader *r, const void *p, size_t n);
void wr_raw(wire_reader *r, void *dst, size_t n); /* zero-fills dst when bad */
const void *wr_view(wire_reader *r, size_t n);    /* pointer into the payload, NULL when bad */
uint8_t wr_u8(wire_reader *r);
uint16_t wr_u16(wire_reader *r);
uint32_t wr_u32(wire_reader *r);
uint64_t wr_u64(wire_reader *r);
int32_t wr_i32(wire_reader *r);
int64_t wr_i64(wire_reader *r);
float wr_f32(wire_reader *r);
double wr_f64(wire_reader *r);
/* Returns a pointer into the payload and its length; NULL (len 0) for an
 * empty blob or when bad. A length larger than what is left marks bad. */
const void *wr_blob(wire_reader *r, size_t *len);
/* Returns NULL for an absent string. A string must end in NUL within its
 * blob, else the reader is marked bad. */
const char *wr_str(wire_reader *r);
/* The reader must be fully consumed and not bad. */
int wr_ok_end(const wire_reader *r);

#endif
