/* migrate_memread.c - see migrate_memread.h. */
#define _GNU_SOURCE
#include "migrate_memread.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "../common/clock.h"
#include "../common/auth.h"
#include "../common/log.h"
#include "../common/messages.gen.h"

/* Chunks per batch: 32 MiB of pinned memory, and as many hashing threads
 * (SHA-256 runs at about 2 GB/s a core; the link and the bus are faster). */
#define BATCH 8
/* Batches in flight: one being sent, the next ones read ahead. A read on
 * the legacy stream waits for the application's queued work, so reading
 * three ahead hides most of that wait behind the link. */
#define NBUF 4

struct hash_job {
    const uint8_t *p;
    size_t len;
    uint8_t sum[AUTH_SHA256_LEN];
};

static void *hash_main(void *arg)
{
    struct hash_job *j = arg;
    auth_sha256_digest(j->p, j->len, j->sum);
    return NULL;
}

/* One batch: its host buffer (migrate_host_alloc), the chunks
 * read into it and their hashing threads. */
struct batch {
    uint8_t *p;
    int pinned;
    int k;        /* chunks read; 0 at the end, -1 on a failed read */
    int ready;    /* read and hashing: the sender may take it */
    struct migrate_chunk c[BATCH];
    struct hash_job job[BATCH];
    pthread_t t[BATCH];
    int started[BATCH];
};

/* The reader thread's and the sender's shared state. */
struct pipe {
    const struct migrate_range *v;
    long n;
    CUcontext ctx;
    struct batch b[NBUF];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop; /* the sender stopped: the reader leaves */
    char why[160];
    uint64_t read_ns, wait_ns, hand_ns, bytes; /* where the time went, for the log */
    uint64_t chunks; /* read so far (the reader's) */
    /* the lanes (lanes > 1): each sends its share of a batch on its thread */
    int lanes;
    pthread_t lane_t[MIGRATE_LANES_MAX];
    int lane_started[MIGRATE_LANES_MAX];
    struct batch *cur;             /* the batch the lanes send, under mu */
    signed char lane_of[BATCH];    /* its chunks' lanes (-1: not sent) */
    unsigned gen;                  /* a new batch for the lanes */
    int pending;                   /* lanes not done with it */
    int lane_rc;                   /* the first lane's nonzero */
    int quit;
    migrate_chunk_fn fn;
    void *arg;
};

void *migrate_host_alloc(size_t size, int *pinned)
{
    void *p = NULL;
    *pinned = REAL(cuMemHostAlloc, &p, size, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS;
    return *pinned ? p : malloc(size);
}

void migrate_host_free(void *p, int pinned)
{
    if (!p) return;
    if (pinned) REAL(cuMemFreeHost, p);
    else free(p);
}

static int batch_alloc(struct batch *b)
{
    b->p = migrate_host_alloc((size_t)BATCH * MIGRATE_CHUNK, &b->pinned);
    return b->p ? 0 : -1;
}

static void batch_free(struct batch *b)
{
    migrate_host_free(b->p, b->pinned);
    b->p = NULL;
}

/* The next batch of chunks from (*range, *off) on, read into b: the
 * chunks of one range lie side by side in both places, so each range's
 * part is one copy (one wait behind the legacy stream, not one a chunk).
 * Sets b->k: how many, 0 at the end, -1 with why. */
static void read_batch(struct pipe *p, long *range, uint64_t *off, struct batch *b)
{
    /* a chunk's index: its place among all chunks, from 1 */
    int k = 0;
    while (k < BATCH && *range < p->n) {
        const struct migrate_range *r = &p->v[*range];
        if (*off >= r->size) {
            (*range)++, *off = 0;
            continue;
        }
        int first = k;
        uint64_t from = *off;
        while (k < BATCH && *off < r->size) {
            size_t len = r->size - *off < MIGRATE_CHUNK ? (size_t)(r->size - *off) : MIGRATE_CHUNK;
            b->c[k] = (struct migrate_chunk){.range = *range, .off = *off, .bytes = b->p + (size_t)k * MIGRATE_CHUNK,
                                             .len = len, .index = ++p->chunks};
            k++, *off += len;
        }
        CUresult e = REAL(cuMemcpyDtoH_v2, b->p + (size_t)first * MIGRATE_CHUNK, (CUdeviceptr)(r->addr + from),
                          (size_t)(*off - from));
        if (e != CUDA_SUCCESS) {
            snprintf(p->why, sizeof p->why, "reading device memory at %#llx failed with CUresult %d",
                     (unsigned long long)(r->addr + from), (int)e);
            b->k = -1;
            return;
        }
    }
    b->k = k;
}

/* Hash the batch's chunks, each on its own thread (inline when no thread
 * can be had: then before the sender sees them). */
static void start_hashing(struct batch *b)
{
    for (int i = 0; i < b->k; i++) {
        b->job[i] = (struct hash_job){.p = b->c[i].bytes, .len = b->c[i].len};
        b->started[i] = pthread_create(&b->t[i], NULL, hash_main, &b->job[i]) == 0;
        if (!b->started[i]) hash_main(&b->job[i]);
    }
}

static void finish_hashing(struct batch *b, struct migrate_digest *d)
{
    for (int i = 0; i < b->k; i++) {
        if (b->started[i]) pthread_join(b->t[i], NULL);
        b->started[i] = 0;
        if (d) migrate_digest_chunk(d, b->job[i].sum);
    }
}

/* The reader: batch after batch into the free buffers, in turn, until
 * the end, a failed read, or the sender stops. */
static void *reader_main(void *arg)
{
    struct pipe *p = arg;
    REAL(cuCtxSetCurrent, p->ctx);
    long range = 0;
    uint64_t off = 0;
    for (unsigned i = 0;; i++) {
        struct batch *b = &p->b[i % NBUF];
        pthread_mutex_lock(&p->mu);
        while (b->ready && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        uint64_t t0 = now_ns();
        read_batch(p, &range, &off, b);
        p->read_ns += now_ns() - t0;
        if (b->k > 0) start_hashing(b);
        pthread_mutex_lock(&p->mu);
        b->ready = 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (b->k <= 0) return NULL;
    }
}

struct lane_arg {
    struct pipe *p;
    int id;
};

/* A lane: at each new batch, its chunks to fn, then done. */
static void *lane_main(void *arg)
{
    struct lane_arg *la = arg;
    struct pipe *p = la->p;
    int id = la->id;
    free(la);
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->cv, &p->mu);
        if (p->gen == seen) break;
        seen = p->gen;
        struct batch *b = p->cur;
        pthread_mutex_unlock(&p->mu);
        int rc = 0;
        for (int c = 0; c < b->k && rc == 0; c++)
            if (p->lane_of[c] == id) rc = p->fn(p->arg, id, &b->c[c]);
        pthread_mutex_lock(&p->mu);
        if (rc && !p->lane_rc) p->lane_rc = rc;
        p->pending--;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static int lanes_start(struct pipe *p)
{
    for (int i = 0; i < p->lanes; i++) {
        struct lane_arg *la = malloc(sizeof *la);
        if (la) *la = (struct lane_arg){p, i};
        p->lane_started[i] = la && pthread_create(&p->lane_t[i], NULL, lane_main, la) == 0;
        if (!p->lane_started[i]) {
            free(la);
            return -1;
        }
    }
    return 0;
}

static void lanes_stop(struct pipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->lanes; i++)
        if (p->lane_started[i]) pthread_join(p->lane_t[i], NULL), p->lane_started[i] = 0;
}

/* A batch's chunks that plan let through, to fn: on this thread (one
 * lane), or shared among the lanes in turn, and waited for. */
static int send_batch(struct pipe *p, struct batch *b, migrate_plan_fn plan, unsigned *turn)
{
    int rc = 0, any = 0;
    for (int c = 0; c < b->k; c++) {
        int go = plan ? plan(p->arg, &b->c[c]) : 0;
        if (go != 0 && go != 1) return go;
        p->lane_of[c] = go == 0 ? (signed char)(p->lanes > 1 ? (*turn)++ % (unsigned)p->lanes : 0) : -1;
        any |= go == 0;
        if (go == 0) p->bytes += b->c[c].len;
    }
    if (p->lanes <= 1) {
        for (int c = 0; c < b->k && rc == 0; c++)
            if (p->lane_of[c] == 0) rc = p->fn(p->arg, 0, &b->c[c]);
        return rc;
    }
    if (!any) return 0;
    pthread_mutex_lock(&p->mu);
    p->cur = b;
    p->pending = p->lanes;
    p->gen++;
    pthread_cond_broadcast(&p->cv);
    while (p->pending > 0) pthread_cond_wait(&p->cv, &p->mu);
    rc = p->lane_rc;
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* The sender's side: each batch in turn planned and sent, its sums to d. */
static int hand_batches(struct pipe *p, struct migrate_digest *d, migrate_plan_fn plan)
{
    unsigned turn = 0;
    for (unsigned i = 0;; i++) {
        struct batch *b = &p->b[i % NBUF];
        uint64_t t0 = now_ns();
        pthread_mutex_lock(&p->mu);
        while (!b->ready) pthread_cond_wait(&p->cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
        uint64_t t1 = now_ns();
        p->wait_ns += t1 - t0;
        if (b->k <= 0) return b->k;
        int rc = p->fn ? send_batch(p, b, plan, &turn) : 0;
        finish_hashing(b, d);
        p->hand_ns += now_ns() - t1;
        pthread_mutex_lock(&p->mu);
        b->ready = 0;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (rc != 0) return rc;
    }
}

/* After the sender stopped early: the reader leaves, and the batches it
 * read meanwhile finish hashing (their threads read the buffers). */
static void stop_reader(struct pipe *p, pthread_t t)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(t, NULL);
    for (int i = 0; i < NBUF; i++)
        if (p->b[i].ready && p->b[i].k > 0) finish_hashing(&p->b[i], NULL);
}

int migrate_memory_read(const struct migrate_range *v, long n, struct migrate_digest *d, migrate_plan_fn plan,
                        migrate_chunk_fn fn, void *arg, int lanes, char *why, size_t whylen)
{
    struct pipe *p = calloc(1, sizeof *p);
    int ok = p != NULL;
    for (int i = 0; ok && i < NBUF; i++) ok = batch_alloc(&p->b[i]) == 0;
    pthread_t t;
    if (ok) {
        p->v = v, p->n = n, p->fn = fn, p->arg = arg;
        p->lanes = lanes < 1 ? 1 : lanes > MIGRATE_LANES_MAX ? MIGRATE_LANES_MAX : lanes;
        REAL(cuCtxGetCurrent, &p->ctx);
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        ok = (p->lanes == 1 || lanes_start(p) == 0) && pthread_create(&t, NULL, reader_main, p) == 0;
        if (!ok) {
            lanes_stop(p);
            pthread_mutex_destroy(&p->mu), pthread_cond_destroy(&p->cv);
        }
    }
    if (!ok) {
        for (int i = 0; p && i < NBUF; i++) batch_free(&p->b[i]);
        free(p);
        snprintf(why, whylen, "out of host memory or threads for the copy");
        return -1;
    }
    uint64_t t0 = now_ns();
    int rc = hand_batches(p, d, plan);
    if (rc != 0) stop_reader(p, t);
    else pthread_join(t, NULL);
    if (p->lanes > 1) lanes_stop(p);
    /* Which side held the copy back: the reads (behind the application's
     * work on the legacy stream) or the sending. */
    LOG_INFO("session %d: %.1f MiB of device memory read and handed on in %.1f ms over %d connection%s: reading "
             "%.1f ms, waiting for reads %.1f ms, sending and hashing %.1f ms", (int)getpid(), p->bytes / 1048576.0,
             (now_ns() - t0) / 1e6, p->lanes, p->lanes > 1 ? "s" : "", p->read_ns / 1e6, p->wait_ns / 1e6,
             p->hand_ns / 1e6);
    if (rc < 0) snprintf(why, whylen, "%s", p->why[0] ? p->why : "the copy failed");
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    for (int i = 0; i < NBUF; i++) batch_free(&p->b[i]);
    free(p);
    return rc;
}
