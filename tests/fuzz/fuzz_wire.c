/* fuzz_wire.c - the wire decoders on random and damaged input, in-process.
 *
 * Every input lives in a heap buffer of exactly its own size, so under the
 * ASan build (-DSCUDA_SANITIZE=ON) a read one byte past the end is caught.
 * Without ASan the invariants below still hold:
 *   - a reader's position and `left` always describe a range inside the
 *     input, and a bad reader never moves again and reads zeros;
 *   - a blob or view lies inside the input; a string is NUL-terminated
 *     inside it;
 *   - encoding values with wb_* and decoding them with wr_* gives them
 *     back; any truncation of such an encoding decodes the same prefix and
 *     then goes bad, never past the end;
 *   - session_info_decode accepts only what fits its arrays, and strings it
 *     returns are terminated.
 * FUZZ_ITERATIONS (default 200000) and FUZZ_SEED tune it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/protocol.h"
#include "common/session_info.h"
#include "common/wire.h"
#include "fuzz_rng.h"


static unsigned long failures;
#define EXPECT(cond, ...)                                                          \
    do {                                                                           \
        if (!(cond)) {                                                             \
            if (failures++ < 20) {                                                 \
                fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);   \
                fprintf(stderr, __VA_ARGS__);                                      \
                fputc('\n', stderr);                                               \
            }                                                                      \
        }                                                                          \
    } while (0)

/* The reader still describes a suffix of [base, base + len). */
static void check_reader(const wire_reader *r, const uint8_t *base, size_t len, const char *after)
{
    EXPECT(r->left <= len, "after %s: left %zu > len %zu", after, r->left, len);
    EXPECT(r->p == base + (len - r->left), "after %s: position and left disagree", after);
}

static void random_reads(const uint8_t *buf, size_t len)
{
    wire_reader r;
    wr_init(&r, buf, len);
    int steps = 1 + (int)below(24);
    for (int i = 0; i < steps; i++) {
        int was_bad = r.bad;
        size_t left = r.left;
        const char *what = "?";
        uint64_t got = 0;
        switch (below(12)) {
        case 0: got = wr_u8(&r); what = "wr_u8"; break;
        case 1: got = wr_u16(&r); what = "wr_u16"; break;
        case 2: got = wr_u32(&r); what = "wr_u32"; break;
        case 3: got = wr_u64(&r); what = "wr_u64"; break;
        case 4: got = (uint64_t)wr_i64(&r); what = "wr_i64"; break;
        case 5: { double d = wr_f64(&r); memcpy(&got, &d, 8); what = "wr_f64"; break; }
        case 6: {
            uint8_t tmp[64];
            size_t n = below(sizeof tmp + 1);
            memset(tmp, 0xa5, sizeof tmp);
            wr_raw(&r, tmp, n);
            what = "wr_raw";
            if (r.bad)
                for (size_t k = 0; k < n; k++) EXPECT(tmp[k] == 0, "wr_raw on a bad reader left byte %zu", k);
            break;
        }
        case 7: {
            size_t n = below(len + 16);
            const uint8_t *v = wr_view(&r, n);
            what = "wr_view";
            if (v) EXPECT(v >= buf && v + n <= buf + len, "wr_view outside the input");
            else EXPECT(r.bad, "wr_view returned NULL without going bad");
            break;
        }
        case 8:
        case 9: {
            size_t n = 12345;
            const uint8_t *v = wr_blob(&r, &n);
            what = "wr_blob";
            if (v) {
                EXPECT(v >= buf && v + n <= buf + len, "wr_blob outside the input (len %zu)", n);
                EXPECT(n > 0, "non-NULL empty blob");
            } else {
                EXPECT(n == 0, "NULL blob with length %zu", n);
            }
            break;
        }
        case 10:
        case 11: {
            const char *s = wr_str(&r);
            what = "wr_str";
            if (s) {
                EXPECT((const uint8_t *)s >= buf && (const uint8_t *)s < buf + len, "wr_str outside the input");
                size_t room = (size_t)(buf + len - (const uint8_t *)s);
                EXPECT(memchr(s, '\0', room) != NULL, "wr_str not terminated inside the input");
            }
            break;
        }
        }
        check_reader(&r, buf, len, what);
        if (was_bad) {
            EXPECT(r.bad, "%s cleared bad", what);
            EXPECT(r.left == left, "%s moved a bad reader", what);
            EXPECT(got == 0, "%s on a bad reader returned %llu", what, (unsigned long long)got);
        }
    }
    EXPECT(wr_ok_end(&r) == (!r.bad && r.left == 0), "wr_ok_end disagrees with bad/left");
}

/* ---- round trips ------------------------------------------------------------ */

enum kind { K_U8, K_U16, K_U32, K_U64, K_I32, K_F64, K_BLOB, K_STR, K_NULLSTR, K_COUNT };

struct item {
    int kind;
    uint64_t v;
    uint8_t blob[40];
    size_t blen;
};

static void round_trip(void)
{
    struct item items[16];
    int n = 1 + (int)below(16);
    wire_buf b;
    wb_init(&b);
    for (int i = 0; i < n; i++) {
        struct item *it = &items[i];
        it->kind = (int)below(K_COUNT);
        it->v = rnd();
        switch (it->kind) {
        case K_U8: wb_put_u8(&b, (uint8_t)it->v); break;
        case K_U16: wb_put_u16(&b, (uint16_t)it->v); break;
        case K_U32: wb_put_u32(&b, (uint32_t)it->v); break;
        case K_U64: wb_put_u64(&b, it->v); break;
        case K_I32: wb_put_i32(&b, (int32_t)it->v); break;
        case K_F64: { double d = (double)(int64_t)it->v / 3.0; memcpy(&it->v, &d, 8); wb_put_f64(&b, d); break; }
        case K_BLOB:
            it->blen = below(sizeof it->blob);
            for (size_t k = 0; k < it->blen; k++) it->blob[k] = (uint8_t)rnd();
            wb_put_blob(&b, it->blob, it->blen);
            break;
        case K_STR:
            it->blen = below(sizeof it->blob - 1);
            for (size_t k = 0; k < it->blen; k++) it->blob[k] = (uint8_t)(1 + below(255));
            it->blob[it->blen] = 0;
            wb_put_str(&b, (const char *)it->blob);
            break;
        case K_NULLSTR: wb_put_str(&b, NULL); break;
        }
    }
    if (b.oom) { wb_free(&b); return; }
    /* Decode a copy cut at `cut` bytes (the whole encoding included). */
    size_t cut = below(3) ? b.len : below(b.len + 1);
    uint8_t *copy = malloc(cut ? cut : 1);
    memcpy(copy, b.data, cut);
    wire_reader r;
    wr_init(&r, copy, cut);
    for (int i = 0; i < n; i++) {
        const struct item *it = &items[i];
        uint64_t got = 0;
        int ok = 1;
        switch (it->kind) {
        case K_U8: got = wr_u8(&r); ok = got == (uint8_t)it->v; break;
        case K_U16: got = wr_u16(&r); ok = got == (uint16_t)it->v; break;
        case K_U32: got = wr_u32(&r); ok = got == (uint32_t)it->v; break;
        case K_U64: got = wr_u64(&r); ok = got == it->v; break;
        case K_I32: ok = wr_i32(&r) == (int32_t)it->v; break;
        case K_F64: { double d = wr_f64(&r); ok = memcmp(&d, &it->v, 8) == 0; break; }
        case K_BLOB: {
            size_t len;
            const void *p = wr_blob(&r, &len);
            ok = len == it->blen && (len == 0 || memcmp(p, it->blob, len) == 0);
            break;
        }
        case K_STR: {
            const char *s = wr_str(&r);
            ok = s && strcmp(s, (const char *)it->blob) == 0;
            break;
        }
        case K_NULLSTR: ok = wr_str(&r) == NULL; break;
        }
        if (r.bad) {
            EXPECT(cut < b.len, "a complete encoding went bad at item %d (kind %d)", i, it->kind);
            break;
        }
        EXPECT(ok, "item %d (kind %d) did not survive the round trip", i, it->kind);
    }
    if (cut == b.len) EXPECT(wr_ok_end(&r), "a complete encoding was not consumed exactly");
    else EXPECT(!wr_ok_end(&r), "a truncated encoding ended ok");
    free(copy);
    wb_free(&b);
}

/* ---- session info -------------------------------------------------------------- */

static struct session_info si_in, si_out;

static void session_info_cases(void)
{
    /* a valid encoding, then damaged */
    memset(&si_in, 0, sizeof si_in);
    si_in.driver_version = 13000;
    si_in.session_pid = 1234;
    si_in.loading_mode = 1;
    snprintf(si_in.driver_build, sizeof si_in.driver_build, "libcuda.so.580.%u", (unsigned)below(1000));
    si_in.device_count = 1 + (uint32_t)below(3);
    for (uint32_t d = 0; d < si_in.device_count; d++) {
        snprintf(si_in.dev[d].name, sizeof si_in.dev[d].name, "Stand-in %u", d);
        snprintf(si_in.dev[d].pci_bus_id, sizeof si_in.dev[d].pci_bus_id, "0000:%02x:00.0", d);
        si_in.dev[d].total_mem = rnd();
        si_in.dev[d].attr_count = (uint32_t)below(SCUDA_ATTR_SLOTS + 1);
        for (uint32_t a = 0; a < si_in.dev[d].attr_count; a++) si_in.dev[d].attr_value[a] = (int32_t)rnd();
    }
    wire_buf b;
    wb_init(&b);
    session_info_encode(&b, &si_in);
    size_t len = b.len;
    uint8_t *copy = malloc(len);
    memcpy(copy, b.data, len);
    wb_free(&b);
    int mode = (int)below(4);
    if (mode == 1) { /* truncate */
        len = below(len);
    } else if (mode == 2) { /* flip bits */
        for (int k = 0; k < 1 + (int)below(8); k++) copy[below(len)] ^= (uint8_t)(1u << below(8));
    } else if (mode == 3) { /* a big count or length */
        uint32_t v = (uint32_t)rnd();
        if (len >= 4) memcpy(copy + below(len - 3), &v, 4);
    }
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, copy, len);
    free(copy);
    wire_reader r;
    wr_init(&r, exact, len);
    int rc = session_info_decode(&r, &si_out);
    check_reader(&r, exact, len, "session_info_decode");
    if (mode == 0) {
        EXPECT(rc == 0, "a valid session info did not decode");
        EXPECT(si_out.device_count == si_in.device_count, "device count changed");
        EXPECT(strcmp(si_out.dev[0].name, si_in.dev[0].name) == 0, "device name changed");
        EXPECT(si_out.loading_mode == 1 && strcmp(si_out.driver_build, si_in.driver_build) == 0,
               "loading mode or driver build changed");
    }
    if (rc == 0) {
        EXPECT(si_out.device_count <= SCUDA_MAX_DEVICES, "device count %u accepted", si_out.device_count);
        for (uint32_t d = 0; d < si_out.device_count && d < SCUDA_MAX_DEVICES; d++) {
            EXPECT(si_out.dev[d].attr_count <= SCUDA_ATTR_SLOTS, "attr count %u accepted", si_out.dev[d].attr_count);
            EXPECT(memchr(si_out.dev[d].name, 0, sizeof si_out.dev[d].name) != NULL, "unterminated name");
            EXPECT(memchr(si_out.dev[d].pci_bus_id, 0, sizeof si_out.dev[d].pci_bus_id) != NULL,
                   "unterminated bus id");
        }
        EXPECT(memchr(si_out.driver_build, 0, sizeof si_out.driver_build) != NULL, "unterminated driver build");
    }
    free(exact);

    /* an older server's: no driver build after the loading mode */
    wb_init(&b);
    session_info_encode(&b, &si_in);
    size_t older = b.len - 8 - strlen(si_in.driver_build);
    wire_reader o;
    wr_init(&o, b.data, older);
    EXPECT(session_info_decode(&o, &si_out) == 0 && si_out.driver_build[0] == '\0' && si_out.loading_mode == 1,
           "an older server's session info");
    wb_free(&b);

    /* and pure noise */
    len = below(2048);
    exact = malloc(len ? len : 1);
    for (size_t k = 0; k < len; k++) exact[k] = (uint8_t)(below(4) ? below(3) : rnd());
    wr_init(&r, exact, len);
    (void)session_info_decode(&r, &si_out);
    check_reader(&r, exact, len, "session_info_decode (noise)");
    free(exact);
}

static void frame_headers(void)
{
    struct frame_header h = {(uint32_t)rnd(), (uint16_t)rnd(), (uint16_t)rnd(), (uint32_t)rnd(), (uint32_t)rnd()};
    uint8_t *out = malloc(FRAME_HEADER_LEN);
    frame_header_encode(&h, out);
    struct frame_header g;
    frame_header_decode(out, &g);
    EXPECT(g.length == h.length && g.op == h.op && g.flags == h.flags && g.seq == h.seq && g.ctx == h.ctx,
           "frame header round trip");
    free(out);
}

int main(void)
{
    const char *env = getenv("FUZZ_ITERATIONS");
    long iterations = env ? atol(env) : 200000;
    uint64_t seed = rng_seed();
    printf("fuzz_wire: %ld iterations, FUZZ_SEED=%llu\n", iterations, (unsigned long long)seed);
    for (long i = 0; i < iterations && failures < 20; i++) {
        /* random bytes, biased to small values so lengths often fit */
        size_t len = below(4) ? below(64) : below(1024);
        uint8_t *buf = malloc(len ? len : 1);
        for (size_t k = 0; k < len; k++) buf[k] = (uint8_t)(below(3) ? below(8) : rnd());
        random_reads(buf, len);
        free(buf);
        round_trip();
        if (i % 16 == 0) session_info_cases();
        if (i % 64 == 0) frame_headers();
    }
    if (failures) {
        printf("FAIL fuzz_wire: %lu failed checks (FUZZ_SEED=%llu)\n", failures, (unsigned long long)seed);
        return 1;
    }
    printf("PASS fuzz_wire\n");
    return 0;
}
