/* coherence.c - see coherence.h.
 *
 * Page states change under one lock. The application's view changes
 * protection; this library only ever reads and writes the alias mapping,
 * so it never faults on its own accesses, and a fill is never visible
 * half-done through a writable view. A SIGSEGV in a region is handled in
 * the faulting thread (fetch, or mark dirty) and the access is retried;
 * any other SIGSEGV goes to the handler that was there before.
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

enum { PAGE_INVALID = 0, PAGE_CLEAN = 1, PAGE_DIRTY = 2 };

/* Sequential faults double the fetch, up to this many pages (2 MiB). */
#define READAHEAD_MAX_PAGES 512
/* One fetch or push moves at most this much (one frame's worth). */
#define MOVE_MAX_BYTES (32u << 20)

struct region {
    char *view, *alias;
    size_t size, npages;    /* whole pages */
    size_t bytes;           /* the allocation's own size: copies stop there */
    uint64_t dev;
    CUcontext ctx;
    uint8_t *state;
    size_t ndirty;
    int owns_mapping;
    uint64_t attached;      /* stream id when attached to one stream, else 0 */
    uint64_t seen;          /* one-way calls sent when last invalidated */
    size_t readahead;       /* pages to fetch at the next sequential fault */
    size_t next_sequential; /* the page a sequential fault would hit */
    size_t prefetch_lo, prefetch_hi; /* pages to fetch at the next sync */
    struct region *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct region *regions;
static _Atomic int nregions;
static _Atomic size_t dirty_total;
static __thread int busy; /* this thread is inside coherence work */
static size_t page_size;
static struct sigaction previous_segv;

/* ---- mappings ----------------------------------------------------------- */

static size_t page_round(size_t n)
{
    if (!page_size) page_size = (size_t)sysconf(_SC_PAGESIZE);
    return (n + page_size - 1) & ~(page_size - 1);
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
        int fixed = at ? MAP_FIXED_NOREPLACE : 0;
        v = mmap((void *)at, len, PROT_READ | PROT_WRITE, MAP_SHARED | fixed, fd, 0);
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
        if (r->state[i] == PAGE_DIRTY && s != PAGE_DIRTY) r->ndirty--, dirty_total--;
        if (r->state[i] != PAGE_DIRTY && s == PAGE_DIRTY) r->ndirty++, dirty_total++;
        r->state[i] = s;
    }
    protect(r, first, count, s == PAGE_DIRTY ? PROT_READ | PROT_WRITE : s == PAGE_CLEAN ? PROT_READ : PROT_NONE);
}

static struct region *find_locked(uintptr_t p)
{
    for (struct region *r = regions; r; r = r->next)
        if (p >= (uintptr_t)r->view && p - (uintptr_t)r->view < r->size) return r;
    return NULL;
}

static struct region *find_dev_locked(uint64_t dev)
{
    for (struct region *r = regions; r; r = r->next)
        if (dev >= r->dev && dev - r->dev < r->size) return r;
    return NULL;
}

/* ---- moving bytes ------------------------------------------------------- */

/* Pushes and fetches run in the region's context, whatever the thread's. */
static CUresult move(struct region *r, size_t first, size_t count, int to_device)
{
    CUresult res = cuCtxPushCurrent(r->ctx);
    if (res != CUDA_SUCCESS) return res;
    size_t off = first * page_size, end = (first + count) * page_size;
    if (end > r->bytes) end = r->bytes;
    for (; off < end && res == CUDA_SUCCESS;) {
        size_t len = end - off < MOVE_MAX_BYTES ? end - off : MOVE_MAX_BYTES;
        res = to_device ? copy_to_device(r->dev + off, r->alias + off, len, NULL, 0)
                        : copy_from_device(r->alias + off, r->dev + off, len, NULL, 0);
        off += len;
    }
    CUcontext popped;
    cuCtxPopCurrent(&popped);
    return res;
}

static CUresult fetch(struct region *r, size_t first, size_t count)
{
    CUresult res = move(r, first, count, 0);
    if (res != CUDA_SUCCESS) LOG_ERROR("fetching mirrored memory from the server failed (%d)", res);
    return res;
}

/* Each run of dirty pages becomes clean (read-only) before its bytes are
 * sent: a write that races with the push faults and waits for the lock,
 * and is then pushed next time. */
static void push_locked(struct region *r)
{
    for (size_t i = 0; i < r->npages && r->ndirty;) {
        if (r->state[i] != PAGE_DIRTY) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < r->npages && r->state[j] == PAGE_DIRTY) j++;
        set_state(r, i, j - i, PAGE_CLEAN);
        CUresult res = move(r, i, j - i, 1);
        if (res != CUDA_SUCCESS) LOG_ERROR("pushing mirrored memory to the server failed (%d)", res);
        i = j;
    }
}

uint64_t coherence_stream_key(CUstream s)
{
    return s == CU_STREAM_PER_THREAD ? per_thread_stream_id() : (uint64_t)(uintptr_t)s;
}

void coherence_before_send(void)
{
    if (atomic_load_explicit(&dirty_total, memory_order_relaxed) == 0 || busy) return;
    busy = 1;
    pthread_mutex_lock(&lock);
    uint64_t before = rpc_async_count();
    for (struct region *r = regions; r; r = r->next)
        if (r->ndirty) push_locked(r);
    /* Our own pushes are not device work that could make the host stale. */
    uint64_t after = rpc_async_count();
    for (struct region *r = regions; r; r = r->next)
        if (r->seen == before) r->seen = after;
    pthread_mutex_unlock(&lock);
    busy = 0;
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

/* 1 when the fault was ours and the access can be retried. */
static int handle_fault(uintptr_t addr, int write)
{
    pthread_mutex_lock(&lock);
    struct region *r = find_locked(addr);
    int ours = r != NULL;
    if (r) {
        size_t i = (addr - (uintptr_t)r->view) / page_size;
        if (r->state[i] == PAGE_INVALID) {
            size_t n = fetch_window_locked(r, i);
            if (fetch(r, i, n) == CUDA_SUCCESS) set_state(r, i, n, PAGE_CLEAN);
            else ours = 0; /* the server is gone: let the fault kill as it would */
        }
        if (ours && r->state[i] == PAGE_CLEAN && write) set_state(r, i, 1, PAGE_DIRTY);
    }
    pthread_mutex_unlock(&lock);
    return ours;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (!busy && nregions) {
        busy = 1;
        int handled = handle_fault((uintptr_t)si->si_addr, fault_is_write(uc));
        busy = 0;
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

CUresult coherence_add(char *view, char *alias, size_t size, uint64_t dev, int host_newer, int owns_mapping)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, install_handler);
    struct region *r = calloc(1, sizeof *r);
    size_t npages = page_round(size ? size : 1) / page_size;
    uint8_t *state = r ? malloc(npages) : NULL;
    CUcontext ctx = NULL;
    if (!state || cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) {
        free(r);
        free(state);
        return state ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
    }
    *r = (struct region){.view = view, .alias = alias, .size = npages * page_size, .npages = npages, .bytes = size,
                         .dev = dev, .ctx = ctx, .state = state, .owns_mapping = owns_mapping,
                         .seen = rpc_async_count()};
    memset(state, PAGE_INVALID, npages);
    pthread_mutex_lock(&lock);
    set_state(r, 0, npages, host_newer ? PAGE_DIRTY : PAGE_CLEAN);
    r->next = regions;
    regions = r;
    nregions++;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

int coherence_forget(const void *view)
{
    pthread_mutex_lock(&lock);
    struct region *found = NULL;
    for (struct region **pp = &regions; *pp; pp = &(*pp)->next) {
        if ((*pp)->view == view) {
            found = *pp;
            *pp = found->next;
            break;
        }
    }
    if (found) {
        dirty_total -= found->ndirty;
        nregions--;
    }
    pthread_mutex_unlock(&lock);
    if (!found) return 0;
    if (found->owns_mapping) coherence_unmap(found->view, found->alias, found->size);
    else protect(found, 0, found->npages, PROT_READ | PROT_WRITE);
    free(found->state);
    free(found);
    return 1;
}

uint64_t coherence_device_address(const void *p)
{
    if (!nregions) return 0;
    pthread_mutex_lock(&lock);
    struct region *r = find_locked((uintptr_t)p);
    uint64_t dev = r ? r->dev + ((uintptr_t)p - (uintptr_t)r->view) : 0;
    pthread_mutex_unlock(&lock);
    return dev;
}

/* ---- synchronization ---------------------------------------------------- */

static void invalidate_locked(struct region *r, size_t first, size_t count)
{
    for (size_t i = first; i < first + count;) {
        if (r->state[i] == PAGE_DIRTY) { /* written since the push: the host's bytes win */
            i++;
            continue;
        }
        size_t j = i;
        while (j < first + count && r->state[j] != PAGE_DIRTY) j++;
        set_state(r, i, j - i, PAGE_INVALID);
        i = j;
    }
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
    if (!nregions || busy) return;
    busy = 1;
    pthread_mutex_lock(&lock);
    uint64_t now = rpc_async_count();
    for (struct region *r = regions; r; r = r->next) {
        if (r->seen == now) continue; /* no work sent since the host copy was last made stale */
        if (!whole_context && r->attached && stream_id && r->attached != stream_id) continue;
        invalidate_locked(r, 0, r->npages);
        /* Another stream's work may still write a region that is not
         * attached to this one: only a context sync proves it all done. */
        if (whole_context || (r->attached && r->attached == stream_id)) r->seen = now;
        if (r->prefetch_hi) prefetch_locked(r);
    }
    pthread_mutex_unlock(&lock);
    busy = 0;
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
    pthread_mutex_lock(&lock);
    for (struct region *r = regions; r; r = r->next) {
        if (dev + n <= r->dev || dev >= r->dev + r->size) continue;
        size_t first, count;
        page_span(r, dev, n, &first, &count);
        invalidate_locked(r, first, count);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- this library's own access ----------------------------------------- */

void *coherence_host_view(const void *p, size_t n, int will_write, CUresult *err)
{
    *err = CUDA_SUCCESS;
    if (!nregions || !n) return (void *)p;
    pthread_mutex_lock(&lock);
    struct region *r = find_locked((uintptr_t)p);
    size_t off = r ? (uintptr_t)p - (uintptr_t)r->view : 0;
    if (!r || n > r->size - off) { /* not ours, or runs past the region: the caller sees EFAULT */
        pthread_mutex_unlock(&lock);
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
    pthread_mutex_unlock(&lock);
    return *err == CUDA_SUCCESS ? r->alias + off : NULL;
}

void coherence_host_wrote(const void *p, size_t n)
{
    if (!nregions || !n) return;
    pthread_mutex_lock(&lock);
    struct region *r = find_locked((uintptr_t)p);
    if (r) {
        size_t off = (uintptr_t)p - (uintptr_t)r->view, first = off / page_size;
        size_t end = off + n < r->size ? off + n : r->size;
        set_state(r, first, (end + page_size - 1) / page_size - first, PAGE_DIRTY);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- hints ------------------------------------------------------------- */

void coherence_prefetch_to_host(uint64_t dev, size_t n)
{
    if (!nregions || !n) return;
    pthread_mutex_lock(&lock);
    struct region *r = find_dev_locked(dev);
    if (r) {
        size_t first, count;
        page_span(r, dev, n, &first, &count);
        if (!r->prefetch_hi || first < r->prefetch_lo) r->prefetch_lo = first;
        if (first + count > r->prefetch_hi) r->prefetch_hi = first + count;
    }
    pthread_mutex_unlock(&lock);
}

void coherence_attach(uint64_t dev, uint64_t stream_id, unsigned flags)
{
    if (!nregions) return;
    pthread_mutex_lock(&lock);
    struct region *r = find_dev_locked(dev);
    if (r) r->attached = flags == CU_MEM_ATTACH_SINGLE ? stream_id : 0;
    pthread_mutex_unlock(&lock);
}
