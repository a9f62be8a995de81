/* staging.c - see staging.h. */
#include "staging.h"

#include <pthread.h>

#include "dispatch.h"
#include "../common/log.h"

#define STAGING_COUNT 4

struct staging {
    void *data;
    CUevent done; /* recorded after the buffer's copy; lives as long as the pool */
    int pending;  /* `done` was recorded and may not have completed */
    int busy;     /* handed out and not yet released */
};

static struct staging pool[STAGING_COUNT];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static int pinned_failed;

/* Called with pool_lock held: is b free now? */
static int reclaim_locked(struct staging *b)
{
    if (b->busy) return 0;
    if (b->pending && REAL(cuEventQuery, b->done) == CUDA_ERROR_NOT_READY) return 0;
    b->pending = 0;
    return 1;
}

static struct staging *take_locked(void)
{
    for (int i = 0; i < STAGING_COUNT; i++) {
        struct staging *b = &pool[i];
        if (!b->data && !pinned_failed) {
            if (REAL(cuMemHostAlloc, &b->data, STAGING_SIZE, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS) {
                LOG_WARN("no pinned staging memory: bulk copies will not overlap the network");
                pinned_failed = 1;
                b->data = NULL;
                return NULL;
            }
        }
        if (b->data && reclaim_locked(b)) {
            b->busy = 1;
            return b;
        }
    }
    return NULL;
}

struct staging *staging_acquire(void)
{
    for (;;) {
        pthread_mutex_lock(&pool_lock);
        struct staging *b = take_locked();
        CUevent wait_on = NULL;
        if (!b && !pinned_failed) {
            /* All in flight: wait for the first to finish, then retry. */
            for (int i = 0; i < STAGING_COUNT && !wait_on; i++)
                if (!pool[i].busy && pool[i].pending) wait_on = pool[i].done;
        }
        pthread_mutex_unlock(&pool_lock);
        if (b || !wait_on) return b;
        REAL(cuEventSynchronize, wait_on);
    }
}

void *staging_data(struct staging *b) { return b->data; }

CUresult staging_record(struct staging *b, CUstream stream)
{
    CUresult r = b->done ? REAL(cuEventRecord, b->done, stream) : CUDA_ERROR_INVALID_HANDLE;
    if (r != CUDA_SUCCESS) {
        /* First use, or the stream is of another context than the event:
         * an event of the current context. */
        if (b->done) REAL(cuEventDestroy_v2, b->done);
        b->done = NULL;
        r = REAL(cuEventCreate, &b->done, CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS) r = REAL(cuEventRecord, b->done, stream);
    }
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
