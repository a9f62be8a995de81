/* srv_packed.c - see srv_packed.h. Every byte is the client's: the frame
 * must state its size, at most SCUDA_MAX_FRAME, and decompress into
 * exactly that many bytes; zstd stops at the buffer's end whatever the
 * frame says. */
#include "srv_packed.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "../common/compress.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

/* Why the last packed request could not be unpacked, for the refusal. */
static _Atomic(const char *) last_why;

static void *refuse(const char *why)
{
    atomic_store(&last_why, why);
    return NULL;
}

void *packed_open(const void *payload, size_t len, uint16_t *op, size_t *n)
{
    wire_reader r;
    struct msg_arena arena;
    struct msg_scuda_packed_req m;
    wr_init(&r, payload, len);
    msg_arena_init(&arena);
    int ok = msg_scuda_packed_req_get(&r, &arena, &m) == 0 && m.frame;
    msg_arena_free(&arena);
    if (!ok) return refuse("a malformed request");
    /* Only driver ops, and never one packed in another. */
    if (m.op == OP_scuda_packed || m.op >= OP_COUNT) return refuse("an op that cannot be packed");
    size_t size = decompress_size(m.frame, (size_t)m.frame_len, SCUDA_MAX_FRAME);
    if (size == 0) return refuse("a zstd frame without a size of 1 byte to SCUDA_MAX_FRAME");
    void *plain = malloc(size);
    if (!plain) return refuse("no memory for its plain bytes");
    if (decompress_chunk(plain, size, m.frame, (size_t)m.frame_len) != 0) {
        free(plain);
        return refuse("a zstd frame that does not decompress to its stated size");
    }
    *op = m.op;
    *n = size;
    return plain;
}

CUresult srv_scuda_packed(srv_call *c)
{
    (void)c;
    const char *why = atomic_load(&last_why);
    LOG_WARN("a compressed request could not be unpacked (%s): refused; a client of another build, or a "
             "damaged stream",
             why ? why : "unknown");
    return CUDA_ERROR_INVALID_VALUE;
}
