/* textures.c - texture and surface objects, CUDA arrays, mipmap levels and
 * texture references through SCUDA, checked by the numbers a kernel reads.
 *
 * The stand-in's tex_sample kernel writes what tex() returns for each
 * coordinate (4 words); surf_write writes base + x + 100 y + 10000 z into
 * every element of a surface. Every value below is exact in float: texel
 * centres, filter weights of 0.5, border colours. Descriptor getters must
 * give back the very handles the application passed (virtual ids
 * translated both ways), and bad handles must be errors, not crashes. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define MAXN 16

/* out[i] (4 words) = tex(coords[i]), i < n, through tex_sample */
static void sample(CUtexObject tex, const float *coords, unsigned n, uint32_t geom, uint32_t *out)
{
    CUdeviceptr d_out, d_coords;
    CU(cuMemAlloc_v2(&d_out, (size_t)n * 16));
    CU(cuMemAlloc_v2(&d_coords, (size_t)n * 16));
    CU(cuMemcpyHtoD_v2(d_coords, coords, (size_t)n * 16));
    void *args[] = {&d_out, &tex, &d_coords, &n, &geom};
    CU(cuLaunchKernel(h_func("tex_sample"), 1, 1, 1, n, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(out, d_out, (size_t)n * 16));
    CU(cuMemFree_v2(d_out));
    CU(cuMemFree_v2(d_coords));
}

static float word_f(uint32_t w)
{
    float f;
    memcpy(&f, &w, 4);
    return f;
}

/* first channel of each sample, as floats */
static void sample_x(CUtexObject tex, const float *coords, unsigned n, uint32_t geom, float *x)
{
    uint32_t out[MAXN * 4];
    sample(tex, coords, n, geom, out);
    for (unsigned i = 0; i < n; i++)
        x[i] = word_f(out[4 * i]);
}

static CUtexObject tex_of(const CUDA_RESOURCE_DESC *res, CUaddress_mode am, CUfilter_mode fm, unsigned flags)
{
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = td.addressMode[1] = td.addressMode[2] = am;
    td.filterMode = fm;
    td.flags = flags;
    td.borderColor[0] = 7;
    CUtexObject t = 0;
    CU(cuTexObjectCreate(&t, res, &td, NULL));
    CHECK(t != 0);
    return t;
}

static CUarray array_of(size_t w, size_t h, size_t d, CUarray_format fmt, unsigned ch, unsigned flags)
{
    CUDA_ARRAY3D_DESCRIPTOR ad = {w, h, d, fmt, ch, flags};
    CUarray a;
    CU(cuArray3DCreate_v2(&a, &ad));
    return a;
}

/* host floats into a 2D array (w x h, 1 float channel) through cuMemcpy2D */
static void fill_2d(CUarray a, const float *src, size_t w, size_t h)
{
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcPitch = w * 4;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = a;
    c.WidthInBytes = w * 4;
    c.Height = h;
    CU(cuMemcpy2D_v2(&c));
}

/* host bytes into and out of a 3D (or layered) array through cuMemcpy3D */
static void copy_3d(CUarray a, void *host, size_t wbytes, size_t h, size_t d, int to_array)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    if (to_array) {
        c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = host, c.srcPitch = wbytes, c.srcHeight = h;
        c.dstMemoryType = CU_MEMORYTYPE_ARRAY, c.dstArray = a;
    } else {
        c.srcMemoryType = CU_MEMORYTYPE_ARRAY, c.srcArray = a;
        c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = host, c.dstPitch = wbytes, c.dstHeight = h;
    }
    c.WidthInBytes = wbytes, c.Height = h, c.Depth = d;
    CU(cuMemcpy3D_v2(&c));
}

static void linear_and_pitched(void)
{
    /* linear: tex1Dfetch by integer index, 0 outside */
    CUdeviceptr lin;
    float vals[16];
    for (int i = 0; i < 16; i++) vals[i] = 1.5f * (float)i;
    CU(cuMemAlloc_v2(&lin, sizeof vals));
    CU(cuMemcpyHtoD_v2(lin, vals, sizeof vals));
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = lin;
    r.res.linear.format = CU_AD_FORMAT_FLOAT;
    r.res.linear.numChannels = 1;
    r.res.linear.sizeInBytes = sizeof vals;
    CUtexObject t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float c[4 * 3] = {3, 0, 0, 0, 15, 0, 0, 0, 20, 0, 0, 0}, x[3];
    sample_x(t, c, 3, 0, x);
    CHECK(x[0] == 4.5f && x[1] == 22.5f && x[2] == 0, "linear: %g %g %g", x[0], x[1], x[2]);
    CUDA_RESOURCE_DESC back;
    CU(cuTexObjectGetResourceDesc(&back, t));
    CHECK(back.resType == CU_RESOURCE_TYPE_LINEAR && back.res.linear.devPtr == lin &&
          back.res.linear.sizeInBytes == sizeof vals && back.res.linear.format == CU_AD_FORMAT_FLOAT);
    CU(cuTexObjectDestroy(t));

    /* pitched 2D, 8 x 4 floats in rows of 512 bytes: point, then linear */
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 512 * 4));
    float rows[4][128];
    for (int y = 0; y < 4; y++)
        for (int xx = 0; xx < 128; xx++) rows[y][xx] = (float)(10 * y + xx);
    CU(cuMemcpyHtoD_v2(p, rows, sizeof rows));
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = p;
    r.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
    r.res.pitch2D.numChannels = 1;
    r.res.pitch2D.width = 8;
    r.res.pitch2D.height = 4;
    r.res.pitch2D.pitchInBytes = 512;
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float c2[8] = {2.5f, 3.5f, 0, 0, 100, -3, 0, 0}, y2[2];
    sample_x(t, c2, 2, 2, y2);
    CHECK(y2[0] == 32 && y2[1] == 7, "pitch2D point: %g %g", y2[0], y2[1]);
    CU(cuTexObjectDestroy(t));
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    float c3[4] = {2.0f, 1.5f, 0, 0}; /* halfway between texels 1 and 2 of row 1 */
    sample_x(t, c3, 1, 2, y2);
    CHECK(y2[0] == 11.5f, "pitch2D linear: %g", y2[0]);
    CU(cuTexObjectDestroy(t));
    CU(cuMemFree_v2(p));
    CU(cuMemFree_v2(lin));
}

static void arrays_and_address_modes(void)
{
    /* 4 x 4 floats, texel (x, y) = 10 y + x */
    float img[16];
    for (int i = 0; i < 16; i++) img[i] = (float)(10 * (i / 4) + i % 4);
    CUarray a = array_of(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    fill_2d(a, img, 4, 4);
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = a;
    /* normalized u = 1.125 is texel 4.5: wrap -> 0, mirror -> 3, clamp -> 3, border -> 7 */
    float c[4] = {1.125f, 0.125f, 0, 0}, x[1];
    struct { CUaddress_mode m; float want; } modes[] = {{CU_TR_ADDRESS_MODE_WRAP, 0}, {CU_TR_ADDRESS_MODE_MIRROR, 3},
                                                       {CU_TR_ADDRESS_MODE_CLAMP, 3}, {CU_TR_ADDRESS_MODE_BORDER, 7}};
    for (int i = 0; i < 4; i++) {
        CUtexObject t = tex_of(&r, modes[i].m, CU_TR_FILTER_MODE_POINT, CU_TRSF_NORMALIZED_COORDINATES);
        sample_x(t, c, 1, 2, x);
        EXPECT(x[0] == modes[i].want, "address mode %d: %g, expected %g", modes[i].m, x[0], modes[i].want);
        CU(cuTexObjectDestroy(t));
    }
    /* descriptors come back as they went, the array as the application's handle */
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.addressMode[0] = CU_TR_ADDRESS_MODE_BORDER;
    td.addressMode[1] = CU_TR_ADDRESS_MODE_MIRROR;
    td.filterMode = CU_TR_FILTER_MODE_LINEAR;
    td.flags = CU_TRSF_NORMALIZED_COORDINATES;
    td.borderColor[2] = 0.25f;
    td.maxAnisotropy = 4;
    td.mipmapLevelBias = 0.5f;
    CUDA_RESOURCE_VIEW_DESC vd;
    memset(&vd, 0, sizeof vd);
    vd.format = CU_RES_VIEW_FORMAT_FLOAT_1X32;
    vd.width = 4, vd.height = 4;
    CUtexObject t;
    CU(cuTexObjectCreate(&t, &r, &td, &vd));
    CUDA_RESOURCE_DESC rb;
    CUDA_TEXTURE_DESC tb;
    CUDA_RESOURCE_VIEW_DESC vb;
    CU(cuTexObjectGetResourceDesc(&rb, t));
    CHECK(rb.resType == CU_RESOURCE_TYPE_ARRAY && rb.res.array.hArray == a, "array %p, expected %p",
          (void *)rb.res.array.hArray, (void *)a);
    CU(cuTexObjectGetTextureDesc(&tb, t));
    CHECK(memcmp(&tb, &td, sizeof td) == 0);
    CU(cuTexObjectGetResourceViewDesc(&vb, t));
    CHECK(vb.format == CU_RES_VIEW_FORMAT_FLOAT_1X32 && vb.width == 4 && vb.height == 4);
    CU(cuTexObjectDestroy(t));
    CU(cuArrayDestroy(a));

    /* 3D: 4 x 2 x 3, linear filtering between slices 0 and 1 */
    float vol[24];
    for (int i = 0; i < 24; i++) vol[i] = (float)i;
    a = array_of(4, 2, 3, CU_AD_FORMAT_FLOAT, 1, 0);
    copy_3d(a, vol, 16, 2, 3, 1);
    float back[24];
    copy_3d(a, back, 16, 2, 3, 0);
    CHECK(memcmp(back, vol, sizeof vol) == 0, "3D array round trip");
    r.res.array.hArray = a;
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_LINEAR, 0);
    float c3[8] = {1.5f, 0.5f, 1.0f, 0, 2.5f, 1.5f, 2.5f, 0}, x3[2];
    sample_x(t, c3, 2, 3, x3);
    CHECK(x3[0] == 5 && x3[1] == 22, "3D: %g %g", x3[0], x3[1]); /* (1 + 9) / 2; texel (2,1,2) */
    CU(cuTexObjectDestroy(t));
    CU(cuArrayDestroy(a));

    /* 2D layered: 2 x 2, 3 layers; layer l holds 100 l + texel */
    float lay[12];
    for (int i = 0; i < 12; i++) lay[i] = (float)(100 * (i / 4) + i % 4);
    a = array_of(2, 2, 3, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);
    copy_3d(a, lay, 8, 2, 3, 1);
    r.res.array.hArray = a;
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    float cl[4] = {1.5f, 0.5f, 2, 0};
    sample_x(t, cl, 1, 5, x);
    CHECK(x[0] == 201, "layered: %g", x[0]);
    CU(cuTexObjectDestroy(t));
    CU(cuArrayDestroy(a));
}

static void formats(void)
{
    /* u8 x 4 channels: normalized floats, sRGB, or integers */
    uint8_t px[4] = {255, 128, 0, 51};
    CUarray a = array_of(1, 1, 0, CU_AD_FORMAT_UNSIGNED_INT8, 4, 0);
    CU(cuMemcpyHtoA_v2(a, 0, px, 4));
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = a;
    float c[4] = {0.5f, 0.5f, 0, 0};
    uint32_t out[4];
    CUtexObject t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, 0);
    sample(t, c, 1, 2, out);
    CHECK(word_f(out[0]) == 1.0f && fabsf(word_f(out[1]) - 128 / 255.0f) < 1e-6f && word_f(out[3]) == 0.2f,
          "normalized: %g %g %g", word_f(out[0]), word_f(out[1]), word_f(out[3]));
    CU(cuTexObjectDestroy(t));
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, CU_TRSF_SRGB);
    sample(t, c, 1, 2, out);
    CHECK(fabsf(word_f(out[1]) - 0.2158605f) < 1e-4f && word_f(out[3]) == 0.2f, "sRGB: %g alpha %g",
          word_f(out[1]), word_f(out[3]));
    CU(cuTexObjectDestroy(t));
    t = tex_of(&r, CU_TR_ADDRESS_MODE_CLAMP, CU_TR_FILTER_MODE_POINT, CU_TRSF_READ_AS_INTEGER);
    sample(t, c, 1, 2, out);
    CHECK(out[0] == 255 && out[1] == 128 && out[2] == 0 && out[3] == 51, "integers: %u %u %u %u", out[0], out[1],
          out[2], out[3]);
    CU(cuTexObjectDestroy(t));
    CU(cuArrayDestroy(a));
}

static void surfaces(void)
{
    CUarray a = array_of(8, 4, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST);
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = a;
    CUsurfObject s;
    CU(cuSurfObjectCreate(&s, &r));
    uint32_t w = 8, h = 4, d = 1, base = 5;
    void *args[] = {&s, &w, &h, &d, &base};
    CU(cuLaunchKernel(h_func("surf_write"), 1, 1, 1, 8, 4, 1, 0, NULL, args, NULL));
    uint32_t got[32];
    CU(cuMemcpyAtoH_v2(got, a, 0, sizeof got));
    for (uint32_t y = 0; y < 4; y++)
        for (uint32_t x = 0; x < 8; x++)
            EXPECT(got[y * 8 + x] == 5 + x + 100 * y, "surface (%u,%u) = %u", x, y, got[y * 8 + x]);
    CUDA_RESOURCE_DESC back;
    CU(cuSurfObjectGetResourceDesc(&back, s));
    CHECK(back.resType == CU_RESOURCE_TYPE_ARRAY && back.res.array.hArray == a);
    CU(cuSurfObjectDestroy(s));
    /* an array made without CUDA_ARRAY3D_SURFACE_LDST is no surface */
    CUarray plain = array_of(8, 4, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1, 0);
    r.res.array.hArray = plain;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &r));
    /* 1D copies between the kinds: array -> array -> device -> array -> host */
    CU(cuMemcpyAtoA_v2(plain, 16, a, 0, 64));
    CUdeviceptr dev;
    CU(cuMemAlloc_v2(&dev, 128));
    CU(cuMemcpyAtoD_v2(dev, plain, 0, 128));
    CU(cuMemcpyDtoA_v2(a, 0, dev, 128));
    uint32_t again[32];
    CU(cuMemcpyAtoH_v2(again, a, 0, sizeof again));
    CHECK(again[4] == 5 && again[4 + 15] == 5 + 7 + 100, "1D copies: %u %u", again[4], again[19]);
    CU(cuMemFree_v2(dev));
    CU(cuArrayDestroy(plain));
    CU(cuArrayDestroy(a));
}

static void mipmaps(void)
{
    CUDA_ARRAY3D_DESCRIPTOR ad = {8, 8, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    CUmipmappedArray m;
    CU(cuMipmappedArrayCreate(&m, &ad, 4));
    CUarray l0, l1, l1b;
    CU(cuMipmappedArrayGetLevel(&l0, m, 0));
    CU(cuMipmappedArrayGetLevel(&l1, m, 1));
    CU(cuMipmappedArrayGetLevel(&l1b, m, 1));
    CHECK(l1 == l1b && l0 != l1, "level handles: %p %p %p", (void *)l0, (void *)l1, (void *)l1b);
    CUDA_ARRAY3D_DESCRIPTOR d1;
    CU(cuArray3DGetDescriptor_v2(&d1, l1));
    CHECK(d1.Width == 4 && d1.Height == 4, "level 1 is %zux%zu", d1.Width, d1.Height);
    float ten[64], eleven[16];
    for (int i = 0; i < 64; i++) ten[i] = 10;
    for (int i = 0; i < 16; i++) eleven[i] = 11;
    fill_2d(l0, ten, 8, 8);
    fill_2d(l1, eleven, 4, 4);
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    r.res.mipmap.hMipmappedArray = m;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    td.flags = CU_TRSF_NORMALIZED_COORDINATES;
    td.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
    td.maxMipmapLevelClamp = 3;
    CUtexObject t;
    CU(cuTexObjectCreate(&t, &r, &td, NULL));
    float c[12] = {0.5f, 0.5f, 0, 0, 0.5f, 0.5f, 0, 1, 0.5f, 0.5f, 0, 0.5f}, x[3];
    sample_x(t, c, 3, 7, x);
    CHECK(x[0] == 10 && x[1] == 11 && x[2] == 10.5f, "mipmap: %g %g %g", x[0], x[1], x[2]);
    CUDA_RESOURCE_DESC back;
    CU(cuTexObjectGetResourceDesc(&back, t));
    CHECK(back.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && back.res.mipmap.hMipmappedArray == m);
    CU(cuTexObjectDestroy(t));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetLevel(&l0, m, 4));
    CU(cuMipmappedArrayDestroy(m));
}

static void planes(void)
{
    CUDA_ARRAY3D_DESCRIPTOR ad = {8, 4, 0, CU_AD_FORMAT_NV12, 3, 0};
    CUarray nv12, y, uv, y2;
    CU(cuArray3DCreate_v2(&nv12, &ad));
    CU(cuArrayGetPlane(&y, nv12, 0));
    CU(cuArrayGetPlane(&uv, nv12, 1));
    CU(cuArrayGetPlane(&y2, nv12, 0));
    CHECK(y == y2 && y != uv);
    CUDA_ARRAY3D_DESCRIPTOR pd;
    CU(cuArray3DGetDescriptor_v2(&pd, uv));
    CHECK(pd.Width == 4 && pd.Height == 2 && pd.NumChannels == 2, "chroma %zux%zu x%u", pd.Width, pd.Height,
          pd.NumChannels);
    uint8_t luma[32], back[32];
    h_pattern(luma, sizeof luma, 3);
    CU(cuMemcpyHtoA_v2(y, 0, luma, sizeof luma));
    CU(cuMemcpyAtoH_v2(back, y, 0, sizeof back));
    CHECK(memcmp(luma, back, sizeof luma) == 0);
    CUarray plain = array_of(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuArrayGetPlane(&y, plain, 0));
    CU(cuArrayDestroy(plain));
    CU(cuArrayDestroy(nv12));
}

static void references(void)
{
    CUtexref tr, tr2;
    CU(cuModuleGetTexRef(&tr, h_module(), "tex_ref"));
    CU(cuModuleGetTexRef(&tr2, h_module(), "tex_ref"));
    CHECK(tr == tr2, "one texture reference per name");
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetTexRef(&tr2, h_module(), "no_such_ref"));
    float img[16];
    for (int i = 0; i < 16; i++) img[i] = (float)(10 * (i / 4) + i % 4);
    CUarray a = array_of(4, 4, 0, CU_AD_FORMAT_FLOAT, 1, 0);
    fill_2d(a, img, 4, 4);
    CU(cuTexRefSetArray(tr, a, CU_TRSA_OVERRIDE_FORMAT));
    CU(cuTexRefSetAddressMode(tr, 0, CU_TR_ADDRESS_MODE_BORDER));
    CU(cuTexRefSetAddressMode(tr, 1, CU_TR_ADDRESS_MODE_CLAMP));
    CU(cuTexRefSetFilterMode(tr, CU_TR_FILTER_MODE_LINEAR));
    CU(cuTexRefSetFlags(tr, 0));
    float border[4] = {7, 0, 0, 0};
    CU(cuTexRefSetBorderColor(tr, border));
    CU(cuTexRefSetMipmapFilterMode(tr, CU_TR_FILTER_MODE_LINEAR));
    CU(cuTexRefSetMipmapLevelBias(tr, 0.25f));
    CU(cuTexRefSetMipmapLevelClamp(tr, 0.5f, 2.5f));
    CU(cuTexRefSetMaxAnisotropy(tr, 8));
    CUarray ab;
    CU(cuTexRefGetArray(&ab, tr));
    CHECK(ab == a, "texref array %p, expected %p", (void *)ab, (void *)a);
    CUaddress_mode am;
    CU(cuTexRefGetAddressMode(&am, tr, 0));
    CHECK(am == CU_TR_ADDRESS_MODE_BORDER);
    CUfilter_mode fm;
    CU(cuTexRefGetFilterMode(&fm, tr));
    CHECK(fm == CU_TR_FILTER_MODE_LINEAR);
    CU(cuTexRefGetMipmapFilterMode(&fm, tr));
    CHECK(fm == CU_TR_FILTER_MODE_LINEAR);
    float bias, lo, hi, bc[4];
    CU(cuTexRefGetMipmapLevelBias(&bias, tr));
    CU(cuTexRefGetMipmapLevelClamp(&lo, &hi, tr));
    CU(cuTexRefGetBorderColor(bc, tr));
    CHECK(bias == 0.25f && lo == 0.5f && hi == 2.5f && bc[0] == 7);
    int aniso;
    CU(cuTexRefGetMaxAnisotropy(&aniso, tr));
    CHECK(aniso == 8);
    /* the kernel reads the reference: (0.5, 1.5) is texel 10; x = -1 is the border; (2, 0.5) filters 1 and 2 */
    float c[12] = {0.5f, 1.5f, 0, 0, -1, 1.5f, 0, 0, 2, 0.5f, 0, 0};
    CUdeviceptr d_out, d_c;
    CU(cuMemAlloc_v2(&d_out, 48));
    CU(cuMemAlloc_v2(&d_c, 48));
    CU(cuMemcpyHtoD_v2(d_c, c, 48));
    unsigned n = 3;
    void *args[] = {&d_out, &d_c, &n};
    CU(cuLaunchKernel(h_func("texref_sample"), 1, 1, 1, 3, 1, 1, 0, NULL, args, NULL));
    float out[12];
    CU(cuMemcpyDtoH_v2(out, d_out, 48));
    CHECK(out[0] == 10 && out[4] == 7 && out[8] == 1.5f, "texref: %g %g %g", out[0], out[4], out[8]);
    CU(cuMemFree_v2(d_out));
    CU(cuMemFree_v2(d_c));
    /* linear memory bound to a created reference */
    CUtexref own;
    CU(cuTexRefCreate(&own));
    CU(cuTexRefSetFormat(own, CU_AD_FORMAT_SIGNED_INT16, 2));
    CUarray_format fmt;
    int ch;
    CU(cuTexRefGetFormat(&fmt, &ch, own));
    CHECK(fmt == CU_AD_FORMAT_SIGNED_INT16 && ch == 2);
    CUdeviceptr lin, lb;
    CU(cuMemAlloc_v2(&lin, 4096));
    size_t off = 1;
    CU(cuTexRefSetAddress_v2(&off, own, lin, 4096));
    CU(cuTexRefGetAddress_v2(&lb, own));
    CHECK(off == 0 && lb == lin);
    CU(cuTexRefSetFlags(own, CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES));
    unsigned flags;
    CU(cuTexRefGetFlags(&flags, own));
    CHECK(flags == (CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES));
    CU(cuTexRefDestroy(own));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuTexRefGetFlags(&flags, own));
    CU(cuMemFree_v2(lin));
    /* surface references */
    CUsurfref sr;
    CU(cuModuleGetSurfRef(&sr, h_module(), "surf_ref"));
    CUarray sa = array_of(4, 4, 0, CU_AD_FORMAT_UNSIGNED_INT32, 1, CUDA_ARRAY3D_SURFACE_LDST);
    CU(cuSurfRefSetArray(sr, sa, 0));
    CU(cuSurfRefGetArray(&ab, sr));
    CHECK(ab == sa, "surfref array %p, expected %p", (void *)ab, (void *)sa);
    CU(cuArrayDestroy(sa));
    CU(cuArrayDestroy(a));
}

static void bad_handles(void)
{
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = (CUarray)(uintptr_t)0xdead0;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject t;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuTexObjectCreate(&t, &r, &td, NULL));
    r.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuTexObjectCreate(&t, &r, &td, NULL));
    CUsurfObject s;
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuSurfObjectCreate(&s, &r));
    r.resType = (CUresourcetype)42;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &r, &td, NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(NULL, &r, &td, NULL));
    CUDA_RESOURCE_DESC back;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetResourceDesc(&back, 0x12345));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuSurfObjectGetResourceDesc(&back, 0x12345));
    CUarray a;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuMipmappedArrayGetLevel(&a, (CUmipmappedArray)(uintptr_t)0xdead0, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuArrayGetPlane(&a, (CUarray)(uintptr_t)0xdead0, 0));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuTexRefGetArray(&a, (CUtexref)(uintptr_t)0xdead0));
    /* the session still works */
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 16));
    CU(cuMemFree_v2(d));
}

static void client(void)
{
    h_cuda_setup();
    linear_and_pitched();
    arrays_and_address_modes();
    formats();
    surfaces();
    mipmaps();
    planes();
    references();
    bad_handles();
    CU(cuCtxSynchronize());
    CHECK(h_soft_failures() == 0);
}

int main(void)
{
    h_run_client_test("textures", 40, NULL, client);
    return 0;
}
