/* coherence.c - see coherence.h.
 *
 * Page states change under one lock. The application's view changes
 * protection; this library only ever reads and writes the alias mapping,
 * so it never faults on its own accesses, and a fill is never visible
 * half-done through a writable view. A SIGSEGV in a region is handled in
 * the faulting thread (fetch, or mark dirty) and the access is retried;
 * any other SIGSEGV goes to the handler that was there before.
 *
 * The lock is held while bytes move, and moving bytes is calling the
 * server, which calls coherence_before_send (and, after a synchronizing
 * call, may call coherence_synced). So the lock is taken only through
 * work_begin(), which marks the thread busy, and the entries that a call
 * or a fault can reach (coherence_before_send, coherence_synced, on_segv)
 * do nothing on a busy thread. No thread takes the lock twice, whichever
 * locked path sends. The push a busy thread skips is not needed by what
 * it sends: it fetches only INVALID pages (never dirty) or pushes bytes
 * itself; the remaining dirty pages go before the next call made outside
 * this file.
 *
 * Why a fault may talk to the server from a signal handler: it only
 * happens on an application access to a region, never inside this
 * library's locked sections (they use the alias), so the thread holds none
 * of the connection's locks when it fetches. */
#define _GNU_SOURCE
#include "coherence.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "copy.h"
#include "rpc.h"
#include "../common/log.h"

/* ZERO is CLEAN for memory the program never initialized: both copies
 * are "uninitialized" and the host's reads zeros. A write to it pushes the
 * whole page (within its allocations), so the device gets the host's zeros
 * too. A write to a CLEAN page first copies it (its twin): a push then
 * sends only the bytes between the first and the last that changed, per
 * allocation, so a page shared by two allocations never carries one's
 * stale bytes over the other's newer ones on the device. */
enum { PAGE_INVALID = 0, PAGE_CLEAN = 1, PAGE_DIRTY = 2, PAGE_ZERO = 3 };

/* Sequential faults double the fetch, up to this many pages (2 MiB). */
#define READAHEAD_MAX_PAGES 512
/* One fetch or push moves at most this much (one frame's worth). */
#define MOVE_MAX_BYTES (32u << 20)
/* Managed memory is mirrored in blocks of this size: the driver carves
 * small managed allocations out of shared 2 MiB blocks, so an allocation
 * need not start on a page of its own. */
#define MANAGED_BLOCK (2u << 20)

/* Device bytes [lo, hi) of the allocation starting at `base` (which may
 * begin in an earlier region): copies touch only these. Attachment to a
 * stream is the allocation's, so it lives here, with the count of one-way
 * calls at which the allocation's host copy was last made stale. */
struct extent {
    uint64_t lo, hi, base;
    uint64_t attached; /* stream key when attached to one stream, else 0 */
    int host_only;     /* attached to the host (CU_MEM_ATTACH_HOST): no kernel uses it */
    uint64_t seen;
};

struct region {
    char *view, *alias;
    size_t size, npages;    /* whole pages */
    struct extent *ext;     /* live allocations in the region */
    size_t nextents, ext_cap;
    int managed;            /* blocks of managed memory (view == dev) */
    uint64_t dev;
    CUcontext ctx;
    uint8_t *state;
    uint8_t **twin;         /* per page: its bytes when it became dirty (NULL: push it whole) */
    size_t ndirty;
    int fresh;              /* mapped by the call now adding an allocation */
    int owns_mapping;
    size_t readahead;       /* pages to fetch at the next sequential fault */
    size_t next_sequential; /* the page a sequential fault would hit */
    size_t prefetch_lo, prefetch_hi; /* pages to fetch at the next sync */
    struct region *next_region;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static _Atomic int nregions;
static _Atomic size_t dirty_total;
/* Non-zero while a push is under way: its pages are already clean, but a
 * call from another thread must still wait for its bytes to go first. */
static _Atomic int pushing;
static __thread int busy; /* this thread holds the lock (work_begin) */
/* One-way calls sent (rpc_async_count) when the latest kernel was sent,
 * and when the latest synchronizing call returned: a kernel may still run
 * while the first is larger (coherence_kernel_sent). The last value
 * reported keeps the log to one line per kernel. */
static _Atomic uint64_t kernel_mark, sync_mark, race_reported;
static size_t page_size;
static struct sigaction previous_segv;

static void work_begin(void)
{
    busy = 1;
    pthread_mutex_lock(&lock);
}

static void work_end(void)
{
    pthread_mutex_unlock(&lock);
    busy = 0;
}

/* ---- mappings ----------------------------------------------------------- */

static void read_page_size(void) { page_size = (size_t)sysconf(_SC_PAGESIZE); }

static size_t page_round(size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_page_size);
    return (n + page_size - 1) & ~(page_size - 1);
}

/* Where pinned host memory goes when no address is asked for: a window of
 * the address space that neither the client's nor the session's own
 * mappings reach (mmap hands out addresses top-down from near 0x7f..., the
 * heap sits near 0x55...). The session maps a mirror of such memory at
 * the same address (unified addressing: the host pointer is the device
 * pointer), which fails when something of the session's already lives
 * there; inside this window it practically never does. The start is
 * random, so two clients of one session rarely pick the same pages. */
#define PINNED_WINDOW_BASE 0x600000000000ull
#define PINNED_WINDOW_SIZE 0x080000000000ull /* 8 TiB */

/* ThreadSanitizer keeps that range for itself (its shadow memory) and
 * kills a process that maps there; its builds take what mmap gives. */
#if defined(__SANITIZE_THREAD__)
#define PINNED_WINDOW 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PINNED_WINDOW 0
#endif
#endif
#ifndef PINNED_WINDOW
#define PINNED_WINDOW 1
#endif

static _Atomic uint64_t pinned_next;

static void *map_in_window(size_t len, int fd)
{
    if (!PINNED_WINDOW) return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    uint64_t expected = 0;
    if (atomic_load(&pinned_next) == 0) {
        uint64_t start = PINNED_WINDOW_BASE + (((uint64_t)getpid() * 0x9e3779b97f4a7c15ull) % (PINNED_WINDOW_SIZE / 2));
        start &= ~(uint64_t)(page_size - 1);
        atomic_compare_exchange_strong(&pinned_next, &expected, start);
    }
    for (int tries = 0; tries < 8; tries++) {
        uint64_t at = atomic_fetch_add(&pinned_next, (uint64_t)len + page_size); /* a guard page between */
        if (at + len > PINNED_WINDOW_BASE + PINNED_WINDOW_SIZE) break;
        void *v = mmap((void *)(uintptr_t)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
        if (v != MAP_FAILED && (uintptr_t)v == at) return v;
        if (v != MAP_FAILED) munmap(v, len);
    }
    return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

int coherence_map(uintptr_t at, size_t size, char **view, char **alias)
{
    size_t len = page_round(size ? size : 1);
    int fd = memfd_create("scuda-mirror", MFD_CLOEXEC);
    if (fd < 0) return errno;
    int err = 0;
    if (ftruncate(fd, (off_t)len) != 0) err = errno;
    void *v = MAP_FAILED, *a = MAP_FAILED;
    if (!err) {
        v = at ? mmap((void *)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0)
               : map_in_window(len, fd);
        if (v == MAP_FAILED) err = errno;
        else if (at && (uintptr_t)v != at) err = EEXIST; /* old kernels take it as a hint */
    }
    if (!err) {
        a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (a == MAP_FAILED) err = errno;
    }
    close(fd);
    if (err) {
        if (v != MAP_FAILED) munmap(v, len);
        return err;
    }
    *view = v;
    *alias = a;
    return 0;
}

void coherence_unmap(char *view, char *alias, size_t size)
{
    size_t len = page_round(size ? size : 1);
    munmap(view, len);
    munmap(alias, len);
}

/* ---- page state --------------------------------------------------------- */

static void protect(struct region *r, size_t first, size_t count, int prot)
{
    if (mprotect(r->view + first * page_size, count * page_size, prot) != 0)
        LOG_ERROR("mprotect of a mirrored region failed: %s", strerror(errno));
}

/* Set pages [first, first+count) to state s, with the view's protection. */
static void set_state(struct region *r, size_t first, size_t count, uint8_t s)
{
    for (size_t i = first; i < first + count; i++) {
        if (r->state[i] == PAGE_DIRTY && s != PAGE_DIRTY) {
            r->ndirty--, dirty_total--;
            if (r->twin) free(r->twin[i]), r->twin[i] = NULL;
        }
        if (r->state[i] != PAGE_DIRTY && s == PAGE_DIRTY) r->ndirty++, dirty_total++;
        r->state[i] = s;
    }
    protect(r, first, count, s == PAGE_DIRTY ? PROT_READ | PROT_WRITE : s == PAGE_INVALID ? PROT_NONE : PROT_READ);
}

/* The host is about to write page i: keep its twin if it was CLEAN. */
static void make_dirty(struct region *r, size_t i)
{
    if (r->state[i] == PAGE_DIRTY) return;
    if (r->state[i] == PAGE_CLEAN) {
        if (!r->twin) r->twin = calloc(r->npages, sizeof *r->twin);
        uint8_t *t = r->twin ? malloc(page_size) : NULL;
        if (t) memcpy(t, r->alias + i * page_size, page_size);
        else LOG_WARN("out of memory for a page's twin: the page will be pushed whole");
        set_state(r, i, 1, PAGE_DIRTY);
        if (r->twin) r->twin[i] = t;
        return;
    }
    set_state(r, i, 1, PAGE_DIRTY);
}

static struct region *find_locked(uintptr_t p)
{
    for (struct region *r = regions; r; r = r->next_region)
        if (p >= (uintptr_t)r->view && p - (uintptr_t)r->view < r->size) return r;
    return NULL;
}

static struct region *find_dev_locked(uint64_t dev)
{
    for (struct region *r = regions; r; r = r->next_region)
        if (dev >= r->dev && dev - r->dev < r->size) return r;
    return NULL;
}

/* ---- moving bytes ------------------------------------------------------- */

static CUresult move_span(struct region *r, uint64_t lo, uint64_t hi, int to_device)
{
    CUresult res = CUDA_SUCCESS;
    for (uint64_t at = lo; at < hi && res == CUDA_SUCCESS;) {
        size_t len = hi - at < MOVE_MAX_BYTES ? (size_t)(hi - at) : MOVE_MAX_BYTES;
        char *host = r->alias + (at - r->dev);
        res = to_device ? copy_to_device(at, host, len, NULL, 0) : copy_from_device(host, at, len, NULL, 0);
        at += len;
    }
    return res;
}

/* Pushes and fetches run in the region's context, whatever the thread's. */
static CUresult enter_ctx(const struct region *r) { return cuCtxPushCurrent(r->ctx); }

static void leave_ctx(void)
{
    CUcontext popped;
    cuCtxPopCurrent(&popped);
}

/* Move pages [first, first+count) where they hold allocated bytes. */
static CUresult move(struct region *r, size_t first, size_t count, int to_device)
{
    CUresult res = enter_ctx(r);
    if (res != CUDA_SUCCESS) return res;
    uint64_t lo = r->dev + first * page_size, hi = r->dev + (first + count) * page_size;
    for (size_t e = 0; e < r->nextents && res == CUDA_SUCCESS; e++) {
        uint64_t a = r->ext[e].lo > lo ? r->ext[e].lo : lo, b = r->ext[e].hi < hi ? r->ext[e].hi : hi;
        if (a < b) res = move_span(r, a, b, to_device);
    }
    leave_ctx();
    return res;
}

static CUresult fetch(struct region *r, size_t first, size_t count)
{
    CUresult res = move(r, first, count, 0);
    if (res != CUDA_SUCCESS) LOG_ERROR("fetching mirrored memory from the server failed (%d)", res);
    return res;
}

/* The changed bytes of dirty page i within [lo, hi): 0 when none. */
static int changed(const struct region *r, size_t i, uint64_t *lo, uint64_t *hi)
{
    const uint8_t *t = r->twin ? r->twin[i] : NULL;
    if (!t) return 1;
    const uint8_t *p = (const uint8_t *)r->alias + i * page_size;
    size_t a = *lo - (r->dev + i * page_size), b = *hi - (r->dev + i * page_size);
    while (a < b && p[a] == t[a]) a++;
    while (b > a && p[b - 1] == t[b - 1]) b--;
    if (a == b) return 0;
    *lo = r->dev + i * page_size + a;
    *hi = r->dev + i * page_size + b;
    return 1;
}

/* Send the changed bytes of the dirty pages of one allocation (extent e):
 * a run of dirty pages goes as one copy from its first changed byte to
 * its last. */
static void push_extent_locked(struct region *r, const struct extent *e, size_t pf, size_t pl)
{
    size_t first = (e->lo - r->dev) / page_size, last = (e->hi - 1 - r->dev) / page_size;
    if (first < pf) first = pf;
    if (last > pl) last = pl;
    if (first > last) return;
    uint64_t run_lo = 0, run_hi = 0;
    int open = 0;
    for (size_t i = first; i <= last + 1; i++) {
        uint64_t lo = r->dev + i * page_size, hi = lo + page_size;
        if (lo < e->lo) lo = e->lo;
        if (hi > e->hi) hi = e->hi;
        int dirty = i <= last && r->state[i] == PAGE_DIRTY && changed(r, i, &lo, &hi);
        if (dirty) {
            if (!open) run_lo = lo;
            run_hi = hi;
            open = 1;
            continue;
        }
        if (open) {
            CUresult res = move_span(r, run_lo, run_hi, 1);
            if (res != CUDA_SUCCESS) LOG_ERROR("pushing mirrored memory to the server failed (%d)", res);
            open = 0;
        }
    }
}

/* Send the dirty pages among [first, last]. They are made read-only before
 * their bytes are sent, so a write racing with the push faults and waits
 * for the lock; the caller then gives them their new state (and a racing
 * write is pushed next time). */
static void push_dirty_locked(struct region *r, size_t first, size_t last)
{
    size_t ndirty = 0;
    for (size_t i = first; i <= last && r->ndirty; i++) {
        if (r->state[i] != PAGE_DIRTY) continue;
        protect(r, i, 1, PROT_READ);
        ndirty++;
    }
    if (!ndirty || enter_ctx(r) != CUDA_SUCCESS) return;
    for (size_t e = 0; e < r->nextents; e++) push_extent_locked(r, &r->ext[e], first, last);
    leave_ctx();
}

static void push_locked(struct region *r)
{
    push_dirty_locked(r, 0, r->npages - 1);
    for (size_t i = 0; i < r->npages && r->ndirty; i++)
        if (r->state[i] == PAGE_DIRTY) set_state(r, i, 1, PAGE_CLEAN);
}

/* A synchronize of the NULL/legacy stream may also wait for the earlier
 * work of the context's other streams (legacy semantics): it names no
 * single stream, like an event's (0). Its raw value would name the legacy
 * stream of every context at once. */
uint64_t coherence_stream_key(CUstream s) { return s == NULL || s == CU_STREAM_LEGACY ? 0 : stream_key(s); }

void coherence_stream_synced(CUstream stream, int whole_context)
{
    coherence_synced(coherence_stream_key(stream), whole_context);
}

void coherence_before_send(void)
{
    if (busy || (atomic_load(&dirty_total) == 0 && atomic_load(&pushing) == 0)) return;
    work_begin();
    pushing++;
    uint64_t before = rpc_async_count(), mine_before = rpc_async_count_here();
    for (struct region *r = regions; r; r = r->next_region)
        if (r->ndirty) push_locked(r);
    /* Our own pushes are not device work that could make the host stale,
     * but a launch another thread sent meanwhile (it passed this check
     * before the push began) may be: then nothing is excused. */
    uint64_t after = rpc_async_count();
    if (after - before == rpc_async_count_here() - mine_before)
        for (struct region *r = regions; r; r = r->next_region)
            for (size_t e = 0; e < r->nextents; e++)
                if (r->ext[e].seen == before) r->ext[e].seen = after;
    pushing--;
    work_end();
}

/* ---- faults ------------------------------------------------------------- */

static int fault_is_write(void *uc)
{
#if defined(__x86_64__)
    return (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
    (void)uc;
    return 0; /* a write then faults twice: fetch, then mark dirty */
#endif
}

/* How many invalid pages to fetch from page i: one, or more when faults
 * walk the region in order. */
static size_t fetch_window_locked(struct region *r, size_t i)
{
    r->readahead = i == r->next_sequential && r->readahead ? r->readahead * 2 : 1;
    if (r->readahead > READAHEAD_MAX_PAGES) r->readahead = READAHEAD_MAX_PAGES;
    size_t n = 1;
    while (n < r->readahead && i + n < r->npages && r->state[i + n] == PAGE_INVALID) n++;
    r->next_sequential = i + n;
    return n;
}

void coherence_kernel_sent(void) { atomic_store(&kernel_mark, rpc_async_count()); }

/* Whether a kernel may use the byte at dev: it is in an allocation
 * attached neither to the host nor to one stream (whose idleness is not
 * known here; such memory is exempt rather than wrongly refused). */
static int open_to_kernels(const struct region *r, uint64_t dev)
{
    for (size_t e = 0; e < r->nextents; e++)
        if (r->ext[e].lo <= dev && dev < r->ext[e].hi) return !r->ext[e].host_only && !r->ext[e].attached;
    return 0;
}

/* The host writes managed memory while a kernel sent since the last
 * synchronize may still run. SCUDA promises no concurrent managed access
 * and no host-native atomics (managed_device_attribute): the host's write
 * and the kernel's meet only at the next synchronize, where one of them
 * loses (a host atomic next to a kernel's counts wrong). The write goes
 * ahead, and the next synchronizing call fails, with the cause logged. */
static void note_race(const struct region *r, uintptr_t addr)
{
    uint64_t k = atomic_load(&kernel_mark);
    if (k <= atomic_load(&sync_mark) || !r->managed || !open_to_kernels(r, r->dev + (addr - (uintptr_t)r->view)))
        return;
    rpc_defer_error(CUDA_ERROR_ILLEGAL_STATE);
    if (atomic_exchange(&race_reported, k) != k)
        LOG_ERROR("the host wrote managed memory at %p while a kernel may be running; this GPU has no "
                  "concurrent managed access or host-native atomics through SCUDA, so the host's and the "
                  "kernel's writes cannot both be kept: the next synchronizing call fails with "
                  "CUDA_ERROR_ILLEGAL_STATE (synchronize before the host touches managed memory, or attach it "
                  "to the host with cudaStreamAttachMemAsync)", (void *)addr);
}

/* 1 when the fault was ours and the access can be retried. */
static int handle_fault(uintptr_t addr, int write)
{
    work_begin();
    struct region *r = find_locked(addr);
    int ours = r != NULL;
    if (r) {
        size_t i = (addr - (uintptr_t)r->view) / page_size;
        if (r->state[i] == PAGE_INVALID) {
            size_t n = fetch_window_locked(r, i);
            if (fetch(r, i, n) == CUDA_SUCCESS) set_state(r, i, n, PAGE_CLEAN);
            else ours = 0; /* the server is gone: let the fault kill as it would */
        }
        if (ours && write) {
            note_race(r, addr);
            make_dirty(r, i);
        }
    }
    work_end();
    return ours;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (!busy && nregions) {
        int handled = handle_fault((uintptr_t)si->si_addr, fault_is_write(uc));
        if (handled) {
            errno = saved;
            return;
        }
    }
    errno = saved;
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(sig, si, uc);
    } else if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
        previous_segv.sa_handler(sig);
    } else {
        signal(sig, SIG_DFL); /* the access repeats and the process dies as it would have */
    }
}

static void install_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous_segv) != 0) LOG_ERROR("cannot install the SIGSEGV handler: %s", strerror(errno));
}

/* ---- regions ------------------------------------------------------------ */

static void invalidate_locked(struct region *r, size_t first, size_t count);

static void install_once(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handler);
}

static int add_extent_locked(struct region *r, uint64_t lo, uint64_t hi, uint64_t base)
{
    if (r->nextents == r->ext_cap) {
        size_t cap = r->ext_cap ? 2 * r->ext_cap : 4;
        struct extent *e = realloc(r->ext, cap * sizeof *e);
        if (!e) return -1;
        r->ext = e;
        r->ext_cap = cap;
    }
    r->ext[r->nextents++] = (struct extent){.lo = lo, .hi = hi, .base = base, .seen = rpc_async_count()};
    return 0;
}

static void free_region(struct region *r)
{
    if (r->owns_mapping) coherence_unmap(r->view, r->alias, r->size);
    else protect(r, 0, r->npages, PROT_READ | PROT_WRITE);
    if (r->twin)
        for (size_t i = 0; i < r->npages; i++) free(r->twin[i]);
    free(r->twin);
    free(r->ext);
    free(r->state);
    free(r);
}

/* A region for [view, view+size) <-> dev, linked in; NULL without memory. */
static struct region *new_region_locked(char *view, char *alias, size_t size, uint64_t dev, CUcontext ctx,
                                        uint8_t state, int owns_mapping)
{
    struct region *r = calloc(1, sizeof *r);
    size_t npages = page_round(size ? size : 1) / page_size;
    uint8_t *st = r ? malloc(npages) : NULL;
    if (!st) {
        free(r);
        return NULL;
    }
    *r = (struct region){.view = view, .alias = alias, .size = npages * page_size, .npages = npages,
                         .dev = dev, .ctx = ctx, .state = st, .owns_mapping = owns_mapping};
    memset(st, PAGE_INVALID, npages);
    set_state(r, 0, npages, state);
    r->next_region = regions;
    regions = r;
    nregions++;
    return r;
}

static void unlink_locked(struct region *r)
{
    for (struct region **pp = &regions; *pp; pp = &(*pp)->next_region) {
        if (*pp == r) {
            *pp = r->next_region;
            break;
        }
    }
    dirty_total -= r->ndirty;
    nregions--;
}

CUresult coherence_add(char *view, char *alias, size_t size, uint64_t dev, int host_newer, int owns_mapping)
{
    install_once();
    CUcontext ctx = NULL;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return CUDA_ERROR_INVALID_CONTEXT;
    work_begin();
    struct region *r = new_region_locked(view, alias, size, dev, ctx, host_newer ? PAGE_DIRTY : PAGE_CLEAN,
                                         owns_mapping);
    int bad = !r || add_extent_locked(r, dev, dev + size, dev) != 0;
    if (bad && r) {
        unlink_locked(r);
        r->owns_mapping = 0;
        free_region(r);
    }
    work_end();
    return bad ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

/* Mirror the blocks of [lo, hi) that no region covers yet. */
static int map_blocks_locked(uint64_t lo, uint64_t hi, CUcontext ctx)
{
    for (uint64_t at = lo; at < hi;) {
        struct region *have = find_locked(at);
        if (have) {
            at = have->dev + have->size;
            continue;
        }
        uint64_t end = at + MANAGED_BLOCK;
        while (end < hi && !find_locked(end)) end += MANAGED_BLOCK;
        char *view, *alias;
        int err = coherence_map((uintptr_t)at, end - at, &view, &alias);
        if (err) return err;
        /* Fresh memory reads as zeros on both sides: nothing to move. */
        struct region *r = new_region_locked(view, alias, end - at, at, ctx, PAGE_ZERO, 1);
        if (!r) {
            coherence_unmap(view, alias, end - at);
            return ENOMEM;
        }
        r->managed = 1;
        r->fresh = 1;
        at = end;
    }
    return 0;
}

/* Drop the allocation starting at dev from every region; a region left
 * without allocations goes. */
static void remove_extent_locked(uint64_t dev)
{
    for (struct region *r = regions, *next; r; r = next) {
        next = r->next_region;
        for (size_t e = 0; e < r->nextents; e++) {
            if (r->ext[e].base == dev) {
                r->ext[e] = r->ext[--r->nextents];
                break;
            }
        }
        if (r->managed && r->nextents == 0) {
            unlink_locked(r);
            free_region(r);
        }
    }
}

static int add_managed(uint64_t dev, size_t size, int device_has_bytes, CUresult *res)
{
    install_once();
    *res = CUDA_SUCCESS;
    CUcontext ctx = NULL;
    if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        *res = CUDA_ERROR_INVALID_CONTEXT;
        return 0;
    }
    uint64_t lo = dev & ~(uint64_t)(MANAGED_BLOCK - 1);
    uint64_t hi = (dev + size + MANAGED_BLOCK - 1) & ~(uint64_t)(MANAGED_BLOCK - 1);
    work_begin();
    int err = map_blocks_locked(lo, hi, ctx);
    for (uint64_t at = lo; !err && at < hi;) {
        struct region *r = find_locked(at);
        uint64_t a = dev > r->dev ? dev : r->dev, b = dev + size < r->dev + r->size ? dev + size : r->dev + r->size;
        /* In a block mirrored before, the host's bytes there are of an
         * earlier allocation: read the device's on first touch. Invalidated
         * before the allocation joins, so that a push of a dirty page it
         * shares sends only the other allocations' bytes. */
        if (!r->fresh || device_has_bytes) invalidate_locked(r, (a - r->dev) / page_size, (b - 1 - r->dev) / page_size - (a - r->dev) / page_size + 1);
        r->fresh = 0;
        if (add_extent_locked(r, a, b, dev) != 0) err = ENOMEM;
        at = r->dev + r->size;
    }
    if (err) remove_extent_locked(dev); /* and blocks mapped for it alone */
    work_end();
    return err;
}

int coherence_add_managed(uint64_t dev, size_t size, CUresult *res) { return add_managed(dev, size, 0, res); }

int coherence_add_managed_existing(uint64_t dev, size_t size, CUresult *res) { return add_managed(dev, size, 1, res); }

void coherence_forget_managed(uint64_t dev)
{
    if (!nregions) return;
    work_begin();
    remove_extent_locked(dev);
    work_end();
}

int coherence_forget(const void *view)
{
    work_begin();
    struct region *found = NULL;
    for (struct region *r = regions; r && !found; r = r->next_region)
        if (r->view == view) found = r;
    if (found) unlink_locked(found);
    work_end();
    if (!found) return 0;
    free_region(found);
    return 1;
}

uint64_t coherence_device_address(const void *p)
{
    if (!nregions) return 0;
    work_begin();
    struct region *r = find_locked((uintptr_t)p);
    uint64_t dev = r ? r->dev + ((uintptr_t)p - (uintptr_t)r->view) : 0;
    work_end();
    return dev;
}

/* ---- synchronization ---------------------------------------------------- */

/* The host copy of pages [first, first+count) is stale. A dirty page
 * among them also holds newer bytes from the host: they are pushed first,
 * so the next touch fetches the device's bytes merged with the host's. */
static void invalidate_locked(struct region *r, size_t first, size_t count)
{
    push_dirty_locked(r, first, first + count - 1);
    set_state(r, first, count, PAGE_INVALID);
    r->readahead = 0;
}

static void prefetch_locked(struct region *r)
{
    size_t lo = r->prefetch_lo, hi = r->prefetch_hi;
    r->prefetch_lo = r->prefetch_hi = 0;
    for (size_t i = lo; i < hi;) {
        if (r->state[i] != PAGE_INVALID) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < hi && r->state[j] == PAGE_INVALID) j++;
        if (fetch(r, i, j - i) == CUDA_SUCCESS) set_state(r, i, j - i, PAGE_CLEAN);
        i = j;
    }
}

void coherence_synced(uint64_t stream_id, int whole_context)
{
    atomic_store(&sync_mark, rpc_async_count());
    if (!nregions || busy) return;
    work_begin();
    uint64_t now = rpc_async_count();
    for (struct region *r = regions; r; r = r->next_region) {
        for (size_t i = 0; i < r->nextents; i++) {
            struct extent *e = &r->ext[i];
            if (e->seen == now) continue; /* no work sent since its host copy was last made stale */
            if (!whole_context && e->attached && stream_id && e->attached != stream_id) continue;
            size_t first = (e->lo - r->dev) / page_size, last = (e->hi - 1 - r->dev) / page_size;
            invalidate_locked(r, first, last - first + 1);
            /* Another stream's work may still write memory that is not
             * attached to this one: only a context sync proves it all done. */
            if (whole_context || (e->attached && e->attached == stream_id)) e->seen = now;
        }
        if (r->prefetch_hi) prefetch_locked(r);
    }
    work_end();
}

/* Pages of region r that [dev, dev+n) touches, clamped to the region. */
static void page_span(const struct region *r, uint64_t dev, size_t n, size_t *first, size_t *count)
{
    uint64_t lo = dev > r->dev ? dev - r->dev : 0;
    uint64_t hi = dev + n - r->dev;
    if (hi > r->size) hi = r->size;
    *first = lo / page_size;
    *count = hi > lo ? (hi + page_size - 1) / page_size - *first : 0;
}

void coherence_device_wrote(uint64_t dev, size_t n)
{
    if (!nregions || !n) return;
    work_begin();
    for (struct region *r = regions; r; r = r->next_region) {
        if (dev + n <= r->dev || dev >= r->dev + r->size) continue;
        size_t first, count;
        page_span(r, dev, n, &first, &count);
        invalidate_locked(r, first, count);
    }
    work_end();
}

/* ---- this library's own access ----------------------------------------- */

void *coherence_host_view(const void *p, size_t n, int will_write, CUresult *err)
{
    *err = CUDA_SUCCESS;
    if (!nregions || !n) return (void *)p;
    work_begin();
    struct region *r = find_locked((uintptr_t)p);
    size_t off = r ? (uintptr_t)p - (uintptr_t)r->view : 0;
    if (!r || n > r->size - off) { /* not ours, or runs past the region: the caller sees EFAULT */
        work_end();
        return (void *)p;
    }
    size_t first = off / page_size, last = (off + n - 1) / page_size;
    for (size_t i = first; i <= last && *err == CUDA_SUCCESS;) {
        /* A page that will be overwritten whole needs no fetch. */
        int whole = will_write && i * page_size >= off && (i + 1) * page_size <= off + n;
        if (r->state[i] != PAGE_INVALID || whole) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j <= last && r->state[j] == PAGE_INVALID) j++;
        *err = fetch(r, i, j - i);
        if (*err == CUDA_SUCCESS) set_state(r, i, j - i, PAGE_CLEAN);
        i = j;
    }
    work_end();
    return *err == CUDA_SUCCESS ? r->alias + off : NULL;
}

/* The bytes go to the device at once: marking the pages dirty would push
 * whole pages or diffs against twins taken before this write. */
void coherence_host_wrote(const void *p, size_t n)
{
    if (!nregions || !n) return;
    work_begin();
    struct region *r = find_locked((uintptr_t)p);
    if (r && n <= r->size - ((uintptr_t)p - (uintptr_t)r->view) && enter_ctx(r) == CUDA_SUCCESS) {
        uint64_t dev = r->dev + ((uintptr_t)p - (uintptr_t)r->view);
        CUresult res = move_span(r, dev, dev + n, 1);
        if (res != CUDA_SUCCESS) LOG_ERROR("pushing mirrored memory to the server failed (%d)", res);
        leave_ctx();
    }
    work_end();
}

/* ---- hints ------------------------------------------------------------- */

void coherence_prefetch_to_host(uint64_t dev, size_t n)
{
    if (!nregions || !n) return;
    work_begin();
    struct region *r = find_dev_locked(dev);
    if (r) {
        size_t first, count;
        page_span(r, dev, n, &first, &count);
        if (!r->prefetch_hi || first < r->prefetch_lo) r->prefetch_lo = first;
        if (first + count > r->prefetch_hi) r->prefetch_hi = first + count;
    }
    work_end();
}

void coherence_attach(uint64_t dev, uint64_t stream_id, unsigned flags)
{
    if (!nregions) return;
    work_begin();
    for (struct region *r = regions; r; r = r->next_region)
        for (size_t i = 0; i < r->nextents; i++)
            if (r->ext[i].base == dev) {
                r->ext[i].attached = flags == CU_MEM_ATTACH_SINGLE ? stream_id : 0;
                r->ext[i].host_only = flags == CU_MEM_ATTACH_HOST;
            }
    work_end();
}
