/* migrate_landing.c - see migrate_landing.h. */
#define _GNU_SOURCE
#include "migrate_landing.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "migrate_links.h"
#include "migrate_memread.h"
#include "../common/clock.h"
#include "../common/auth.h"
#include "../common/log.h"
#include "../common/messages.gen.h"

/* A MIG_BYTES frame: the item's fixed fields, an empty name, the chunk. */
#define FRAME_EXTRA 4096
/* Slots, each with a thread: while chunks arrive on the connections, the
 * ones before them are copied, read back and hashed. SHA-256 at about
 * 2 GB/s a core is the slow step: with 8 slots, an H200 host's importer
 * held 4 links to about 3.7 GB/s, its readers waiting for a free slot
 * more than half the time. 16 cost 128 MiB of pinned memory. */
#define NSLOT 16
_Static_assert(NSLOT >= MIGRATE_LINKS_MAX + 2, "a slot for each reader that may hold one, and one more");

struct migrate_landing;

struct slot {
    struct migrate_landing *l;
    uint8_t *in;    /* the frame lands here */
    uint8_t *check; /* the device's bytes are read back here */
    int pinned;
    pthread_t t;
    int started;
    /* the job, under l->mu */
    int taken;      /* a reader holds it (migrate_landing_take) */
    int busy, quit;
    uint64_t addr;
    const uint8_t *src; /* NULL: already on the device, only checked */
    size_t len;
    long index;
};

/* Where a chunk goes: range v[range] at off. */
struct chunk_at {
    long range;
    uint64_t off;
};

struct migrate_landing {
    struct migrate_range *v; /* the session's ranges, in digest order */
    long n;
    long chunks;
    uint8_t (*sums)[AUTH_SHA256_LEN];
    CUcontext ctx;
    struct slot s[NSLOT];
    int nslot;     /* slots made: no more than chunks, so a small copy pins little */
    size_t cap;    /* a slot's frame buffer: the longest chunk and the item around it */
    struct chunk_at *at; /* chunk i: where it goes */
    uint8_t *came;       /* chunk i came (or was kept), under mu */
    long came_n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wait_ns, t0; /* waiting for a free slot, since open: for the log */
    CUresult err; /* the first failure, under mu */
    char why[160];
};

static void fail(struct migrate_landing *l, CUresult r, const char *what, uint64_t addr)
{
    pthread_mutex_lock(&l->mu);
    if (l->err == CUDA_SUCCESS) {
        l->err = r;
        snprintf(l->why, sizeof l->why, "%s %#llx failed with CUresult %d", what, (unsigned long long)addr, (int)r);
    }
    pthread_mutex_unlock(&l->mu);
}

/* One job: the chunk to the device (unless it is there), read back, and
 * its digest at its index. */
static void land(struct slot *s)
{
    struct migrate_landing *l = s->l;
    CUresult r = s->src ? REAL(cuMemcpyHtoD_v2, (CUdeviceptr)s->addr, s->src, s->len) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS) {
        fail(l, r, "copying memory to", s->addr);
    } else if ((r = REAL(cuMemcpyDtoH_v2, s->check, (CUdeviceptr)s->addr, s->len)) != CUDA_SUCCESS) {
        fail(l, r, "reading back the memory at", s->addr);
    } else {
        auth_sha256_digest(s->check, s->len, l->sums[s->index]);
    }
}

static void *slot_main(void *arg)
{
    struct slot *s = arg;
    struct migrate_landing *l = s->l;
    REAL(cuCtxSetCurrent, l->ctx);
    pthread_mutex_lock(&l->mu);
    for (;;) {
        while (!s->busy && !s->quit) pthread_cond_wait(&l->cv, &l->mu);
        if (!s->busy) break;
        pthread_mutex_unlock(&l->mu);
        land(s);
        pthread_mutex_lock(&l->mu);
        s->busy = 0;
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static int slot_open(struct migrate_landing *l, struct slot *s)
{
    s->l = l;
    if (!(s->in = migrate_host_alloc(l->cap + (l->cap - FRAME_EXTRA), &s->pinned))) return -1;
    s->check = s->in + l->cap;
    s->started = pthread_create(&s->t, NULL, slot_main, s) == 0;
    return s->started ? 0 : -1;
}

static void slot_free(struct slot *s)
{
    migrate_host_free(s->in, s->pinned);
    s->in = NULL;
}

/* Wait for every slot's job, then stop their threads. */
static void slots_stop(struct migrate_landing *l)
{
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nslot; i++)
        while (l->s[i].busy) pthread_cond_wait(&l->cv, &l->mu);
    for (int i = 0; i < l->nslot; i++) l->s[i].quit = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nslot; i++)
        if (l->s[i].started) pthread_join(l->s[i].t, NULL), l->s[i].started = 0;
}

static void landing_free(struct migrate_landing *l)
{
    slots_stop(l);
    for (int i = 0; i < l->nslot; i++) slot_free(&l->s[i]);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->sums);
    free(l->at);
    free(l->came);
    free(l->v);
    free(l);
}

struct migrate_landing *migrate_landing_open(char *why, size_t wl)
{
    struct migrate_landing *l = calloc(1, sizeof *l);
    if (!l || (l->n = migrate_memory(&l->v)) < 0) {
        free(l);
        snprintf(why, wl, "out of host memory for the copy");
        return NULL;
    }
    for (long i = 0; i < l->n; i++) l->chunks += (long)((l->v[i].size + MIGRATE_CHUNK - 1) / MIGRATE_CHUNK);
    REAL(cuCtxGetCurrent, &l->ctx);
    l->t0 = now_ns();
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    size_t m = (size_t)(l->chunks ? l->chunks : 1);
    int ok = (l->sums = malloc(m * sizeof *l->sums)) && (l->at = malloc(m * sizeof *l->at)) &&
             (l->came = calloc(m, 1));
    for (long r = 0, i = 0; ok && r < l->n; r++)
        for (uint64_t off = 0; off < l->v[r].size; off += MIGRATE_CHUNK) l->at[i++] = (struct chunk_at){r, off};
    uint64_t longest = 0;
    for (long i = 0; i < l->n; i++) longest = l->v[i].size > longest ? l->v[i].size : longest;
    l->cap = (size_t)(longest < MIGRATE_CHUNK ? longest : MIGRATE_CHUNK) + FRAME_EXTRA;
    /* No more slots than chunks, so a small copy pins little; but always
     * one more than the readers that may each hold one while they wait
     * (the links' and the main connection's), so that one is free for
     * whichever connection's bytes come next. */
    long want = l->chunks > MIGRATE_LINKS_MAX + 2 ? l->chunks : MIGRATE_LINKS_MAX + 2;
    l->nslot = want < NSLOT ? (int)want : NSLOT;
    for (int i = 0; ok && i < l->nslot; i++) ok = slot_open(l, &l->s[i]) == 0;
    if (!ok) {
        landing_free(l);
        snprintf(why, wl, "out of host memory or threads for the copy");
        return NULL;
    }
    return l;
}

int migrate_landing_take(struct migrate_landing *l)
{
    uint64_t t0 = now_ns();
    pthread_mutex_lock(&l->mu);
    int i;
    for (;;) {
        for (i = 0; i < l->nslot && (l->s[i].busy || l->s[i].taken); i++) {
        }
        if (i < l->nslot) break;
        pthread_cond_wait(&l->cv, &l->mu);
    }
    l->s[i].taken = 1;
    l->wait_ns += now_ns() - t0;
    pthread_mutex_unlock(&l->mu);
    return i;
}

uint8_t *migrate_landing_slot_buf(struct migrate_landing *l, int slot, size_t *cap)
{
    *cap = l->cap;
    return l->s[slot].in;
}

void migrate_landing_give(struct migrate_landing *l, int slot)
{
    pthread_mutex_lock(&l->mu);
    l->s[slot].taken = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* The taken slot gets chunk `index` at addr (src NULL: only checked). */
static void post(struct migrate_landing *l, int slot, long index, uint64_t addr, const uint8_t *src, size_t len)
{
    struct slot *s = &l->s[slot];
    if (src && (src < s->in || src + len > s->in + l->cap)) src = memcpy(s->in, src, len);
    s->addr = addr, s->src = src, s->len = len, s->index = index;
    pthread_mutex_lock(&l->mu);
    s->taken = 0;
    s->busy = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static size_t chunk_len(const struct migrate_landing *l, long i)
{
    uint64_t left = l->v[l->at[i].range].size - l->at[i].off;
    return left < MIGRATE_CHUNK ? (size_t)left : MIGRATE_CHUNK;
}

static uint64_t chunk_addr(const struct migrate_landing *l, long i) { return l->v[l->at[i].range].addr + l->at[i].off; }

/* Chunk i (0-based) may come now: it is one of the session's, for addr
 * and len, and has not come before. Marks it come. 0, or -1 with why. */
static int claim(struct migrate_landing *l, long i, uint64_t addr, uint64_t len, char *why, size_t wl)
{
    int ok = i >= 0 && i < l->chunks && addr == chunk_addr(l, i) && len == chunk_len(l, i);
    pthread_mutex_lock(&l->mu);
    int again = ok && l->came[i];
    if (ok && !again) l->came[i] = 1, l->came_n++;
    CUresult err = l->err; /* a chunk before failed: say so now, not after the rest came */
    if (err != CUDA_SUCCESS) snprintf(why, wl, "%s", l->why);
    pthread_mutex_unlock(&l->mu);
    if (err != CUDA_SUCCESS) return -1;
    if (!ok)
        snprintf(why, wl, "%llu bytes for %#llx came as chunk %ld, which is not where the session has it",
                 (unsigned long long)len, (unsigned long long)addr, i);
    else if (again)
        snprintf(why, wl, "chunk %ld (%#llx) came twice", i, (unsigned long long)addr);
    return ok && !again ? 0 : -1;
}

CUresult migrate_landing_bytes(struct migrate_landing *l, int slot, uint64_t index, uint64_t addr, const uint8_t *data,
                               uint64_t len, char *why, size_t wl)
{
    long i = index >= 1 && index <= (uint64_t)l->chunks ? (long)(index - 1) : -1;
    if (claim(l, i, addr, len, why, wl) != 0) {
        migrate_landing_give(l, slot);
        return CUDA_ERROR_INVALID_VALUE;
    }
    post(l, slot, i, addr, data, (size_t)len);
    return CUDA_SUCCESS;
}

int migrate_landing_kept_fits(const struct migrate_landing *l, uint64_t index, uint64_t addr, uint64_t size, char *why,
                              size_t wl)
{
    long first = index >= 1 && index <= (uint64_t)l->chunks ? (long)(index - 1) : -1;
    if (first >= 0 && l->at[first].off == 0 && chunk_addr(l, first) == addr && l->v[l->at[first].range].size == size)
        return 0;
    snprintf(why, wl, "%llu kept bytes for %#llx came as chunk %lld, which is not the start of such a range of the "
                      "session's", (unsigned long long)size, (unsigned long long)addr, (long long)index - 1);
    return -1;
}

CUresult migrate_landing_kept(struct migrate_landing *l, uint64_t index, char *why, size_t wl)
{
    long first = (long)index - 1;
    for (long i = first; i < l->chunks && l->at[i].range == l->at[first].range; i++) {
        if (claim(l, i, chunk_addr(l, i), chunk_len(l, i), why, wl) != 0) return CUDA_ERROR_INVALID_VALUE;
        post(l, migrate_landing_take(l), i, chunk_addr(l, i), NULL, chunk_len(l, i));
    }
    return CUDA_SUCCESS;
}

void migrate_landing_fail(struct migrate_landing *l, const char *why)
{
    pthread_mutex_lock(&l->mu);
    if (l->err == CUDA_SUCCESS) {
        l->err = CUDA_ERROR_INVALID_VALUE;
        snprintf(l->why, sizeof l->why, "%s", why);
    }
    pthread_mutex_unlock(&l->mu);
}

CUresult migrate_landing_error(struct migrate_landing *l, char *why, size_t wl)
{
    pthread_mutex_lock(&l->mu);
    CUresult r = l->err;
    if (r != CUDA_SUCCESS) snprintf(why, wl, "%s", l->why);
    pthread_mutex_unlock(&l->mu);
    return r;
}

CUresult migrate_landing_close(struct migrate_landing *l, struct migrate_digest *d, char *why, size_t wl)
{
    uint64_t t0 = now_ns();
    slots_stop(l);
    /* Whether the slots held the copy back (waiting for one) or the link
     * did (the rest). */
    LOG_INFO("session %d: %ld chunks landed and checked in %.1f ms: waited %.1f ms for a free slot, %.1f ms for "
             "the last ones", (int)getpid(), l->came_n, (now_ns() - l->t0) / 1e6, l->wait_ns / 1e6, (now_ns() - t0) / 1e6);
    CUresult r = l->err;
    if (r != CUDA_SUCCESS) {
        snprintf(why, wl, "%s", l->why);
    } else if (d && l->came_n != l->chunks) {
        long i = 0;
        while (l->came[i]) i++;
        snprintf(why, wl, "the copy ended without %ld of the session's %ld chunks of memory (the first at %#llx)",
                 l->chunks - l->came_n, l->chunks, (unsigned long long)chunk_addr(l, i));
        r = CUDA_ERROR_INVALID_VALUE;
    }
    for (long i = 0; r == CUDA_SUCCESS && d && i < l->chunks; i++) migrate_digest_chunk(d, l->sums[i]);
    landing_free(l);
    return r;
}
