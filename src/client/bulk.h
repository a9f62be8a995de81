/* bulk.h - striped copies: large host<->device copies over several extra
 * TCP connections to the session at once, because one TCP stream cannot
 * fill a fast link (protocol.h, "Bulk connections";
 * docs/architecture.md, 9.9 Copies and striping).
 *
 * The connections are opened at the first copy of BULK_MIN_COPY bytes or
 * more (BULK_MIN_COPY_TLS over TLS), SCUDA_BULK_STREAMS of them (config.h). When they cannot be opened
 * (an older server, a firewall that lets one connection through) one log
 * line says so and every copy uses the main connection, as before. */
#ifndef SCUDA_CLIENT_BULK_H
#define SCUDA_CLIENT_BULK_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/protocol.h"

struct server;

/* Copies smaller than this go over the main connection, which is faster
 * for them (no announcement, no hand-off to the connections' threads). */
#define BULK_MIN_COPY (8u << 20)
/* The same over TLS. There a stream seals (or opens) each record and then
 * sends (or receives) it on one thread, so the main connection's copy
 * runs at about half a plain stream's speed, whatever its size; spread
 * over the bulk connections the crypto runs on k threads per side at
 * once. From 1 MiB on that pays for the announcement and the hand-off. */
#define BULK_MIN_COPY_TLS (1u << 20)
/* Over TLS, the least each connection a copy uses carries: a copy of n
 * bytes uses at most n / BULK_SHARE_MIN_TLS connections (a 1 MiB copy 2,
 * 4 MiB all 8), whatever SCUDA_BULK_STREAMS. Each connection costs a copy
 * fixed work on both sides (thread wake-ups, a chunk header and its
 * record, a DMA per chunk); below this share that outweighs the crypto
 * it spreads (on the GPU host, 1 MiB ran at 6 GB/s over 4 connections,
 * 4.3 over 8). */
#define BULK_SHARE_MIN_TLS (512u << 10)

enum bulk_mode { BULK_UNTRIED, BULK_ON, BULK_OFF };
enum bulk_dir { BULK_TO_DEVICE, BULK_FROM_DEVICE };

/* One striped copy, as every connection's mover sees it. */
struct bulk_job {
    uint64_t gen;
    enum bulk_dir dir;
    uint64_t id, n;
    uint32_t chunk;
    int used; /* connections 0..used-1 carry its chunks (min(k, chunks)) */
    char *host; /* the caller's buffer (only read for BULK_TO_DEVICE) */
    unsigned policy; /* compress.h: how eagerly chunks are compressed, by whichever side sends them; 0 never */
    int background; /* every connection's share moved by its helper; the caller returned (bulk_copy) */
};

/* The argument of helper thread `index` of server s. */
struct bulk_helper {
    struct server *s;
    int index;
};

/* One server's striping state (servers.h embeds one per server; only bulk.c
 * touches it). */
struct bulk_state {
    pthread_mutex_t lock; /* one striped copy at a time; setup */
    enum bulk_mode state;
    int k;
    int tls; /* the connections are TLS: chunks of whole records */
    int fd[BULK_MAX_STREAMS];
    uint32_t chunk_max;
    uint64_t next_id;
    int last_used; /* connections the last striped copy used (tests) */
    /* Compression (docs/architecture.md, "Compressed copies"). */
    int zstd; /* every connection joined with HELLO_JOIN_ZSTD */
    int zmode; /* enum compress_mode: SCUDA_COMPRESS */
    double link_set; /* SCUDA_LINK_MBPS; 0: measure */
    double link_mbps; /* the link's rate, measured on striped copies sent plain; 0: not yet */
    double link_low_mbps; /* for the tests: the lowest estimate so far; 0: none */
    _Atomic uint64_t link_mbps_seen; /* link_mbps, rounded up, for readers without the lock (bulk_link_mbps) */
    unsigned copies; /* striped copies over these connections (the first does not measure) */
    uint8_t *packed[BULK_MAX_STREAMS]; /* zstd: each connection's room for a compressed chunk */
    _Atomic uint64_t job_wire; /* the running copy's bytes on the wire */
    _Atomic uint64_t packed_sent, packed_received; /* compressed chunks, ever (tests) */
    _Atomic uint64_t packed_plain, packed_wire; /* their bytes, plain and compressed */

    pthread_mutex_t job_lock; /* guards what follows */
    pthread_cond_t job_cv;    /* a helper exited */
    /* Helper i waits on helper_cv[i] for a job or quit: a copy that uses
     * fewer connections than k wakes only the helpers it uses. */
    pthread_cond_t helper_cv[BULK_MAX_STREAMS];
    /* The last mover finished: only the job's caller waits for that, so a
     * mover finishing does not wake every idle helper. */
    pthread_cond_t done_cv;
    struct bulk_job job;
    int moving; /* movers still on the job */
    /* A background job (job.background) runs: the next user of the
     * connections settles it first (bulk.c, settle_locked). */
    int background_busy;
    int background_failed; /* it failed; fail_* say where */
    double background_t0, background_took; /* its start, and how long it took */
    int failed; /* the job failed; fail_* say where */
    int fail_index, fail_errno;
    int quit; /* helpers exit */
    int helpers; /* helper threads alive */
    uint64_t gen_at_setup; /* the last job's gen when the helpers started: theirs come after it */
    unsigned moves_seen; /* conn_moves() when the connections were opened */
    /* Whether the connections are TLS, worked out once per server the
     * session is on (over_tls): (moves + 1) << 1 | tls; 0: not yet. */
    _Atomic unsigned long tls_known;
    struct bulk_helper helpers_of[BULK_MAX_STREAMS];
};
#define BULK_STATE_INIT                                                                                      \
    {                                                                                                        \
        .lock = PTHREAD_MUTEX_INITIALIZER, .job_lock = PTHREAD_MUTEX_INITIALIZER,                             \
        .job_cv = PTHREAD_COND_INITIALIZER, .done_cv = PTHREAD_COND_INITIALIZER,                              \
        .helper_cv = {[0 ... BULK_MAX_STREAMS - 1] = PTHREAD_COND_INITIALIZER},                               \
    }

/* Copy n bytes from src to device address dst on server s, striped. Returns 1 when
 * the copy was made that way (its result in *r), 0 when striping is not
 * available (the caller copies over the main connection). stream is the
 * stream's wire id (handle_wire_id), mode 0 synchronous or 1 asynchronous (memcpy.c). */
int bulk_htod(struct server *s, uint64_t dst, const void *src, size_t n, uint64_t stream, int mode, CUresult *r);
/* The mirror image: device address src to dst. */
int bulk_dtoh(struct server *s, void *dst, uint64_t src, size_t n, uint64_t stream, int mode, CUresult *r);

/* Wait until no background copy reads host memory (cuMemFreeHost,
 * cuMemHostUnregister: the memory is about to go). */
void bulk_wait_background(void);

/* In a forked child: the connections belong to the parent. */
void bulk_forget_after_fork(struct server *s);
/* The link's rate to s in Mbit/s as the striped copies measured it
 * (docs/architecture.md, "Compressed copies"); 0 before a copy has. */
double bulk_link_mbps(struct server *s);

#endif
