/* two_servers.c - one client of two servers (SCUDA_SERVER=a,b;
 * docs/architecture.md, 9.x "A client of several servers"). Each server's
 * stand-in is one GPU whose UUID carries a tag of its own
 * (STANDIN_UUID_TAG), as two machines' GPUs differ.
 *
 *   unset      -> 2 devices: a's, then b's (UUIDs); on each, a context,
 *                 the test module, a kernel and byte-exact copies; the two
 *                 devices' pointers are in different windows and say
 *                 their own device and context; a striped copy on the
 *                 second server is exact, as is a read of device 1's
 *                 memory by a new thread in device 0's context; copies
 *                 between them (cuMemcpyDtoD, cuMemcpyPeer, cuMemcpy and
 *                 their asynchronous forms, cuMemcpy3DPeer of packed
 *                 and of pitched rows) are byte-exact both ways, go
 *                 server to server (the client's wire bytes grow by far
 *                 less than the copy) and keep stream order on both
 *                 servers; peer access between them is 0; a stream waits
 *                 for an event of the other server
 *   1          -> 1 device, b's
 *   1,0        -> b's, then a's
 *   (empty)    -> cuInit: CUDA_ERROR_NO_DEVICE
 *   a,unreachable -> cuInit: CUDA_ERROR_NO_DEVICE, the log names the entry
 *   a,c (c with --driver-placed-memory) -> cuInit: CUDA_ERROR_NO_DEVICE */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define TAG_A 0x0a
#define TAG_B 0x0b
#define N 4096 /* u32 elements per device */
/* A copy between the servers: below striping's threshold (BULK_MIN_COPY),
 * so a byte of it that went through the client would be counted by
 * scuda_client_wire_bytes, which counts the main connections. */
#define ACROSS ((4u << 20) + 4321)

int scuda_client_wire_bytes(uint64_t *sent, uint64_t *received);

struct expect {
    const char *visible; /* NULL: unset */
    int count;
    int tags[2];
};

static int tag_of(CUdevice d)
{
    CUuuid u;
    CU(cuDeviceGetUuid_v2(&u, d));
    CHECK(memcmp(u.bytes, "SCUDA-STANDIN", 13) == 0, "device %d has no stand-in UUID", d);
    return (unsigned char)u.bytes[14];
}

/* A context on dev, the module loaded in it, fill_u32 over N elements,
 * then host-to-device and device-to-host copies that must be exact.
 * Returns the allocation (left allocated) and the context. */
static CUdeviceptr work_on(CUdevice dev, uint32_t value, CUcontext *pctx)
{
    CU(cuDevicePrimaryCtxRetain(pctx, dev));
    CU(cuCtxSetCurrent(*pctx));
    CUdevice back;
    CU(cuCtxGetDevice(&back));
    CHECK(back == dev, "the context of device %d says device %d", dev, back);
    CUmodule m = h_load_module();
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, N * sizeof(uint32_t)));
    unsigned long long n = N;
    void *args[] = {&p, &value, &n};
    CU(cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    static uint32_t got[N];
    CU(cuMemcpyDtoH_v2(got, p, sizeof got));
    for (int i = 0; i < N; i++)
        CHECK(got[i] == value, "device %d: fill_u32 wrote %u at %d, not %u", dev, got[i], i, value);
    static unsigned char pattern[N * sizeof(uint32_t)], again[N * sizeof(uint32_t)];
    h_pattern(pattern, sizeof pattern, value);
    CU(cuMemcpyHtoD_v2(p, pattern, sizeof pattern));
    CU(cuMemcpyDtoH_v2(again, p, sizeof again));
    CHECK(h_diff(pattern, again, sizeof again) < 0, "device %d: a copy's bytes differ at %ld", dev,
          h_diff(pattern, again, sizeof again));
    return p;
}

/* A thread that never had a context of device 1's server reads device
 * 1's memory in device 0's context, as unified addressing allows: the
 * copy runs in a context of device 1's server. */
struct reader {
    CUcontext ctx;
    CUdeviceptr p;
    uint32_t got;
    CUresult r;
};

static void *read_first(void *arg)
{
    struct reader *rd = arg;
    rd->r = cuCtxSetCurrent(rd->ctx);
    if (rd->r == CUDA_SUCCESS) rd->r = cuMemcpyDtoH_v2(&rd->got, rd->p, sizeof rd->got);
    return NULL;
}

/* ---- copies between the two servers ---- */

static uint64_t wire_total(void)
{
    uint64_t s = 0, r = 0;
    CHECK(scuda_client_wire_bytes(&s, &r) == 0, "scuda_client_wire_bytes");
    return s + r;
}

/* Device memory in ctx, holding `bytes`. */
static CUdeviceptr holding(CUcontext ctx, const unsigned char *bytes, size_t n)
{
    CU(cuCtxSetCurrent(ctx));
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, n));
    CU(cuMemcpyHtoD_v2(p, bytes, n));
    return p;
}

static void expect_bytes(CUdeviceptr p, const unsigned char *want, size_t n, const char *what)
{
    unsigned char *got = malloc(n);
    CHECK(got);
    CU(cuMemcpyDtoH_v2(got, p, n)); /* by pointer, from its server */
    long at = h_diff(want, got, n);
    CHECK(at < 0, "%s: the bytes differ at %ld", what, at);
    free(got);
}

/* The client's wire bytes grew by far less than one copy (its calls and
 * replies only): the bytes went server to server. */
static void expect_not_through_client(uint64_t before, const char *what)
{
    uint64_t crossed = wire_total() - before;
    CHECK(crossed < ACROSS / 64, "%s: %llu bytes went through the client for a %u-byte copy", what,
          (unsigned long long)crossed, ACROSS);
}

/* A module's kernels in the current context. */
struct kernels {
    CUfunction fill, sleep;
};

static struct kernels kernels_here(void)
{
    struct kernels k;
    CUmodule m = h_load_module();
    CU(cuModuleGetFunction(&k.fill, m, "fill_u32"));
    CU(cuModuleGetFunction(&k.sleep, m, "sleep_ms"));
    return k;
}

/* On st: ms milliseconds of nothing (the stand-in's sleep_ms), then
 * fill_u32 of `value` over dst's first ACROSS / 4 words; so a copy that
 * does not wait for st reads or lands before the fill. */
static void fill_later(const struct kernels *k, CUdeviceptr dst, uint32_t value, CUstream st, uint32_t ms)
{
    void *nap[] = {&ms};
    CU(cuLaunchKernel(k->sleep, 1, 1, 1, 1, 1, 1, 0, st, nap, NULL));
    unsigned long long n = ACROSS / 4;
    void *args[] = {&dst, &value, &n};
    CU(cuLaunchKernel(k->fill, 64, 1, 1, 128, 1, 1, 0, st, args, NULL));
}

static void words_of(unsigned char *out, uint32_t value)
{
    for (size_t i = 0; i + 4 <= ACROSS; i += 4) memcpy(out + i, &value, 4);
}

/* cuMemcpy3DPeer from a (holding sa's bytes) to b (holding db's) over a
 * box of w x h x d bytes at (x, y, z) on both sides, each side with its
 * own pitch and height; b must then hold `db` with the box copied. */
struct box {
    size_t w, h, d, x, y, z, spitch, sheight, dpitch, dheight;
};

static void copy_box(CUdeviceptr b, CUcontext c1, CUdeviceptr a, CUcontext c0, const unsigned char *sa,
                     unsigned char *db, const struct box *bx, const char *what)
{
    CUDA_MEMCPY3D_PEER p = {
        .srcXInBytes = bx->x, .srcY = bx->y, .srcZ = bx->z, .srcMemoryType = CU_MEMORYTYPE_DEVICE,
        .srcDevice = a, .srcContext = c0, .srcPitch = bx->spitch, .srcHeight = bx->sheight,
        .dstXInBytes = bx->x, .dstY = bx->y, .dstZ = bx->z, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
        .dstDevice = b, .dstContext = c1, .dstPitch = bx->dpitch, .dstHeight = bx->dheight,
        .WidthInBytes = bx->w, .Height = bx->h, .Depth = bx->d,
    };
    uint64_t before = wire_total();
    CU(cuMemcpy3DPeer(&p));
    expect_not_through_client(before, what);
    for (size_t z = 0; z < bx->d; z++)
        for (size_t y = 0; y < bx->h; y++)
            memcpy(db + ((bx->z + z) * bx->dheight + bx->y + y) * bx->dpitch + bx->x,
                   sa + ((bx->z + z) * bx->sheight + bx->y + y) * bx->spitch + bx->x, bx->w);
    expect_bytes(b, db, ACROSS, what);
}

/* 3D peer copies between the servers: rows packed on both sides (one
 * copy), and pitched (a copy per row). */
static void boxes_between(CUcontext c0, CUcontext c1)
{
    unsigned char *pa = malloc(ACROSS), *pb = malloc(ACROSS);
    CHECK(pa && pb);
    h_pattern(pa, ACROSS, 41);
    h_pattern(pb, ACROSS, 42);
    CUdeviceptr a = holding(c0, pa, ACROSS), b = holding(c1, pb, ACROSS);
    CU(cuCtxSetCurrent(c0));
    struct box packed = {.w = 4096, .h = 64, .d = 3, .z = 1, .spitch = 4096, .sheight = 64, .dpitch = 4096,
                         .dheight = 64};
    copy_box(b, c1, a, c0, pa, pb, &packed, "cuMemcpy3DPeer of packed rows from server a to server b");
    struct box pitched = {.w = 100, .h = 7, .d = 2, .x = 3, .y = 2, .z = 1, .spitch = 256, .sheight = 16,
                          .dpitch = 128, .dheight = 9};
    copy_box(b, c1, a, c0, pa, pb, &pitched, "cuMemcpy3DPeer of pitched rows from server a to server b");
    CU(cuMemFree_v2(a));
    CU(cuCtxSetCurrent(c1));
    CU(cuMemFree_v2(b));
    free(pa);
    free(pb);
}

/* Every 1D form of a copy between device 0 (server a) and device 1
 * (server b), both ways. */
static void between(CUcontext c0, CUcontext c1)
{
    size_t n = ACROSS;
    unsigned char *pa = malloc(n), *pb = malloc(n), *want = malloc(n);
    CHECK(pa && pb && want);
    h_pattern(pa, n, 31);
    h_pattern(pb, n, 32);
    CUdeviceptr a = holding(c0, pa, n), b = holding(c1, pb, n);

    /* a -> b by pointers alone, in device 0's context. */
    CU(cuCtxSetCurrent(c0));
    uint64_t before = wire_total();
    CU(cuMemcpyDtoD_v2(b, a, n));
    expect_not_through_client(before, "cuMemcpyDtoD from server a to server b");
    expect_bytes(b, pa, n, "cuMemcpyDtoD from server a to server b");

    /* b -> a with each side's context, from device 1's context. */
    h_pattern(pb, n, 33);
    CU(cuCtxSetCurrent(c1));
    CU(cuMemcpyHtoD_v2(b, pb, n));
    before = wire_total();
    CU(cuMemcpyPeer(a, c0, b, c1, n));
    expect_not_through_client(before, "cuMemcpyPeer from server b to server a");
    expect_bytes(a, pb, n, "cuMemcpyPeer from server b to server a");

    /* Unified addressing (cudaMemcpyDefault): a -> b at odd offsets. */
    memcpy(want, pb, n);
    memcpy(want + 3, pb + 5, n - 4096);
    before = wire_total();
    CU(cuMemcpy(b + 3, a + 5, n - 4096));
    expect_not_through_client(before, "cuMemcpy from server a to server b");
    expect_bytes(b, want, n, "cuMemcpy from server a to server b at odd offsets");

    /* Stream order on both servers, with streams that do not wait for
     * the legacy stream. A kernel on a's stream writes the source; the
     * copy on b's stream must see it. */
    CUstream sa, sb;
    CU(cuCtxSetCurrent(c0));
    CU(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    struct kernels ka = kernels_here();
    CU(cuCtxSetCurrent(c1));
    CU(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    struct kernels kb = kernels_here();
    memcpy(want, pb, n); /* a's bytes past its last whole word: pb's, from cuMemcpyPeer */
    words_of(want, 0x5151);
    CU(cuCtxSetCurrent(c0));
    fill_later(&ka, a, 0x5151, sa, 300);
    CU(cuCtxSetCurrent(c1));
    CU(cuMemcpyDtoDAsync_v2(b, a, n, sb));
    CU(cuStreamSynchronize(sb));
    expect_bytes(b, want, n, "cuMemcpyDtoDAsync on the destination's stream after a kernel wrote the source");

    /* A kernel on b's stream writes the destination, one on a's stream
     * the source; the copy on a's stream (as PyTorch's .to() copies on
     * the source's) reads after the second and lands after the first.
     * a's waits longer than b's: waiting for b's does not cover it. */
    fill_later(&kb, b, 0x6262, sb, 300);
    CU(cuCtxSetCurrent(c0));
    fill_later(&ka, a, 0x7373, sa, 1000);
    CU(cuMemcpyPeerAsync(b, c1, a, c0, n, sa));
    CU(cuStreamSynchronize(sa));
    words_of(want, 0x7373);
    expect_bytes(b, want, n, "cuMemcpyPeerAsync on the source's stream after kernels wrote both sides");

    /* cuMemcpyAsync (unified) b -> a on the legacy stream. */
    h_pattern(pb, n, 34);
    CU(cuCtxSetCurrent(c1));
    CU(cuMemcpyHtoD_v2(b, pb, n));
    CU(cuCtxSetCurrent(c0));
    before = wire_total();
    CU(cuMemcpyAsync(a, b, n, NULL));
    CU(cuStreamSynchronize(NULL));
    expect_not_through_client(before, "cuMemcpyAsync from server b to server a");
    expect_bytes(a, pb, n, "cuMemcpyAsync from server b to server a");

    CU(cuStreamDestroy_v2(sa));
    CU(cuCtxSetCurrent(c1));
    CU(cuStreamDestroy_v2(sb));
    CU(cuMemFree_v2(b));
    CU(cuCtxSetCurrent(c0));
    CU(cuMemFree_v2(a));
    free(pa);
    free(pb);
    free(want);
}

/* Both devices at once: the calls on each go to its server. */
/* A library is context-independent (cudart loads every fatbin as one, and
 * PyTorch launches its kernels in whichever device's context is current):
 * one library, its kernel launched as a function in each device's context,
 * must run on that device's server, on that device's memory. */
static void library_everywhere(CUcontext c0, CUcontext c1)
{
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    CUkernel k;
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    CUcontext ctxs[2] = {c0, c1};
    for (int d = 0; d < 2; d++) {
        CU(cuCtxSetCurrent(ctxs[d]));
        CUdeviceptr p;
        CU(cuMemAlloc_v2(&p, N * sizeof(uint32_t)));
        uint32_t value = 0x5150u + (uint32_t)d;
        unsigned long long n = N;
        void *args[] = {&p, &value, &n};
        CU(cuLaunchKernel((CUfunction)k, 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL)); /* as cudart does */
        CUfunction f;
        CU(cuKernelGetFunction(&f, k));
        value += 0x100;
        CU(cuLaunchKernel(f, 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
        static uint32_t got[N];
        CU(cuMemcpyDtoH_v2(got, p, sizeof got));
        for (int i = 0; i < N; i++)
            CHECK(got[i] == value, "device %d: a library's kernel wrote %#x at %d, not %#x", d, got[i], i, value);
        CU(cuMemFree_v2(p));
    }
    /* Asked of either device from device 0's context, as PyTorch's
     * autograd threads do: each device's server answers for its device. */
    CU(cuCtxSetCurrent(c0));
    for (CUdevice d = 0; d < 2; d++) {
        int threads = 0;
        CU(cuKernelGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, d));
        CHECK(threads > 0, "device %d: a library kernel's max threads per block is %d", d, threads);
        CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024, k, d));
    }
    CU(cuLibraryUnload(lib));
    CU(cuCtxSetCurrent(c0));
    CUkernel gone;
    CHECK(cuLibraryGetKernel(&gone, lib, "fill_u32") == CUDA_ERROR_INVALID_HANDLE, "an unloaded library still answers");
    CU(cuCtxSynchronize());
    CU(cuCtxSetCurrent(c1));
    CU(cuCtxSynchronize()); /* no deferred error from the unload on either server */
    printf("ok a library's kernel runs in either server's context\n");
}

static void across(void)
{
    CUcontext c0, c1;
    CUdeviceptr p0 = work_on(0, 0x1111, &c0);
    CUdeviceptr p1 = work_on(1, 0x2222, &c1);
    /* Each device has a window of its own (128 GiB at least, aligned so). */
    CHECK(p0 >> 37 != p1 >> 37, "the two servers' devices share a window: %#llx and %#llx",
          (unsigned long long)p0, (unsigned long long)p1);
    /* Device 0's memory is still there and still answers on its server. */
    CU(cuCtxSetCurrent(c0));
    uint32_t first;
    CU(cuMemcpyDtoH_v2(&first, p1, sizeof first)); /* by pointer, from device 1's server */
    unsigned char pattern[4];
    h_pattern(pattern, sizeof pattern, 0x2222);
    CHECK(memcmp(&first, pattern, 4) == 0, "a copy from device 1's memory while device 0's context is current "
                                           "did not read device 1's bytes");
    /* Pointer attributes come from the pointer's server, in the client's terms. */
    int ordinal = -1;
    CUcontext owner = NULL;
    CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p1));
    CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p1));
    CHECK(ordinal == 1 && owner == c1, "device 1's memory says device %d, context %p (not 1, %p)", ordinal,
          (void *)owner, (void *)c1);
    /* A copy large enough to stripe goes over the second server's own bulk
     * connections. */
    size_t big = 9u << 20;
    unsigned char *out = malloc(big), *in = malloc(big);
    CHECK(out && in);
    h_pattern(out, big, 77);
    CUdeviceptr pb;
    CU(cuCtxSetCurrent(c1));
    CU(cuMemAlloc_v2(&pb, big));
    CU(cuMemcpyHtoD_v2(pb, out, big));
    CU(cuMemcpyDtoH_v2(in, pb, big));
    CHECK(h_diff(out, in, big) < 0, "a striped copy on the second server differs at %ld", h_diff(out, in, big));
    CU(cuMemFree_v2(pb));
    free(out);
    free(in);
    CU(cuCtxSetCurrent(c0));
    struct reader rd = {.ctx = c0, .p = p1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_first, &rd) == 0);
    pthread_join(t, NULL);
    CHECK(rd.r == CUDA_SUCCESS && memcmp(&rd.got, pattern, 4) == 0,
          "a thread in device 0's context reading device 1's memory got %s", h_cu_name(rd.r));
    between(c0, c1);
    boxes_between(c0, c1);
    library_everywhere(c0, c1);
    CU(cuCtxSetCurrent(c0));
    int can = -1;
    CU(cuDeviceCanAccessPeer(&can, 0, 1));
    CHECK(can == 0, "devices of two servers say they can access each other (%d)", can);
    /* A stream of server a waits for an event of server b. */
    CUevent ev;
    CU(cuCtxSetCurrent(c1));
    CU(cuEventCreate(&ev, 0));
    CU(cuEventRecord(ev, NULL));
    CU(cuCtxSetCurrent(c0));
    CUstream s;
    CU(cuStreamCreate(&s, 0));
    CU(cuStreamWaitEvent(s, ev, 0));
    CU(cuStreamSynchronize(s));
    CU(cuStreamDestroy_v2(s));
    CU(cuEventDestroy_v2(ev));
    CU(cuMemFree_v2(p0));
    CU(cuCtxSetCurrent(c1));
    CU(cuMemFree_v2(p1));
}

static int sees(void *arg)
{
    const struct expect *e = arg;
    if (e->visible) setenv("CUDA_VISIBLE_DEVICES", e->visible, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
    int n = -1;
    if (e->count == 0) {
        CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuInit(0));
        CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuDeviceGetCount(&n));
        return 0;
    }
    CU(cuInit(0));
    CU(cuDeviceGetCount(&n));
    CHECK(n == e->count, "CUDA_VISIBLE_DEVICES='%s' shows %d devices, not %d", e->visible ? e->visible : "(unset)",
          n, e->count);
    for (int i = 0; i < n; i++)
        CHECK(tag_of(i) == e->tags[i], "CUDA_VISIBLE_DEVICES='%s': device %d is server %#x's, not %#x's",
              e->visible ? e->visible : "(unset)", i, tag_of(i), e->tags[i]);
    CUdevice beyond;
    CU_EXPECT(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&beyond, n));
    if (n == 2 && e->visible == NULL) {
        across();
    } else {
        CUcontext c;
        CUdeviceptr p = work_on(n - 1, 0x3333, &c);
        CU(cuMemFree_v2(p));
    }
    return 0;
}

static int unreachable(void *arg)
{
    (void)arg;
    CU_EXPECT(CUDA_ERROR_NO_DEVICE, cuInit(0));
    return 0;
}

int main(void)
{
    h_begin("two_servers", 110);
    unsetenv("CUDA_VISIBLE_DEVICES");
    setenv("STANDIN_DEVICES", "1", 1);
    struct h_server a, b;
    setenv("STANDIN_UUID_TAG", "10", 1); /* TAG_A: the server, and so its sessions, inherit it */
    h_server_start(&a, "two-a", NULL);
    setenv("STANDIN_UUID_TAG", "11", 1); /* TAG_B */
    h_server_start(&b, "two-b", NULL);
    unsetenv("STANDIN_UUID_TAG");
    char both[160];
    snprintf(both, sizeof both, "%s,%s", a.addr, b.addr);
    setenv("SCUDA_SERVER", both, 1);

    static const struct expect cases[] = {
        {NULL, 2, {TAG_A, TAG_B}},
        {"1", 1, {TAG_B}},
        {"1,0", 2, {TAG_B, TAG_A}},
        {"", 0, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[160];
        snprintf(what, sizeof what, "a client of two servers, CUDA_VISIBLE_DEVICES='%s'",
                 cases[i].visible ? cases[i].visible : "(unset)");
        h_wait_ok(h_spawn(sees, (void *)&cases[i], 30, -1, -1), 30000, what);
    }
    printf("ok two servers: their devices in list order, CUDA_VISIBLE_DEVICES picks and reorders them, "
           "work and copies on each, windows apart, copies between them server to server\n");

    /* A server that is not there fails cuInit, naming its entry. */
    snprintf(both, sizeof both, "%s,127.0.0.1:1", a.addr);
    setenv("SCUDA_SERVER", both, 1);
    char err_path[512];
    int fd = h_temp_file("two-unreachable", err_path, sizeof err_path);
    h_wait_ok(h_spawn(unreachable, NULL, 30, -1, fd), 30000, "a client of a server that is not there");
    close(fd);
    char *log = h_read_file(err_path, NULL);
    CHECK(strstr(log, "SCUDA_SERVER's entry 2 (127.0.0.1:1)") != NULL,
          "the client's log does not name the entry that did not open:\n%s", log);
    free(log);
    printf("ok an unreachable entry fails cuInit with a line naming it\n");

    /* A server that places memory with its driver cannot keep pointers
     * apart: refused at cuInit, saying so. */
    struct h_server c;
    struct h_server_opts placed = {.extra_args = {"--driver-placed-memory"}};
    h_server_start(&c, "two-placed", &placed);
    snprintf(both, sizeof both, "%s,%s", a.addr, c.addr);
    setenv("SCUDA_SERVER", both, 1);
    fd = h_temp_file("two-placed", err_path, sizeof err_path);
    h_wait_ok(h_spawn(unreachable, NULL, 30, -1, fd), 30000, "a client of a server without windows");
    close(fd);
    log = h_read_file(err_path, NULL);
    CHECK(strstr(log, "windows of their own") != NULL, "the client's log does not say why:\n%s", log);
    free(log);
    h_server_stop(&c);
    printf("ok a server without memory windows is refused at cuInit\n");

    h_server_stop(&a);
    h_server_stop(&b);
    printf("PASS two_servers\n");
    return 0;
}
