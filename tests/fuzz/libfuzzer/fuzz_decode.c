/* fuzz_decode.c - libFuzzer target: everything that decodes bytes from the
 * network, in-process (docs/architecture.md, 6 Tests).
 *
 * Input: [selector u8][flags u8][payload...]. The selector picks, modulo
 * their number:
 *   0 .. D-1  the message decoders of messages.gen.h (fuzz_decoders.gen.c,
 *             in the header's order), over the payload; flags bit 0 decodes
 *             as the session does a request whose bulk bytes went to
 *             staging memory (msg_arena.bulk_apart). A payload that decodes
 *             must re-encode into bytes that decode again (bulk fields
 *             apart, as their encoders leave them out).
 *   D + 0     frame header decode and encode (a round trip);
 *   D + 1     the server's client_hello and join request readers;
 *   D + 2     the client's welcome reader, with session info;
 *   D + 3     the client's welcome reader, without;
 *   D + 4     session_info_decode;
 *   D + 5     the wire_reader primitives, driven by a script: the payload
 *             is [script length u8][script][data].
 * The payload is the tail of libFuzzer's buffer, which is exactly its
 * size: AddressSanitizer reports any read past it.
 *
 * The hello readers read from a descriptor: the payload goes through a
 * pipe whose write end is closed, so every read ends at once. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hello.h"
#include "common/protocol.h"
#include "common/session_info.h"
#include "common/wire.h"
#include "fuzz_decode.h"

#define SPECIAL_TARGETS 6

/* A reader must only ever move forward inside its bytes. */
static void check_reader(const wire_reader *r, const uint8_t *start, size_t len, const char *what)
{
    if (r->p < start || r->p + r->left != start + len) {
        fprintf(stderr, "%s: the reader left its bytes\n", what);
        abort();
    }
}

static void fuzz_message(const struct fuzz_decoder *d, int bulk_apart, const uint8_t *p, size_t n)
{
    struct msg_arena a;
    msg_arena_init(&a);
    a.bulk_apart = bulk_apart;
    a.bulk_len = n;
    wire_reader r;
    wr_init(&r, p, n);
    wire_buf again;
    wb_init(&again);
    int rc = d->decode(&r, &a, &again);
    check_reader(&r, p, n, d->name);
    if (rc == 0 && !again.oom) {
        /* Decode the re-encoding from its own exactly-sized copy. */
        uint8_t *copy = malloc(again.len ? again.len : 1);
        if (!copy) abort();
        memcpy(copy, again.data, again.len);
        struct msg_arena a2;
        msg_arena_init(&a2);
        /* An encoder leaves a bulk field's bytes out (they travel apart,
         * srv_call.bulk and rpc_call.bulk): decode the way their receiver does. */
        a2.bulk_apart = 1;
        a2.bulk_len = a.bulk_len;
        wire_reader r2;
        wr_init(&r2, copy, again.len);
        if (d->redecode(&r2, &a2) != 0) {
            fprintf(stderr, "%s: a message that decoded re-encodes into %zu bytes that do not\n", d->name,
                    again.len);
            abort();
        }
        msg_arena_free(&a2);
        free(copy);
    }
    wb_free(&again);
    msg_arena_free(&a);
}

static void fuzz_frame_header(const uint8_t *p, size_t n)
{
    if (n < FRAME_HEADER_LEN) return;
    struct frame_header h;
    frame_header_decode(p, &h);
    uint8_t out[FRAME_HEADER_LEN];
    frame_header_encode(&h, out);
    if (memcmp(out, p, FRAME_HEADER_LEN) != 0) abort();
}

/* A pipe holding the payload, its write end closed; -1 when the payload
 * does not fit a pipe's buffer (such inputs are skipped). */
static int pipe_of(const uint8_t *p, size_t n)
{
    int fds[2];
    if (n > 4096 || pipe2(fds, O_CLOEXEC) != 0) return -1;
    if (n && write(fds[1], p, n) != (ssize_t)n) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    close(fds[1]);
    return fds[0];
}

static void fuzz_client_hello(const uint8_t *p, size_t n)
{
    int fd = pipe_of(p, n);
    if (fd < 0) return;
    struct client_hello ch;
    if (hello_read_client(fd, 1000, &ch) == 0) {
        static const uint8_t nonce[SCUDA_NONCE_LEN];
        (void)hello_proof_ok(&ch, (ch.flags & 1) ? "token" : NULL, nonce);
        struct join_request jr;
        (void)hello_read_join_request(fd, 1000, &jr);
    }
    close(fd);
}

static void fuzz_welcome(const uint8_t *p, size_t n, int with_info)
{
    int fd = pipe_of(p, n);
    if (fd < 0) return;
    uint32_t status;
    char msg[256];
    static struct session_info si;
    int rc = with_info ? hello_read_session_welcome(fd, 1000, &status, msg, sizeof msg, &si)
                       : hello_read_welcome(fd, 1000, &status, msg, sizeof msg);
    if (memchr(msg, 0, sizeof msg) == NULL) abort(); /* the message is always a C string */
    if (rc == 0 && with_info && status == WELCOME_OK && si.device_count > SCUDA_MAX_DEVICES) abort();
    close(fd);
}

static void fuzz_session_info(const uint8_t *p, size_t n)
{
    static struct session_info si;
    wire_reader r;
    wr_init(&r, p, n);
    if (session_info_decode(&r, &si) == 0) {
        if (si.device_count > SCUDA_MAX_DEVICES) abort();
        for (uint32_t d = 0; d < si.device_count; d++) {
            if (si.dev[d].attr_count > SCUDA_ATTR_SLOTS) abort();
            if (!memchr(si.dev[d].name, 0, sizeof si.dev[d].name)) abort();
            if (!memchr(si.dev[d].pci_bus_id, 0, sizeof si.dev[d].pci_bus_id)) abort();
        }
    }
    check_reader(&r, p, n, "session_info_decode");
}

/* Each script byte is one read: the low 4 bits pick it, the high 4 bits
 * are a length for wr_view and wr_raw. */
static void fuzz_primitives(const uint8_t *p, size_t n)
{
    if (n < 1) return;
    size_t script_len = p[0] < n - 1 ? p[0] : n - 1;
    const uint8_t *script = p + 1, *data = p + 1 + script_len;
    size_t data_len = n - 1 - script_len;
    wire_reader r;
    wr_init(&r, data, data_len);
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < script_len; i++) {
        size_t len, k = script[i] >> 4;
        uint8_t raw[16];
        const char *s;
        switch (script[i] & 15) {
        case 0: sink += wr_u8(&r); break;
        case 1: sink += wr_u16(&r); break;
        case 2: sink += wr_u32(&r); break;
        case 3: sink += wr_u64(&r); break;
        case 4: sink += (uint64_t)wr_i32(&r); break;
        case 5: sink += (uint64_t)wr_i64(&r); break;
        case 6: { float f = wr_f32(&r); uint32_t bits; memcpy(&bits, &f, 4); sink += bits; break; }
        case 7: { double f = wr_f64(&r); uint64_t bits; memcpy(&bits, &f, 8); sink += bits; break; }
        case 8: {
            const uint8_t *b = wr_blob(&r, &len);
            for (size_t j = 0; b && j < len; j++) sink += b[j];
            if (!b && len) abort();
            break;
        }
        case 9:
            s = wr_str(&r);
            if (s) sink += strlen(s);
            break;
        case 10: {
            const uint8_t *v = wr_view(&r, k);
            for (size_t j = 0; v && j < k; j++) sink += v[j];
            break;
        }
        case 11: wr_raw(&r, raw, k); sink += raw[0]; break;
        default: sink += (uint64_t)wr_ok_end(&r); break;
        }
        check_reader(&r, data, data_len, "wire_reader");
        if (r.bad && wr_ok_end(&r)) abort();
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    unsigned pick = data[0] % (fuzz_decoder_count + SPECIAL_TARGETS);
    int flags = data[1];
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    if (pick < fuzz_decoder_count) {
        fuzz_message(&fuzz_decoders[pick], flags & 1, p, n);
        return 0;
    }
    switch (pick - fuzz_decoder_count) {
    case 0: fuzz_frame_header(p, n); break;
    case 1: fuzz_client_hello(p, n); break;
    case 2: fuzz_welcome(p, n, 1); break;
    case 3: fuzz_welcome(p, n, 0); break;
    case 4: fuzz_session_info(p, n); break;
    default: fuzz_primitives(p, n); break;
    }
    return 0;
}
