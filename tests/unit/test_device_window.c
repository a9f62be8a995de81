/* Unit tests of the device window (src/server/device_window.c) over a fake
 * driver that only keeps accounts: placement, reuse of freed space and of
 * idle chunks, fragmentation, a full window, a window that is taken,
 * unknown pointers, the per-allocation answers, the application's own
 * reservations, scratch memory at the top. */
#include <string.h>

#include "check.h"
#include "server/device_window.h"

#define MiB (1ull << 20)
#define BASE 0x200000000000ull
#define SIZE (64 * MiB)
#define TOTAL (1024 * MiB)
#define CTX ((CUcontext)(uintptr_t)0xc7c7)

/* ---- the fake driver -------------------------------------------------- */

static int dev, creates, releases, maps;
static CUresult sticky;
static uint64_t phys; /* bytes of cuMemCreate handles alive */
static uint64_t sizes[4096];

static CUresult f_granularity(size_t *g, const CUmemAllocationProp *p, CUmemAllocationGranularity_flags o)
{
    (void)p, (void)o;
    *g = 2 * MiB;
    return CUDA_SUCCESS;
}
/* Device 1's window is taken: the driver puts it elsewhere. */
static CUresult f_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags)
{
    (void)size, (void)align, (void)flags;
    *p = addr == BASE + SIZE ? 0x7f0000000000ull : addr ? addr : 0x300000000ull;
    return CUDA_SUCCESS;
}
static CUresult f_addr_free(CUdeviceptr p, size_t n) { (void)p, (void)n; return CUDA_SUCCESS; }
static CUresult f_create(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p, unsigned long long f)
{
    (void)p, (void)f;
    if (phys + n > TOTAL) return CUDA_ERROR_OUT_OF_MEMORY;
    phys += n;
    sizes[++creates] = n;
    *h = (CUmemGenericAllocationHandle)creates;
    return CUDA_SUCCESS;
}
static CUresult f_release(CUmemGenericAllocationHandle h)
{
    phys -= sizes[h];
    releases++;
    return CUDA_SUCCESS;
}
static CUresult f_map(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h, unsigned long long f)
{
    (void)p, (void)n, (void)o, (void)h, (void)f;
    maps++;
    return CUDA_SUCCESS;
}
static CUresult f_unmap(CUdeviceptr p, size_t n) { (void)p, (void)n; return CUDA_SUCCESS; }
static CUresult f_access(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c)
{
    (void)p, (void)n, (void)d, (void)c;
    return CUDA_SUCCESS;
}
static CUresult f_current(CUcontext *c) { *c = CTX; return CUDA_SUCCESS; }
static CUresult f_device(CUdevice *d) { *d = dev; return CUDA_SUCCESS; }
static CUresult f_count(int *n) { *n = 2; return CUDA_SUCCESS; }
static CUresult f_peer(int *can, CUdevice a, CUdevice b) { (void)a, (void)b; *can = 0; return CUDA_SUCCESS; }
static CUresult f_sync(void) { return sticky; }
static CUresult f_query(CUstream s) { (void)s; return sticky; }
static CUresult f_stream_sync(CUstream s) { (void)s; return sticky; }
static CUresult f_free_async(CUdeviceptr p, CUstream s) { (void)p, (void)s; return CUDA_ERROR_INVALID_VALUE; }
static CUresult f_pitch(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)
{
    (void)w, (void)h, (void)e;
    *p = 0x7f0000100000ull;
    *pitch = 512;
    return CUDA_SUCCESS;
}
static CUresult f_alloc(CUdeviceptr *p, size_t n) { (void)n; *p = 0x7f0000200000ull; return CUDA_SUCCESS; }
static CUresult f_free(CUdeviceptr p) { return p >= 0x7f0000000000ull ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
/* The driver answers for the mapping: a chunk, not an allocation. */
static CUresult f_attr(void *data, CUpointer_attribute a, CUdeviceptr p)
{
    if (a == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(unsigned *)data = CU_MEMORYTYPE_DEVICE;
    else if (a == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *)data = p & ~(2 * MiB - 1);
    else *(uint64_t *)data = 0;
    return CUDA_SUCCESS;
}
static CUresult f_range(CUdeviceptr *b, size_t *s, CUdeviceptr p)
{
    *b = p & ~(2 * MiB - 1);
    *s = 2 * MiB;
    return CUDA_SUCCESS;
}
static CUresult f_info(size_t *free_bytes, size_t *total)
{
    *free_bytes = TOTAL - phys;
    *total = TOTAL;
    return CUDA_SUCCESS;
}

static struct driver_table t = {
    .cuMemGetAllocationGranularity = f_granularity, .cuMemAddressReserve = f_reserve,
    .cuMemAddressFree = f_addr_free, .cuMemCreate = f_create, .cuMemRelease = f_release, .cuMemMap = f_map,
    .cuMemUnmap = f_unmap, .cuMemSetAccess = f_access, .cuCtxGetCurrent = f_current, .cuCtxGetDevice = f_device,
    .cuDeviceGetCount = f_count, .cuDeviceCanAccessPeer = f_peer, .cuCtxSynchronize = f_sync,
    .cuStreamQuery = f_query, .cuStreamSynchronize = f_stream_sync, .cuMemFreeAsync = f_free_async, .cuMemAllocPitch_v2 = f_pitch, .cuMemAlloc_v2 = f_alloc, .cuMemFree_v2 = f_free,
    .cuPointerGetAttribute = f_attr, .cuMemGetAddressRange_v2 = f_range, .cuMemGetInfo_v2 = f_info,
};

static uint64_t alloc(size_t n)
{
    CUdeviceptr p = 0;
    return t.cuMemAlloc_v2(&p, n) == CUDA_SUCCESS ? p : 0;
}

static uint64_t attr64(CUpointer_attribute a, uint64_t p)
{
    uint64_t v = 0;
    return t.cuPointerGetAttribute(&v, a, p) == CUDA_SUCCESS ? v : ~0ull;
}

int main(void)
{
    struct window_config bad = {.base = BASE + 4096, .size = SIZE, .cache_bytes = 8 * MiB};
    CHECK(window_install(&t, &bad) == -1); /* not on a 2 MiB boundary */
    struct window_config cfg = {.base = BASE, .size = SIZE, .cache_bytes = 8 * MiB};
    CHECK(window_install(&t, &cfg) == 0);

    /* placement: small ones side by side in the first chunk, 512-aligned;
     * a large one in a chunk of its own, rounded to 2 MiB */
    uint64_t a = alloc(100), b = alloc(100), big = alloc(3 * MiB);
    CHECK(a == BASE);
    CHECK(b == BASE + 512);
    CHECK(big == BASE + 2 * MiB);
    CHECK(creates == 2 && phys == 6 * MiB);

    /* per-allocation answers, not the chunk's */
    CUdeviceptr rb = 0;
    size_t rs = 0;
    CHECK(t.cuMemGetAddressRange_v2(&rb, &rs, b + 10) == CUDA_SUCCESS && rb == b && rs == 100);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, b + 99) == b);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_SIZE, b) == 100);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_BUFFER_ID, a) != attr64(CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
    CHECK(attr64(CU_POINTER_ATTRIBUTE_CONTEXT, a) == (uint64_t)(uintptr_t)CTX);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a) == CU_MEMORYTYPE_DEVICE); /* the driver's */
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, b + 200) == ~0ull); /* between allocations */
    CHECK(t.cuMemGetAddressRange_v2(&rb, &rs, b + 200) == CUDA_ERROR_NOT_FOUND);

    /* cuMemGetInfo falls by what was asked for, not by chunks */
    size_t fr, to;
    CHECK(t.cuMemGetInfo_v2(&fr, &to) == CUDA_SUCCESS && fr == TOTAL - 100 - 100 - 3 * MiB && to == TOTAL);

    /* unknown pointers: refused, nothing changes */
    CHECK(t.cuMemFree_v2(b + 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(t.cuMemFree_v2(BASE + 40 * MiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(t.cuMemFree_v2(0x1234) == CUDA_ERROR_INVALID_VALUE); /* the driver's answer */

    /* reuse: freed space and idle chunks, with no new driver memory */
    CHECK(t.cuMemFree_v2(b) == CUDA_SUCCESS);
    CHECK(t.cuMemFree_v2(b) == CUDA_ERROR_INVALID_VALUE);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_SIZE, b) == ~0ull);
    CHECK(alloc(300) == b);
    CHECK(t.cuMemFree_v2(big) == CUDA_SUCCESS);
    CHECK(releases == 0); /* kept mapped: idle */
    CHECK(alloc(3 * MiB + 5) == big && creates == 2);

    /* fragmentation: holes too small for a request leave it to a new chunk */
    uint64_t q[8];
    uint64_t c3 = alloc(256 * 1024); /* the first chunk still has room: a, b, then this */
    CHECK(c3 == BASE + 1024);
    for (int i = 0; i < 7; i++) q[i] = alloc(256 * 1024);
    CHECK(q[6] == BASE + 6 * MiB); /* the first chunk is full: a new small chunk after `big` */
    CHECK(t.cuMemFree_v2(q[1]) == CUDA_SUCCESS && t.cuMemFree_v2(q[3]) == CUDA_SUCCESS);
    uint64_t wide = alloc(512 * 1024);
    CHECK(wide == q[6] + 256 * 1024);
    CHECK(alloc(256 * 1024) == q[1]);

    /* pitch: the driver's row alignment, the whole block per allocation */
    CUdeviceptr pp = 0;
    size_t pitch = 0;
    CHECK(t.cuMemAllocPitch_v2(&pp, &pitch, 100, 10, 4) == CUDA_SUCCESS && pitch == 512);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_SIZE, pp) == 5120);
    CHECK(t.cuMemAllocPitch_v2(&pp, &pitch, 100, 10, 3) == CUDA_ERROR_INVALID_VALUE);

    /* the application's reservations: in the window, a free fixed address
     * honoured, a taken one placed elsewhere, freed only as reserved */
    CUdeviceptr r1 = 0, r2 = 0, r3 = 0;
    CHECK(t.cuMemAddressReserve(&r1, 8 * MiB, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(r1 >= BASE && r1 + 8 * MiB <= BASE + SIZE && r1 % (2 * MiB) == 0);
    CHECK(t.cuMemAddressReserve(&r2, 4 * MiB, 0, BASE + 48 * MiB, 0) == CUDA_SUCCESS && r2 == BASE + 48 * MiB);
    CHECK(t.cuMemAddressReserve(&r3, 4 * MiB, 0, r1, 0) == CUDA_SUCCESS && r3 != r1);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, r1 + 12345) == r1);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_SIZE, r1 + 12345) == 8 * MiB);
    CHECK(t.cuMemAddressReserve(&r3, 3 * MiB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(t.cuMemAddressFree(r1, 4 * MiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(t.cuMemAddressFree(r1, 8 * MiB) == CUDA_SUCCESS);
    CHECK(t.cuMemFree_v2(r2) == CUDA_ERROR_INVALID_VALUE); /* a reservation is no allocation */

    /* the table, walked in address order */
    struct window_entry e;
    int n = 0, pitched = 0, reserves = 0;
    uint64_t last = 0;
    for (uint64_t from = 0; window_entry_from(from, &e); from = e.addr + 1) {
        CHECK(e.addr >= last);
        last = e.addr;
        n++;
        pitched += e.kind == WINDOW_PITCH && e.pitch == 512 && e.size == 5120;
        reserves += e.kind == WINDOW_RESERVE;
    }
    CHECK(n == 14 && pitched == 1 && reserves == 2);
    CHECK(window_blockers() == 0);

    /* a stream-ordered free of window memory frees it, once */
    uint64_t fa = alloc(100);
    CHECK(fa != 0 && t.cuMemFreeAsync(fa, NULL) == CUDA_SUCCESS);
    CHECK(t.cuMemFreeAsync(fa, NULL) == CUDA_ERROR_INVALID_VALUE);

    /* a request the window has no room for is the driver's: its answer
     * (here a placement; a refusal would be the driver's error and log),
     * and the session can no longer move; what fits still fits */
    CHECK(alloc(40 * MiB) == 0x7f0000200000ull);
    CHECK(window_blockers() == WINDOW_BLOCK_NO_ROOM);
    CHECK(t.cuMemFree_v2(0x7f0000200000ull) == CUDA_SUCCESS);
    CHECK(alloc(100) != 0);

    /* the cache is bounded: idle chunks past it go back to the driver */
    uint64_t l1 = alloc(4 * MiB), l2 = alloc(6 * MiB);
    CHECK(l1 && l2);
    int before = releases;
    CHECK(t.cuMemFree_v2(l1) == CUDA_SUCCESS && releases == before);     /* 4 MiB idle: kept */
    CHECK(t.cuMemFree_v2(l2) == CUDA_SUCCESS && releases == before + 1); /* 10 MiB > 8: released */

    /* scratch memory: at the top of the window, in no record, its
     * addresses taken while it lives and given back after; the session's
     * allocations go on at the lowest addresses */
    CUdeviceptr s1 = 0, s2 = 0;
    CHECK(window_scratch_alloc(&s1, 3 * MiB) == CUDA_SUCCESS && s1 == BASE + SIZE - 4 * MiB);
    CHECK(window_scratch_alloc(&s2, 2 * MiB) == CUDA_SUCCESS && s2 == s1 - 2 * MiB);
    struct window_entry se;
    CHECK(!window_entry_from(s2, &se)); /* no migration sees it */
    uint64_t low = alloc(5 * MiB);
    CHECK(low && low < BASE + 32 * MiB);
    uint64_t held = phys;
    window_scratch_free(s1);
    window_scratch_free(s2);
    CHECK(phys == held - 6 * MiB);
    CHECK(window_scratch_alloc(&s1, 2 * MiB) == CUDA_SUCCESS && s1 == BASE + SIZE - 2 * MiB);
    window_scratch_free(s1);
    CHECK(t.cuMemFree_v2(low) == CUDA_SUCCESS);

    /* a context that faulted: allocations fail with its error */
    sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    CHECK(t.cuMemAlloc_v2(&pp, 100) == CUDA_ERROR_ILLEGAL_ADDRESS);
    sticky = CUDA_SUCCESS;

    /* device 1's window is taken: its memory goes to the driver, and the
     * session is marked as one that cannot move */
    dev = 1;
    CHECK(alloc(100) == 0x7f0000200000ull);
    CHECK(window_blockers() & WINDOW_BLOCK_NO_WINDOW);

    printf("test_device_window: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
