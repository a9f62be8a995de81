/* copies.c - every form of copy and memset, byte-exact.
 *
 * Each device buffer has a host "mirror" to which every operation is also
 * applied by a reference implementation; at each checkpoint the whole
 * device buffer (guard bytes included) is read back and compared with its
 * mirror, so a copy that writes too much, too little or in the wrong place
 * fails. Host destinations carry canary bytes the same way. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define GUARD 64 /* bytes after every region that nothing may touch */

struct dbuf {
    CUdeviceptr d;
    uint8_t *m; /* mirror */
    size_t n;
};

static CUstream stream;

static void dbuf_new(struct dbuf *b, size_t n, uint8_t fill)
{
    b->n = n;
    CU(cuMemAlloc_v2(&b->d, n));
    b->m = malloc(n);
    CHECK(b->m != NULL);
    memset(b->m, fill, n);
    CU(cuMemsetD8_v2(b->d, fill, n));
}

static void dbuf_free(struct dbuf *b)
{
    CU(cuMemFree_v2(b->d));
    free(b->m);
}

/* Read the whole buffer back and compare it with the mirror. */
static void dbuf_verify(const struct dbuf *b, const char *what)
{
    uint8_t *tmp = malloc(b->n);
    CHECK(tmp != NULL);
    memset(tmp, 0x5a, b->n);
    CU(cuMemcpyDtoH_v2(tmp, b->d, b->n));
    long at = h_diff(tmp, b->m, b->n);
    CHECK(at < 0, "%s: device byte %ld of %zu is 0x%02x, expected 0x%02x", what, at, b->n, tmp[at], b->m[at]);
    free(tmp);
}

/* The reference: rows of w bytes, row (y, z) at base + ((z0+z)*height + y0+y)*pitch + x0. */
static void ref3d(uint8_t *dst, size_t dpitch, size_t dheight, size_t dx, size_t dy, size_t dz, const uint8_t *src,
                  size_t spitch, size_t sheight, size_t sx, size_t sy, size_t sz, size_t w, size_t h, size_t d)
{
    for (size_t z = 0; z < d; z++)
        for (size_t y = 0; y < h; y++)
            memmove(dst + ((dz + z) * dheight + dy + y) * dpitch + dx, src + ((sz + z) * sheight + sy + y) * spitch + sx,
                    w);
}

/* ---- linear copies ------------------------------------------------------ */

static void linear_sizes(void)
{
    static const size_t sizes[] = {0, 1, 4095, (8u << 20) + 3};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        char what[128];
        struct dbuf a, b;
        dbuf_new(&a, n + GUARD, 0xee);
        dbuf_new(&b, n + GUARD, 0xdd);
        uint8_t *src = malloc(n + 1), *out = malloc(n + GUARD);
        CHECK(src && out);

        /* synchronous: host -> a -> b -> host */
        h_pattern(src, n, 1000 + i);
        CU(cuMemcpyHtoD_v2(a.d, src, n));
        memcpy(a.m, src, n);
        CU(cuMemcpyDtoD_v2(b.d, a.d, n));
        memcpy(b.m, a.m, n);
        memset(out, 0xcd, n + GUARD);
        CU(cuMemcpyDtoH_v2(out, b.d, n));
        long at = h_diff(out, src, n);
        CHECK(at < 0, "sync round trip of %zu bytes differs at byte %ld", n, at);
        for (size_t k = n; k < n + GUARD; k++) CHECK(out[k] == 0xcd, "DtoH of %zu bytes wrote past the end", n);
        snprintf(what, sizeof what, "sync %zu: a", n);
        dbuf_verify(&a, what);
        snprintf(what, sizeof what, "sync %zu: b", n);
        dbuf_verify(&b, what);

        /* asynchronous on a stream, unaligned offsets */
        size_t off = n > 8 ? 3 : 0, len = n - off;
        h_pattern(src, n, 2000 + i);
        CU(cuMemcpyHtoDAsync_v2(a.d + off, src, len, stream));
        memcpy(a.m + off, src, len);
        CU(cuMemcpyDtoDAsync_v2(b.d, a.d + off, len, stream));
        memcpy(b.m, a.m + off, len);
        memset(out, 0xcd, n + GUARD);
        CU(cuMemcpyDtoHAsync_v2(out, b.d, len, stream));
        CU(cuStreamSynchronize(stream));
        at = h_diff(out, src, len);
        CHECK(at < 0, "async round trip of %zu bytes differs at byte %ld", len, at);
        for (size_t k = len; k < n + GUARD; k++) CHECK(out[k] == 0xcd, "async DtoH of %zu bytes wrote past the end", len);
        snprintf(what, sizeof what, "async %zu: a", n);
        dbuf_verify(&a, what);
        snprintf(what, sizeof what, "async %zu: b", n);
        dbuf_verify(&b, what);

        /* asynchronous on the legacy stream, from and to pinned memory */
        void *pin_src, *pin_out;
        CU(cuMemAllocHost_v2(&pin_src, n + 1));
        CU(cuMemAllocHost_v2(&pin_out, n + GUARD));
        h_pattern(pin_src, n, 3000 + i);
        memset(pin_out, 0xcd, n + GUARD);
        CU(cuMemcpyHtoDAsync_v2(b.d, pin_src, n, NULL));
        memcpy(b.m, pin_src, n);
        CU(cuMemcpyDtoHAsync_v2(pin_out, b.d, n, NULL));
        CU(cuCtxSynchronize());
        at = h_diff(pin_out, pin_src, n);
        CHECK(at < 0, "pinned round trip of %zu bytes differs at byte %ld", n, at);
        for (size_t k = n; k < n + GUARD; k++)
            CHECK(((uint8_t *)pin_out)[k] == 0xcd, "pinned DtoH of %zu bytes wrote past the end", n);
        snprintf(what, sizeof what, "pinned %zu: b", n);
        dbuf_verify(&b, what);
        CU(cuMemFreeHost(pin_src));
        CU(cuMemFreeHost(pin_out));

        free(src);
        free(out);
        dbuf_free(&a);
        dbuf_free(&b);
    }
    printf("ok linear copies (0, 1, 4095, 8 MiB + 3; sync, async, pinned)\n");
}

/* ---- unified cuMemcpy ----------------------------------------------------- */

static void unified(void)
{
    static const size_t sizes[] = {1, 4095, (8u << 20) + 3};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        for (int async = 0; async < 2; async++) {
            struct dbuf a, b;
            dbuf_new(&a, n + GUARD, 0x11);
            dbuf_new(&b, n + GUARD, 0x22);
            uint8_t *h1 = malloc(n + GUARD), *h2 = malloc(n + GUARD);
            CHECK(h1 && h2);
            h_pattern(h1, n + GUARD, 4000 + i * 2 + async);
            memset(h2, 0xcd, n + GUARD);
            CUstream st = async ? stream : NULL;
#define UCOPY(dst, src, len)                                                                                 \
    (async ? cuMemcpyAsync((CUdeviceptr)(dst), (CUdeviceptr)(src), len, st)                                  \
           : cuMemcpy((CUdeviceptr)(dst), (CUdeviceptr)(src), len))
            CU(UCOPY(a.d, (uintptr_t)h1, n)); /* host -> device */
            memcpy(a.m, h1, n);
            CU(UCOPY(b.d + 1, a.d, n - 1)); /* device -> device */
            memcpy(b.m + 1, a.m, n - 1);
            CU(UCOPY((uintptr_t)h2, b.d, n)); /* device -> host */
            if (async) CU(cuStreamSynchronize(st));
            long at = h_diff(h2, b.m, n);
            CHECK(at < 0, "unified %s copy of %zu bytes: host byte %ld differs", async ? "async" : "sync", n, at);
            for (size_t k = n; k < n + GUARD; k++) CHECK(h2[k] == 0xcd, "unified DtoH of %zu bytes overran", n);
            CU(UCOPY((uintptr_t)(h2 + 2), (uintptr_t)h1, n)); /* host -> host */
            if (async) CU(cuStreamSynchronize(st));
            at = h_diff(h2 + 2, h1, n);
            CHECK(at < 0, "unified host-to-host copy of %zu bytes differs at %ld", n, at);
#undef UCOPY
            dbuf_verify(&a, "unified a");
            dbuf_verify(&b, "unified b");
            dbuf_free(&a);
            dbuf_free(&b);
            free(h1);
            free(h2);
        }
    }
    printf("ok unified cuMemcpy / cuMemcpyAsync in all four directions\n");
}

/* ---- 2D ---------------------------------------------------------------- */

static CUDA_MEMCPY2D desc2d(CUmemorytype st, const void *sh, CUdeviceptr sd, size_t spitch, size_t sx, size_t sy,
                            CUmemorytype dt, void *dh, CUdeviceptr dd, size_t dpitch, size_t dx, size_t dy, size_t w,
                            size_t h)
{
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = st;
    c.srcHost = sh;
    c.srcDevice = sd;
    c.srcPitch = spitch;
    c.srcXInBytes = sx;
    c.srcY = sy;
    c.dstMemoryType = dt;
    c.dstHost = dh;
    c.dstDevice = dd;
    c.dstPitch = dpitch;
    c.dstXInBytes = dx;
    c.dstY = dy;
    c.WidthInBytes = w;
    c.Height = h;
    return c;
}

static void copies_2d(void)
{
    /* A pitched allocation and a plain one used as pitch 512. */
    CUdeviceptr pd;
    size_t ppitch = 0;
    CU(cuMemAllocPitch_v2(&pd, &ppitch, 256, 40, 4));
    CHECK(ppitch >= 256, "pitch %zu", ppitch);
    struct dbuf p = {.d = pd, .n = ppitch * 40};
    p.m = malloc(p.n);
    CHECK(p.m != NULL);
    memset(p.m, 0x33, p.n);
    CU(cuMemsetD8_v2(p.d, 0x33, p.n));
    struct dbuf q;
    dbuf_new(&q, 512 * 30 + GUARD, 0x44);

    const size_t hp = 300, hrows = 40;
    uint8_t *hsrc = malloc(hp * hrows), *hdst = malloc(333 * 30), *hmodel = malloc(333 * 30);
    CHECK(hsrc && hdst && hmodel);
    h_pattern(hsrc, hp * hrows, 77);

    for (int variant = 0; variant < 3; variant++) { /* cuMemcpy2D, Unaligned, Async */
#define COPY2D(c)                                                                         \
    (variant == 0 ? cuMemcpy2D_v2(&(c)) : variant == 1 ? cuMemcpy2DUnaligned_v2(&(c)) \
                                                        : cuMemcpy2DAsync_v2(&(c), stream))
        h_pattern(hsrc, hp * hrows, 77 + variant);
        /* host -> device (pitched), offsets on both sides */
        CUDA_MEMCPY2D c = desc2d(CU_MEMORYTYPE_HOST, hsrc, 0, hp, 7, 3, CU_MEMORYTYPE_DEVICE, NULL, p.d, ppitch, 5,
                                 2, 201, 30);
        CU(COPY2D(c));
        ref3d(p.m, ppitch, 0, 5, 2, 0, hsrc, hp, 0, 7, 3, 0, 201, 30, 1);
        /* device -> device, into pitch 512 */
        c = desc2d(CU_MEMORYTYPE_DEVICE, NULL, p.d, ppitch, 1, 0, CU_MEMORYTYPE_DEVICE, NULL, q.d, 512, 9, 4, 150, 20);
        CU(COPY2D(c));
        ref3d(q.m, 512, 0, 9, 4, 0, p.m, ppitch, 0, 1, 0, 0, 150, 20, 1);
        /* device -> host, offsets, host pitch 333 */
        memset(hdst, 0xcd, 333 * 30);
        memset(hmodel, 0xcd, 333 * 30);
        c = desc2d(CU_MEMORYTYPE_DEVICE, NULL, q.d, 512, 8, 3, CU_MEMORYTYPE_HOST, hdst, 0, 333, 11, 5, 152, 21);
        CU(COPY2D(c));
        if (variant == 2) CU(cuStreamSynchronize(stream));
        ref3d(hmodel, 333, 0, 11, 5, 0, q.m, 512, 0, 8, 3, 0, 152, 21, 1);
        long at = h_diff(hdst, hmodel, 333 * 30);
        CHECK(at < 0, "2D device-to-host (variant %d): host byte %ld (row %ld col %ld)", variant, at, at / 333,
              at % 333);
        /* host -> host */
        c = desc2d(CU_MEMORYTYPE_HOST, hsrc, 0, hp, 0, 1, CU_MEMORYTYPE_HOST, hdst, 0, 333, 2, 0, 100, 7);
        CU(COPY2D(c));
        if (variant == 2) CU(cuStreamSynchronize(stream));
        ref3d(hmodel, 333, 0, 2, 0, 0, hsrc, hp, 0, 0, 1, 0, 100, 7, 1);
        at = h_diff(hdst, hmodel, 333 * 30);
        CHECK(at < 0, "2D host-to-host (variant %d): host byte %ld", variant, at);
        /* unified: a host pointer and a device pointer, both as UNIFIED */
        c = desc2d(CU_MEMORYTYPE_UNIFIED, NULL, (CUdeviceptr)(uintptr_t)hsrc, hp, 13, 0, CU_MEMORYTYPE_UNIFIED, NULL,
                   q.d, 512, 0, 25, 64, 4);
        CU(COPY2D(c));
        ref3d(q.m, 512, 0, 0, 25, 0, hsrc, hp, 0, 13, 0, 0, 64, 4, 1);
        if (variant == 2) CU(cuStreamSynchronize(stream));
        dbuf_verify(&p, "2D pitched buffer");
        dbuf_verify(&q, "2D pitch-512 buffer");
#undef COPY2D
    }
    free(hsrc);
    free(hdst);
    free(hmodel);
    dbuf_free(&p);
    dbuf_free(&q);
    printf("ok 2D copies (host/device/unified sides, pitches, offsets; sync, unaligned, async)\n");
}

/* ---- 3D ---------------------------------------------------------------- */

static CUDA_MEMCPY3D desc3d(void)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    return c;
}

static void copies_3d(void)
{
    /* device volume: pitch 128, 16 rows per slice, 8 slices */
    const size_t dp = 128, dh = 16, dd = 8;
    struct dbuf v, w;
    dbuf_new(&v, dp * dh * dd + GUARD, 0x55);
    dbuf_new(&w, dp * dh * dd + GUARD, 0x66);
    /* host volume: pitch 64, 20 rows per slice, 6 slices */
    const size_t hp = 64, hh = 20, hd = 6;
    uint8_t *hsrc = malloc(hp * hh * hd);
    /* host destination: pitch 80, 15 rows, 8 slices */
    const size_t op = 80, oh = 15, od = 8;
    uint8_t *hout = malloc(op * oh * od), *hmodel = malloc(op * oh * od);
    CHECK(hsrc && hout && hmodel);

    for (int async = 0; async < 2; async++) {
        h_pattern(hsrc, hp * hh * hd, 91 + async);
        /* host -> device */
        CUDA_MEMCPY3D c = desc3d();
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = hsrc;
        c.srcPitch = hp;
        c.srcHeight = hh;
        c.srcXInBytes = 3;
        c.srcY = 2;
        c.srcZ = 1;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = v.d;
        c.dstPitch = dp;
        c.dstHeight = dh;
        c.dstXInBytes = 4;
        c.dstY = 1;
        c.dstZ = 2;
        c.WidthInBytes = 50;
        c.Height = 10;
        c.Depth = 5;
        CU(async ? cuMemcpy3DAsync_v2(&c, stream) : cuMemcpy3D_v2(&c));
        ref3d(v.m, dp, dh, 4, 1, 2, hsrc, hp, hh, 3, 2, 1, 50, 10, 5);

        /* device -> device */
        c = desc3d();
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = v.d;
        c.srcPitch = dp;
        c.srcHeight = dh;
        c.srcXInBytes = 2;
        c.srcY = 0;
        c.srcZ = 2;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = w.d;
        c.dstPitch = dp;
        c.dstHeight = dh;
        c.dstXInBytes = 60;
        c.dstY = 3;
        c.dstZ = 0;
        c.WidthInBytes = 60;
        c.Height = 12;
        c.Depth = 6;
        CU(async ? cuMemcpy3DAsync_v2(&c, stream) : cuMemcpy3D_v2(&c));
        ref3d(w.m, dp, dh, 60, 3, 0, v.m, dp, dh, 2, 0, 2, 60, 12, 6);

        /* device -> host */
        memset(hout, 0xcd, op * oh * od);
        memset(hmodel, 0xcd, op * oh * od);
        c = desc3d();
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = w.d;
        c.srcPitch = dp;
        c.srcHeight = dh;
        c.srcXInBytes = 59;
        c.srcY = 2;
        c.srcZ = 0;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = hout;
        c.dstPitch = op;
        c.dstHeight = oh;
        c.dstXInBytes = 2;
        c.dstY = 3;
        c.dstZ = 1;
        c.WidthInBytes = 62;
        c.Height = 11;
        c.Depth = 7;
        CU(async ? cuMemcpy3DAsync_v2(&c, stream) : cuMemcpy3D_v2(&c));
        if (async) CU(cuStreamSynchronize(stream));
        ref3d(hmodel, op, oh, 2, 3, 1, w.m, dp, dh, 59, 2, 0, 62, 11, 7);
        long at = h_diff(hout, hmodel, op * oh * od);
        CHECK(at < 0, "3D device-to-host (%s): host byte %ld (slice %ld row %ld col %ld)", async ? "async" : "sync",
              at, at / (long)(op * oh), at / (long)op % (long)oh, at % (long)op);

        /* host -> host */
        c = desc3d();
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = hsrc;
        c.srcPitch = hp;
        c.srcHeight = hh;
        c.dstMemoryType = CU_MEMORYTYPE_HOST;
        c.dstHost = hout;
        c.dstPitch = op;
        c.dstHeight = oh;
        c.dstXInBytes = 1;
        c.dstZ = 6;
        c.WidthInBytes = 30;
        c.Height = 4;
        c.Depth = 2;
        CU(async ? cuMemcpy3DAsync_v2(&c, stream) : cuMemcpy3D_v2(&c));
        if (async) CU(cuStreamSynchronize(stream));
        ref3d(hmodel, op, oh, 1, 0, 6, hsrc, hp, hh, 0, 0, 0, 30, 4, 2);
        at = h_diff(hout, hmodel, op * oh * od);
        CHECK(at < 0, "3D host-to-host (%s): host byte %ld", async ? "async" : "sync", at);

        dbuf_verify(&v, "3D volume v");
        dbuf_verify(&w, "3D volume w");
    }
    free(hsrc);
    free(hout);
    free(hmodel);
    dbuf_free(&v);
    dbuf_free(&w);
    printf("ok 3D copies (host/device sides, pitches, heights, x/y/z offsets; sync and async)\n");
}

/* ---- memsets ------------------------------------------------------------ */

static void ref_set(uint8_t *m, size_t off, const void *val, unsigned elem, size_t count)
{
    for (size_t i = 0; i < count; i++) memcpy(m + off + i * elem, val, elem);
}

static void ref_set2d(uint8_t *m, size_t off, size_t pitch, const void *val, unsigned elem, size_t width, size_t height)
{
    for (size_t y = 0; y < height; y++) ref_set(m, off + y * pitch, val, elem, width);
}

static void memsets(void)
{
    struct dbuf b;
    dbuf_new(&b, 3 * 4096 + GUARD, 0x77);
    uint8_t u8 = 0xa5;
    uint16_t u16 = 0xbeef;
    uint32_t u32 = 0xdeadc0de;

    for (int async = 0; async < 2; async++) {
        u8 = (uint8_t)(u8 + async);
        u16 = (uint16_t)(u16 + async);
        u32 += (uint32_t)async;
        CU(async ? cuMemsetD8Async(b.d + 3, u8, 1001, stream) : cuMemsetD8_v2(b.d + 3, u8, 1001));
        ref_set(b.m, 3, &u8, 1, 1001);
        CU(async ? cuMemsetD16Async(b.d + 1010, u16, 333, stream) : cuMemsetD16_v2(b.d + 1010, u16, 333));
        ref_set(b.m, 1010, &u16, 2, 333);
        CU(async ? cuMemsetD32Async(b.d + 2000, u32, 257, stream) : cuMemsetD32_v2(b.d + 2000, u32, 257));
        ref_set(b.m, 2000, &u32, 4, 257);
        /* 2D: pitch 100, width in elements */
        CU(async ? cuMemsetD2D8Async(b.d + 4096 + 1, 100, u8 ^ 0xff, 37, 9, stream)
                 : cuMemsetD2D8_v2(b.d + 4096 + 1, 100, u8 ^ 0xff, 37, 9));
        uint8_t nu8 = u8 ^ 0xff;
        ref_set2d(b.m, 4096 + 1, 100, &nu8, 1, 37, 9);
        CU(async ? cuMemsetD2D16Async(b.d + 6000, 102, (uint16_t)~u16, 21, 11, stream)
                 : cuMemsetD2D16_v2(b.d + 6000, 102, (uint16_t)~u16, 21, 11));
        uint16_t nu16 = (uint16_t)~u16;
        ref_set2d(b.m, 6000, 102, &nu16, 2, 21, 11);
        CU(async ? cuMemsetD2D32Async(b.d + 8192, 256, ~u32, 33, 13, stream)
                 : cuMemsetD2D32_v2(b.d + 8192, 256, ~u32, 33, 13));
        uint32_t nu32 = ~u32;
        ref_set2d(b.m, 8192, 256, &nu32, 4, 33, 13);
        if (async) CU(cuStreamSynchronize(stream));
        dbuf_verify(&b, async ? "async memsets" : "memsets");
    }
    dbuf_free(&b);
    printf("ok memsets D8/D16/D32 and D2D8/D2D16/D2D32, sync and async\n");
}

int main(void)
{
    h_begin("copies", 55);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    linear_sizes();
    unified();
    copies_2d();
    copies_3d();
    memsets();

    CU(cuStreamDestroy_v2(stream));
    CU(cuCtxSynchronize());
    h_server_stop(&srv);
    printf("PASS copies\n");
    return 0;
}
