/* host_quota.c - see host_quota.h. Charges are one atomic add: they sit on
 * the paths of copies and queued calls, and may come from driver threads
 * (graph host work). */
#include "host_quota.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "../common/log.h"

static uint64_t limit;
static _Atomic uint64_t used;

void host_quota_init(uint64_t bytes) { limit = bytes; }

static uint64_t (*reclaim)(void);

void host_quota_set_reclaim(uint64_t (*fn)(void)) { reclaim = fn; }

static int try_charge(uint64_t bytes, uint64_t *before)
{
    *before = atomic_fetch_add(&used, bytes);
    if (limit == 0 || (*before + bytes >= *before && *before + bytes <= limit)) return 0;
    atomic_fetch_sub(&used, bytes);
    return -1;
}

int host_quota_charge(uint64_t bytes, const char *what)
{
    uint64_t before;
    if (try_charge(bytes, &before) == 0) return 0;
    /* Memory kept only to be fast (idle staging buffers) gives way to
     * memory a call needs. */
    if (reclaim && reclaim() > 0 && try_charge(bytes, &before) == 0) return 0;
    LOG_WARN("session host memory quota: refused %llu bytes for %s (%llu of %llu in use); the call fails with "
             "CUDA_ERROR_OUT_OF_MEMORY. Raise the server's --host-mem-quota if this client needs more",
             (unsigned long long)bytes, what, (unsigned long long)before, (unsigned long long)limit);
    return -1;
}

void host_quota_release(uint64_t bytes) { atomic_fetch_sub(&used, bytes); }

uint64_t host_quota_used(void) { return atomic_load(&used); }

/* The charged size travels in front of the block, so a free needs no
 * table. 16 bytes keep the block as aligned as malloc's. */
#define HEAD 16

void *host_quota_alloc(size_t n, const char *what)
{
    if (n > SIZE_MAX - HEAD || host_quota_charge(n, what) != 0) return NULL;
    unsigned char *p = malloc(HEAD + n);
    if (!p) {
        host_quota_release(n);
        return NULL;
    }
    *(size_t *)p = n;
    return p + HEAD;
}

void host_quota_free(void *p)
{
    if (!p) return;
    unsigned char *b = (unsigned char *)p - HEAD;
    host_quota_release(*(size_t *)b);
    free(b);
}
