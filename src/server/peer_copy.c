/* peer_copy.c - a copy over a peer link (peer_link.h): scuda_peer_send on
 * the source session, scuda_peer_recv on the destination's, announced by
 * the client to both at once.
 *
 * On the link a copy is
 *   waits   { u32 PEER_WAIT, u32 0, u64 0 }   (any number)
 *   head    { u32 PEER_MAGIC, u32 CUresult, u64 n }
 *   n bytes                      (only when the head's result is success)
 *   trailer { u32 PEER_MAGIC, u32 CUresult }
 * The sender checks its range, and waits for the DMA of its first chunk,
 * before it sends the head: a bad range or a failed DMA goes in the head,
 * and no bytes follow. The first DMA runs after whatever the stream held
 * before the copy, which may take longer than a read on the link may
 * wait: meanwhile the sender says it is alive with a wait every
 * PEER_WAIT_EVERY_MS. A DMA that fails later still sends
 * every byte (whatever the buffer held) and says so in the trailer, so
 * the link stays in step. The receiver checks its own range too, and
 * reads (and drops) the bytes of a copy it refuses, for the same reason.
 * Anything else (a read or write that fails or waits past
 * PEER_IO_TIMEOUT_MS, a head that is not one, another length) closes the
 * link: both calls fail, CUDA_ERROR_DEVICE_UNAVAILABLE, and the client
 * sets up a new link for its next copy.
 *
 * Both ends pipeline through the link's two pinned buffers: the sender
 * starts the DMA of chunk k+1 before it writes chunk k; the receiver
 * reads chunk k+1 while the DMA of chunk k runs. */
#define _GNU_SOURCE
#include "peer_link.h"

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "staging.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/transport.h"
#include "../common/clock.h"

#define PEER_MAGIC 0x52454550u /* "PEER" */
#define PEER_WAIT 0x54494157u  /* "WAIT" */
#define PEER_WAIT_EVERY_MS 5000
#define PEER_HEAD_LEN 16
#define PEER_TRAILER_LEN 8
#define CHUNK PEER_CHUNK
/* What a broken link makes of a copy: the other server is as good as gone. */
#define LINK_LOST CUDA_ERROR_DEVICE_UNAVAILABLE

static CUresult stream_of(srv_call *c, uint64_t id, CUstream *out)
{
    void *h;
    CUresult r = handle_get(c->s, id, HK_STREAM, &h);
    *out = (CUstream)h;
    return r;
}

/* A copy through the link's buffers must never be captured into a graph
 * (a replay would use a link long gone): as srv_memory.c refuses it. */
static CUresult not_capturing(CUstream st)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!real.cuStreamIsCapturing || REAL(cuStreamIsCapturing, st, &cs) != CUDA_SUCCESS ||
        cs == CU_STREAM_CAPTURE_STATUS_NONE)
        return CUDA_SUCCESS;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* [p, p+n) lies within one allocation the driver knows. */
static CUresult range_ok(CUdeviceptr p, uint64_t n)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = REAL(cuMemGetAddressRange_v2, &base, &size, p);
    if (r != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    if (p < base || n > size || p - base > size - n) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static int put_head_as(int fd, uint32_t magic, CUresult r, uint64_t n)
{
    uint8_t h[PEER_HEAD_LEN];
    uint32_t res = (uint32_t)r;
    memcpy(h, &magic, 4);
    memcpy(h + 4, &res, 4);
    memcpy(h + 8, &n, 8);
    return io_write_full(fd, h, sizeof h);
}

static int put_head(int fd, CUresult r, uint64_t n) { return put_head_as(fd, PEER_MAGIC, r, n); }

/* The head, after any waits. Returns 0, or -1 (the link failed or is out
 * of step). */
static int get_head(int fd, CUresult *r, uint64_t *n)
{
    for (;;) {
        uint8_t h[PEER_HEAD_LEN];
        uint32_t magic, res;
        if (io_read_full(fd, h, sizeof h) != 0) return -1;
        memcpy(&magic, h, 4);
        memcpy(&res, h + 4, 4);
        memcpy(n, h + 8, 8);
        *r = (CUresult)res;
        if (magic == PEER_MAGIC) return 0;
        if (magic != PEER_WAIT) return -1;
    }
}


/* Wait for the work queued on st (the first chunk's DMA, behind whatever
 * the stream held), telling the receiver every PEER_WAIT_EVERY_MS that
 * this end is alive. Polls: from 20 us up to 1 ms between looks. Returns
 * the stream's result, or sets *broken. */
static CUresult wait_first_dma(int fd, CUstream st, int *broken)
{
    uint64_t told = now_ms();
    unsigned nap_us = 20;
    for (;;) {
        CUresult q = REAL(cuStreamQuery, st);
        if (q != CUDA_ERROR_NOT_READY) return q;
        if (now_ms() - told >= PEER_WAIT_EVERY_MS) {
            if (put_head_as(fd, PEER_WAIT, CUDA_SUCCESS, 0) != 0) {
                *broken = 1;
                return LINK_LOST;
            }
            told = now_ms();
        }
        usleep(nap_us);
        if (nap_us < 1000) nap_us *= 2;
    }
}

static int put_trailer(int fd, CUresult r)
{
    uint32_t t[2] = {PEER_MAGIC, (uint32_t)r};
    return io_write_full(fd, t, sizeof t);
}

static int get_trailer(int fd, CUresult *r)
{
    uint32_t t[2];
    if (io_read_full(fd, t, sizeof t) != 0 || t[0] != PEER_MAGIC) return -1;
    *r = (CUresult)t[1];
    return 0;
}

static size_t chunk_len(uint64_t n, uint64_t k)
{
    uint64_t off = k * CHUNK;
    return (size_t)(n - off < CHUNK ? n - off : CHUNK);
}

static CUresult dma_out(struct staging *b, CUdeviceptr src, size_t len, CUstream st)
{
    CUresult r = REAL(cuMemcpyDtoHAsync_v2, staging_data(b), src, len, st);
    CUresult e = staging_record(b, st);
    return r != CUDA_SUCCESS ? r : e;
}

/* Every chunk of [src, src+n) onto the link, the first one's DMA done
 * (into buf[0]). Returns the first CUDA failure (its chunk and the later
 * ones carry what the buffer held), or sets *broken when the link failed. */
static CUresult send_chunks(struct peer_hold *h, CUdeviceptr src, uint64_t n, CUstream st, int *broken)
{
    uint64_t chunks = (n + CHUNK - 1) / CHUNK;
    CUresult r = CUDA_SUCCESS;
    for (uint64_t k = 0; k < chunks; k++) {
        struct staging *b = h->buf[k & 1];
        if (k + 1 < chunks && r == CUDA_SUCCESS)
            r = dma_out(h->buf[(k + 1) & 1], src + (k + 1) * CHUNK, chunk_len(n, k + 1), st);
        CUresult w = staging_wait(b);
        if (r == CUDA_SUCCESS) r = w;
        if (io_write_full(h->fd, staging_data(b), chunk_len(n, k)) != 0) {
            *broken = 1;
            return LINK_LOST;
        }
    }
    return r;
}

/* Every chunk of the copy from the link, landed at dst when `land` (else
 * read and dropped). As send_chunks. */
static CUresult recv_chunks(struct peer_hold *h, CUdeviceptr dst, uint64_t n, CUstream st, int land, int *broken)
{
    uint64_t chunks = (n + CHUNK - 1) / CHUNK;
    CUresult r = CUDA_SUCCESS;
    for (uint64_t k = 0; k < chunks; k++) {
        struct staging *b = h->buf[k & 1];
        CUresult w = staging_wait(b); /* chunk k-2's DMA */
        if (r == CUDA_SUCCESS) r = w;
        size_t len = chunk_len(n, k);
        if (io_read_full(h->fd, staging_data(b), len) != 0) {
            *broken = 1;
            break;
        }
        if (!land || r != CUDA_SUCCESS) continue;
        r = REAL(cuMemcpyHtoDAsync_v2, dst + k * CHUNK, staging_data(b), len, st);
        CUresult e = staging_record(b, st);
        if (r == CUDA_SUCCESS) r = e;
    }
    for (int i = 0; i < 2; i++) {
        CUresult w = staging_wait(h->buf[i]);
        if (r == CUDA_SUCCESS) r = w;
    }
    return *broken ? LINK_LOST : r;
}

CUresult srv_scuda_peer_send(srv_call *c)
{
    struct msg_scuda_peer_send_req m;
    if (msg_scuda_peer_send_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUstream st;
    CUresult r = stream_of(c, m.stream, &st);
    if (r == CUDA_SUCCESS) r = not_capturing(st);
    if (r == CUDA_SUCCESS) r = range_ok(m.src, m.n);
    struct peer_hold h;
    if (peer_link_acquire(m.link, &h) != 0) {
        LOG_WARN("peer send: no link %u", m.link);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    int broken = 0;
    if (r == CUDA_SUCCESS && m.n) r = dma_out(h.buf[0], m.src, chunk_len(m.n, 0), st);
    if (r == CUDA_SUCCESS && m.n) r = wait_first_dma(h.fd, st, &broken);
    if (!broken) broken = put_head(h.fd, r, m.n) != 0;
    if (!broken && r == CUDA_SUCCESS) {
        r = send_chunks(&h, m.src, m.n, st, &broken);
        if (!broken) broken = put_trailer(h.fd, r) != 0;
    }
    peer_link_release(&h, broken);
    return broken ? LINK_LOST : r;
}

CUresult srv_scuda_peer_recv(srv_call *c)
{
    struct msg_scuda_peer_recv_req m;
    if (msg_scuda_peer_recv_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUstream st;
    CUresult mine = stream_of(c, m.stream, &st);
    if (mine == CUDA_SUCCESS) mine = not_capturing(st);
    if (mine == CUDA_SUCCESS) mine = range_ok(m.dst, m.n);
    struct peer_hold h;
    if (peer_link_acquire(m.link, &h) != 0) {
        LOG_WARN("peer receive: no link %u", m.link);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    CUresult theirs = CUDA_SUCCESS, landed = CUDA_SUCCESS;
    uint64_t n = 0;
    int broken = get_head(h.fd, &theirs, &n) != 0;
    if (!broken && theirs == CUDA_SUCCESS && n != m.n) {
        LOG_WARN("peer receive: the sender sends %llu bytes, this copy is of %llu", (unsigned long long)n,
                 (unsigned long long)m.n);
        broken = 1;
    }
    if (!broken && theirs == CUDA_SUCCESS) {
        landed = recv_chunks(&h, m.dst, n, st, mine == CUDA_SUCCESS, &broken);
        if (!broken) broken = get_trailer(h.fd, &theirs) != 0;
    }
    peer_link_release(&h, broken);
    if (broken) return LINK_LOST;
    if (mine != CUDA_SUCCESS) return mine;
    return theirs != CUDA_SUCCESS ? theirs : landed;
}
