/* SCUDA CPU stand-in driver: texture and surface objects, texture and
 * surface references, and the sampler the built-in kernels use.
 *
 * An object's value is the address of its record (checked against a set,
 * so a stale or forged value is an error, never a dereference). A kernel
 * gets a copy of what it samples at launch (si_texview): the resource's
 * levels and the sampling state. The sampler follows CUDA's rules in
 * exact arithmetic: address modes per dimension (wrap and mirror only
 * with normalized coordinates, else clamp), point or linear filtering
 * (texel centres at +0.5; integer reads are never filtered), 8 and 16-bit
 * integers read as normalized floats unless CU_TRSF_READ_AS_INTEGER,
 * sRGB on 8-bit unsigned colour channels, border colour, mipmap level
 * bias, clamp and point or linear level filtering, layers, cubemaps.
 * The hardware's 9-bit filter weights are not modelled. */
#include "standin_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct si_texobj {
    bool surface;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC td;
    CUDA_RESOURCE_VIEW_DESC view;
} si_texobj;

typedef struct si_texref {
    si_module *module;     /* NULL: made by cuTexRefCreate */
    bool surface;
    bool bound;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC td;  /* address modes, filters, flags, border, mipmap state */
    CUarray_format fmt;    /* cuTexRefSetFormat */
    int ch;
} si_texref;

static si_hset si_texobjs, si_texrefs;

/* ---- resources ---- */

static bool si_fmt_ok(CUarray_format f, unsigned ch)
{
    return si_format_size(f) && f != CU_AD_FORMAT_NV12 && (ch == 1 || ch == 2 || ch == 4);
}

/* the resource described, checked; a surface needs a CUDA_ARRAY3D_SURFACE_LDST array */
static CUresult si_res_check(const CUDA_RESOURCE_DESC *r, bool surface)
{
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
        si_array *a = si_array_get(r->res.array.hArray);
        if (!a)
            return CUDA_ERROR_INVALID_HANDLE;
        if (!a->mem || (surface && !(a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST)))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
        if (surface)
            return CUDA_ERROR_INVALID_VALUE;
        return si_mipmap_get(r->res.mipmap.hMipmappedArray) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
    case CU_RESOURCE_TYPE_LINEAR: {
        const __typeof__(r->res.linear) *l = &r->res.linear;
        if (surface || !si_fmt_ok(l->format, l->numChannels) || l->devPtr % 512 || !l->sizeInBytes ||
            !si_range((uintptr_t)l->devPtr, l->sizeInBytes))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
        const __typeof__(r->res.pitch2D) *p = &r->res.pitch2D;
        size_t row = si_format_size(p->format) * p->numChannels;
        if (surface || !si_fmt_ok(p->format, p->numChannels) || p->devPtr % 512 || p->pitchInBytes % 32 ||
            !p->width || !p->height || p->pitchInBytes < p->width * row ||
            !si_range((uintptr_t)p->devPtr, p->pitchInBytes * p->height))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static void si_level_of(const si_array *a, si_level *l)
{
    l->base = a->mem->base;
    l->w = a->desc.Width;
    l->h = a->rows;
    l->d = a->slices;
    l->pitch = a->pitch;
}

/* the view of a checked resource with sampling state td */
static bool si_view_make(const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *td, si_texview *v)
{
    memset(v, 0, sizeof(*v));
    v->res = r->resType;
    v->td = *td;
    v->layers = 1;
    const si_array *a = NULL;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY:
        if (!(a = si_array_get(r->res.array.hArray)) || !a->mem)
            return false;
        v->n_levels = 1;
        si_level_of(a, &v->lv[0]);
        break;
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY: {
        const si_mipmap *m = si_mipmap_get(r->res.mipmap.hMipmappedArray);
        if (!m)
            return false;
        a = m->levels[0];
        v->n_levels = m->n_levels;
        for (unsigned i = 0; i < m->n_levels; i++)
            si_level_of(m->levels[i], &v->lv[i]);
        break;
    }
    case CU_RESOURCE_TYPE_LINEAR:
        v->fmt = r->res.linear.format;
        v->ch = r->res.linear.numChannels;
        v->elem = (unsigned)si_format_size(v->fmt) * v->ch;
        v->dims = 1;
        v->n_levels = 1;
        v->lv[0] = (si_level){r->res.linear.devPtr, r->res.linear.sizeInBytes / v->elem, 1, 1,
                              r->res.linear.sizeInBytes};
        return true;
    case CU_RESOURCE_TYPE_PITCH2D:
        v->fmt = r->res.pitch2D.format;
        v->ch = r->res.pitch2D.numChannels;
        v->elem = (unsigned)si_format_size(v->fmt) * v->ch;
        v->dims = 2;
        v->n_levels = 1;
        v->lv[0] = (si_level){r->res.pitch2D.devPtr, r->res.pitch2D.width, r->res.pitch2D.height, 1,
                              r->res.pitch2D.pitchInBytes};
        return true;
    default:
        return false;
    }
    v->fmt = a->desc.Format;
    v->ch = a->desc.NumChannels;
    v->elem = (unsigned)a->elem;
    v->arr_flags = a->desc.Flags;
    bool layered = a->desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    v->dims = a->desc.Flags & CUDA_ARRAY3D_CUBEMAP ? 2 : a->desc.Depth && !layered ? 3 : a->desc.Height ? 2 : 1;
    v->layers = layered ? a->slices : 1;
    return true;
}

/* ---- texture and surface objects ---- */

static CUresult si_obj_create(unsigned long long *out, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *td,
                              const CUDA_RESOURCE_VIEW_DESC *view, bool surface)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!out || !r || (!surface && !td)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_res_check(r, surface);
    if (!rc && td) {
        for (int i = 0; i < 3; i++)
            if ((unsigned)td->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER)
                rc = CUDA_ERROR_INVALID_VALUE;
        if ((unsigned)td->filterMode > CU_TR_FILTER_MODE_LINEAR ||
            (unsigned)td->mipmapFilterMode > CU_TR_FILTER_MODE_LINEAR)
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc) {
        si_texobj *o = si_xcalloc(1, sizeof(*o));
        o->surface = surface;
        o->res = *r;
        if (td)
            o->td = *td;
        if (view)
            o->view = *view;
        si_hset_add(&si_texobjs, o);
        *out = (uint64_t)(uintptr_t)o;
    }
    si_leave();
    return rc;
}

static si_texobj *si_obj_get(uint64_t v, bool surface)
{
    si_texobj *o = (si_texobj *)(uintptr_t)v;
    return v && si_hset_has(&si_texobjs, o) && o->surface == surface ? o : NULL;
}

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
                                   const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
    return si_obj_create(pTexObject, pResDesc, pTexDesc, pResViewDesc, false);
}

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *pSurfObject, const CUDA_RESOURCE_DESC *pResDesc)
{
    return si_obj_create(pSurfObject, pResDesc, NULL, NULL, true);
}

static CUresult si_obj_destroy(uint64_t v, bool surface)
{
    si_enter();
    CUresult rc = si_check_init();
    si_texobj *o = si_obj_get(v, surface);
    if (!rc && !o)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_hset_del(&si_texobjs, o);
        free(o);
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject o) { return si_obj_destroy(o, false); }
CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject o) { return si_obj_destroy(o, true); }

/* copies part `what` (0 resource, 1 texture, 2 view) of an object */
static CUresult si_obj_query(uint64_t v, bool surface, int what, void *out)
{
    si_enter();
    CUresult rc = si_check_init();
    si_texobj *o = si_obj_get(v, surface);
    if (!rc && (!o || !out))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc && what == 0)
        *(CUDA_RESOURCE_DESC *)out = o->res;
    if (!rc && what == 1)
        *(CUDA_TEXTURE_DESC *)out = o->td;
    if (!rc && what == 2)
        *(CUDA_RESOURCE_VIEW_DESC *)out = o->view;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *d, CUtexObject o) { return si_obj_query(o, false, 0, d); }
CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *d, CUtexObject o) { return si_obj_query(o, false, 1, d); }
CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *d, CUtexObject o) { return si_obj_query(o, false, 2, d); }
CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *d, CUsurfObject o) { return si_obj_query(o, true, 0, d); }

bool si_texobj_view(uint64_t obj, bool surface, si_texview *v)
{
    si_texobj *o = si_obj_get(obj, surface);
    return o && si_res_check(&o->res, surface) == CUDA_SUCCESS && si_view_make(&o->res, &o->td, v);
}

/* ---- texture and surface references ---- */

static si_texref *si_ref_new(si_module *m, bool surface)
{
    si_texref *t = si_xcalloc(1, sizeof(*t));
    t->module = m;
    t->surface = surface;
    t->fmt = CU_AD_FORMAT_FLOAT;
    t->ch = 1;
    si_hset_add(&si_texrefs, t);
    return t;
}

void si_module_refs_free(si_module *m)
{
    if (!m->refs)
        return;
    for (size_t i = 0; i < m->image->n_globals; i++)
        if (m->refs[i]) {
            si_hset_del(&si_texrefs, m->refs[i]);
            free(m->refs[i]);
        }
    free(m->refs);
    m->refs = NULL;
}

/* the module's reference `name` of kind 1 (texref) or 2 (surfref), made at first use */
static si_texref *si_module_ref(si_module *m, const char *name, int kind)
{
    for (size_t i = 0; i < m->image->n_globals; i++) {
        const si_gvar *g = &m->image->globals[i];
        if (g->ref_kind != kind || strcmp(g->name, name) != 0)
            continue;
        if (!m->refs)
            m->refs = si_xcalloc(m->image->n_globals, sizeof(void *));
        if (!m->refs[i])
            m->refs[i] = si_ref_new(m, kind == 2);
        return m->refs[i];
    }
    return NULL;
}

static CUresult si_module_get_ref(void **out, CUmodule hmod, const char *name, int kind)
{
    si_enter();
    CUresult rc = si_check_init();
    si_module *m = (si_module *)hmod;
    if (!rc && (!hmod || !si_hset_has(&si_g.modules, m)))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && (!out || !name))
        rc = CUDA_ERROR_INVALID_VALUE;
    si_texref *t = NULL;
    if (!rc && !(t = si_module_ref(m, name, kind)))
        rc = CUDA_ERROR_NOT_FOUND;
    if (!rc)
        *out = t;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuModuleGetTexRef(CUtexref *pTexRef, CUmodule hmod, const char *name)
{
    return si_module_get_ref((void **)pTexRef, hmod, name, 1);
}

CUresult CUDAAPI cuModuleGetSurfRef(CUsurfref *pSurfRef, CUmodule hmod, const char *name)
{
    return si_module_get_ref((void **)pSurfRef, hmod, name, 2);
}

CUresult CUDAAPI cuTexRefCreate(CUtexref *pTexRef)
{
    si_enter();
    CUresult rc = si_check_init();
    if (!rc && !pTexRef)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        *pTexRef = (CUtexref)si_ref_new(NULL, false);
    si_leave();
    return rc;
}

bool si_texref_live(CUtexref h)
{
    si_texref *t = (si_texref *)h;
    return t && si_hset_has(&si_texrefs, t) && !t->surface;
}

CUresult CUDAAPI cuTexRefDestroy(CUtexref h)
{
    si_enter();
    CUresult rc = si_check_init();
    si_texref *t = (si_texref *)h;
    if (!rc && (!h || !si_hset_has(&si_texrefs, t) || t->module))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        si_hset_del(&si_texrefs, t);
        free(t);
    }
    si_leave();
    return rc;
}

/* Every texref call: lock, check the handle and the pointer, run `body`. */
#define SI_REF_CALL(h, ptr, is_surf, body)                                       \
    do {                                                                         \
        si_enter();                                                              \
        CUresult rc_ = si_check_init();                                          \
        si_texref *t = (si_texref *)(h);                                         \
        if (!rc_ && (!(h) || !si_hset_has(&si_texrefs, t) || t->surface != (is_surf))) \
            rc_ = CUDA_ERROR_INVALID_HANDLE;                                     \
        if (!rc_ && !(ptr))                                                      \
            rc_ = CUDA_ERROR_INVALID_VALUE;                                      \
        if (!rc_) {                                                              \
            body;                                                                \
        }                                                                        \
        si_leave();                                                              \
        return rc_;                                                              \
    } while (0)

static CUresult si_ref_bind(si_texref *t, const CUDA_RESOURCE_DESC *r)
{
    CUresult rc = si_res_check(r, t->surface);
    if (!rc) {
        t->res = *r;
        t->bound = true;
    }
    return rc;
}

CUresult CUDAAPI cuTexRefSetArray(CUtexref h, CUarray a, unsigned int flags)
{
    CUDA_RESOURCE_DESC r = {.resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a};
    SI_REF_CALL(h, flags == CU_TRSA_OVERRIDE_FORMAT, false, rc_ = si_ref_bind(t, &r));
}

CUresult CUDAAPI cuTexRefSetMipmappedArray(CUtexref h, CUmipmappedArray m, unsigned int flags)
{
    CUDA_RESOURCE_DESC r = {.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, .res.mipmap.hMipmappedArray = m};
    SI_REF_CALL(h, flags == CU_TRSA_OVERRIDE_FORMAT, false, rc_ = si_ref_bind(t, &r));
}

CUresult CUDAAPI cuSurfRefSetArray(CUsurfref h, CUarray a, unsigned int flags)
{
    CUDA_RESOURCE_DESC r = {.resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = a};
    SI_REF_CALL(h, flags == 0, true, rc_ = si_ref_bind(t, &r));
}

CUresult CUDAAPI cuTexRefSetAddress_v2(size_t *ByteOffset, CUtexref h, CUdeviceptr dptr, size_t bytes)
{
    CUDA_RESOURCE_DESC r = {.resType = CU_RESOURCE_TYPE_LINEAR};
    r.res.linear.devPtr = dptr;
    r.res.linear.sizeInBytes = bytes;
    SI_REF_CALL(h, 1, false, {
        r.res.linear.format = t->fmt;
        r.res.linear.numChannels = (unsigned)t->ch;
        rc_ = si_ref_bind(t, &r);
        if (!rc_ && ByteOffset)
            *ByteOffset = 0; /* allocations are 4096-byte aligned */
    });
}

CUresult CUDAAPI cuTexRefSetAddress2D_v3(CUtexref h, const CUDA_ARRAY_DESCRIPTOR *d, CUdeviceptr dptr,
                                         size_t pitch)
{
    CUDA_RESOURCE_DESC r = {.resType = CU_RESOURCE_TYPE_PITCH2D};
    SI_REF_CALL(h, d, false, {
        r.res.pitch2D.devPtr = dptr;
        r.res.pitch2D.format = d->Format;
        r.res.pitch2D.numChannels = d->NumChannels;
        r.res.pitch2D.width = d->Width;
        r.res.pitch2D.height = d->Height;
        r.res.pitch2D.pitchInBytes = pitch;
        rc_ = si_ref_bind(t, &r);
    });
}

CUresult CUDAAPI cuTexRefSetFormat(CUtexref h, CUarray_format fmt, int ch)
{
    SI_REF_CALL(h, si_fmt_ok(fmt, (unsigned)ch), false, t->fmt = fmt; t->ch = ch);
}

CUresult CUDAAPI cuTexRefSetAddressMode(CUtexref h, int dim, CUaddress_mode am)
{
    SI_REF_CALL(h, dim >= 0 && dim < 3 && (unsigned)am <= CU_TR_ADDRESS_MODE_BORDER, false,
                t->td.addressMode[dim] = am);
}

CUresult CUDAAPI cuTexRefSetFilterMode(CUtexref h, CUfilter_mode fm)
{
    SI_REF_CALL(h, (unsigned)fm <= CU_TR_FILTER_MODE_LINEAR, false, t->td.filterMode = fm);
}

CUresult CUDAAPI cuTexRefSetMipmapFilterMode(CUtexref h, CUfilter_mode fm)
{
    SI_REF_CALL(h, (unsigned)fm <= CU_TR_FILTER_MODE_LINEAR, false, t->td.mipmapFilterMode = fm);
}

CUresult CUDAAPI cuTexRefSetMipmapLevelBias(CUtexref h, float bias)
{
    SI_REF_CALL(h, 1, false, t->td.mipmapLevelBias = bias);
}

CUresult CUDAAPI cuTexRefSetMipmapLevelClamp(CUtexref h, float lo, float hi)
{
    SI_REF_CALL(h, lo <= hi, false, t->td.minMipmapLevelClamp = lo; t->td.maxMipmapLevelClamp = hi);
}

CUresult CUDAAPI cuTexRefSetMaxAnisotropy(CUtexref h, unsigned int a)
{
    SI_REF_CALL(h, a <= 16, false, t->td.maxAnisotropy = a);
}

CUresult CUDAAPI cuTexRefSetBorderColor(CUtexref h, float *c)
{
    SI_REF_CALL(h, c, false, memcpy(t->td.borderColor, c, sizeof(t->td.borderColor)));
}

CUresult CUDAAPI cuTexRefSetFlags(CUtexref h, unsigned int flags)
{
    unsigned known = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
                     CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP;
    SI_REF_CALL(h, !(flags & ~known), false, t->td.flags = flags);
}

CUresult CUDAAPI cuTexRefGetAddress_v2(CUdeviceptr *p, CUtexref h)
{
    SI_REF_CALL(h, p, false, {
        if (t->bound && t->res.resType == CU_RESOURCE_TYPE_LINEAR)
            *p = t->res.res.linear.devPtr;
        else if (t->bound && t->res.resType == CU_RESOURCE_TYPE_PITCH2D)
            *p = t->res.res.pitch2D.devPtr;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

CUresult CUDAAPI cuTexRefGetArray(CUarray *a, CUtexref h)
{
    SI_REF_CALL(h, a, false, {
        if (t->bound && t->res.resType == CU_RESOURCE_TYPE_ARRAY)
            *a = t->res.res.array.hArray;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

CUresult CUDAAPI cuSurfRefGetArray(CUarray *a, CUsurfref h)
{
    SI_REF_CALL(h, a, true, {
        if (t->bound)
            *a = t->res.res.array.hArray;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

CUresult CUDAAPI cuTexRefGetMipmappedArray(CUmipmappedArray *m, CUtexref h)
{
    SI_REF_CALL(h, m, false, {
        if (t->bound && t->res.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY)
            *m = t->res.res.mipmap.hMipmappedArray;
        else
            rc_ = CUDA_ERROR_INVALID_VALUE;
    });
}

CUresult CUDAAPI cuTexRefGetAddressMode(CUaddress_mode *am, CUtexref h, int dim)
{
    SI_REF_CALL(h, am && dim >= 0 && dim < 3, false, *am = t->td.addressMode[dim]);
}

CUresult CUDAAPI cuTexRefGetFilterMode(CUfilter_mode *fm, CUtexref h)
{
    SI_REF_CALL(h, fm, false, *fm = t->td.filterMode);
}

CUresult CUDAAPI cuTexRefGetMipmapFilterMode(CUfilter_mode *fm, CUtexref h)
{
    SI_REF_CALL(h, fm, false, *fm = t->td.mipmapFilterMode);
}

CUresult CUDAAPI cuTexRefGetMipmapLevelBias(float *b, CUtexref h)
{
    SI_REF_CALL(h, b, false, *b = t->td.mipmapLevelBias);
}

CUresult CUDAAPI cuTexRefGetMipmapLevelClamp(float *lo, float *hi, CUtexref h)
{
    SI_REF_CALL(h, lo && hi, false, *lo = t->td.minMipmapLevelClamp; *hi = t->td.maxMipmapLevelClamp);
}

CUresult CUDAAPI cuTexRefGetMaxAnisotropy(int *a, CUtexref h)
{
    SI_REF_CALL(h, a, false, *a = (int)t->td.maxAnisotropy);
}

CUresult CUDAAPI cuTexRefGetBorderColor(float *c, CUtexref h)
{
    SI_REF_CALL(h, c, false, memcpy(c, t->td.borderColor, sizeof(t->td.borderColor)));
}

CUresult CUDAAPI cuTexRefGetFlags(unsigned int *f, CUtexref h)
{
    SI_REF_CALL(h, f, false, *f = t->td.flags);
}

CUresult CUDAAPI cuTexRefGetFormat(CUarray_format *fmt, int *ch, CUtexref h)
{
    SI_REF_CALL(h, fmt || ch, false, {
        if (fmt)
            *fmt = t->fmt;
        if (ch)
            *ch = t->ch;
    });
}

bool si_texref_view(si_module *m, const char *name, si_texview *v)
{
    si_texref *t = si_module_ref(m, name, 1);
    return t && t->bound && si_res_check(&t->res, false) == CUDA_SUCCESS && si_view_make(&t->res, &t->td, v);
}

/* ---- the sampler ---- */

static float si_half(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return h & 0x8000 ? -v : v;
}

static float si_srgb(float c)
{
    return c <= 0.04045f ? c / 12.92f : powf((c + 0.055f) / 1.055f, 2.4f);
}

static bool si_reads_int(const si_texview *v)
{
    if (v->fmt == CU_AD_FORMAT_HALF || v->fmt == CU_AD_FORMAT_FLOAT)
        return false;
    return (v->td.flags & CU_TRSF_READ_AS_INTEGER) || si_format_size(v->fmt) == 4;
}

/* one texel's channels: floats in f, or (integer reads) the words in u */
static void si_texel(const si_texview *v, const si_level *l, size_t x, size_t y, size_t z, float f[4],
                     uint32_t u[4])
{
    const unsigned char *p = (const unsigned char *)(l->base + (z * l->h + y) * l->pitch + x * v->elem);
    size_t cs = si_format_size(v->fmt);
    bool as_int = si_reads_int(v);
    for (unsigned c = 0; c < 4; c++) {
        f[c] = 0, u[c] = 0;
        if (c >= v->ch)
            continue;
        const unsigned char *q = p + c * cs;
        uint8_t u8 = q[0];
        uint16_t u16 = 0;
        uint32_t u32 = 0;
        if (cs >= 2)
            memcpy(&u16, q, 2);
        if (cs >= 4)
            memcpy(&u32, q, 4);
        switch (v->fmt) {
        case CU_AD_FORMAT_UNSIGNED_INT8: u[c] = u8, f[c] = u8 / 255.0f; break;
        case CU_AD_FORMAT_SIGNED_INT8: u[c] = (uint32_t)(int32_t)(int8_t)u8, f[c] = fmaxf((int8_t)u8 / 127.0f, -1); break;
        case CU_AD_FORMAT_UNSIGNED_INT16: u[c] = u16, f[c] = u16 / 65535.0f; break;
        case CU_AD_FORMAT_SIGNED_INT16: u[c] = (uint32_t)(int32_t)(int16_t)u16, f[c] = fmaxf((int16_t)u16 / 32767.0f, -1); break;
        case CU_AD_FORMAT_HALF: f[c] = si_half(u16); break;
        case CU_AD_FORMAT_FLOAT: memcpy(&f[c], &u32, 4); break;
        default: u[c] = u32; break;
        }
        if (!as_int && c < 3 && (v->td.flags & CU_TRSF_SRGB) && v->fmt == CU_AD_FORMAT_UNSIGNED_INT8)
            f[c] = si_srgb(f[c]);
    }
}

/* the texel index i of a dimension of n texels, by address mode; false: the border */
static bool si_address(const si_texview *v, int dim, long i, long n, long *out)
{
    int mode = v->td.addressMode[dim];
    bool normalized = v->td.flags & CU_TRSF_NORMALIZED_COORDINATES;
    if (!normalized && (mode == CU_TR_ADDRESS_MODE_WRAP || mode == CU_TR_ADDRESS_MODE_MIRROR))
        mode = CU_TR_ADDRESS_MODE_CLAMP; /* as the hardware: those need normalized coordinates */
    switch (mode) {
    case CU_TR_ADDRESS_MODE_WRAP: *out = ((i % n) + n) % n; return true;
    case CU_TR_ADDRESS_MODE_MIRROR: {
        long m = ((i % (2 * n)) + 2 * n) % (2 * n);
        *out = m < n ? m : 2 * n - 1 - m;
        return true;
    }
    case CU_TR_ADDRESS_MODE_BORDER:
        *out = i;
        return i >= 0 && i < n;
    default: *out = i < 0 ? 0 : i >= n ? n - 1 : i; return true;
    }
}

/* One level sampled at texel coordinates u (dims of them) in layer `layer`. */
static void si_sample_level(const si_texview *v, const si_level *l, const float u[3], size_t layer, float f[4],
                            uint32_t w[4])
{
    long n[3] = {(long)l->w, (long)l->h, (long)l->d};
    bool linear = v->td.filterMode == CU_TR_FILTER_MODE_LINEAR && !si_reads_int(v);
    long i0[3] = {0, 0, 0};
    float a[3] = {0, 0, 0};
    for (int k = 0; k < v->dims; k++) {
        float x = linear ? u[k] - 0.5f : u[k];
        i0[k] = (long)floorf(x);
        a[k] = linear ? x - floorf(x) : 0;
    }
    float acc[4] = {0, 0, 0, 0};
    int corners = linear ? 1 << v->dims : 1;
    for (int cidx = 0; cidx < corners; cidx++) {
        float weight = 1;
        long idx[3] = {0, 0, (long)layer};
        bool border = false;
        for (int k = 0; k < v->dims; k++) {
            int hi = (cidx >> k) & 1;
            weight *= hi ? a[k] : 1 - a[k];
            border |= !si_address(v, k, i0[k] + hi, n[k], &idx[k]);
        }
        float tf[4];
        uint32_t tu[4];
        if (border) {
            memcpy(tf, v->td.borderColor, sizeof tf);
            for (int c = 0; c < 4; c++)
                tu[c] = (uint32_t)(int32_t)v->td.borderColor[c];
        } else {
            si_texel(v, l, (size_t)idx[0], (size_t)idx[1], (size_t)idx[2], tf, tu);
        }
        for (int c = 0; c < 4; c++)
            acc[c] += weight * tf[c];
        if (cidx == 0)
            memcpy(w, tu, 4 * sizeof(uint32_t));
    }
    memcpy(f, acc, sizeof acc);
}

/* a cubemap direction as a face and 2D coordinates in [0, 1] (CUDA's table) */
static size_t si_cube_face(float x, float y, float z, float *s, float *t)
{
    float ax = fabsf(x), ay = fabsf(y), az = fabsf(z), ma, sc, tc;
    size_t face;
    if (ax >= ay && ax >= az)
        face = x >= 0 ? 0 : 1, ma = ax, sc = x >= 0 ? -z : z, tc = -y;
    else if (ay >= az)
        face = y >= 0 ? 2 : 3, ma = ay, sc = x, tc = y >= 0 ? z : -z;
    else
        face = z >= 0 ? 4 : 5, ma = az, sc = z >= 0 ? x : -x, tc = -y;
    *s = ma ? (sc / ma + 1) / 2 : 0.5f;
    *t = ma ? (tc / ma + 1) / 2 : 0.5f;
    return face;
}

/* tex(coords) for one element: c = {x, y, z, lod}; the layer is y (1D
 * layered), z (2D layered) or the fourth word (layered cubemap) */
static void si_sample(const si_texview *v, const float c[4], uint32_t out[4])
{
    float f[4] = {0, 0, 0, 0};
    uint32_t w[4] = {0, 0, 0, 0};
    if (v->res == CU_RESOURCE_TYPE_LINEAR) { /* tex1Dfetch: integer index, 0 outside */
        long i = (long)c[0];
        if (i >= 0 && (size_t)i < v->lv[0].w)
            si_texel(v, &v->lv[0], (size_t)i, 0, 0, f, w);
    } else {
        float pos[3] = {c[0], c[1], c[2]};
        size_t layer = 0;
        bool layered = v->arr_flags & CUDA_ARRAY3D_LAYERED;
        bool cube = v->arr_flags & CUDA_ARRAY3D_CUBEMAP;
        float lay = cube ? (layered ? c[3] : 0) : layered ? c[v->dims] : 0;
        size_t nl = cube ? v->layers / 6 : v->layers;
        layer = lay <= 0 ? 0 : (size_t)lay >= nl ? nl - 1 : (size_t)lay;
        if (cube) {
            layer = layer * 6 + si_cube_face(c[0], c[1], c[2], &pos[0], &pos[1]);
        }
        bool normalized = cube || (v->td.flags & CU_TRSF_NORMALIZED_COORDINATES);
        float lod = 0;
        if (v->res == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && !cube) {
            lod = c[3] + v->td.mipmapLevelBias;
            lod = fmaxf(fminf(lod, v->td.maxMipmapLevelClamp), v->td.minMipmapLevelClamp);
        }
        lod = fmaxf(fminf(lod, (float)(v->n_levels - 1)), 0);
        unsigned l0 = v->td.mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR ? (unsigned)floorf(lod)
                                                                         : (unsigned)floorf(lod + 0.5f);
        unsigned l1 = l0 + 1 < v->n_levels ? l0 + 1 : l0;
        float t = v->td.mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR ? lod - (float)l0 : 0;
        float fa[4], fb[4];
        for (int lv = 0; lv < (t > 0 ? 2 : 1); lv++) {
            const si_level *l = &v->lv[lv ? l1 : l0];
            float u[3];
            size_t ext[3] = {l->w, l->h, l->d};
            for (int k = 0; k < 3; k++)
                u[k] = normalized ? pos[k] * (float)ext[k] : pos[k];
            si_sample_level(v, l, u, layer, lv ? fb : fa, w);
        }
        for (int k = 0; k < 4; k++)
            f[k] = t > 0 ? fa[k] * (1 - t) + fb[k] * t : fa[k];
    }
    if (si_reads_int(v))
        memcpy(out, w, sizeof w);
    else
        memcpy(out, f, sizeof f);
}

static bool si_view_in_bounds(const si_texview *v)
{
    for (unsigned i = 0; i < v->n_levels; i++) {
        const si_level *l = &v->lv[i];
        if (!si_range(l->base, l->pitch * l->h * l->d))
            return false;
    }
    return true;
}

bool si_tex_sample_exec(const si_texview *v, uint64_t out, uint64_t coords, uint64_t n)
{
    size_t bytes;
    if (__builtin_mul_overflow((size_t)n, (size_t)16, &bytes) || !si_range((uintptr_t)out, bytes) ||
        !si_range((uintptr_t)coords, bytes) || !si_view_in_bounds(v))
        return false;
    for (uint64_t i = 0; i < n; i++) {
        float c[4];
        uint32_t r[4];
        memcpy(c, (const void *)(uintptr_t)(coords + 16 * i), sizeof c);
        si_sample(v, c, r);
        memcpy((void *)(uintptr_t)(out + 16 * i), r, sizeof r);
    }
    return true;
}

bool si_surf_write_exec(const si_texview *v, uint32_t w, uint32_t h, uint32_t d, uint32_t base)
{
    const si_level *l = &v->lv[0];
    if (!si_view_in_bounds(v) || (size_t)w * 4 > l->pitch || h > l->h || d > l->d)
        return false; /* the surface's default boundary mode traps */
    for (uint32_t z = 0; z < d; z++)
        for (uint32_t y = 0; y < h; y++)
            for (uint32_t x = 0; x < w; x++) {
                uint32_t val = base + x + 100 * y + 10000 * z;
                memcpy((void *)(l->base + (z * l->h + y) * l->pitch + 4 * x), &val, 4);
            }
    return true;
}
