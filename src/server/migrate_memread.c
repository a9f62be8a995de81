/* migrate_memread.c - see migrate_memread.h. */
#define _GNU_SOURCE
#include "migrate_memread.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "../common/auth.h"
#include "../common/messages.gen.h"

/* Chunks per batch: 32 MiB of pinned memory, and as many hashing threads
 * (SHA-256 runs at about 2 GB/s a core; the link and the bus are faster). */
#define BATCH 8

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

/* The host buffer a batch is read into: pinned when the driver gives it
 * (portable: any context may copy into it), else plain memory. */
struct batch_buf {
    uint8_t *p;
    int pinned;
};

static int buf_get(struct batch_buf *b)
{
    void *p = NULL;
    b->pinned = REAL(cuMemHostAlloc, &p, (size_t)BATCH * MIGRATE_CHUNK, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS;
    b->p = b->pinned ? p : malloc((size_t)BATCH * MIGRATE_CHUNK);
    return b->p ? 0 : -1;
}

static void buf_put(struct batch_buf *b)
{
    if (b->pinned) REAL(cuMemFreeHost, b->p);
    else free(b->p);
}

/* The next batch of chunks from (*range, *off) on, read into buf. Returns
 * how many, 0 at the end, -1 with why. */
static int read_batch(const struct migrate_range *v, long n, long *range, uint64_t *off, uint8_t *buf,
                      struct migrate_chunk *c, char *why, size_t whylen)
{
    int k = 0;
    while (k < BATCH && *range < n) {
        const struct migrate_range *r = &v[*range];
        if (*off >= r->size) {
            (*range)++, *off = 0;
            continue;
        }
        size_t len = r->size - *off < MIGRATE_CHUNK ? (size_t)(r->size - *off) : MIGRATE_CHUNK;
        uint8_t *dst = buf + (size_t)k * MIGRATE_CHUNK;
        CUresult e = REAL(cuMemcpyDtoH_v2, dst, (CUdeviceptr)(r->addr + *off), len);
        if (e != CUDA_SUCCESS) {
            snprintf(why, whylen, "reading device memory at %#llx failed with CUresult %d",
                     (unsigned long long)(r->addr + *off), (int)e);
            return -1;
        }
        c[k++] = (struct migrate_chunk){.range = *range, .off = *off, .bytes = dst, .len = len};
        *off += len;
    }
    return k;
}

/* Hash chunks c[0..k) on their own threads (inline when no thread can be
 * had) while fn sees them; then feed the sums to d in order. */
static int digest_and_hand(const struct migrate_chunk *c, int k, struct migrate_digest *d, migrate_chunk_fn fn,
                           void *arg)
{
    struct hash_job job[BATCH];
    pthread_t t[BATCH];
    int started[BATCH];
    for (int i = 0; i < k; i++) {
        job[i] = (struct hash_job){.p = c[i].bytes, .len = c[i].len};
        started[i] = pthread_create(&t[i], NULL, hash_main, &job[i]) == 0;
    }
    int rc = 0;
    for (int i = 0; i < k && rc == 0 && fn; i++) rc = fn(arg, &c[i]);
    for (int i = 0; i < k; i++) {
        if (started[i]) pthread_join(t[i], NULL);
        else hash_main(&job[i]);
        migrate_digest_chunk(d, job[i].sum);
    }
    return rc;
}

int migrate_memory_read(const struct migrate_range *v, long n, struct migrate_digest *d, migrate_chunk_fn fn,
                        void *arg, char *why, size_t whylen)
{
    struct batch_buf buf;
    if (buf_get(&buf) != 0) {
        snprintf(why, whylen, "out of host memory for the copy");
        return -1;
    }
    struct migrate_chunk c[BATCH];
    long range = 0;
    uint64_t off = 0;
    int k, rc = 0;
    while (rc == 0 && (k = read_batch(v, n, &range, &off, buf.p, c, why, whylen)) != 0) {
        if (k < 0) rc = -1;
        else rc = digest_and_hand(c, k, d, fn, arg);
    }
    buf_put(&buf);
    return rc;
}
