/* staging.c - see staging.h. */
#define _GNU_SOURCE /* clock_gettime, pthread_cond_timedwait */
#include "staging.h"
#include "driver_va.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "dispatch.h"
#include "host_quota.h"
#include "../common/log.h"

#define SESSION_POOL_COUNT 4

struct staging {
    void *data;
    CUevent done; /* recorded after the buffer's copy; lives as long as the pool */
    int pending;  /* `done` was recorded and may not have completed */
    int busy;     /* handed out and not yet released */
    /* Filled in pieces (staging.h): piece i's copy is marked by
     * piece_done[i]; pieces_marked of them are; pieces_ended: no more
     * will be. Guarded by pool_lock; piece_cv tells the one reader. */
    CUevent piece_done[STAGING_PIECES_MAX];
    int pieces_marked, pieces_ended;
    pthread_cond_t piece_cv;
};

struct staging_pool {
    int count;
    size_t size;
    int wait_held;     /* takers also wait for held buffers (staging_pool_take) */
    int pinned_failed; /* the session pool then stops trying */
    int capped;        /* the host memory quota refused a buffer: no more are made */
    struct staging *bufs;
};

/* One lock for every pool: buffers change hands a few hundred times a
 * second at most. `freed` is signalled whenever a buffer is released. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t freed = PTHREAD_COND_INITIALIZER;

/* Set while this thread charges the quota for a new buffer, pool_lock
 * held: the quota's reclaim hook must not take the lock again. */
static _Thread_local int charging_in_pool;

static struct staging session_bufs[SESSION_POOL_COUNT];
static struct staging_pool session_pool = {.count = SESSION_POOL_COUNT, .size = STAGING_SIZE, .bufs = session_bufs};

/* Called with pool_lock held: is b free now? */
static int reclaim_locked(struct staging *b)
{
    if (b->busy) return 0;
    if (b->pending && REAL(cuEventQuery, b->done) == CUDA_ERROR_NOT_READY) return 0;
    b->pending = 0;
    return 1;
}

/* The session pool allocates on first use, pinned or not at all.
 * Returns -1 when this attempt failed. */
static int session_buffer(struct staging *b)
{
    if (b->data || session_pool.pinned_failed || session_pool.capped) return 0;
    /* Charged for the session's life: the pools are never freed. Refused,
     * the pool keeps the buffers it has (copies that find none free go the
     * plain way, received into their frame), and asks no more. */
    charging_in_pool = 1;
    int refused = host_quota_charge(STAGING_SIZE, "a staging buffer") != 0;
    charging_in_pool = 0;
    if (refused) {
        session_pool.capped = 1;
        return 0;
    }
    driver_va_own_begin();
    CUresult pinned = REAL(cuMemHostAlloc, &b->data, STAGING_SIZE, CU_MEMHOSTALLOC_PORTABLE);
    driver_va_own_end();
    if (pinned != CUDA_SUCCESS) {
        LOG_WARN("no pinned staging memory: bulk copies will not overlap the network");
        host_quota_release(STAGING_SIZE);
        session_pool.pinned_failed = 1;
        b->data = NULL;
        return -1;
    }
    return 0;
}

/* Called with pool_lock held: free the session pool's idle buffers. */
static uint64_t trim_locked(void)
{
    uint64_t freed_bytes = 0;
    for (int i = 0; i < session_pool.count; i++) {
        struct staging *b = &session_bufs[i];
        if (!b->data || !reclaim_locked(b)) continue;
        REAL(cuMemFreeHost, b->data);
        b->data = NULL;
        host_quota_release(STAGING_SIZE);
        freed_bytes += STAGING_SIZE;
    }
    if (freed_bytes) session_pool.capped = 0; /* it may grow again when there is room */
    return freed_bytes;
}

/* The host quota's reclaim hook: idle staging buffers give way to memory
 * a call needs. A caller inside the pool (its lock held) reclaims nothing.
 * Any other caller waits for the lock: a try-lock failed whenever the
 * session's reader happened to be taking a buffer, and the call that
 * needed the memory failed with it (the lock is never held across a
 * wait for the GPU or the network). */
static uint64_t staging_trim_idle(void)
{
    if (charging_in_pool) return 0;
    pthread_mutex_lock(&pool_lock);
    uint64_t n = trim_locked();
    pthread_mutex_unlock(&pool_lock);
    return n;
}

void staging_init(void) { host_quota_set_reclaim(staging_trim_idle); }

void staging_forget_all(void)
{
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < session_pool.count; i++) {
        if (session_bufs[i].data) host_quota_release(STAGING_SIZE);
        session_bufs[i] = (struct staging){0};
    }
    session_pool.capped = session_pool.pinned_failed = 0;
    pthread_mutex_unlock(&pool_lock);
}

static struct staging *take_locked(struct staging_pool *p)
{
    for (int i = 0; i < p->count; i++) {
        struct staging *b = &p->bufs[i];
        if (p == &session_pool && session_buffer(b) != 0) return NULL;
        if (b->data && reclaim_locked(b)) {
            b->busy = 1;
            return b;
        }
    }
    return NULL;
}

/* The event of a buffer of p whose copy may still run; NULL if none. */
static CUevent copying_locked(struct staging_pool *p)
{
    if (p->pinned_failed && p == &session_pool) return NULL;
    for (int i = 0; i < p->count; i++)
        if (p->bufs[i].data && !p->bufs[i].busy && p->bufs[i].pending) return p->bufs[i].done;
    return NULL;
}

/* held_ms: how long to wait for a buffer another call holds (-1: as long
 * as it takes; the pool's wait_held says which). */
static struct staging *take(struct staging_pool *p, int held_ms)
{
    struct staging *b;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += held_ms / 1000;
    until.tv_nsec += (long)(held_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&pool_lock);
    while ((b = take_locked(p)) == NULL) {
        CUevent wait_on = copying_locked(p);
        if (wait_on) {
            /* All in flight: wait for one copy to finish, then look again. */
            pthread_mutex_unlock(&pool_lock);
            REAL(cuEventSynchronize, wait_on);
            pthread_mutex_lock(&pool_lock);
        } else if (p->wait_held) {
            pthread_cond_wait(&freed, &pool_lock);
        } else if (held_ms <= 0 || pthread_cond_timedwait(&freed, &pool_lock, &until) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return b;
}

struct staging *staging_acquire(void) { return take(&session_pool, 0); }

struct staging *staging_acquire_within(int held_ms) { return take(&session_pool, held_ms); }

struct staging_pool *staging_pool_new(int count, size_t size)
{
    struct staging_pool *p = calloc(1, sizeof *p);
    struct staging *bufs = calloc((size_t)count, sizeof *bufs);
    if (!p || !bufs) {
        free(p);
        free(bufs);
        return NULL;
    }
    *p = (struct staging_pool){.count = count, .size = size, .wait_held = 1, .bufs = bufs};
    for (int i = 0; i < count; i++) pthread_cond_init(&bufs[i].piece_cv, NULL);
    return p;
}

int staging_pool_fill(struct staging_pool *p)
{
    for (int i = 0; i < p->count; i++) {
        struct staging *b = &p->bufs[i];
        if (b->data) continue;
        if (host_quota_charge(p->size, "a striping buffer") != 0) return -1;
        driver_va_own_begin();
        CUresult pinned = p->pinned_failed ? CUDA_ERROR_OUT_OF_MEMORY
                                           : REAL(cuMemHostAlloc, &b->data, p->size, CU_MEMHOSTALLOC_PORTABLE);
        driver_va_own_end();
        if (!p->pinned_failed && pinned != CUDA_SUCCESS) {
            LOG_WARN("no pinned memory for striped copies: they go through ordinary memory, slower");
            p->pinned_failed = 1;
            b->data = NULL;
        }
        if (!b->data && !(b->data = malloc(p->size))) {
            host_quota_release(p->size);
            return -1;
        }
    }
    return 0;
}

struct staging *staging_pool_take(struct staging_pool *p) { return take(p, -1); }

void *staging_data(struct staging *b) { return b->data; }

/* Record *e on stream; the event is made at its first use, and again when
 * the stream is of another context than the event. */
static CUresult record_event(CUevent *e, CUstream stream)
{
    CUresult r = *e ? REAL(cuEventRecord, *e, stream) : CUDA_ERROR_INVALID_HANDLE;
    if (r != CUDA_SUCCESS) {
        if (*e) REAL(cuEventDestroy_v2, *e);
        *e = NULL;
        r = REAL(cuEventCreate, e, CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS) r = REAL(cuEventRecord, *e, stream);
    }
    return r;
}

CUresult staging_record(struct staging *b, CUstream stream)
{
    CUresult r = record_event(&b->done, stream);
    if (r != CUDA_SUCCESS) REAL(cuStreamSynchronize, stream); /* cannot tell when it ends: wait */
    pthread_mutex_lock(&pool_lock);
    b->pending = r == CUDA_SUCCESS;
    pthread_mutex_unlock(&pool_lock);
    return r;
}

void staging_release(struct staging *b)
{
    pthread_mutex_lock(&pool_lock);
    b->busy = 0;
    pthread_cond_broadcast(&freed);
    pthread_mutex_unlock(&pool_lock);
}

CUresult staging_release_after(struct staging *b, CUstream stream)
{
    CUresult r = staging_record(b, stream);
    staging_release(b);
    return r;
}

CUresult staging_wait(struct staging *b)
{
    /* The event outlives every use of the buffer; one re-recorded for a
     * later copy only makes the wait longer, never wrong. */
    pthread_mutex_lock(&pool_lock);
    int pending = b->pending;
    CUevent e = b->done;
    pthread_mutex_unlock(&pool_lock);
    return pending ? REAL(cuEventSynchronize, e) : CUDA_SUCCESS;
}

struct staging *staging_pool_try_take(struct staging_pool *p)
{
    pthread_mutex_lock(&pool_lock);
    struct staging *b = take_locked(p);
    pthread_mutex_unlock(&pool_lock);
    return b;
}

void staging_pieces_begin(struct staging *b)
{
    pthread_mutex_lock(&pool_lock);
    b->pieces_marked = b->pieces_ended = 0;
    pthread_mutex_unlock(&pool_lock);
}

CUresult staging_piece_record(struct staging *b, CUstream stream)
{
    /* Only the filler writes the events, and a reader reads event i only
     * after pieces_marked says so, under the lock. */
    int i = b->pieces_marked;
    if (i >= STAGING_PIECES_MAX) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = record_event(&b->piece_done[i], stream);
    if (r != CUDA_SUCCESS) return r;
    pthread_mutex_lock(&pool_lock);
    b->pieces_marked = i + 1;
    pthread_cond_signal(&b->piece_cv);
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

void staging_pieces_end(struct staging *b, CUstream stream)
{
    /* `done` covers every piece queued, so the buffer is reused only after
     * them all, whoever gives it back and when. */
    staging_record(b, stream);
    pthread_mutex_lock(&pool_lock);
    b->pieces_ended = 1;
    pthread_cond_signal(&b->piece_cv);
    pthread_mutex_unlock(&pool_lock);
}

CUresult staging_piece_wait(struct staging *b, int i)
{
    pthread_mutex_lock(&pool_lock);
    while (b->pieces_marked <= i && !b->pieces_ended) pthread_cond_wait(&b->piece_cv, &pool_lock);
    int marked = b->pieces_marked > i;
    CUevent e = marked ? b->piece_done[i] : NULL;
    pthread_mutex_unlock(&pool_lock);
    return marked ? REAL(cuEventSynchronize, e) : CUDA_ERROR_UNKNOWN;
}
