/* alloc_ahead.c - cuMemAlloc over a slow link: spares of a size asked before
 * (docs/architecture.md, 3.8.5).
 *
 * PyTorch's caching allocator asks the driver for every new segment, and
 * its segments come in few sizes (2 MiB for small blocks, 20 MiB, then
 * multiples of 2 MiB): a small transformer's first training step over a
 * 20 ms link waited for 19 allocations. So over a link whose round trip
 * is at least AHEAD_RTT_MIN_US (ahead_mode), an
 * allocation the client cannot answer asks for more of its size in the
 * same round trip (scuda_mem_alloc_ahead): 2 the first time a context asks
 * for that size, ALLOC_AHEAD_MAX after that. The extra ones are spares,
 * and the next allocations of that size in that context take one at once.
 *
 * A spare is a real allocation, made by the session exactly as cuMemAlloc
 * makes it, so a move or a failover carries it as any other. What the
 * program can see of them is kept as without them:
 *   - cuMemGetInfo counts the spares of the device as free;
 *   - a cuMemAlloc that fails for want of memory, of any size, gives every
 *     spare back and is asked again, so spares never cost the program a
 *     cuMemAlloc (other allocating calls do not retry: the bound below is
 *     what they may lose);
 *   - they are bounded: sizes up to AHEAD_SIZE_MAX, AHEAD_SPARE_MAX bytes
 *     in all.
 * A context that goes away takes its spares with it (the session freed
 * them with the context). SCUDA_ALLOC_AHEAD=1 turns this on whatever the
 * link, =0 off. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_ahead.h"
#include "capture.h"
#include "context.h"
#include "hooks.h"
#include "rpc.h"
#include "failover.h"
#include "servers.h"
#include "stats.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"

#define AHEAD_RTT_MIN_US 2000u
#define AHEAD_SIZE_MAX (64u << 20)
#define AHEAD_SPARE_MAX (256u << 20)
#define AHEAD_SPARES 64 /* at most this many spares at once */
#define AHEAD_SIZES 64  /* sizes remembered (per context) as asked before */

struct spare {
    CUcontext ctx;
    CUdevice dev;
    size_t size;
    CUdeviceptr ptr;
};

struct asked_size {
    CUcontext ctx;
    size_t size;
};

static struct {
    pthread_mutex_t lock;
    struct spare spare[AHEAD_SPARES];
    int nspare;
    _Atomic int any; /* nspare > 0, read without the lock */
    uint64_t spare_bytes;
    struct asked_size asked[AHEAD_SIZES];
    unsigned nasked; /* a ring: the oldest is forgotten */
} ahead = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Whether a link is slow, per server: the first heartbeat's round trip
 * (conn.c) can only be longer than the link's (the session may still be
 * starting), so a short one settles it; a long one is confirmed by the
 * shortest of AHEAD_SAMPLES allocations' own round trips, made plain
 * meanwhile. So a loaded machine's loopback does not pass for slow, and
 * nothing about a run's addresses depends on a moment's timing there. */
#define AHEAD_SAMPLES 3
enum { AHEAD_OFF, AHEAD_ON, AHEAD_SAMPLING };
static _Atomic uint64_t sample_min_us[SCUDA_MAX_SERVERS];
static _Atomic unsigned samples[SCUDA_MAX_SERVERS];

/* SCUDA_ALLOC_AHEAD: 1 on, 0 off, unset: when the link is slow. */
static int ahead_mode(const struct server *srv)
{
    static _Atomic int mode = -2;
    int m = atomic_load(&mode);
    if (m == -2) {
        const char *v = getenv("SCUDA_ALLOC_AHEAD");
        m = !v || !*v ? -1 : strcmp(v, "0") != 0;
        atomic_store(&mode, m);
    }
    /* With a standby, every snapshot would copy the spares too. */
    if (failover_standby()) return AHEAD_OFF;
    if (m >= 0) return m ? AHEAD_ON : AHEAD_OFF;
    if (atomic_load(&srv->c.greet_rtt_us) < AHEAD_RTT_MIN_US) return AHEAD_OFF;
    if (atomic_load(&samples[srv->index]) < AHEAD_SAMPLES) return AHEAD_SAMPLING;
    return atomic_load(&sample_min_us[srv->index]) >= AHEAD_RTT_MIN_US ? AHEAD_ON : AHEAD_OFF;
}

static void note_sample(const struct server *srv, uint64_t us)
{
    _Atomic uint64_t *min = &sample_min_us[srv->index];
    uint64_t was = atomic_load(min);
    if (us == 0) us = 1; /* 0 means no sample yet */
    while ((was == 0 || us < was) && !atomic_compare_exchange_weak(min, &was, us)) {
    }
    atomic_fetch_add(&samples[srv->index], 1);
}

/* Under ahead.lock: a spare of this size in ctx, taken out. */
static int take_spare(CUcontext ctx, size_t size, CUdeviceptr *out)
{
    for (int i = 0; i < ahead.nspare; i++) {
        if (ahead.spare[i].ctx != ctx || ahead.spare[i].size != size) continue;
        *out = ahead.spare[i].ptr;
        ahead.spare_bytes -= size;
        ahead.spare[i] = ahead.spare[--ahead.nspare];
        atomic_store(&ahead.any, ahead.nspare > 0);
        return 1;
    }
    return 0;
}

/* Under ahead.lock: whether ctx asked for this size before (and note
 * that it has now). */
static int asked_before(CUcontext ctx, size_t size)
{
    unsigned n = ahead.nasked < AHEAD_SIZES ? ahead.nasked : AHEAD_SIZES;
    for (unsigned i = 0; i < n; i++)
        if (ahead.asked[i].ctx == ctx && ahead.asked[i].size == size) return 1;
    ahead.asked[ahead.nasked++ % AHEAD_SIZES] = (struct asked_size){ctx, size};
    return 0;
}

/* Under ahead.lock: how many allocations to ask for, the program's one
 * included: as many as the bounds leave room for. */
static uint32_t how_many(CUcontext ctx, size_t size)
{
    uint32_t want = asked_before(ctx, size) ? ALLOC_AHEAD_MAX : 2;
    uint64_t room = (AHEAD_SPARE_MAX - ahead.spare_bytes) / size;
    uint32_t slots = (uint32_t)(AHEAD_SPARES - ahead.nspare);
    uint32_t extra = want - 1;
    if (extra > room) extra = (uint32_t)room;
    if (extra > slots) extra = slots;
    return 1 + extra;
}

/* scuda_mem_alloc_ahead: up to count allocations of size; *got of them in
 * ptrs (at least 1 on success). */
static CUresult ask_ahead(size_t size, uint32_t count, CUdeviceptr *ptrs, uint32_t *got)
{
    rpc_call c;
    struct msg_scuda_mem_alloc_ahead_req m = {.bytesize = size, .count = count};
    struct msg_scuda_mem_alloc_ahead_rep rep;
    rpc_begin(&c, OP_scuda_mem_alloc_ahead);
    msg_scuda_mem_alloc_ahead_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    *got = 0;
    if (r == CUDA_SUCCESS) {
        if (msg_scuda_mem_alloc_ahead_rep_get(&c.out, &c.arena, &rep) != 0 || rep.ptrs_count == 0 ||
            rep.ptrs_count > count) {
            LOG_ERROR("scuda_mem_alloc_ahead: malformed reply from the server");
            r = CUDA_ERROR_UNKNOWN;
        } else {
            for (uint32_t i = 0; i < rep.ptrs_count; i++) ptrs[i] = (CUdeviceptr)rep.ptrs[i];
            *got = rep.ptrs_count;
        }
    }
    rpc_end(&c);
    return r;
}

/* Every spare back to the session (an allocation ran out of memory).
 * Returns how many were given back. */
static int give_back_all(void)
{
    struct spare mine[AHEAD_SPARES];
    pthread_mutex_lock(&ahead.lock);
    int n = ahead.nspare;
    memcpy(mine, ahead.spare, (size_t)n * sizeof *mine);
    ahead.nspare = 0;
    ahead.spare_bytes = 0;
    atomic_store(&ahead.any, 0);
    pthread_mutex_unlock(&ahead.lock);
    for (int i = 0; i < n; i++) {
        CUcontext was = NULL;
        context_current(&was, NULL);
        if (mine[i].ctx != was) cuCtxSetCurrent(mine[i].ctx);
        CUresult r = cuMemFree_v2(mine[i].ptr);
        if (mine[i].ctx != was) cuCtxSetCurrent(was);
        if (r != CUDA_SUCCESS) LOG_WARN("giving a spare allocation back failed (%d)", (int)r);
    }
    return n;
}

int hook_guard_cuMemAlloc_v2(CUresult *r, CUdeviceptr *dptr, size_t bytesize)
{
    CUcontext ctx = NULL;
    CUdevice dev = 0;
    /* During a capture the driver may refuse an allocation: it decides. */
    if (!dptr || bytesize == 0 || capture_any()) return 0;
    struct server *srv = server_current();
    int mode = ahead_mode(srv), wanted = mode == AHEAD_ON && bytesize <= AHEAD_SIZE_MAX;
    if (mode == AHEAD_OFF && !atomic_load(&ahead.any)) return 0; /* the plain call, and its own error */
    if (!context_current(&ctx, &dev) || !ctx) return 0;
    pthread_mutex_lock(&ahead.lock);
    int hit = wanted && take_spare(ctx, bytesize, dptr);
    uint32_t count = hit ? 0 : wanted ? how_many(ctx, bytesize) : 1;
    pthread_mutex_unlock(&ahead.lock);
    if (hit) {
        stats_add(STATS_ALLOC_SPARES);
        *r = CUDA_SUCCESS;
        return 1;
    }
    CUdeviceptr got_ptrs[ALLOC_AHEAD_MAX];
    uint32_t got;
    uint64_t t0 = now_ns();
    *r = ask_ahead(bytesize, count, got_ptrs, &got);
    if (mode == AHEAD_SAMPLING && *r == CUDA_SUCCESS) note_sample(srv, (now_ns() - t0) / 1000u);
    /* Spares never cost the program an allocation. */
    if (*r == CUDA_ERROR_OUT_OF_MEMORY && give_back_all() > 0) *r = ask_ahead(bytesize, 1, got_ptrs, &got);
    if (*r != CUDA_SUCCESS) return 1;
    *dptr = got_ptrs[0];
    pthread_mutex_lock(&ahead.lock);
    for (uint32_t i = 1; i < got; i++) {
        ahead.spare[ahead.nspare++] = (struct spare){ctx, dev, bytesize, got_ptrs[i]};
        ahead.spare_bytes += bytesize;
    }
    atomic_store(&ahead.any, ahead.nspare > 0);
    pthread_mutex_unlock(&ahead.lock);
    return 1;
}

CUresult hook_cuMemGetInfo_v2(CUresult r, size_t *free, size_t *total)
{
    CUdevice dev;
    if (r != CUDA_SUCCESS || !free || !atomic_load(&ahead.any) || !context_current(NULL, &dev)) return r;
    uint64_t spare = 0;
    pthread_mutex_lock(&ahead.lock);
    for (int i = 0; i < ahead.nspare; i++)
        if (ahead.spare[i].dev == dev) spare += ahead.spare[i].size;
    pthread_mutex_unlock(&ahead.lock);
    *free += spare;
    if (total && *free > *total) *free = *total;
    return r;
}

void alloc_ahead_context_gone(CUcontext ctx)
{
    pthread_mutex_lock(&ahead.lock);
    for (int i = 0; i < ahead.nspare;) {
        if (ahead.spare[i].ctx != ctx) {
            i++;
            continue;
        }
        ahead.spare_bytes -= ahead.spare[i].size;
        ahead.spare[i] = ahead.spare[--ahead.nspare];
    }
    atomic_store(&ahead.any, ahead.nspare > 0);
    for (unsigned i = 0; i < AHEAD_SIZES; i++)
        if (ahead.asked[i].ctx == ctx) ahead.asked[i] = (struct asked_size){0};
    pthread_mutex_unlock(&ahead.lock);
}
