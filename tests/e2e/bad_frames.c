/* bad_frames.c - a raw TCP client that completes the handshake and then
 * sends what no shim would: unknown ops, truncated and extended payloads,
 * lengths that lie, a frame over SCUDA_MAX_FRAME, random bytes, bad
 * context ids, compressed requests (scuda_packed) that do not unpack, and
 * bad handshakes.
 *
 * Asserts, per case, what the server answers (INVALID_VALUE for a
 * malformed payload, NOT_SUPPORTED for an unknown op, the connection
 * closed for an oversized frame), and at the end that the server parent
 * still serves, that a normal client works, and that no session died from
 * a signal (h_server_stop). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/compress.h"
#include "common/dial.h"
#include "common/hello.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/transport.h"
#include "common/wire.h"
#include "harness.h"

static const char *addr;
static uint32_t seq = 1;
static const uint32_t CTX = 0x200;

static int open_session(void)
{
    uint32_t status;
    int fd = h_raw_connect(addr, NULL, &status);
    CHECK(fd >= 0, "handshake failed (status %u)", status);
    return fd;
}

static long call_raw(int fd, uint16_t op, uint16_t flags, uint32_t ctx, const void *p, uint32_t len)
{
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, op, flags, s, ctx, p, len) == 0, "send: %s", strerror(errno));
    return h_raw_call_reply(fd, s, 15000, NULL, NULL);
}

static long call(int fd, uint16_t op, const wire_buf *b) { return call_raw(fd, op, 0, CTX, b ? b->data : NULL, b ? (uint32_t)b->len : 0); }

static void retain_ctx(int fd)
{
    struct msg_scuda_primary_ctx_retain_req m = {.dev = 0, .ctx = CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &m);
    CHECK(call_raw(fd, OP_scuda_primary_ctx_retain, 0, 0, b.data, (uint32_t)b.len) == CUDA_SUCCESS);
    wb_free(&b);
}

static void ping_ok(int fd, const char *after)
{
    long r = call(fd, OP_scuda_ping, NULL);
    CHECK(r >= 0, "after %s: the session no longer answers", after);
    if (r != CUDA_SUCCESS) r = call(fd, OP_scuda_ping, NULL); /* a deferred error, once */
    CHECK(r == CUDA_SUCCESS, "after %s: ping returned %ld", after, r);
}

/* ---- valid requests, built as the shim builds them ---------------------- */

struct req {
    const char *name;
    uint16_t op;
    wire_buf b;
};

static void build_requests(struct req *r, int *n, CUdeviceptr dev)
{
    static uint8_t data[100];
    for (int i = 0; i < 100; i++) data[i] = (uint8_t)i;
    *n = 0;
#define NEW(nm, o) (r[*n].name = nm, r[*n].op = o, wb_init(&r[*n].b), &r[(*n)++].b)
    wire_buf *b = NEW("cuMemAlloc_v2", OP_cuMemAlloc_v2);
    wb_put_u8(b, 1);
    wb_put_u64(b, 4096);
    b = NEW("cuMemsetD32_v2", OP_cuMemsetD32_v2);
    wb_put_u64(b, dev);
    wb_put_u32(b, 7);
    wb_put_u64(b, 16);
    b = NEW("scuda_memcpy_htod", OP_scuda_memcpy_htod);
    msg_scuda_memcpy_htod_req_put(b, &(struct msg_scuda_memcpy_htod_req){.dst = dev, .data_len = sizeof data});
    wb_put_raw(b, data, sizeof data); /* the bulk bytes follow the fields */
    b = NEW("scuda_memcpy_dtoh", OP_scuda_memcpy_dtoh);
    msg_scuda_memcpy_dtoh_req_put(b, &(struct msg_scuda_memcpy_dtoh_req){.src = dev, .n = 64});
    b = NEW("scuda_memcpy_dtod", OP_scuda_memcpy_dtod);
    msg_scuda_memcpy_dtod_req_put(b, &(struct msg_scuda_memcpy_dtod_req){.dst = dev + 256, .src = dev, .n = 64});
    b = NEW("scuda_ctx_synchronize", OP_scuda_ctx_synchronize);
    msg_scuda_ctx_synchronize_req_put(b, &(struct msg_scuda_ctx_synchronize_req){.ctx = CTX});
    b = NEW("cuStreamCreate", OP_cuStreamCreate);
    wb_put_u8(b, 1);
    wb_put_u64(b, 0x5550);
    wb_put_u32(b, 0);
    b = NEW("scuda_error_string", OP_scuda_error_string);
    msg_scuda_error_string_req_put(b, &(struct msg_scuda_error_string_req){.code = CUDA_ERROR_INVALID_VALUE});
    b = NEW("scuda_pointer_get_attributes", OP_scuda_pointer_get_attributes);
    struct msg_scuda_pointer_get_attributes_req attr = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dev};
    msg_scuda_pointer_get_attributes_req_put(b, &attr);
    b = NEW("scuda_module_get_global", OP_scuda_module_get_global);
    struct msg_scuda_module_get_global_req global = {.id = 0x9990, .name = "nosuchglobal"};
    msg_scuda_module_get_global_req_put(b, &global);
#undef NEW
}

/* Every strict prefix of a valid request is malformed; so is the request
 * with a byte appended. Both must get INVALID_VALUE, and the session must
 * go on. The valid request itself must not. */
static void truncations(void)
{
    int fd = open_session();
    retain_ctx(fd);
    wire_buf b;
    wb_init(&b);
    wb_put_u8(&b, 1);
    wb_put_u64(&b, 1 << 16);
    uint8_t *out = NULL;
    size_t out_len = 0;
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, OP_cuMemAlloc_v2, 0, s, CTX, b.data, (uint32_t)b.len) == 0);
    CHECK(h_raw_call_reply(fd, s, 10000, &out, &out_len) == CUDA_SUCCESS && out_len == 8);
    CUdeviceptr dev;
    memcpy(&dev, out, 8);
    free(out);
    wb_free(&b);

    struct req reqs[16];
    int n;
    build_requests(reqs, &n, dev);
    for (int i = 0; i < n; i++) {
        wire_buf *rb = &reqs[i].b;
        long r = call(fd, reqs[i].op, rb);
        /* module_get_global names an unknown module: INVALID_HANDLE */
        CHECK(r >= 0 && r != CUDA_ERROR_INVALID_VALUE, "%s: the valid request returned %ld", reqs[i].name, r);
        for (size_t len = 0; len < rb->len; len++) {
            if (rb->len > 64 && len > 40 && len < rb->len - 8) continue; /* the bulk tail: a few suffices */
            r = call_raw(fd, reqs[i].op, 0, CTX, rb->data, (uint32_t)len);
            CHECK(r == CUDA_ERROR_INVALID_VALUE, "%s truncated to %zu of %zu bytes returned %ld", reqs[i].name, len,
                  rb->len, r);
        }
        wb_put_u8(rb, 0);
        r = call(fd, reqs[i].op, rb);
        CHECK(r == CUDA_ERROR_INVALID_VALUE, "%s with a byte appended returned %ld", reqs[i].name, r);
        ping_ok(fd, reqs[i].name);
        wb_free(rb);
    }
    io_close(fd);
    printf("ok truncated and extended payloads get INVALID_VALUE\n");
}

/* Bulk lengths inside the payload that lie. */
static void inner_lengths(void)
{
    int fd = open_session();
    retain_ctx(fd);
    wire_buf b;
    wb_init(&b);
    /* htod claims 1 GiB of data, carries 8 bytes */
    msg_scuda_memcpy_htod_req_put(&b, &(struct msg_scuda_memcpy_htod_req){.dst = 0x1000, .data_len = 1ull << 30});
    wb_put_u64(&b, 0);
    CHECK(call(fd, OP_scuda_memcpy_htod, &b) == CUDA_ERROR_INVALID_VALUE);
    /* htod claims 2^64 - 1 bytes */
    wb_reset(&b);
    msg_scuda_memcpy_htod_req_put(&b, &(struct msg_scuda_memcpy_htod_req){.dst = 0x1000, .data_len = UINT64_MAX});
    CHECK(call(fd, OP_scuda_memcpy_htod, &b) == CUDA_ERROR_INVALID_VALUE);
    /* module load with an image length past the end */
    wb_reset(&b);
    struct msg_scuda_module_load_req load = {.head = {.id = 0x4440}, .image_len = 1ull << 40};
    msg_scuda_module_load_req_put(&b, &load);
    wb_put_raw(&b, "hello", 5);
    CHECK(call(fd, OP_scuda_module_load, &b) == CUDA_ERROR_INVALID_VALUE);
    /* module load with an empty image */
    wb_reset(&b);
    load = (struct msg_scuda_module_load_req){.head = {.id = 0x4450}, .image_len = 0};
    msg_scuda_module_load_req_put(&b, &load);
    long r = call(fd, OP_scuda_module_load, &b);
    CHECK(r != CUDA_SUCCESS && r >= 0, "empty module image returned %ld", r);
    /* dtoh of 2^40 bytes from a bogus address: an error, not an allocation */
    wb_reset(&b);
    msg_scuda_memcpy_dtoh_req_put(&b, &(struct msg_scuda_memcpy_dtoh_req){.src = 0x1000, .n = 1ull << 40});
    r = call(fd, OP_scuda_memcpy_dtoh, &b);
    CHECK(r != CUDA_SUCCESS && r >= 0, "dtoh of 1 TiB returned %ld", r);
    /* a launch with 1000 attributes */
    wb_reset(&b);
    wb_put_u64(&b, 0x7770);
    for (int i = 0; i < 7; i++) wb_put_u32(&b, 1);
    wb_put_u64(&b, 0);
    wb_put_u32(&b, 1000);
    CHECK(call(fd, OP_scuda_launch, &b) == CUDA_ERROR_INVALID_VALUE);
    /* pointer_kind with one pointer more than its maximum */
    uint64_t ptrs[POINTER_KIND_MAX + 1] = {0};
    struct msg_scuda_pointer_kind_req kinds = {ptrs, POINTER_KIND_MAX + 1};
    wb_reset(&b);
    msg_scuda_pointer_kind_req_put(&b, &kinds);
    CHECK(call(fd, OP_scuda_pointer_kind, &b) == CUDA_ERROR_INVALID_VALUE);
    /* ... and with a count of 2^32 - 1 and no pointers, which no encoder writes */
    wb_reset(&b);
    wb_put_u32(&b, UINT32_MAX);
    CHECK(call(fd, OP_scuda_pointer_kind, &b) == CUDA_ERROR_INVALID_VALUE);
    /* a 2D copy with absurd extents and a host side */
    wb_reset(&b);
    struct msg_copy_side side = {.x = 0x1000, .y = 0x1000, .z = 0x1000, .lod = 0x1000, .ptr = 0x1000,
                                 .array = 0x1000, .pitch = 0x1000, .height = 0x1000};
    struct msg_scuda_memcpy_2d_req c2 = {.copy = {.src = side, .dst = side, .width = 1ull << 32, .height = 1ull << 24,
                                                  .depth = 1}};
    c2.copy.src.type = CU_MEMORYTYPE_DEVICE;
    c2.copy.dst.type = CU_MEMORYTYPE_HOST;
    msg_scuda_memcpy_2d_req_put(&b, &c2);
    r = call(fd, OP_scuda_memcpy_2d, &b);
    CHECK(r != CUDA_SUCCESS && r >= 0, "a 2^56-byte 2D copy returned %ld", r);
    /* A 3D host-to-host copy whose packed size width*height*depth
     * = 2^32 * 2^24 * 2^8 wraps to 0 in 64 bits: it carries 0 bytes but
     * describes 2^64. */
    wb_reset(&b);
    struct msg_scuda_memcpy_3d_req c3 = {.copy = {.src = {.type = CU_MEMORYTYPE_HOST},
                                                  .dst = {.type = CU_MEMORYTYPE_HOST},
                                                  .width = 1ull << 32, .height = 1ull << 24, .depth = 1ull << 8}};
    msg_scuda_memcpy_3d_req_put(&b, &c3);
    r = call(fd, OP_scuda_memcpy_3d, &b);
    CHECK(r >= 0, "a 3D copy whose packed size wraps to 0 killed the session");
    CHECK(r != CUDA_SUCCESS, "a 3D copy whose packed size wraps to 0 returned SUCCESS");
    ping_ok(fd, "lying inner lengths");
    wb_free(&b);
    io_close(fd);
    printf("ok lying inner lengths are refused\n");
}

static void unknown_ops_and_contexts(void)
{
    int fd = open_session();
    retain_ctx(fd);
    static const uint16_t unknown[] = {0, OP_COUNT, OP_COUNT + 1, 1000, 32768, 65535};
    for (unsigned i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        long r = call(fd, unknown[i], NULL);
        CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "unknown op %u returned %ld", unknown[i], r);
        uint8_t junk[40];
        h_pattern(junk, sizeof junk, i);
        r = call_raw(fd, unknown[i], 0, CTX, junk, sizeof junk);
        CHECK(r == CUDA_ERROR_NOT_SUPPORTED, "unknown op %u with a payload returned %ld", unknown[i], r);
    }
    ping_ok(fd, "unknown ops");
    /* a context id the session does not know */
    long r = call_raw(fd, OP_scuda_ping, 0, 0xdeadbee0, NULL, 0);
    CHECK(r == CUDA_ERROR_INVALID_CONTEXT, "ping with an unknown context returned %ld", r);
    ping_ok(fd, "an unknown context");
    /* reply/output flags on a request, and every flag bit at once */
    r = call_raw(fd, OP_scuda_ping, FRAME_REPLY | FRAME_OUTPUT | FRAME_BULK | 0xfff0, CTX, NULL, 0);
    CHECK(r == CUDA_SUCCESS || r == -1, "ping with odd flags returned %ld", r);
    ping_ok(fd, "odd flags");
    io_close(fd);
    printf("ok unknown ops, unknown contexts, odd flags\n");
}

/* A scuda_packed request around the given zstd frame, for inner op `op`. */
static long call_packed(int fd, uint16_t op, const void *frame, size_t frame_len)
{
    struct msg_scuda_packed_req m = {.op = op, .frame = frame, .frame_len = frame_len};
    wire_buf b;
    wb_init(&b);
    msg_scuda_packed_req_put(&b, &m);
    wb_put_raw(&b, frame, frame_len);
    long r = call(fd, OP_scuda_packed, &b);
    wb_free(&b);
    return r;
}

/* The parts compressed into one zstd frame in *z (malloc'd); its length. */
static size_t pack(const struct iovec *parts, int n, uint8_t **z)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += parts[i].iov_len;
    *z = malloc(total);
    CHECK(*z != NULL);
    size_t zn = compress_parts(*z, total, parts, n);
    CHECK(zn > 0, "zstd did not shrink %zu bytes", total);
    return zn;
}

/* Compressed requests that do not unpack or do not decode: garbage, a
 * request with bytes past its end, a packed op inside, an inner op the
 * server lacks, a frame whose size is over SCUDA_MAX_FRAME (a bomb: 65 MiB
 * of zeros in a few kilobytes) and a frame cut short are each refused
 * with INVALID_VALUE, and the session lives. */
static void packed_frames(void)
{
    int fd = open_session();
    retain_ctx(fd);
    /* A request with bytes past its end, packed: refused as it would be
     * plain. (Packed requests that run: e2e/packed_images.) */
    struct msg_scuda_primary_ctx_retain_req m = {.dev = 0, .ctx = CTX + 0x100};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &m);
    uint8_t *z, pad[4096] = {0};
    struct iovec two[2] = {{b.data, b.len}, {pad, sizeof pad}};
    uint8_t small[16];
    CHECK(compress_parts(small, sizeof small, two, 2) == 0, "compress_parts claimed 4 KiB fit in 16 bytes");
    size_t zn = pack(two, 2, &z);
    long r = call_packed(fd, OP_scuda_primary_ctx_retain, z, zn);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request with 4 KiB past its end returned %ld", r);
    free(z);
    wb_free(&b);
    ping_ok(fd, "a packed request");

    uint8_t junk[256];
    h_pattern(junk, sizeof junk, 7);
    r = call_packed(fd, OP_scuda_ping, junk, sizeof junk);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request of random bytes returned %ld", r);
    ping_ok(fd, "a packed request of random bytes");

    uint8_t filler[4096] = {0};
    struct iovec f = {filler, sizeof filler};
    zn = pack(&f, 1, &z);
    r = call_packed(fd, OP_scuda_packed, z, zn);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request inside a packed one returned %ld", r);
    r = call_packed(fd, OP_COUNT, z, zn);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request of an unknown op returned %ld", r);
    r = call_packed(fd, OP_scuda_ping, z, zn / 2);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request cut in half returned %ld", r);
    free(z);
    ping_ok(fd, "packed requests that do not unpack");

    size_t big = SCUDA_MAX_FRAME + (1u << 20);
    uint8_t *zeros = calloc(1, big);
    CHECK(zeros != NULL);
    struct iovec bomb = {zeros, big};
    zn = pack(&bomb, 1, &z);
    free(zeros);
    CHECK(zn < 64 * 1024, "65 MiB of zeros took %zu bytes", zn);
    r = call_packed(fd, OP_scuda_ping, z, zn);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a packed request over SCUDA_MAX_FRAME returned %ld", r);
    free(z);
    ping_ok(fd, "a packed request over SCUDA_MAX_FRAME");
    io_close(fd);
    printf("ok packed requests\n");
}

/* Every op the server knows, with an empty payload and with a payload of
 * 0xff bytes, as a request: each gets a reply, and the session lives. Then
 * the same as one-way frames. */
static void every_op(void)
{
    int fd = open_session();
    retain_ctx(fd);
    uint8_t ff[300];
    memset(ff, 0xff, sizeof ff);
    for (unsigned op = 1; op < OP_COUNT; op++) {
        long r = call(fd, (uint16_t)op, NULL);
        CHECK(r >= 0, "op %u (%s) with an empty payload: no reply", op, scuda_op_name(op));
        r = call_raw(fd, (uint16_t)op, 0, CTX, ff, sizeof ff);
        CHECK(r >= 0, "op %u (%s) with 0xff bytes: no reply", op, scuda_op_name(op));
    }
    ping_ok(fd, "every op as a request");
    for (unsigned op = 1; op < OP_COUNT; op++) {
        uint32_t s = seq++;
        CHECK(h_raw_send(fd, (uint16_t)op, FRAME_ASYNC, s, CTX, ff, 1 + op % 64) == 0);
    }
    ping_ok(fd, "every op one-way");
    io_close(fd);
    printf("ok every op with empty and 0xff payloads\n");
}

static void framing(void)
{
    /* A frame longer than SCUDA_MAX_FRAME: the session closes the connection. */
    uint32_t lens[] = {SCUDA_MAX_FRAME + 1, UINT32_MAX};
    for (int i = 0; i < 2; i++) {
        int fd = open_session();
        CHECK(h_raw_send(fd, OP_scuda_ping, 0, seq++, 0, NULL, 0) == 0);
        struct frame_header h = {.length = lens[i], .op = OP_scuda_memcpy_htod, .seq = seq++};
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_header_encode(&h, hdr);
        CHECK(io_write_full(fd, hdr, sizeof hdr) == 0);
        CHECK(h_raw_closed_within(fd, 5000), "a %u-byte frame did not close the connection", lens[i]);
        io_close(fd);
    }
    /* A header that promises more than comes, then the client leaves. */
    {
        int fd = open_session();
        struct frame_header h = {.length = 1 << 20, .op = OP_scuda_memcpy_htod, .seq = seq++};
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_header_encode(&h, hdr);
        CHECK(io_write_full(fd, hdr, sizeof hdr) == 0);
        CHECK(io_write_full(fd, "0123456789", 10) == 0);
        io_close(fd);
    }
    /* A header that promises less than comes: the rest is read as frames. */
    {
        int fd = open_session();
        retain_ctx(fd);
        uint8_t junk[200];
        h_pattern(junk, sizeof junk, 42);
        struct frame_header h = {.length = 10, .op = OP_scuda_ping, .seq = seq++, .ctx = CTX};
        uint8_t hdr[FRAME_HEADER_LEN];
        frame_header_encode(&h, hdr);
        CHECK(io_write_full(fd, hdr, sizeof hdr) == 0);
        (void)io_write_full(fd, junk, sizeof junk);
        h_sleep_ms(100);
        io_close(fd);
    }
    /* A partial header, then nothing. */
    {
        int fd = open_session();
        CHECK(io_write_full(fd, "\x10\x00\x00", 3) == 0);
        io_close(fd);
    }
    /* Random bytes right after the handshake, in several sizes. */
    for (int i = 0; i < 6; i++) {
        int fd = open_session();
        size_t n = (size_t)1 << (4 + 3 * i); /* 16 B .. 512 KiB */
        uint8_t *junk = malloc(n);
        CHECK(junk != NULL);
        h_pattern(junk, n, 100 + i);
        (void)io_write_full(fd, junk, n);
        free(junk);
        h_sleep_ms(20);
        io_close(fd);
    }
    printf("ok oversized frames close the session; lying lengths and random bytes do no harm\n");
}

/* Connect and read the server's greeting; returns the fd and its nonce. */
static int greeted(uint8_t nonce[SCUDA_NONCE_LEN])
{
    char err[256];
    int fd = dial(addr, 5000, PREFACE_SESSION, err, sizeof err);
    CHECK(fd >= 0, "%s", err);
    CHECK(hello_read_server(fd, 5000, nonce, err, sizeof err) == 0, "%s", err);
    return fd;
}

/* The welcome a refused hello gets: its status must be `want` and its
 * message must mention `says`. */
static void expect_refusal(int fd, uint32_t want, const char *says, const char *what)
{
    uint32_t status;
    char msg[256];
    CHECK(hello_read_welcome(fd, 5000, &status, msg, sizeof msg) == 0, "no welcome for %s: %s", what, msg);
    CHECK(status == want, "%s got welcome status %u", what, status);
    CHECK(strstr(msg, says) != NULL, "%s refused with \"%s\"", what, msg);
}

static void handshakes(const struct h_server *srv)
{
    uint8_t nonce[SCUDA_NONCE_LEN];
    /* wrong magic: closed without a welcome */
    int fd = greeted(nonce);
    uint8_t junk[CLIENT_HELLO_LEN];
    memset(junk, 0x41, sizeof junk);
    CHECK(io_write_full(fd, junk, sizeof junk) == 0);
    CHECK(h_raw_closed_within(fd, 5000), "a client hello with a wrong magic was not closed");
    io_close(fd);
    CHECK(h_wait_log(srv, "not a SCUDA client", 1, 10000) >= 1, "the server did not log the wrong magic");
    /* wrong version: refused with WELCOME_BAD_VERSION. Built by hand:
     * hello.c sends only its own version. */
    fd = greeted(nonce);
    uint8_t ch[CLIENT_HELLO_LEN] = {0};
    uint32_t magic = SCUDA_MAGIC;
    uint16_t ver = SCUDA_PROTOCOL_VERSION + 7;
    memcpy(ch, &magic, 4);
    memcpy(ch + 4, &ver, 2);
    CHECK(io_write_full(fd, ch, sizeof ch) == 0);
    expect_refusal(fd, WELCOME_BAD_VERSION, "protocol v", "a wrong version");
    io_close(fd);
    /* a well-formed hello with a flag this server does not know */
    fd = greeted(nonce);
    CHECK(hello_send_client(fd, 1u << 9, ~0ull, NULL, nonce, NULL, 0) == 0);
    expect_refusal(fd, WELCOME_BAD_VERSION, "unknown hello flags 0x200", "an unknown flag");
    io_close(fd);
    /* half a client hello, then gone */
    fd = greeted(nonce);
    CHECK(io_write_full(fd, ch, 20) == 0);
    io_close(fd);
    printf("ok bad handshakes are refused\n");
}

static int good_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 1 << 20));
    uint8_t *h = malloc(1 << 20), *o = malloc(1 << 20);
    CHECK(h && o);
    h_pattern(h, 1 << 20, 5);
    CU(cuMemcpyHtoD_v2(d, h, 1 << 20));
    CU(cuMemcpyDtoH_v2(o, d, 1 << 20));
    CHECK(h_diff(h, o, 1 << 20) < 0);
    CU(cuMemFree_v2(d));
    free(h);
    free(o);
    return 0;
}

int main(void)
{
    h_begin("bad_frames", 55);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    addr = srv.addr;

    unknown_ops_and_contexts();
    truncations();
    inner_lengths();
    every_op();
    packed_frames();
    framing();
    handshakes(&srv);

    h_wait_ok(h_spawn(good_client, NULL, 15, -1, -1), 15000, "a normal client after the bad ones");
    /* give the parent a moment to reap the sessions that ended */
    h_sleep_ms(500);
    h_server_stop(&srv);
    printf("PASS bad_frames\n");
    return 0;
}
