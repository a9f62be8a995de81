/* migrate_arrays.c - see migrate_arrays.h; the design is in
 * docs/architecture.md, 9.17 Live migration ("Arrays"). */
#define _GNU_SOURCE
#include "migrate_arrays.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handles.h"
#include "migrate_seq.h"
#include "session.h"
#include "../common/idmap.h"

/* The context current at each array's creation, by real CUarray. */
static struct idmap array_ctx = IDMAP_INIT;
static atomic_long live_objects; /* texture and surface objects */

static CUresult (*orig_array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
static CUresult (*orig_array3d_create)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
static CUresult (*orig_array_destroy)(CUarray);
static CUresult (*orig_tex_create)(CUtexObject *, const CUDA_RESOURCE_DESC *, const CUDA_TEXTURE_DESC *,
                                   const CUDA_RESOURCE_VIEW_DESC *);
static CUresult (*orig_tex_destroy)(CUtexObject);
static CUresult (*orig_surf_create)(CUsurfObject *, const CUDA_RESOURCE_DESC *);
static CUresult (*orig_surf_destroy)(CUsurfObject);

static void note_array(CUarray a)
{
    idmap_del(&array_ctx, (uint64_t)(uintptr_t)a); /* a handle value the driver reused */
    if (idmap_put(&array_ctx, (uint64_t)(uintptr_t)a, 0, (void *)(uintptr_t)migrate_current_ctx_id()) != 0)
        migrate_block(MIGRATE_BLOCK_LOST_NOTE);
}

/* The driver's answer to an array's creation: when it made one, note it. */
static CUresult noted_array(CUresult r, const CUarray *a)
{
    if (r == CUDA_SUCCESS && a && *a) note_array(*a);
    return r;
}

static CUresult noting_array_create(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    return noted_array(orig_array_create(a, d), a);
}

static CUresult noting_array3d_create(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return noted_array(orig_array3d_create(a, d), a);
}

static CUresult noting_array_destroy(CUarray a)
{
    CUresult r = orig_array_destroy(a);
    if (r == CUDA_SUCCESS) idmap_del(&array_ctx, (uint64_t)(uintptr_t)a);
    return r;
}

/* The driver's answer to a texture or surface object's creation (delta 1)
 * or destruction (-1): when it did so, count it. */
static CUresult counted(CUresult rc, long delta)
{
    if (rc == CUDA_SUCCESS) live_objects += delta;
    return rc;
}

static CUresult counting_tex_create(CUtexObject *o, const CUDA_RESOURCE_DESC *r, const CUDA_TEXTURE_DESC *t,
                                    const CUDA_RESOURCE_VIEW_DESC *v)
{
    return counted(orig_tex_create(o, r, t, v), 1);
}

static CUresult counting_tex_destroy(CUtexObject o) { return counted(orig_tex_destroy(o), -1); }

static CUresult counting_surf_create(CUsurfObject *o, const CUDA_RESOURCE_DESC *r)
{
    return counted(orig_surf_create(o, r), 1);
}

static CUresult counting_surf_destroy(CUsurfObject o) { return counted(orig_surf_destroy(o), -1); }

void migrate_arrays_install(struct driver_table *t)
{
    if (orig_array_destroy || !t->cuArrayDestroy) return;
    orig_array_destroy = t->cuArrayDestroy, t->cuArrayDestroy = noting_array_destroy;
    if (t->cuArrayCreate_v2) orig_array_create = t->cuArrayCreate_v2, t->cuArrayCreate_v2 = noting_array_create;
    if (t->cuArray3DCreate_v2) orig_array3d_create = t->cuArray3DCreate_v2, t->cuArray3DCreate_v2 = noting_array3d_create;
    if (t->cuTexObjectCreate && t->cuTexObjectDestroy)
        orig_tex_create = t->cuTexObjectCreate, t->cuTexObjectCreate = counting_tex_create,
        orig_tex_destroy = t->cuTexObjectDestroy, t->cuTexObjectDestroy = counting_tex_destroy;
    if (t->cuSurfObjectCreate && t->cuSurfObjectDestroy)
        orig_surf_create = t->cuSurfObjectCreate, t->cuSurfObjectCreate = counting_surf_create,
        orig_surf_destroy = t->cuSurfObjectDestroy, t->cuSurfObjectDestroy = counting_surf_destroy;
}

/* ---- the shape of an array ---------------------------------------------------- */

static unsigned format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0; /* block-compressed and planar formats: not carried */
    }
}

/* The copy of the whole array into (or from) `host`, packed; 0 bytes when
 * the format is one this file does not carry. */
static uint64_t array_copy(const CUDA_ARRAY3D_DESCRIPTOR *d, CUarray a, void *host, int to_host, CUDA_MEMCPY3D *c)
{
    unsigned e = format_bytes(d->Format);
    if (!e || d->NumChannels == 0 || d->NumChannels > 4 || d->Width == 0) return 0;
    memset(c, 0, sizeof *c);
    c->WidthInBytes = d->Width * e * d->NumChannels;
    c->Height = d->Height ? d->Height : 1;
    c->Depth = d->Depth ? d->Depth : 1;
    if (to_host)
        c->srcMemoryType = CU_MEMORYTYPE_ARRAY, c->srcArray = a, c->dstMemoryType = CU_MEMORYTYPE_HOST,
        c->dstHost = host, c->dstPitch = c->WidthInBytes, c->dstHeight = c->Height;
    else
        c->dstMemoryType = CU_MEMORYTYPE_ARRAY, c->dstArray = a, c->srcMemoryType = CU_MEMORYTYPE_HOST,
        c->srcHost = host, c->srcPitch = c->WidthInBytes, c->srcHeight = c->Height;
    return (uint64_t)c->WidthInBytes * c->Height * c->Depth;
}

static int carried(const struct handle_ref *h) { return h->kind == HK_ARRAY && !handle_is_server_id(h->id); }

/* ---- leaving ----------------------------------------------------------------- */

static void add_reason(char *why, size_t whylen, const char *reason)
{
    size_t n = strlen(why);
    if (n < whylen) snprintf(why + n, whylen - n, "%s%s", n ? "; " : "", reason);
}

void migrate_arrays_explain(char *why, size_t whylen)
{
    if (live_objects > 0)
        add_reason(why, whylen, "texture or surface objects are live (their values are the driver's, held by "
                                "kernels; destroy them before a move)");
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    int driver_made = 0, format = 0;
    for (long i = 0; i < n; i++) {
        CUDA_ARRAY3D_DESCRIPTOR d;
        CUDA_MEMCPY3D c;
        if (h[i].kind == HK_ARRAY && !carried(&h[i])) driver_made = 1;
        else if (carried(&h[i]) && (REAL(cuArray3DGetDescriptor_v2, &d, (CUarray)h[i].real) != CUDA_SUCCESS ||
                                    !array_copy(&d, NULL, NULL, 1, &c)))
            format = 1;
    }
    if (driver_made) add_reason(why, whylen, "arrays the driver made (mipmap levels, planes) are not replayed yet");
    if (format) add_reason(why, whylen, "arrays of block-compressed or planar formats are not replayed yet");
    free(h);
}

static uint8_t **contents; /* the last migrate_arrays_items' bytes */
static size_t ncontents;
static CUDA_ARRAY3D_DESCRIPTOR *descs;

static void free_contents(void)
{
    for (size_t i = 0; i < ncontents; i++) free(contents[i]);
    free(contents);
    free(descs);
    contents = NULL, descs = NULL, ncontents = 0;
}

static int array_items(struct migrate_items *l, const struct handle_ref *h, size_t k, char *why, size_t wl)
{
    CUDA_MEMCPY3D c;
    CUresult r = REAL(cuArray3DGetDescriptor_v2, &descs[k], (CUarray)h->real);
    uint64_t size = r == CUDA_SUCCESS ? array_copy(&descs[k], (CUarray)h->real, NULL, 1, &c) : 0;
    if (!size || !(contents[k] = malloc(size)))
        return snprintf(why, wl, "array %#llx cannot be read (CUresult %d)", (unsigned long long)h->id, (int)r), -1;
    array_copy(&descs[k], (CUarray)h->real, contents[k], 1, &c);
    void *ctx = NULL;
    idmap_get(&array_ctx, (uint64_t)(uintptr_t)h->real, NULL, &ctx);
    if ((r = REAL(cuMemcpy3D_v2, &c)) != CUDA_SUCCESS)
        return snprintf(why, wl, "reading array %#llx failed with CUresult %d", (unsigned long long)h->id, (int)r), -1;
    struct msg_migrate_item it = {.kind = MIG_ARRAY, .id = h->id, .parent = (uint64_t)(uintptr_t)ctx, .b = size,
                                  .data = &descs[k], .data_len = sizeof descs[k]};
    int rc = migrate_items_push(l, it);
    for (uint64_t off = 0; rc == 0 && off < size; off += MIGRATE_CHUNK) {
        uint64_t len = size - off < MIGRATE_CHUNK ? size - off : MIGRATE_CHUNK;
        it = (struct msg_migrate_item){.kind = MIG_ARRAY_BYTES, .id = h->id, .a = off, .data = contents[k] + off,
                                       .data_len = len};
        rc = migrate_items_push(l, it);
    }
    if (rc != 0) snprintf(why, wl, "out of host memory");
    return rc;
}

int migrate_arrays_items(struct migrate_items *l, char *why, size_t whylen)
{
    free_contents();
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    int rc = n < 0 ? -1 : 0;
    contents = n > 0 ? calloc((size_t)n, sizeof *contents) : NULL;
    descs = n > 0 ? calloc((size_t)n, sizeof *descs) : NULL;
    if (n > 0 && (!contents || !descs)) rc = -1;
    ncontents = contents ? (size_t)n : 0;
    for (long i = 0; rc == 0 && i < n; i++)
        if (carried(&h[i])) rc = array_items(l, &h[i], (size_t)i, why, whylen);
    if (rc != 0 && !why[0]) snprintf(why, whylen, "out of host memory listing arrays");
    free(h);
    return rc;
}

/* ---- arriving: one array at a time, its bytes in order ------------------------- */

static struct {
    uint64_t id;
    CUarray a;
    CUDA_ARRAY3D_DESCRIPTOR d;
    uint8_t *buf;
    uint64_t size, got;
} filling;
static int incomplete; /* an array whose bytes did not all arrive */

void migrate_arrays_digest(struct migrate_digest *d)
{
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    for (long i = 0; i < n; i++) {
        CUDA_ARRAY3D_DESCRIPTOR desc;
        memset(&desc, 0, sizeof desc);
        if (!carried(&h[i]) || REAL(cuArray3DGetDescriptor_v2, &desc, (CUarray)h[i].real) != CUDA_SUCCESS) continue;
        migrate_digest_u64(d, h[i].id);
        migrate_digest_u64(d, desc.Width), migrate_digest_u64(d, desc.Height), migrate_digest_u64(d, desc.Depth);
        migrate_digest_u64(d, desc.Format), migrate_digest_u64(d, desc.NumChannels), migrate_digest_u64(d, desc.Flags);
    }
    if (incomplete || filling.buf) migrate_digest_u64(d, ~0ull);
    free(h);
}

/* All bytes are here: write them, read them back, compare. */
static CUresult fill_array(char *why, size_t wl)
{
    CUDA_MEMCPY3D c;
    uint8_t *back = malloc(filling.size);
    array_copy(&filling.d, filling.a, filling.buf, 0, &c);
    CUresult r = back ? REAL(cuMemcpy3D_v2, &c) : CUDA_ERROR_OUT_OF_MEMORY;
    array_copy(&filling.d, filling.a, back, 1, &c);
    if (r == CUDA_SUCCESS) r = REAL(cuMemcpy3D_v2, &c);
    if (r == CUDA_SUCCESS && memcmp(back, filling.buf, filling.size) != 0)
        r = CUDA_ERROR_INVALID_VALUE, snprintf(why, wl, "array %#llx reads back other bytes than were written",
                                               (unsigned long long)filling.id);
    free(back);
    free(filling.buf);
    filling.buf = NULL;
    return r;
}

static CUresult replay_array(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUDA_MEMCPY3D c;
    if (filling.buf) incomplete = 1;
    if (!it->data || it->data_len != sizeof filling.d) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&filling.d, it->data, sizeof filling.d);
    uint64_t size = array_copy(&filling.d, NULL, NULL, 1, &c);
    if (!size || size != it->b)
        return snprintf(why, wl, "array %#llx: its descriptor and its size disagree", (unsigned long long)it->id),
               CUDA_ERROR_INVALID_VALUE;
    CUarray a = NULL;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS) r = REAL(cuArray3DCreate_v2, &a, &filling.d); /* the driver checks the descriptor */
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_ARRAY, a)) != CUDA_SUCCESS) REAL(cuArrayDestroy, a);
    if (r != CUDA_SUCCESS) return r;
    filling.buf = malloc(size); /* the driver made an array of this size */
    filling.id = it->id, filling.a = a, filling.size = size, filling.got = 0;
    return filling.buf ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult replay_array_bytes(const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (!filling.buf || it->id != filling.id || it->a != filling.got || !it->data || it->data_len == 0 ||
        it->data_len > filling.size - filling.got)
        return snprintf(why, wl, "bytes for array %#llx out of place", (unsigned long long)it->id),
               CUDA_ERROR_INVALID_VALUE;
    memcpy(filling.buf + filling.got, it->data, (size_t)it->data_len);
    filling.got += it->data_len;
    return filling.got == filling.size ? fill_array(why, wl) : CUDA_SUCCESS;
}

CUresult migrate_arrays_replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    return it->kind == MIG_ARRAY ? replay_array(s, it, why, wl) : replay_array_bytes(it, why, wl);
}
