/* func_attrs.c - cuFuncGetAttribute and cuKernelGetAttribute
 * (docs/architecture.md, 3.8.1).
 *
 * The attributes a function is compiled with (CUfunction_attribute 0 to
 * FUNC_ATTR_FIXED - 1: max threads per block, static shared, constant and
 * local sizes, registers, PTX and binary versions, cache mode) never
 * change, so the first query of any of them fetches them all in one round
 * trip (scuda_func_attributes), kept per function, or per kernel and
 * device, for the process. cuDNN asks several of them of every kernel it
 * builds. The others can be set (cuFuncSetAttribute) and go to the session
 * one by one, answered from the memo (memo.h) until a set clears it, as
 * the generated call did. */
#include <pthread.h>
#include <string.h>

#include "memo.h"
#include "module.h"
#include "rpc.h"
#include "shim.h"
#include "stats.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

/* Direct-mapped: bounded, and a function that loses its slot is asked again. */
#define ATTR_SLOTS 4096

struct fixed_attrs {
    uint64_t func; /* 0: empty */
    int32_t dev;   /* cuKernelGetAttribute's; -1 for cuFuncGetAttribute */
    uint32_t known;
    int32_t values[FUNC_ATTR_FIXED];
};

static struct fixed_attrs slots[ATTR_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static struct fixed_attrs *slot_of(uint64_t func, int32_t dev)
{
    uint64_t h = (func ^ (uint64_t)(uint32_t)dev << 32) * 0x9e3779b97f4a7c15ull;
    return &slots[(h >> 40) & (ATTR_SLOTS - 1)];
}

/* Attribute a of func from the slot: 1 when it is there. */
static int cached(uint64_t func, int32_t dev, unsigned a, int *value)
{
    pthread_mutex_lock(&slots_lock);
    const struct fixed_attrs *s = slot_of(func, dev);
    int hit = s->func == func && s->dev == dev && (s->known >> a & 1);
    if (hit) *value = s->values[a];
    pthread_mutex_unlock(&slots_lock);
    return hit;
}

/* One round trip for all of func's fixed attributes. CUDA_SUCCESS also
 * when the driver refused some: those stay unknown. */
static CUresult fetch_fixed(const void *h, int is_kernel, int32_t dev)
{
    struct msg_scuda_func_attributes_req m = {
        .func = handle_wire_id(h), .is_kernel = (uint8_t)is_kernel, .dev = is_kernel ? dev : 0};
    struct msg_scuda_func_attributes_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_scuda_func_attributes);
    msg_scuda_func_attributes_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && (msg_scuda_func_attributes_rep_get(&c.out, &c.arena, &rep) != 0 ||
                              rep.values_count != FUNC_ATTR_FIXED)) {
        LOG_ERROR("scuda_func_attributes: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS) {
        struct fixed_attrs fresh = {.func = (uint64_t)(uintptr_t)h, .dev = dev, .known = rep.known};
        memcpy(fresh.values, rep.values, sizeof fresh.values);
        pthread_mutex_lock(&slots_lock);
        *slot_of(fresh.func, dev) = fresh;
        pthread_mutex_unlock(&slots_lock);
    }
    rpc_end(&c);
    return r;
}

/* A fixed attribute of a function this client knows (func_lookup: not
 * one it unloaded), from the slot, fetching all of them the first time;
 * dev < 0: as cuFuncGetAttribute asks (of a function, or of a kernel used
 * as one), else as cuKernelGetAttribute does. CUDA_ERROR_NOT_FOUND: ask
 * for it alone (the driver refused it in the batch, or the handle is not
 * one this client knows). */
static CUresult fixed_attribute(int *value, unsigned a, const void *h, int32_t dev)
{
    uint64_t func = (uint64_t)(uintptr_t)h;
    if (a >= FUNC_ATTR_FIXED || !func_lookup(h)) return CUDA_ERROR_NOT_FOUND;
    if (cached(func, dev, a, value)) {
        stats_add(STATS_ATTR_HITS);
        return CUDA_SUCCESS;
    }
    CUresult r = fetch_fixed(h, dev >= 0, dev);
    if (r != CUDA_SUCCESS) return r;
    return cached(func, dev, a, value) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* One attribute, request bytes `key` (also the memo's key), as the
 * generated memo call did. */
static CUresult one_attribute(uint16_t op, const wire_buf *key, int *value)
{
    uint8_t val[MEMO_MAX_VALUE];
    size_t val_len = 0;
    uint64_t gen = 0;
    uint32_t ctx = shim_current_ctx_id();
    if (!key->oom && memo_lookup(op, ctx, key->data, key->len, val, &val_len, &gen)) {
        wire_reader o;
        wr_init(&o, val, val_len);
        *value = (int)wr_i32(&o);
        return CUDA_SUCCESS;
    }
    rpc_call c;
    rpc_begin(&c, op);
    wb_put_raw(&c.req, key->data, key->len);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        if (!key->oom) memo_insert(op, ctx, key->data, key->len, c.out.p, c.out.left, gen);
        *value = (int)wr_i32(&c.out);
        if (!wr_ok_end(&c.out)) {
            LOG_ERROR("%s: malformed reply from the server", scuda_op_name(op));
            r = CUDA_ERROR_UNKNOWN;
        }
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SHIM_ENTER(cuFuncGetAttribute, (pi, attrib, hfunc));
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fixed_attribute(pi, (unsigned)attrib, hfunc, -1);
    if (r != CUDA_ERROR_NOT_FOUND) return r;
    struct msg_cuFuncGetAttribute_req m = {.has_value = 1, .attrib = (uint32_t)attrib, .func = handle_wire_id(hfunc)};
    wire_buf key;
    wb_init(&key);
    msg_cuFuncGetAttribute_req_put(&key, &m);
    r = one_attribute(OP_cuFuncGetAttribute, &key, pi);
    wb_free(&key);
    return r;
}

EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    SHIM_ENTER(cuKernelGetAttribute, (pi, attrib, kernel, dev));
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = dev < 0 ? CUDA_ERROR_NOT_FOUND : fixed_attribute(pi, (unsigned)attrib, kernel, (int32_t)dev);
    if (r != CUDA_ERROR_NOT_FOUND) return r;
    struct msg_cuKernelGetAttribute_req m = {
        .has_value = 1, .attrib = (uint32_t)attrib, .kernel = handle_wire_id(kernel), .dev = (int32_t)dev};
    wire_buf key;
    wb_init(&key);
    msg_cuKernelGetAttribute_req_put(&key, &m);
    r = one_attribute(OP_cuKernelGetAttribute, &key, pi);
    wb_free(&key);
    return r;
}
