/* managed.c - managed and zero-copy host memory over the wire
 * (docs/architecture.md, 4 Memory kinds): the host and "the GPU" (the
 * stand-in, in the session process) see the same bytes at the same
 * address; host writes reach the device before later work; device writes
 * are seen after a synchronize; only dirty pages travel (counted with the
 * shim's scuda_client_wire_bytes). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int scuda_client_wire_bytes(uint64_t *sent, uint64_t *received);

#define PAGE 4096u

static void fill(CUdeviceptr out, uint32_t value, uint64_t n, CUstream st)
{
    void *args[] = {&out, &value, &n};
    CU(cuLaunchKernel(h_func("fill_u32"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
}

static void vec_add(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int n)
{
    void *args[] = {&a, &b, &c, &n};
    CU(cuLaunchKernel(h_func("vec_add"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
}

static void wire(uint64_t *sent, uint64_t *received)
{
    CHECK(scuda_client_wire_bytes(sent, received) == 0, "scuda_client_wire_bytes");
}

/* Host initializes, a kernel adds, the host checks. */
static void vector_add(void)
{
    const int n = 100000;
    CUdeviceptr a, b, c;
    CU(cuMemAllocManaged(&a, n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&b, n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&c, n * sizeof(float), CU_MEM_ATTACH_GLOBAL));
    float *ha = (float *)a, *hb = (float *)b, *hc = (float *)c;
    for (int i = 0; i < n; i++) ha[i] = (float)i, hb[i] = 2.0f * (float)i;
    vec_add(a, b, c, n);
    CU(cuCtxSynchronize());
    for (int i = 0; i < n; i++) CHECK(hc[i] == 3.0f * (float)i, "c[%d] = %f", i, hc[i]);
    unsigned managed = 0;
    CU(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, c));
    CHECK(managed == 1, "IS_MANAGED %u", managed);
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(b));
    CU(cuMemFree_v2(c));
}

/* Small allocations share pages (the driver carves them out of 2 MiB
 * blocks): each keeps its own bytes, and freeing one leaves the others. */
static void shared_pages(void)
{
    CUdeviceptr m[5];
    for (int i = 0; i < 5; i++) {
        CU(cuMemAllocManaged(&m[i], 100 + 8 * i, CU_MEM_ATTACH_GLOBAL));
        memset((void *)m[i], 0x10 + i, 100 + 8 * i);
    }
    CHECK(m[1] / PAGE == m[0] / PAGE, "the stand-in should share a page: %llx %llx", (unsigned long long)m[0],
          (unsigned long long)m[1]);
    fill(m[2], 0x33333333, 25, NULL);
    CU(cuCtxSynchronize());
    CU(cuMemFree_v2(m[3]));
    for (int i = 0; i < 5; i++) {
        if (i == 3) continue;
        const unsigned char *h = (const unsigned char *)m[i];
        for (int j = 0; j < 100 + 8 * i; j++) {
            int want = i == 2 && j < 100 ? 0x33 : 0x10 + i;
            CHECK(h[j] == want, "alloc %d byte %d: %x want %x", i, j, h[j], want);
        }
        unsigned char dev;
        CU(cuMemcpyDtoH_v2(&dev, m[i] + 99, 1));
        CHECK(dev == (i == 2 ? 0x33 : 0x10 + i), "device byte of alloc %d: %x", i, dev);
    }
    for (int i = 0; i < 5; i++)
        if (i != 3) CU(cuMemFree_v2(m[i]));
}

/* Host and device take turns on the same pages, 100 times; a plain copy
 * out of managed memory sees the host's latest writes. */
static void alternate(void)
{
    const uint32_t n = 3 * PAGE / 4 + 17, half = n / 2;
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, n * 4, CU_MEM_ATTACH_GLOBAL));
    uint32_t *h = (uint32_t *)m;
    for (uint32_t k = 0; k < 100; k++) {
        for (uint32_t i = half; i < n; i++) h[i] = k + 1000 + i;
        fill(m, k, half, NULL);
        CU(cuCtxSynchronize());
        for (uint32_t i = 0; i < half; i++) CHECK(h[i] == k, "round %u: h[%u] = %u", k, i, h[i]);
        for (uint32_t i = half; i < n; i++) CHECK(h[i] == k + 1000 + i, "round %u: h[%u] = %u", k, i, h[i]);
    }
    h[n - 1] = 77;
    uint32_t last = 0;
    CU(cuMemcpyDtoH_v2(&last, m + (n - 1) * 4, 4));
    CHECK(last == 77, "DtoH of a host write: %u", last);
    CU(cuMemFree_v2(m));
}

/* 4 GiB written 1 page in 64: what crosses the wire is the dirty pages
 * (and, read back after device work, one page per touched page). */
static void sparse(void)
{
    const size_t size = 4ull << 30, stride = 64 * PAGE;
    const size_t dirty = size / stride * PAGE;
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, size, CU_MEM_ATTACH_GLOBAL));
    unsigned char *h = (unsigned char *)m;
    for (size_t off = 0; off < size; off += stride) h[off + 100] = (unsigned char)(off / stride);

    uint64_t s0, r0, s1, r1, s2, r2;
    wire(&s0, &r0);
    CUdeviceptr small;
    CU(cuMemAlloc_v2(&small, 64));
    fill(small, 1, 16, NULL); /* any call pushes first */
    CU(cuCtxSynchronize());
    wire(&s1, &r1);
    printf("sparse: %zu dirty bytes, %llu bytes sent\n", dirty, (unsigned long long)(s1 - s0));
    CHECK(s1 - s0 >= dirty && s1 - s0 <= 2 * dirty, "sent %llu for %zu dirty", (unsigned long long)(s1 - s0), dirty);

    unsigned char probe[2];
    CU(cuMemcpyDtoH_v2(&probe[0], m + 5 * stride + 100, 1));
    CU(cuMemcpyDtoH_v2(&probe[1], m + (size - stride) + 100, 1));
    CHECK(probe[0] == 5 && probe[1] == (unsigned char)(size / stride - 1), "device sees %u %u", probe[0], probe[1]);

    fill(m, 0xabababab, 1, NULL); /* device work: the host copy goes stale */
    CU(cuCtxSynchronize());
    wire(&s1, &r1);
    CHECK(h[0] == 0xab && h[3] == 0xab && h[4] == 0, "device write seen: %x %x %x", h[0], h[3], h[4]);
    size_t bad = 0;
    for (size_t off = stride; off < size; off += stride) bad += h[off + 100] != (unsigned char)(off / stride);
    CHECK(bad == 0, "%zu sparse pages read back wrong", bad);
    wire(&s2, &r2);
    printf("sparse: read back, %llu bytes received\n", (unsigned long long)(r2 - r1));
    CHECK(r2 - r1 <= 2 * dirty, "received %llu for %zu touched", (unsigned long long)(r2 - r1), dirty);
    CU(cuMemFree_v2(small));
    CU(cuMemFree_v2(m));
}

/* A prefetch to the host fetches at the synchronize: later reads move nothing. */
static void prefetch(void)
{
    const size_t n = 64 * PAGE;
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, n, CU_MEM_ATTACH_GLOBAL));
    fill(m, 0x01020304, n / 4, NULL);
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CU(cuMemPrefetchAsync_v2(m, n, host, 0, NULL));
    CU(cuCtxSynchronize());
    uint64_t s0, r0, s1, r1;
    wire(&s0, &r0);
    const uint32_t *h = (const uint32_t *)m;
    for (size_t i = 0; i < n / 4; i++) CHECK(h[i] == 0x01020304, "h[%zu] = %x", i, h[i]);
    wire(&s1, &r1);
    CHECK(r1 == r0 && s1 == s0, "reads after a prefetch moved %llu bytes", (unsigned long long)(r1 - r0));
    CU(cuMemFree_v2(m));
}

/* Memory attached to one stream follows that stream's synchronizations. */
static void attached(void)
{
    CUstream s1, s2;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CU(cuMemAllocManaged(&a, PAGE, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&b, PAGE, CU_MEM_ATTACH_GLOBAL));
    CU(cuStreamAttachMemAsync(s1, a, 0, CU_MEM_ATTACH_SINGLE));
    CU(cuStreamAttachMemAsync(s2, b, 0, CU_MEM_ATTACH_SINGLE));
    CU(cuStreamSynchronize(s1));
    CU(cuStreamSynchronize(s2));
    uint32_t *ha = (uint32_t *)a, *hb = (uint32_t *)b;
    for (int k = 1; k <= 4; k++) {
        fill(a, (uint32_t)k, PAGE / 4, s1);
        fill(b, (uint32_t)(100 + k), PAGE / 4, s2);
        CU(cuStreamSynchronize(s1));
        CHECK(ha[PAGE / 4 - 1] == (uint32_t)k, "a after s1 sync: %u", ha[PAGE / 4 - 1]);
        CU(cuStreamSynchronize(s2));
        CHECK(hb[0] == (uint32_t)(100 + k), "b after s2 sync: %u", hb[0]);
    }
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(b));
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s2));
}

/* Four threads, each with its own stream and buffers attached to it:
 * host writes, a kernel reads them, the host checks after syncing its own
 * stream only, while the others do the same (pushes from one thread must
 * reach the wire before another thread's launch that follows them). */
#define THREADS 4
static int thread_bad[THREADS];
static CUcontext main_ctx;

static void *stream_task(void *arg)
{
    int t = (int)(intptr_t)arg;
    const int n = 3000 + 100 * t;
    CU(cuCtxSetCurrent(main_ctx));
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr x, y;
    CU(cuMemAllocManaged(&x, n * sizeof(float), CU_MEM_ATTACH_HOST));
    CU(cuMemAllocManaged(&y, n * sizeof(float), CU_MEM_ATTACH_HOST));
    CU(cuStreamAttachMemAsync(s, x, 0, CU_MEM_ATTACH_SINGLE));
    CU(cuStreamAttachMemAsync(s, y, 0, CU_MEM_ATTACH_SINGLE));
    CU(cuStreamSynchronize(s));
    float *hx = (float *)x, *hy = (float *)y;
    for (int r = 0; r < 25; r++) {
        for (int i = 0; i < n; i++) hx[i] = (float)(i + t + r);
        void *args[] = {&x, &x, &y, (void *)&n};
        CU(cuLaunchKernel(h_func("vec_add"), 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
        CU(cuStreamSynchronize(s));
        for (int i = 0; i < n; i++) thread_bad[t] += hy[i] != 2.0f * (float)(i + t + r);
    }
    CU(cuMemFree_v2(x));
    CU(cuMemFree_v2(y));
    CU(cuStreamDestroy_v2(s));
    return NULL;
}

static void threads(void)
{
    CU(cuCtxGetCurrent(&main_ctx));
    h_func("vec_add"); /* load the module once, before the threads */
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, stream_task, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) CHECK(thread_bad[t] == 0, "thread %d: %d wrong", t, thread_bad[t]);
}

/* A copy out of managed memory that has to fetch a stale page, while a page
 * of another allocation is dirty: the fetch is itself a call to the server,
 * and must not wait for the push of that page (it once deadlocked here). */
static void fetch_while_dirty(void)
{
    CUdeviceptr a, b, d;
    CU(cuMemAllocManaged(&a, PAGE, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&b, 3 * PAGE, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAlloc_v2(&d, PAGE));
    CUdeviceptr mid = (b + PAGE) & ~(CUdeviceptr)(PAGE - 1); /* a page of b alone */
    fill(b, 7, 3 * PAGE / 4, NULL);
    CU(cuCtxSynchronize()); /* b's pages are stale on the host now */
    *(volatile uint32_t *)a = 1; /* and a's page dirty */
    CU(cuMemcpyHtoD_v2(d, (const void *)mid, PAGE)); /* fetches b's page */
    uint32_t got[2] = {0, 0};
    CU(cuMemcpyDtoH_v2(&got[0], d + PAGE - 4, 4));
    *(volatile uint32_t *)a = 2;
    CU(cuMemcpyDtoH_v2((void *)(mid + 4), d, 4)); /* a partial page of b: fetched, then written */
    CU(cuMemcpyDtoH_v2(&got[1], a, 4));
    CHECK(got[0] == 7 && got[1] == 2, "device bytes %u %u", got[0], got[1]);
    CHECK(((uint32_t *)mid)[1] == 7 && ((uint32_t *)mid)[2] == 7, "host bytes of b");
    CU(cuMemFree_v2(d));
    CU(cuMemFree_v2(b));
    CU(cuMemFree_v2(a));
}

/* Hold the session up for `ms` before it runs its next call: a
 * synchronous copy that it stages, and must finish before the next call,
 * waits behind a sleeping kernel. Calls made meanwhile wait that long for
 * their replies, a window other threads surely act in. */
static void stall_session(uint32_t ms)
{
    static const size_t staged = 2u << 20; /* large enough to be staged */
    static CUdeviceptr dev;
    static void *src;
    if (!dev) {
        CU(cuMemAlloc_v2(&dev, staged));
        CHECK((src = calloc(1, staged)) != NULL);
    }
    void *args[] = {&ms};
    CU(cuLaunchKernel(h_func("sleep_ms"), 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyHtoD_v2(dev, src, staged));
}

static uint64_t sent_now(void)
{
    uint64_t sent, received;
    wire(&sent, &received);
    return sent;
}

/* Wait until this process (another thread of it) sends a call. */
static void wait_sent_beyond(uint64_t before)
{
    while (sent_now() == before) sched_yield();
}

/* A new managed allocation on a page that another thread made dirty while
 * the allocation's call was on the wire: the page is pushed before it is
 * made stale, by the allocating thread, without waiting on itself. */
struct dirtier {
    volatile uint8_t *page;
    uint64_t sent_before;
};

static void *dirty_when_sent(void *arg)
{
    struct dirtier *d = arg;
    wait_sent_beyond(d->sent_before);
    d->page[1] = 3;
    return NULL;
}

static void alloc_while_dirty(void)
{
    CUdeviceptr x, y;
    /* Attached to the host: it is written while the stalling kernel runs,
     * which memory a kernel may use must not be (host_write_during_kernel). */
    do CU(cuMemAllocManaged(&x, 256, CU_MEM_ATTACH_HOST));
    while ((x + 256) % PAGE == 0); /* the next allocation must share x's page */
    volatile uint8_t *hx = (volatile uint8_t *)x;
    hx[0] = 1;
    stall_session(300);
    struct dirtier d = {.page = hx, .sent_before = sent_now()};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, dirty_when_sent, &d) == 0);
    CU(cuMemAllocManaged(&y, 256, CU_MEM_ATTACH_GLOBAL));
    pthread_join(t, NULL);
    CHECK(y / PAGE == x / PAGE, "the stand-in should share a page: %llx %llx", (unsigned long long)x,
          (unsigned long long)y);
    uint8_t dev[2] = {0, 0};
    CU(cuMemcpyDtoH_v2(dev, x, 2));
    CHECK(dev[0] == 1 && dev[1] == 3 && hx[0] == 1 && hx[1] == 3, "x: device %u %u, host %u %u", dev[0], dev[1],
          hx[0], hx[1]);
    CU(cuMemFree_v2(y));
    CU(cuMemFree_v2(x));
}

/* One thread fetches mirrored memory in two runs, the second large enough
 * to be striped over the bulk connections, while another thread opens the
 * bulk connections for its first striped copy and then has a dirty page
 * to push before announcing it. The push happens before the striping lock
 * is taken, never under it, so neither thread waits for the other's lock
 * while holding its own. Run in a process of its own: opening the
 * connections (the window) happens at a process's first striped copy. */
struct striper {
    CUcontext ctx;
    CUdeviceptr dst;
    const void *src;
    size_t n;
};

static void *striped_copy(void *arg)
{
    struct striper *c = arg;
    CU(cuCtxSetCurrent(c->ctx));
    CU(cuMemcpyHtoD_v2(c->dst, c->src, c->n));
    return NULL;
}

static void stripe_while_fetching(void)
{
    const size_t n = 16u << 20, qn = n + 2 * PAGE; /* striped: 8 MiB and more */
    CUdeviceptr q, p, dq, d;
    CU(cuMemAllocManaged(&q, qn, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&p, 64, CU_MEM_ATTACH_HOST)); /* written while the stalling kernel runs */
    CU(cuMemAlloc_v2(&dq, qn));
    CU(cuMemAlloc_v2(&d, n));
    uint8_t *h = malloc(n), *back = malloc(n);
    CHECK(h && back);
    h_pattern(h, n, 7);
    CU(cuMemsetD8_v2(q, 1, qn));
    CU(cuCtxSynchronize()); /* q's host copy is stale */
    volatile uint8_t *hq = (volatile uint8_t *)q, *hp = (volatile uint8_t *)p;
    CHECK(hq[PAGE] == 1); /* page 1 valid: q is fetched as page 0, then the rest */
    hp[0] = 1;
    stall_session(300); /* pushes p: its page is clean */
    struct striper c = {.dst = d, .src = h, .n = n};
    CU(cuCtxGetCurrent(&c.ctx));
    uint64_t before = sent_now();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, striped_copy, &c) == 0);
    wait_sent_beyond(before); /* it is opening the bulk connections */
    hp[0] = 2;                /* a dirty page for its announcement to push */
    CU(cuMemcpyHtoD_v2(dq, (const void *)q, qn));
    pthread_join(t, NULL);
    uint8_t got[2] = {0, 0};
    CU(cuMemcpyDtoH_v2(&got[0], dq + qn - 1, 1));
    CU(cuMemcpyDtoH_v2(&got[1], p, 1));
    CHECK(got[0] == 1 && got[1] == 2, "device bytes %u %u", got[0], got[1]);
    CU(cuMemcpyDtoH_v2(back, d, n));
    CHECK(h_diff(h, back, n) < 0, "striped copy differs at %ld", h_diff(h, back, n));
    free(back);
    free(h);
    CU(cuMemFree_v2(d));
    CU(cuMemFree_v2(dq));
    CU(cuMemFree_v2(p));
    CU(cuMemFree_v2(q));
}

/* Zero-copy: a kernel reads and writes cuMemHostAlloc memory through the
 * address cuMemHostGetDevicePointer gives. */
static void zero_copy(void)
{
    const int n = 5000;
    float *h;
    CU(cuMemHostAlloc((void **)&h, 3 * n * sizeof(float), CU_MEMHOSTALLOC_DEVICEMAP));
    for (int i = 0; i < n; i++) h[i] = (float)i, h[n + i] = 0.5f;
    CUdeviceptr d;
    CU(cuMemHostGetDevicePointer_v2(&d, h, 0));
    CUdeviceptr d2;
    CU(cuMemHostGetDevicePointer_v2(&d2, h + n, 0));
    CHECK(d2 == d + n * sizeof(float), "device pointer of an offset");
    for (int round = 0; round < 3; round++) {
        vec_add(d, d + n * sizeof(float), d + 2 * n * sizeof(float), n);
        CU(cuCtxSynchronize());
        for (int i = 0; i < n; i++)
            CHECK(h[2 * n + i] == (float)i + 0.5f + (float)round, "round %d: c[%d] = %f", round, i, h[2 * n + i]);
        for (int i = 0; i < n; i++) h[n + i] += 1.0f;
    }
    CU(cuMemFreeHost(h));
}

/* What SCUDA cannot give, the device attributes must not promise, so that
 * programs that check take their fallback path: the host sees the GPU's
 * writes only after a synchronize, host and GPU atomics on one word do not
 * meet, and registered memory has no device pointer. */
static void honest_attributes(void)
{
    static const struct {
        CUdevice_attribute a;
        const char *name;
    } none[] = {
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "CONCURRENT_MANAGED_ACCESS"},
        {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "PAGEABLE_MEMORY_ACCESS"},
        {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, "USES_HOST_PAGE_TABLES"},
        {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, "HOST_NATIVE_ATOMIC_SUPPORTED"},
        {CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST"},
        {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM"},
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        int v = -1;
        CU(cuDeviceGetAttribute(&v, none[i].a, 0));
        CHECK(v == 0, "%s is %d: SCUDA cannot give it", none[i].name, v);
    }
    int v = 0;
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 0));
    CHECK(v == 1, "MANAGED_MEMORY is %d", v);
    CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0));
    CHECK(v == 1, "CAN_MAP_HOST_MEMORY is %d", v);
}

/* The same kernel over managed, pinned (its host address used as a device
 * address), zero-copy and plain device memory, one after another, as a
 * program comparing memory kinds does. */
static void mixed_kinds(void)
{
    const int n = 4096;
    const size_t bytes = 3 * (size_t)n * sizeof(float);
    CUdeviceptr managed, plain, zc;
    float *pinned, *mapped;
    CU(cuMemAllocManaged(&managed, bytes, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocHost_v2((void **)&pinned, bytes));
    CU(cuMemHostAlloc((void **)&mapped, bytes, CU_MEMHOSTALLOC_DEVICEMAP));
    CU(cuMemHostGetDevicePointer_v2(&zc, mapped, 0));
    CU(cuMemAlloc_v2(&plain, bytes));
    float *host[3] = {(float *)managed, pinned, mapped};
    CUdeviceptr dev[4] = {managed, (CUdeviceptr)pinned, zc, plain};
    float *ref = malloc(bytes);
    for (int i = 0; i < n; i++) ref[i] = (float)i, ref[n + i] = 0.25f * (float)i, ref[2 * n + i] = 0;
    for (int k = 0; k < 3; k++) memcpy(host[k], ref, bytes);
    CU(cuMemcpyHtoD_v2(plain, ref, bytes));
    for (int round = 0; round < 2; round++)
        for (int k = 0; k < 4; k++) {
            vec_add(dev[k], dev[k] + n * sizeof(float), dev[k] + 2 * n * sizeof(float), n);
            CU(cuCtxSynchronize());
        }
    float *out = malloc(bytes);
    for (int k = 0; k < 4; k++) {
        const float *c = k < 3 ? host[k] + 2 * n : out;
        if (k == 3) CU(cuMemcpyDtoH_v2(out, plain + 2 * n * sizeof(float), n * sizeof(float)));
        for (int i = 0; i < n; i++) CHECK(c[i] == 1.25f * (float)i, "kind %d: c[%d] = %f", k, i, c[i]);
    }
    free(ref), free(out);
    CU(cuMemFree_v2(managed));
    CU(cuMemFree_v2(plain));
    CU(cuMemFreeHost(pinned));
    CU(cuMemFreeHost(mapped));
}

/* A 2D copy into managed memory: the host reads the copy's rows right
 * after the (synchronous) copy returns, as it does after a 1D copy. Rows
 * the copy skips keep the host's own bytes. */
static void copy_2d_into_managed(void)
{
    const size_t pitch = 2 * PAGE, width = 3000, rows = 6;
    CUdeviceptr m;
    CU(cuMemAllocManaged(&m, pitch * rows, CU_MEM_ATTACH_GLOBAL));
    uint8_t *h = (uint8_t *)m;
    memset(h, 1, pitch * rows); /* every page dirty, pushed by the copy */
    uint8_t *src = malloc(width * rows);
    memset(src, 2, width * rows);
    CUDA_MEMCPY2D c = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = width,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = m, .dstXInBytes = 100, .dstY = 1, .dstPitch = pitch,
        .WidthInBytes = width, .Height = rows - 2,
    };
    CU(cuMemcpy2D_v2(&c));
    for (size_t y = 0; y < rows; y++)
        for (size_t x = 0; x < pitch; x++) {
            int copied = y >= 1 && y <= rows - 2 && x >= 100 && x < 100 + width;
            if (h[y * pitch + x] != (copied ? 2 : 1)) {
                CHECK(0, "row %zu byte %zu: %u after a 2D copy into managed memory", y, x, h[y * pitch + x]);
                y = rows;
                break;
            }
        }
    free(src);
    CU(cuMemFree_v2(m));
}

/* SCUDA has no concurrent managed access or host-native atomics: a host
 * write (an atomic, say) to managed memory while a kernel may still run
 * cannot be merged with the kernel's, so the next synchronize fails
 * instead of returning a wrong count. Memory attached to the host, and
 * writes after a synchronize, are fine. */
static void host_write_during_kernel(void)
{
    CUdeviceptr m, mine;
    CU(cuMemAllocManaged(&m, 64 * 1024, CU_MEM_ATTACH_GLOBAL));
    CU(cuMemAllocManaged(&mine, 64 * 1024, CU_MEM_ATTACH_HOST));
    uint32_t *counter = (uint32_t *)m, *host_only = (uint32_t *)mine;
    *counter = 0, *host_only = 0;
    fill(m + 4096, 5, 16, NULL); /* a kernel that may use the allocation */
    __atomic_fetch_add(host_only, 1, __ATOMIC_SEQ_CST);
    CUresult r = cuCtxSynchronize();
    CHECK(r == CUDA_SUCCESS, "a host write to memory attached to the host: %d", r);

    fill(m + 4096, 6, 16, NULL);
    __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST); /* the kernel may run */
    r = cuCtxSynchronize();
    CHECK(r == CUDA_ERROR_ILLEGAL_STATE, "host atomic while a kernel may run: %d, want CUDA_ERROR_ILLEGAL_STATE", r);
    r = cuCtxSynchronize();
    CHECK(r == CUDA_SUCCESS, "the error is reported once: %d", r);

    __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST); /* after the synchronize: fine */
    r = cuCtxSynchronize();
    CHECK(r == CUDA_SUCCESS && *counter == 2 && counter[1024] == 6, "after a synchronize: %d, %u %u", r, *counter,
          counter[1024]);
    CU(cuMemFree_v2(m));
    CU(cuMemFree_v2(mine));
}

/* A library's __managed__ variable (cuLibraryGetManaged, as static cudart
 * binds one): the host sees its initializer, host and kernel writes meet
 * at synchronizations, and asking again gives the same mirror. */
static const char managed_var_ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
                                      ".visible .global .attribute(.managed) .align 4 .u32 g_managed[4] = {7, 8, 9, 10};\n"
                                      ".visible .global .align 4 .u32 g_plain = 1;\n";

static void library_managed_variable(void)
{
    for (int round = 0; round < 2; round++) { /* the second after an unload: mirrored afresh */
        CUlibrary lib;
        CU(cuLibraryLoadData(&lib, managed_var_ptx, NULL, NULL, 0, NULL, NULL, 0));
        CUdeviceptr p = 0, again = 0;
        size_t n = 0;
        CU(cuLibraryGetManaged(&p, &n, lib, "g_managed"));
        CHECK(p && n == 16, "g_managed at 0x%llx, %zu bytes", (unsigned long long)p, n);
        volatile uint32_t *v = (volatile uint32_t *)p;
        CHECK(v[0] == 7 && v[3] == 10, "the initializer on the host: %u %u", v[0], v[3]);
        v[1] = 80;
        fill(p + 8, 0x55, 1, NULL);
        CU(cuCtxSynchronize());
        CHECK(v[1] == 80 && v[2] == 0x55, "host and kernel writes: %u %u", v[1], v[2]);
        uint32_t dev[4];
        CU(cuMemcpyDtoH_v2(dev, p, sizeof dev));
        CHECK(dev[0] == 7 && dev[1] == 80 && dev[2] == 0x55, "device bytes %u %u %u", dev[0], dev[1], dev[2]);
        CU(cuLibraryGetManaged(&again, NULL, lib, "g_managed"));
        CHECK(again == p, "asked again: 0x%llx, first 0x%llx", (unsigned long long)again, (unsigned long long)p);
        CHECK(cuLibraryGetManaged(&again, &n, lib, "g_plain") != CUDA_SUCCESS, "a variable that is not managed");
        CHECK(cuLibraryGetManaged(&again, &n, lib, NULL) == CUDA_ERROR_INVALID_VALUE, "no name");
        CU(cuLibraryUnload(lib));
        CHECK(cuLibraryGetManaged(&again, &n, lib, "g_managed") == CUDA_ERROR_INVALID_HANDLE, "unloaded library");
    }
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    /* Each part names itself on stderr (unbuffered): a part that hangs is
     * then named in the log of a timed-out run. */
    static const struct {
        const char *name;
        void (*run)(void);
    } parts[] = {{"vector_add", vector_add}, {"shared_pages", shared_pages}, {"alternate", alternate},
                 {"prefetch", prefetch},     {"attached", attached},         {"threads", threads},
                 {"zero_copy", zero_copy},   {"fetch_while_dirty", fetch_while_dirty},
                 {"alloc_while_dirty", alloc_while_dirty}, {"sparse", sparse},
                 {"honest_attributes", honest_attributes}, {"mixed_kinds", mixed_kinds},
                 {"copy_2d_into_managed", copy_2d_into_managed},
                 {"host_write_during_kernel", host_write_during_kernel},
                 {"library_managed_variable", library_managed_variable}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        fprintf(stderr, "managed: %s\n", parts[i].name);
        parts[i].run();
    }
    return 0;
}

static int striping_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    fprintf(stderr, "managed: stripe_while_fetching\n");
    stripe_while_fetching();
    return 0;
}

int main(void)
{
    h_begin("managed", 170);
    /* Room for the 4 GiB allocation twice: when its address is taken in
     * the client (more likely under ThreadSanitizer's layout), the client
     * asks for another while it holds the first (managed.c). */
    setenv("STANDIN_MEM_MB", "12288", 1);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_wait_ok(h_spawn(client, NULL, 160, -1, -1), 165000, "client");
    h_wait_ok(h_spawn(striping_client, NULL, 60, -1, -1), 65000, "striping client");
    h_server_stop(&srv);
    printf("PASS managed\n");
    return 0;
}
