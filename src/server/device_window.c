/* device_window.c - see device_window.h; the design is in
 * docs/architecture.md, 9.8 Memory, "The device window".
 *
 * Layout of one device's window: address space is handed out first fit,
 * lowest address first, so the same sequence of calls gives the same
 * addresses in every session (what a migration replays). Chunks are
 * mapped device memory: a small chunk (2 MiB, the driver's granularity)
 * serves many allocations of up to SMALL_MAX bytes, 512-byte aligned as
 * the driver's own; a larger allocation is rounded to the granularity and
 * gets a chunk of its own. A chunk that holds no allocation any more stays
 * mapped (idle) while the idle ones total at most the cache size.
 *
 * One lock guards it all: allocation calls come from the dispatch thread,
 * pointer queries also from the workers that run copies. */
#include "device_window.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

#define MAX_DEVICES 64
#define SMALL_MAX (1u << 20)
#define SMALL_ALIGN 512u
#define CHUNK_MIN (2u << 20)
#define VA_LIMIT (1ull << 47) /* x86-64 user addresses, which UVA shares */
#define ID_BASE (1ull << 62)  /* buffer ids apart from the driver's own */

struct span {
    uint64_t off, len;
};

/* Free ranges, sorted by offset, never adjacent. */
struct spans {
    struct span *v;
    size_t n, cap;
};

struct chunk {
    uint64_t addr, size;
    CUmemGenericAllocationHandle handle;
    bool small;
    uint32_t live;     /* allocations in it */
    struct spans free; /* small chunks: what is not allocated */
};

struct window {
    int state; /* 0 not reserved yet, 1 reserved, -1 unusable: memory goes to the driver */
    uint64_t base, size, gran, pitch_align;
    struct spans va;
    struct chunk **chunks; /* sorted by address */
    size_t nchunks, cap;
    uint64_t mapped, live;               /* bytes of chunks; bytes the application holds in them */
    CUmemAccessDesc access[MAX_DEVICES]; /* the device and its peers */
    size_t naccess;
    CUmemAllocationHandleType shareable; /* what chunks are created exportable as (IPC) */
    bool no_room; /* the last placement found no free addresses for its size */
};

struct record {
    uint64_t addr, size, pitch, id;
    enum window_kind kind;
    int dev;
    CUcontext ctx;
    struct chunk *chunk; /* NULL for WINDOW_RESERVE */
    unsigned sync_memops; /* CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, as the app set it */
};

static struct driver_table orig;
static struct window_config cfg;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct window windows[MAX_DEVICES];
static struct record *recs; /* sorted by address */
static size_t nrecs, caprecs;
static uint64_t idle_bytes, next_id;
static unsigned blockers;
/* The window index of device 0 (window_set_first): 0 but for a client of
 * several servers, whose devices each take their own window. */
static unsigned first;

/* ---- spans --------------------------------------------------------------- */

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int spans_insert(struct spans *s, size_t i, struct span sp)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct span *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = sp;
    s->n++;
    return 0;
}

static void spans_remove(struct spans *s, size_t i)
{
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

/* Give [off, off+len) back, merged with its neighbours. */
static int spans_give(struct spans *s, uint64_t off, uint64_t len)
{
    size_t i = 0;
    while (i < s->n && s->v[i].off < off) i++;
    bool prev = i > 0 && s->v[i - 1].off + s->v[i - 1].len == off;
    bool next = i < s->n && off + len == s->v[i].off;
    if (prev && next) {
        s->v[i - 1].len += len + s->v[i].len;
        spans_remove(s, i);
    } else if (prev) {
        s->v[i - 1].len += len;
    } else if (next) {
        s->v[i].off = off;
        s->v[i].len += len;
    } else {
        return spans_insert(s, i, (struct span){off, len});
    }
    return 0;
}

/* Take [at, at+len) out of span i, which holds it. */
static int spans_carve(struct spans *s, size_t i, uint64_t at, uint64_t len)
{
    struct span sp = s->v[i];
    spans_remove(s, i);
    if (at > sp.off && spans_give(s, sp.off, at - sp.off) != 0) return -1;
    if (at + len < sp.off + sp.len && spans_give(s, at + len, sp.off + sp.len - at - len) != 0) return -1;
    return 0;
}

/* First fit, lowest offset first: deterministic, so replayable. */
static bool spans_take(struct spans *s, uint64_t len, uint64_t align, uint64_t *off)
{
    for (size_t i = 0; i < s->n; i++) {
        uint64_t at = round_up(s->v[i].off, align), end = s->v[i].off + s->v[i].len;
        if (at < end && len <= end - at) {
            if (spans_carve(s, i, at, len) != 0) return false;
            *off = at;
            return true;
        }
    }
    return false;
}

static bool spans_take_at(struct spans *s, uint64_t at, uint64_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (at >= s->v[i].off && len <= s->v[i].len && at - s->v[i].off <= s->v[i].len - len)
            return spans_carve(s, i, at, len) == 0;
    return false;
}

/* ---- the allocation table ---------------------------------------------- */

/* Index of the first record at an address >= addr. */
static size_t rec_lower(uint64_t addr)
{
    size_t lo = 0, hi = nrecs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (recs[mid].addr < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int rec_add(const struct record *r)
{
    if (nrecs == caprecs) {
        size_t cap = caprecs ? caprecs * 2 : 64;
        struct record *v = realloc(recs, cap * sizeof *v);
        if (!v) return -1;
        recs = v;
        caprecs = cap;
    }
    size_t i = rec_lower(r->addr);
    memmove(&recs[i + 1], &recs[i], (nrecs - i) * sizeof *recs);
    recs[i] = *r;
    nrecs++;
    return 0;
}

/* The record whose range holds p, or NULL. */
static struct record *rec_holding(uint64_t p)
{
    size_t i = rec_lower(p + 1);
    if (i == 0) return NULL;
    struct record *r = &recs[i - 1];
    return p - r->addr < r->size ? r : NULL;
}

static void rec_drop(struct record *r) { memmove(r, r + 1, (size_t)(recs + nrecs - r - 1) * sizeof *r), nrecs--; }

/* ---- windows and chunks -------------------------------------------------- */

/* Device dev's window: index first + dev from the base. */
static uint64_t window_base(int dev) { return cfg.base + ((uint64_t)first + (uint64_t)dev) * cfg.size; }

/* The device whose window holds p, or -1. */
static int window_device(uint64_t p)
{
    if (cfg.size == 0 || p < cfg.base) return -1;
    uint64_t i = (p - cfg.base) / cfg.size;
    return i >= first && i - first < MAX_DEVICES ? (int)(i - first) : -1;
}

static struct window *window_holding(uint64_t p)
{
    int dev = window_device(p);
    if (dev < 0) return NULL;
    struct window *w = &windows[dev];
    return w->state == 1 ? w : NULL;
}

static struct chunk *chunk_holding(struct window *w, uint64_t p)
{
    size_t lo = 0, hi = w->nchunks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        struct chunk *c = w->chunks[mid];
        if (p < c->addr) hi = mid;
        else if (p - c->addr >= c->size) lo = mid + 1;
        else return c;
    }
    return NULL;
}

/* Who may reach a device's memory: the device and its peers, so that peer
 * access works as it does for cuMemAlloc memory once enabled. */
static void window_access(struct window *w, int dev)
{
    int count = 0;
    if (orig.cuDeviceGetCount == NULL || orig.cuDeviceGetCount(&count) != CUDA_SUCCESS) count = dev + 1;
    for (int d = 0; d < count && d < MAX_DEVICES; d++) {
        int can = d == dev;
        if (!can && orig.cuDeviceCanAccessPeer && orig.cuDeviceCanAccessPeer(&can, d, dev) != CUDA_SUCCESS) can = 0;
        if (!can) continue;
        w->access[w->naccess++] = (CUmemAccessDesc){
            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d},
            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
    }
}

/* Chunks are created exportable as file descriptors where the device can,
 * so that cuIpcGetMemHandle works on window memory: VMM memory has no
 * legacy IPC handle, so srv_ipc.c exports the chunk instead. */
static void window_shareable(struct window *w, int dev)
{
    int posix = 0;
    if (orig.cuDeviceGetAttribute &&
        orig.cuDeviceGetAttribute(&posix, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev) !=
            CUDA_SUCCESS)
        posix = 0;
    w->shareable = posix ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
}

/* Reserve device dev's window at its fixed address. The driver takes the
 * address as a hint: a window that is taken comes back elsewhere, and
 * then memory goes to the driver, said once in the log. */
static struct window *window_open(int dev)
{
    if (dev < 0 || dev >= MAX_DEVICES) return NULL;
    struct window *w = &windows[dev];
    if (w->state != 0) return w->state == 1 ? w : NULL;
    w->state = -1;
    w->base = window_base(dev);
    w->size = cfg.size;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}};
    size_t gran = 0;
    CUdeviceptr got = 0;
    CUresult r = orig.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r == CUDA_SUCCESS && (gran == 0 || (gran & (gran - 1)) || w->base % gran || w->size % gran))
        r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && w->base + w->size > VA_LIMIT) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = orig.cuMemAddressReserve(&got, w->size, 0, w->base, 0);
    if (r == CUDA_SUCCESS && got != w->base) {
        orig.cuMemAddressFree(got, w->size);
        r = CUDA_ERROR_ALREADY_MAPPED;
    }
    if (r != CUDA_SUCCESS || spans_give(&w->va, 0, w->size) != 0) {
        LOG_WARN("device %d: cannot reserve its memory window %#llx-%#llx (CUresult %d%s); its memory is placed by "
                 "the driver, and this session cannot move to another server; choose a free range with "
                 "--window-base and --window-size",
                 dev, (unsigned long long)w->base, (unsigned long long)(w->base + w->size), (int)r,
                 r == CUDA_ERROR_ALREADY_MAPPED ? ": the range is in use" : "");
        blockers |= WINDOW_BLOCK_NO_WINDOW;
        return NULL;
    }
    w->gran = gran > CHUNK_MIN ? gran : CHUNK_MIN;
    window_access(w, dev);
    window_shareable(w, dev);
    w->state = 1;
    LOG_INFO("device %d: memory window %#llx-%#llx", dev, (unsigned long long)w->base,
             (unsigned long long)(w->base + w->size));
    return w;
}

static void chunk_unlink(struct window *w, struct chunk *c)
{
    for (size_t i = 0; i < w->nchunks; i++)
        if (w->chunks[i] == c) {
            memmove(&w->chunks[i], &w->chunks[i + 1], (w->nchunks - i - 1) * sizeof *w->chunks);
            w->nchunks--;
            return;
        }
}

/* Unmap and release a chunk that holds no allocation. */
static void chunk_release(struct window *w, struct chunk *c)
{
    orig.cuMemUnmap(c->addr, c->size);
    orig.cuMemRelease(c->handle);
    spans_give(&w->va, c->addr - w->base, c->size);
    idle_bytes -= c->size;
    w->mapped -= c->size;
    chunk_unlink(w, c);
    free(c->free.v);
    free(c);
}

/* Let the driver have the idle chunks back (when it is out of memory). */
static void window_trim(struct window *w)
{
    for (size_t i = w->nchunks; i-- > 0;)
        if (w->chunks[i]->live == 0) chunk_release(w, w->chunks[i]);
}

static CUresult chunk_map(struct window *w, int dev, uint64_t addr, uint64_t size, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                                .requestedHandleTypes = w->shareable};
    CUresult r = orig.cuMemCreate(h, size, &prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && idle_bytes) {
        window_trim(w);
        r = orig.cuMemCreate(h, size, &prop, 0);
    }
    if (r != CUDA_SUCCESS) return r;
    if ((r = orig.cuMemMap(addr, size, 0, *h, 0)) != CUDA_SUCCESS) {
        orig.cuMemRelease(*h);
        return r;
    }
    if ((r = orig.cuMemSetAccess(addr, size, w->access, w->naccess)) != CUDA_SUCCESS) {
        orig.cuMemUnmap(addr, size);
        orig.cuMemRelease(*h);
    }
    return r;
}

/* A new chunk of `size` bytes, mapped, at the lowest free address, or at
 * offset `at` of the window when it is not NO_OFFSET (a migration's replay). */
#define NO_OFFSET UINT64_MAX
static CUresult chunk_new_at(struct window *w, int dev, uint64_t size, bool small, uint64_t at, struct chunk **out)
{
    uint64_t off = at;
    struct chunk *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    if (at != NO_OFFSET && !spans_take_at(&w->va, at, size)) {
        free(c);
        LOG_WARN("device %d: window offset %#llx is taken; a migration cannot place memory there", dev,
                 (unsigned long long)at);
        return CUDA_ERROR_ALREADY_MAPPED;
    }
    if (at == NO_OFFSET && !spans_take(&w->va, size, w->gran, &off)) {
        free(c);
        w->no_room = true; /* the caller asks the driver (window_alloc) */
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->addr = w->base + off;
    c->size = size;
    c->small = small;
    CUresult r = chunk_map(w, dev, c->addr, size, &c->handle);
    if (r == CUDA_SUCCESS && small && spans_give(&c->free, 0, size) != 0) {
        orig.cuMemUnmap(c->addr, size);
        orig.cuMemRelease(c->handle);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS && w->nchunks == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct chunk **v = realloc(w->chunks, cap * sizeof *v);
        if (v) w->chunks = v, w->cap = cap;
        else r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r != CUDA_SUCCESS) orig.cuMemUnmap(c->addr, size), orig.cuMemRelease(c->handle);
    }
    if (r != CUDA_SUCCESS) {
        spans_give(&w->va, off, size);
        free(c->free.v);
        free(c);
        return r;
    }
    size_t i = 0;
    while (i < w->nchunks && w->chunks[i]->addr < c->addr) i++;
    memmove(&w->chunks[i + 1], &w->chunks[i], (w->nchunks - i) * sizeof *w->chunks);
    w->chunks[i] = c;
    w->nchunks++;
    idle_bytes += size; /* idle until its first allocation, which takes it out */
    w->mapped += size;
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult chunk_new(struct window *w, int dev, uint64_t size, bool small, struct chunk **out)
{
    return chunk_new_at(w, dev, size, small, NO_OFFSET, out);
}

static void chunk_use(struct chunk *c)
{
    if (c->live++ == 0) idle_bytes -= c->size;
}

/* Place `bytes` in window w: *addr and the chunk it lies in. */
static CUresult window_place(struct window *w, int dev, uint64_t bytes, uint64_t *addr, struct chunk **in)
{
    CUresult r;
    if (bytes <= SMALL_MAX) {
        uint64_t need = round_up(bytes, SMALL_ALIGN), off;
        for (size_t i = 0; i < w->nchunks; i++) {
            struct chunk *c = w->chunks[i];
            if (c->small && spans_take(&c->free, need, SMALL_ALIGN, &off)) {
                chunk_use(c);
                *addr = c->addr + off, *in = c;
                return CUDA_SUCCESS;
            }
        }
        struct chunk *c;
        if ((r = chunk_new(w, dev, w->gran, true, &c)) != CUDA_SUCCESS) return r;
        if (!spans_take(&c->free, need, SMALL_ALIGN, &off)) return CUDA_ERROR_OUT_OF_MEMORY;
        chunk_use(c);
        *addr = c->addr + off, *in = c;
        return CUDA_SUCCESS;
    }
    uint64_t need = round_up(bytes, w->gran);
    if (need < bytes) {
        w->no_room = true;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < w->nchunks; i++) {
        struct chunk *c = w->chunks[i];
        if (!c->small && c->live == 0 && c->size == need) {
            chunk_use(c);
            *addr = c->addr, *in = c;
            return CUDA_SUCCESS;
        }
    }
    struct chunk *c;
    if ((r = chunk_new(w, dev, need, false, &c)) != CUDA_SUCCESS) return r;
    chunk_use(c);
    *addr = c->addr, *in = c;
    return CUDA_SUCCESS;
}

/* A migration's replay: place `bytes` at exactly `addr` (where the
 * exporting session had it), in a chunk of the same kind the exporter's
 * placement would have made. */
static CUresult window_place_fixed(struct window *w, int dev, uint64_t bytes, uint64_t addr, struct chunk **in)
{
    if (addr < w->base || addr - w->base >= w->size) return CUDA_ERROR_INVALID_ADDRESS_SPACE;
    struct chunk *c = chunk_holding(w, addr);
    CUresult r;
    if (bytes <= SMALL_MAX) {
        uint64_t off = addr - w->base;
        if (!c && (r = chunk_new_at(w, dev, w->gran, true, off - off % w->gran, &c)) != CUDA_SUCCESS) return r;
        if (!c->small || !spans_take_at(&c->free, addr - c->addr, round_up(bytes, SMALL_ALIGN)))
            return CUDA_ERROR_ALREADY_MAPPED;
    } else {
        uint64_t need = round_up(bytes, w->gran);
        if (c || (addr - w->base) % w->gran) return CUDA_ERROR_ALREADY_MAPPED;
        if ((r = chunk_new_at(w, dev, need, false, addr - w->base, &c)) != CUDA_SUCCESS) return r;
    }
    chunk_use(c);
    *in = c;
    return CUDA_SUCCESS;
}

/* The address the next allocation must get (window_place_next_at), 0 when
 * none: read and cleared under the lock. */
static uint64_t next_fixed;

/* An allocation leaves its chunk: the chunk becomes idle when empty, and
 * goes back to the driver when the idle ones would pass the cache. */
static void chunk_leave(struct window *w, struct chunk *c, uint64_t addr, uint64_t bytes)
{
    if (c->small) spans_give(&c->free, addr - c->addr, round_up(bytes, SMALL_ALIGN));
    if (--c->live > 0) return;
    idle_bytes += c->size;
    if (idle_bytes > cfg.cache_bytes) chunk_release(w, c);
}

/* ---- the current context --------------------------------------------------- */

static CUresult current(CUcontext *ctx, int *dev)
{
    CUdevice d = 0;
    CUresult r = orig.cuCtxGetCurrent(ctx);
    if (r == CUDA_SUCCESS && *ctx == NULL) r = CUDA_ERROR_INVALID_CONTEXT;
    if (r == CUDA_SUCCESS) r = orig.cuCtxGetDevice(&d);
    *dev = (int)d;
    return r;
}

/* ---- allocation -------------------------------------------------------- */

static void block(unsigned why);

/* When an allocation is the driver's to place instead of the window's. */
enum fallback {
    FALLBACK_NONE,
    FALLBACK_NO_WINDOW, /* the window is unusable (taken, or no VMM) */
    FALLBACK_NO_ROOM,   /* the window has no free addresses for this size */
};

/* Allocate `bytes` (kind, pitch) in the current device's window. Sets
 * *fallback when the window cannot place it: the caller asks the driver
 * instead (driver_alloc_done). A request the window has no room for goes
 * to the driver too, so that the application gets the driver's own answer
 * (its error code, its log entry: a request larger than the GPU fails
 * there, not in SCUDA), never an error SCUDA made up. */
static CUresult window_alloc(CUdeviceptr *p, uint64_t bytes, enum window_kind kind, uint64_t pitch,
                             enum fallback *fallback)
{
    CUcontext ctx;
    int dev;
    *fallback = FALLBACK_NONE;
    CUresult r = current(&ctx, &dev);
    if (r != CUDA_SUCCESS) return r;
    /* A context that faulted fails every call, allocations too, though
     * this one may not reach the driver: the query says so without
     * waiting. */
    r = orig.cuStreamQuery ? orig.cuStreamQuery(NULL) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) return r;
    pthread_mutex_lock(&lock);
    struct window *w = window_open(dev);
    struct chunk *c = NULL;
    uint64_t addr = 0;
    uint64_t fixed = next_fixed;
    next_fixed = 0;
    if (!w) *fallback = fixed ? FALLBACK_NONE : FALLBACK_NO_WINDOW, r = CUDA_ERROR_NOT_SUPPORTED;
    else if (fixed) r = window_place_fixed(w, dev, bytes, addr = fixed, &c);
    else {
        w->no_room = false;
        r = window_place(w, dev, bytes, &addr, &c);
        if (r != CUDA_SUCCESS && w->no_room) *fallback = FALLBACK_NO_ROOM;
    }
    struct record rec = {.addr = addr, .size = bytes, .pitch = pitch, .id = ID_BASE + ++next_id,
                         .kind = kind, .dev = dev, .ctx = ctx, .chunk = c};
    if (r == CUDA_SUCCESS && rec_add(&rec) != 0) {
        chunk_leave(w, c, addr, bytes);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) w->live += bytes;
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) *p = addr;
    return r;
}

/* The driver's answer to a request the window did not place. Memory the
 * driver placed because the window had no room cannot be reproduced at
 * the same address elsewhere: the session can no longer move. */
static CUresult driver_alloc_done(CUresult r, enum fallback why, uint64_t bytes)
{
    if (why != FALLBACK_NO_ROOM) return r;
    CUdevice dev = -1;
    orig.cuCtxGetDevice(&dev);
    uint64_t size = cfg.size; /* every device's window has this size */
    if (r == CUDA_SUCCESS) {
        block(WINDOW_BLOCK_NO_ROOM);
        LOG_WARN("device %d: %llu bytes do not fit its memory window (%llu bytes); the driver placed them, and this "
                 "session cannot move to another server; raise --window-size",
                 dev, (unsigned long long)bytes, (unsigned long long)size);
    } else {
        LOG_INFO("device %d: %llu bytes do not fit its memory window (%llu bytes); the driver refused them too "
                 "(CUresult %d), which the application gets",
                 dev, (unsigned long long)bytes, (unsigned long long)size, (int)r);
    }
    return r;
}

static CUresult win_cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
    if (p == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    enum fallback fallback;
    CUresult r = window_alloc(p, bytes, WINDOW_ALLOC, 0, &fallback);
    return fallback ? driver_alloc_done(orig.cuMemAlloc_v2(p, bytes), fallback, bytes) : r;
}

/* The driver's row pitch for a device, learnt once from the driver itself
 * (its rule is not documented): the pitch of a 1-byte row. */
static CUresult pitch_align(int dev, uint64_t *align)
{
    pthread_mutex_lock(&lock);
    uint64_t a = dev >= 0 && dev < MAX_DEVICES ? windows[dev].pitch_align : 0;
    pthread_mutex_unlock(&lock);
    if (a == 0) {
        CUdeviceptr p;
        size_t pitch = 0;
        CUresult r = orig.cuMemAllocPitch_v2(&p, &pitch, 1, 1, 4);
        if (r != CUDA_SUCCESS) return r;
        orig.cuMemFree_v2(p);
        if (pitch == 0 || (pitch & (pitch - 1))) return CUDA_ERROR_UNKNOWN;
        a = pitch;
        pthread_mutex_lock(&lock);
        if (dev >= 0 && dev < MAX_DEVICES) windows[dev].pitch_align = a;
        pthread_mutex_unlock(&lock);
    }
    *align = a;
    return CUDA_SUCCESS;
}

static CUresult win_cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t width, size_t height, unsigned elem)
{
    if (!p || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    int dev;
    uint64_t align, rowp, bytes;
    CUresult r = current(&ctx, &dev);
    if (r == CUDA_SUCCESS) r = pitch_align(dev, &align);
    if (r != CUDA_SUCCESS) return r;
    rowp = round_up(width, align);
    if (rowp < width || __builtin_mul_overflow(rowp, (uint64_t)height, &bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    enum fallback fallback;
    r = window_alloc(p, bytes, WINDOW_PITCH, rowp, &fallback);
    if (fallback) return driver_alloc_done(orig.cuMemAllocPitch_v2(p, pitch, width, height, elem), fallback, bytes);
    if (r == CUDA_SUCCESS) *pitch = rowp;
    return r;
}

static bool in_windows(uint64_t p) { return window_device(p) >= 0; }

static CUresult win_cuMemFree_v2(CUdeviceptr p)
{
    if (!in_windows(p)) return orig.cuMemFree_v2(p);
    /* As the driver's free: work queued on the memory finishes before the
     * memory can serve another allocation. */
    CUresult r = orig.cuCtxSynchronize();
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_CONTEXT) return r;
    pthread_mutex_lock(&lock);
    struct window *w = window_holding(p);
    if (!w) { /* the window is not in use: whatever is there is the driver's */
        pthread_mutex_unlock(&lock);
        return orig.cuMemFree_v2(p);
    }
    struct record *rec = rec_holding(p);
    r = CUDA_ERROR_INVALID_VALUE;
    if (rec && rec->addr == p && rec->kind != WINDOW_RESERVE) {
        struct chunk *c = rec->chunk;
        uint64_t bytes = rec->size;
        rec_drop(rec);
        chunk_leave(w, c, p, bytes);
        w->live -= bytes;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* A stream-ordered free of window memory: the stream's work on it
 * finishes first, then it is freed as by cuMemFree. */
static CUresult win_cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    if (!in_windows(p) || !orig.cuStreamSynchronize) return orig.cuMemFreeAsync(p, s);
    CUresult r = orig.cuStreamSynchronize(s);
    return r == CUDA_SUCCESS ? win_cuMemFree_v2(p) : r;
}

/* ---- queries ---------------------------------------------------------------- */

/* What the table knows of p: 1 and *rec for an allocation or a reservation
 * of the application, -1 for window memory that no allocation holds (freed
 * memory in a chunk), 0 when the driver should answer. */
static int lookup(uint64_t p, struct record *rec)
{
    if (!in_windows(p)) return 0;
    pthread_mutex_lock(&lock);
    struct window *w = window_holding(p);
    struct record *r = w ? rec_holding(p) : NULL;
    int found = r ? 1 : w && chunk_holding(w, p) ? -1 : 0;
    if (r) *rec = *r;
    pthread_mutex_unlock(&lock);
    return found;
}

static CUresult win_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p)
{
    struct record rec;
    int found = lookup(p, &rec);
    if (found < 0) return CUDA_ERROR_NOT_FOUND;
    if (found == 0 || rec.kind == WINDOW_RESERVE) return orig.cuMemGetAddressRange_v2(base, size, p);
    if (base) *base = rec.addr;
    if (size) *size = rec.size;
    return CUDA_SUCCESS;
}

/* Attributes that must answer per allocation; the rest are the mapping's,
 * which the driver answers as for cuMemAlloc memory (architecture.md,
 * 9.8, "The device window", lists the one that differs). */
static CUresult win_cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    struct record rec;
    int found = data ? lookup(p, &rec) : 0;
    if (found < 0) return CUDA_ERROR_INVALID_VALUE; /* freed, as the driver says of freed memory */
    if (found == 0) return orig.cuPointerGetAttribute(data, a, p);
    bool alloc = rec.kind != WINDOW_RESERVE;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = rec.addr; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = rec.size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        if (!alloc) break;
        *(unsigned long long *)data = rec.id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!alloc) break;
        *(CUcontext *)data = rec.ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        if (!alloc) break;
        *(unsigned *)data = rec.sync_memops;
        return CUDA_SUCCESS;
    default: break;
    }
    return orig.cuPointerGetAttribute(data, a, p);
}

/* SYNC_MEMOPS: the driver refuses it on VMM mappings (NOT_SUPPORTED), but
 * the application set it on what it knows as cuMemAlloc memory, where the
 * driver takes it. Its effect, synchronous memory operations that always
 * synchronize, cannot be told apart by a client: every call of the
 * session runs in order, and nothing outside CUDA's order (a GPUDirect
 * RDMA peer of the client) can reach the server's memory. So the window
 * keeps the value, for cuPointerGetAttribute to answer. */
static CUresult win_cuPointerSetAttribute(const void *value, CUpointer_attribute a, CUdeviceptr p)
{
    if (a != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !value || !in_windows(p)) return orig.cuPointerSetAttribute(value, a, p);
    pthread_mutex_lock(&lock);
    struct record *r = window_holding(p) ? rec_holding(p) : NULL;
    CUresult res = r && r->kind != WINDOW_RESERVE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (res == CUDA_SUCCESS) r->sync_memops = *(const unsigned *)value ? 1 : 0;
    pthread_mutex_unlock(&lock);
    return res;
}

static CUresult win_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    struct record rec;
    if (!in_windows(p) || !attrs || !data || lookup(p, &rec) == 0) return orig.cuPointerGetAttributes(n, attrs, data, p);
    for (unsigned i = 0; i < n; i++) {
        if (!data[i]) continue;
        CUresult r = win_cuPointerGetAttribute(data[i], attrs[i], p);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

/* Mapped bytes the application does not hold (idle chunks, the rest of
 * small chunks) are memory its allocations can have: free, as far as it
 * can tell. So free memory falls by what it allocates, as the quota
 * counts it. */
static CUresult win_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    CUresult r = orig.cuMemGetInfo_v2(free_bytes, total);
    CUcontext ctx;
    int dev;
    if (r != CUDA_SUCCESS || !free_bytes || !total || current(&ctx, &dev) != CUDA_SUCCESS) return r;
    uint64_t spare = 0;
    pthread_mutex_lock(&lock);
    if (dev >= 0 && dev < MAX_DEVICES) spare = windows[dev].mapped - windows[dev].live;
    pthread_mutex_unlock(&lock);
    *free_bytes = *free_bytes + spare < *total ? *free_bytes + spare : *total;
    return r;
}

/* ---- the application's own address reservations ---------------------------- */

/* Placed in the window: at `addr` when the application asks for a free
 * address there, else at the lowest free one (the driver too takes the
 * address as a hint). Outside the windows the driver decides. */
static CUresult win_cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                        unsigned long long flags)
{
    CUcontext ctx;
    int dev;
    if (!ptr || size == 0 || flags || (align & (align - 1)) || (addr && !in_windows(addr)) ||
        current(&ctx, &dev) != CUDA_SUCCESS) {
        CUresult r = orig.cuMemAddressReserve(ptr, size, align, addr, flags);
        if (r == CUDA_SUCCESS && (addr == 0 || *ptr != addr)) {
            pthread_mutex_lock(&lock);
            blockers |= WINDOW_BLOCK_DRIVER_RESERVE;
            pthread_mutex_unlock(&lock);
        }
        return r;
    }
    pthread_mutex_lock(&lock);
    struct window *w = window_open(dev);
    CUresult r = CUDA_SUCCESS;
    uint64_t off = 0;
    if (!w) {
        pthread_mutex_unlock(&lock);
        return orig.cuMemAddressReserve(ptr, size, align, addr, flags);
    }
    uint64_t al = align > w->gran ? align : w->gran;
    bool mine = addr >= w->base && addr - w->base < w->size && addr % al == 0;
    if (size % w->gran) r = CUDA_ERROR_INVALID_VALUE;
    else if (mine && spans_take_at(&w->va, addr - w->base, size)) off = addr - w->base;
    else if (!spans_take(&w->va, size, al, &off)) r = CUDA_ERROR_OUT_OF_MEMORY;
    struct record rec = {.addr = w->base + off, .size = size, .kind = WINDOW_RESERVE, .dev = dev};
    if (r == CUDA_SUCCESS && rec_add(&rec) != 0) {
        spans_give(&w->va, off, size);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) *ptr = rec.addr;
    return r;
}

static CUresult win_cuMemAddressFree(CUdeviceptr p, size_t size)
{
    if (!in_windows(p)) return orig.cuMemAddressFree(p, size);
    pthread_mutex_lock(&lock);
    struct window *w = window_holding(p);
    struct record *rec = w ? rec_holding(p) : NULL;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (rec && rec->kind == WINDOW_RESERVE && rec->addr == p && rec->size == size) {
        spans_give(&w->va, p - w->base, size);
        rec_drop(rec);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- memory the driver places ------------------------------------------------- */

static void block(unsigned why)
{
    pthread_mutex_lock(&lock);
    blockers |= why;
    pthread_mutex_unlock(&lock);
}

static CUresult win_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s)
{
    CUresult r = orig.cuMemAllocAsync(p, n, s);
    if (r == CUDA_SUCCESS) block(WINDOW_BLOCK_STREAM_ORDERED);
    return r;
}

static CUresult win_cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s)
{
    CUresult r = orig.cuMemAllocFromPoolAsync(p, n, pool, s);
    if (r == CUDA_SUCCESS) block(WINDOW_BLOCK_STREAM_ORDERED);
    return r;
}

static CUresult win_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t n,
                                           CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    CUresult r = orig.cuGraphAddMemAllocNode(node, g, deps, n, params);
    if (r == CUDA_SUCCESS) block(WINDOW_BLOCK_STREAM_ORDERED);
    return r;
}

static CUresult win_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags)
{
    CUresult r = orig.cuMemAllocManaged(p, n, flags);
    if (r == CUDA_SUCCESS) block(WINDOW_BLOCK_MANAGED);
    return r;
}

/* ---- contexts that end ----------------------------------------------------- */

/* The driver frees a context's cuMemAlloc memory with it; window memory
 * belongs to the process, so the table lets it go here. */
static void drop_context(CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    for (size_t i = nrecs; i-- > 0;) {
        struct record *rec = &recs[i];
        if (rec->ctx != ctx || rec->kind == WINDOW_RESERVE) continue;
        struct window *w = &windows[rec->dev];
        struct chunk *c = rec->chunk;
        uint64_t addr = rec->addr, bytes = rec->size;
        rec_drop(rec);
        chunk_leave(w, c, addr, bytes);
        w->live -= bytes;
    }
    pthread_mutex_unlock(&lock);
}

static CUresult win_cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = orig.cuCtxDestroy_v2(ctx);
    if (r == CUDA_SUCCESS) drop_context(ctx);
    return r;
}

/* A primary context ends when its last retain is released or it is reset.
 * Its handle is learnt first (a retain undone at once). */
static void primary_ended(CUdevice dev, CUcontext ctx)
{
    unsigned flags;
    int active = 1;
    if (ctx && orig.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active) drop_context(ctx);
}

static CUcontext primary_of(CUdevice dev)
{
    CUcontext ctx = NULL;
    if (orig.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return NULL;
    orig.cuDevicePrimaryCtxRelease_v2(dev);
    return ctx;
}

/* A release or reset of dev's primary context: if it was active, what it
 * held is gone once the call succeeds. */
static CUresult primary_call(CUdevice dev, CUresult (*call)(CUdevice))
{
    unsigned flags;
    int active = 0;
    CUcontext ctx = orig.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active
                        ? primary_of(dev) : NULL;
    CUresult r = call(dev);
    if (r == CUDA_SUCCESS) primary_ended(dev, ctx);
    return r;
}

static CUresult win_cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_call(dev, orig.cuDevicePrimaryCtxRelease_v2);
}

static CUresult win_cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_call(dev, orig.cuDevicePrimaryCtxReset_v2);
}

/* ---- the table for a migration ------------------------------------------------ */

bool window_entry_from(uint64_t from, struct window_entry *e)
{
    pthread_mutex_lock(&lock);
    size_t i = rec_lower(from);
    bool found = i < nrecs;
    if (found)
        *e = (struct window_entry){.addr = recs[i].addr, .size = recs[i].size, .pitch = recs[i].pitch,
                                   .kind = recs[i].kind, .device = recs[i].dev, .ctx = recs[i].ctx};
    pthread_mutex_unlock(&lock);
    return found;
}

void window_place_next_at(uint64_t addr)
{
    pthread_mutex_lock(&lock);
    next_fixed = addr;
    pthread_mutex_unlock(&lock);
}

bool window_chunk_of(uint64_t p, struct window_chunk *out)
{
    if (!in_windows(p)) return false;
    pthread_mutex_lock(&lock);
    struct window *w = window_holding(p);
    struct record *r = w ? rec_holding(p) : NULL;
    struct chunk *c = r && r->chunk ? r->chunk : NULL;
    if (c)
        *out = (struct window_chunk){.handle = c->handle, .addr = c->addr, .size = c->size, .device = r->dev,
                                     .shareable = w->shareable != CU_MEM_HANDLE_TYPE_NONE};
    pthread_mutex_unlock(&lock);
    return c != NULL;
}

unsigned window_blockers(void)
{
    pthread_mutex_lock(&lock);
    unsigned b = blockers;
    pthread_mutex_unlock(&lock);
    return b;
}

bool window_range(int dev, uint64_t *base, uint64_t *size)
{
    if (cfg.size == 0 || dev < 0 || dev >= MAX_DEVICES) return false;
    *base = window_base(dev);
    *size = cfg.size;
    return true;
}

int window_set_first(unsigned index)
{
    pthread_mutex_lock(&lock);
    int rc = 0;
    if (cfg.size == 0) rc = -1;
    else if (index >= MAX_DEVICES || cfg.base + ((uint64_t)index + 1) * cfg.size > VA_LIMIT) rc = -2;
    for (int d = 0; d < MAX_DEVICES && rc == 0; d++)
        if (windows[d].state != 0 && index != first) rc = -3; /* placed memory keeps its addresses */
    if (rc == 0) first = index;
    /* A session moving in starts its windows at 0: the index does not
     * travel with it yet, so such a session stays where it is. */
    if (rc == 0 && index != 0) blockers |= WINDOW_BLOCK_FIRST;
    pthread_mutex_unlock(&lock);
    return rc;
}

/* ---- install ---------------------------------------------------------------- */

#define WRAP(name) \
    if (t->name) t->name = win_##name

int window_install(struct driver_table *t, const struct window_config *c)
{
    if (c->size == 0 || c->base % CHUNK_MIN || c->size % CHUNK_MIN || c->base == 0 || c->base >= VA_LIMIT ||
        c->size > VA_LIMIT - c->base) {
        LOG_ERROR("memory window %#llx+%#llx is not usable: base and size must be multiples of 2 MiB, the base "
                  "above 0 and the window below 2^47",
                  (unsigned long long)c->base, (unsigned long long)c->size);
        return -1;
    }
    if (!t->cuMemCreate || !t->cuMemMap || !t->cuMemSetAccess || !t->cuMemAddressReserve || !t->cuMemUnmap ||
        !t->cuMemRelease || !t->cuMemAddressFree || !t->cuMemGetAllocationGranularity || !t->cuCtxGetCurrent ||
        !t->cuCtxGetDevice || !t->cuCtxSynchronize || !t->cuMemAllocPitch_v2 || !t->cuMemFree_v2) {
        LOG_WARN("the driver lacks the virtual memory calls (cuMemCreate, cuMemMap, cuMemAddressReserve...): "
                 "device memory is placed by the driver, and sessions cannot move to another server");
        return -1;
    }
    orig = *t;
    cfg = *c;
    WRAP(cuMemAlloc_v2);
    WRAP(cuMemAllocPitch_v2);
    WRAP(cuMemFree_v2);
    WRAP(cuMemFreeAsync);
    WRAP(cuMemGetAddressRange_v2);
    WRAP(cuPointerGetAttribute);
    WRAP(cuPointerGetAttributes);
    if (t->cuPointerSetAttribute) WRAP(cuPointerSetAttribute);
    WRAP(cuMemGetInfo_v2);
    WRAP(cuMemAddressReserve);
    WRAP(cuMemAddressFree);
    WRAP(cuMemAllocAsync);
    WRAP(cuMemAllocFromPoolAsync);
    WRAP(cuGraphAddMemAllocNode);
    WRAP(cuMemAllocManaged);
    if (t->cuDevicePrimaryCtxGetState && t->cuDevicePrimaryCtxRetain) {
        WRAP(cuCtxDestroy_v2);
        WRAP(cuDevicePrimaryCtxRelease_v2);
        WRAP(cuDevicePrimaryCtxReset_v2);
    }
    return 0;
}

/* ---- scratch memory, outside the session's state ------------------------- */

/* Scratch is mapped at the top of the device's window, taken out of its
 * free addresses for as long as it lives: nothing the driver places
 * (globals, managed memory) moves because of it, and the session's own
 * allocations, placed lowest address first, stay where a replay puts
 * them. It is in no record, so no migration sees it. */
struct scratch {
    uint64_t addr, size;
    CUmemGenericAllocationHandle handle;
    struct window *w;
};
static struct scratch *scratch;
static size_t nscratch, capscratch;

/* The highest `len` bytes of a free span, aligned to `align`. */
static bool spans_take_top(struct spans *s, uint64_t len, uint64_t align, uint64_t *off)
{
    for (size_t i = s->n; i-- > 0;) {
        uint64_t end = s->v[i].off + s->v[i].len;
        if (len > end) continue;
        uint64_t at = (end - len) / align * align;
        if (at < s->v[i].off) continue;
        if (spans_carve(s, i, at, len) != 0) return false;
        *off = at;
        return true;
    }
    return false;
}

static int scratch_note(struct scratch sc)
{
    if (nscratch == capscratch) {
        size_t cap = capscratch ? capscratch * 2 : 16;
        struct scratch *v = realloc(scratch, cap * sizeof *v);
        if (!v) return -1;
        scratch = v, capscratch = cap;
    }
    scratch[nscratch++] = sc;
    return 0;
}

/* Map `size` bytes at the top of window w: *addr. */
static CUresult scratch_map(struct window *w, int dev, uint64_t size, uint64_t *addr)
{
    uint64_t off;
    if (!spans_take_top(&w->va, size, w->gran, &off)) return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemGenericAllocationHandle h;
    CUresult r = chunk_map(w, dev, w->base + off, size, &h);
    if (r == CUDA_SUCCESS && scratch_note((struct scratch){w->base + off, size, h, w}) != 0) {
        orig.cuMemUnmap(w->base + off, size);
        orig.cuMemRelease(h);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) spans_give(&w->va, off, size);
    else *addr = w->base + off;
    return r;
}

CUresult window_scratch_alloc(CUdeviceptr *p, size_t bytes)
{
    if (cfg.size == 0) return CUDA_ERROR_NOT_SUPPORTED; /* the window is off */
    CUcontext ctx;
    int dev;
    pthread_mutex_lock(&lock);
    CUresult r = current(&ctx, &dev);
    struct window *w = r == CUDA_SUCCESS ? window_open(dev) : NULL;
    if (r == CUDA_SUCCESS && !w) r = CUDA_ERROR_NOT_SUPPORTED;
    uint64_t size = w ? round_up(bytes, w->gran) : 0, addr = 0;
    if (r == CUDA_SUCCESS) r = size < bytes ? CUDA_ERROR_OUT_OF_MEMORY : scratch_map(w, dev, size, &addr);
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) *p = (CUdeviceptr)addr;
    return r;
}

void window_scratch_free(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nscratch; i++) {
        struct scratch sc = scratch[i];
        if (sc.addr != p) continue;
        orig.cuMemUnmap(sc.addr, sc.size);
        orig.cuMemRelease(sc.handle);
        spans_give(&sc.w->va, sc.addr - sc.w->base, sc.size);
        memmove(&scratch[i], &scratch[i + 1], (nscratch - i - 1) * sizeof *scratch);
        nscratch--;
        break;
    }
    pthread_mutex_unlock(&lock);
}

CUresult window_scratch_room(size_t *free_bytes, size_t *total)
{
    if (!orig.cuMemGetInfo_v2) return CUDA_ERROR_NOT_SUPPORTED;
    return orig.cuMemGetInfo_v2(free_bytes, total);
}
