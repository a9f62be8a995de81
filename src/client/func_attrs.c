/* func_attrs.c - cuFuncGetAttribute and cuKernelGetAttribute
 * (docs/architecture.md, 3.8.1).
 *
 * cudart's cudaFuncGetAttributes asks for every attribute of a function,
 * one call each, and cuDNN asks several of every kernel it builds. So the
 * first query of a function (or of a kernel on a device) fetches all of
 * them in one round trip (scuda_func_attributes):
 *   - the ones it was compiled with (CUfunction_attribute 0 to
 *     FUNC_ATTR_FIXED - 1: max threads per block, static shared, constant
 *     and local sizes, registers, PTX and binary versions, cache mode)
 *     never change: kept here for the process;
 *   - the others can be set (cuFuncSetAttribute): they go into the memo
 *     (memo.h) under the key of the one-attribute call, which any set
 *     clears; after that they are asked one by one, as before.
 * A batch's answers are also kept on disk for later processes, which
 * then ask nothing (attr_store.h). */
#include <pthread.h>
#include <string.h>

#include "attr_store.h"
#include "memo.h"
#include "module.h"
#include "rpc.h"
#include "servers.h"
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

/* Whether func's fixed attributes were fetched (and still hold the slot);
 * with a < FUNC_ATTR_FIXED, 1 only when attribute a is known, in *value. */
static int cached(uint64_t func, int32_t dev, unsigned a, int *value)
{
    pthread_mutex_lock(&slots_lock);
    const struct fixed_attrs *s = slot_of(func, dev);
    int hit = s->func == func && s->dev == dev;
    if (hit && a < FUNC_ATTR_FIXED) {
        hit = s->known >> a & 1;
        if (hit) *value = s->values[a];
    }
    pthread_mutex_unlock(&slots_lock);
    return hit;
}

/* The request of the one-attribute call, which is also its memo key. */
static void one_attribute_key(wire_buf *key, unsigned a, const void *h, int kernel, int32_t dev)
{
    wb_init(key);
    if (!kernel) {
        struct msg_cuFuncGetAttribute_req m = {.has_value = 1, .attrib = a, .func = handle_wire_id(h)};
        msg_cuFuncGetAttribute_req_put(key, &m);
    } else {
        struct msg_cuKernelGetAttribute_req m = {.has_value = 1, .attrib = a, .kernel = handle_wire_id(h), .dev = dev};
        msg_cuKernelGetAttribute_req_put(key, &m);
    }
}

static uint16_t one_attribute_op(int kernel) { return kernel ? OP_cuKernelGetAttribute : OP_cuFuncGetAttribute; }

/* The settable attributes of a batch, into the memo as their own calls
 * would have put them; `gen` from before the batch was asked for, so a set
 * meanwhile wins. */
static void memoize_settable(const void *h, int32_t dev, const struct attr_answers *a, uint64_t gen)
{
    uint32_t ctx = shim_current_ctx_id();
    for (unsigned i = FUNC_ATTR_FIXED; i < FUNC_ATTR_COUNT; i++) {
        if (!(a->known >> i & 1)) continue;
        wire_buf key, value;
        one_attribute_key(&key, i, h, dev >= 0, dev);
        wb_init(&value);
        wb_put_i32(&value, a->values[i]);
        if (!key.oom && !value.oom)
            memo_insert_about(one_attribute_op(dev >= 0), ctx, key.data, key.len, value.data, value.len, gen,
                              handle_wire_id(h));
        wb_free(&key);
        wb_free(&value);
    }
}

/* A batch's answers, kept for the process: the fixed ones in the slots,
 * the settable ones in the memo. */
static void keep_answers(const void *h, int32_t dev, const struct attr_answers *a, uint64_t gen)
{
    struct fixed_attrs fresh = {.func = (uint64_t)(uintptr_t)h, .dev = dev, .known = a->known};
    memcpy(fresh.values, a->values, sizeof fresh.values);
    pthread_mutex_lock(&slots_lock);
    *slot_of(fresh.func, dev) = fresh;
    pthread_mutex_unlock(&slots_lock);
    memoize_settable(h, dev, a, gen);
}

/* Where an attribute question goes: a kernel's of a device to that
 * device's server (a library's kernel is on every server), a function's
 * to its own server. The device travels as that server's ordinal; the
 * memo and the slots keep the client's. */
static struct server *asked(const void *h, int32_t dev)
{
    return dev >= 0 ? server_of_device(dev) : server_of_handle(h);
}

/* One round trip for all of a function's attributes. CUDA_SUCCESS also
 * when the driver refused some: those stay unknown. */
static CUresult ask_all(const void *h, int32_t dev, struct server *srv, struct attr_answers *a)
{
    struct msg_scuda_func_attributes_req m = {
        .func = handle_wire_id(h), .is_kernel = (uint8_t)(dev >= 0), .dev = dev >= 0 ? device_local(dev) : 0};
    struct msg_scuda_func_attributes_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_func_attributes, srv);
    msg_scuda_func_attributes_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && (msg_scuda_func_attributes_rep_get(&c.out, &c.arena, &rep) != 0 ||
                              rep.values_count != FUNC_ATTR_COUNT)) {
        LOG_ERROR("scuda_func_attributes: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS) {
        a->known = rep.known & ((1u << FUNC_ATTR_COUNT) - 1); /* no bits for attributes it has no values of */
        memcpy(a->values, rep.values, sizeof a->values);
    }
    rpc_end(&c);
    return r;
}

/* All of a function's attributes: from the attribute cache of earlier
 * processes when it has them (attr_store.h), else from the session, and
 * then into that cache, unless a set began meanwhile. */
static CUresult fetch_all(const void *h, int32_t dev)
{
    struct server *srv = asked(h, dev);
    int32_t local = dev >= 0 ? device_local(dev) : -1;
    uint8_t key[MODULE_KEY_LEN];
    struct attr_answers a;
    uint64_t gen = memo_generation();
    if (attr_store_key(h, srv, local, key) && attr_store_recall(key, &a)) {
        keep_answers(h, dev, &a, gen);
        stats_add(STATS_ATTR_RECALLED);
        return CUDA_SUCCESS;
    }
    CUresult r = ask_all(h, dev, srv, &a);
    if (r != CUDA_SUCCESS) return r;
    keep_answers(h, dev, &a, gen);
    if (attr_store_key(h, srv, local, key)) attr_store_keep(key, &a);
    return CUDA_SUCCESS;
}

/* One attribute, as the generated memo call did: from the memo, else from
 * the session (and into the memo). */
static CUresult one_attribute(int *value, unsigned a, const void *h, int kernel, int32_t dev, int count_hit)
{
    uint16_t op = one_attribute_op(kernel);
    wire_buf key;
    one_attribute_key(&key, a, h, kernel, dev);
    uint8_t val[MEMO_MAX_VALUE];
    size_t val_len = 0;
    uint64_t gen = 0;
    uint32_t ctx = shim_current_ctx_id();
    CUresult r;
    if (!key.oom && memo_lookup(op, ctx, key.data, key.len, val, &val_len, &gen)) {
        wire_reader o;
        wr_init(&o, val, val_len);
        *value = (int)wr_i32(&o);
        if (count_hit) stats_add(STATS_ATTR_HITS);
        r = CUDA_SUCCESS;
    } else {
        rpc_call c;
        rpc_begin_on(&c, op, asked(h, dev));
        wire_buf wire; /* the key, with the server's ordinal */
        one_attribute_key(&wire, a, h, kernel, dev >= 0 ? device_local(dev) : dev);
        if (wire.oom) c.req.oom = 1;
        else wb_put_raw(&c.req, wire.data, wire.len);
        wb_free(&wire);
        r = rpc_sync(&c);
        if (r == CUDA_SUCCESS) {
            if (!key.oom) memo_insert_about(op, ctx, key.data, key.len, c.out.p, c.out.left, gen, handle_wire_id(h));
            *value = (int)wr_i32(&c.out);
            if (!wr_ok_end(&c.out)) {
                LOG_ERROR("%s: malformed reply from the server", scuda_op_name(op));
                r = CUDA_ERROR_UNKNOWN;
            }
        }
        rpc_end(&c);
    }
    wb_free(&key);
    return r;
}

/* Attribute a of h (dev < 0: as cuFuncGetAttribute asks, of a function or
 * of a kernel used as one; else as cuKernelGetAttribute does). The batch
 * is asked for at the first query of a handle this client knows
 * (func_lookup: not one it unloaded). */
static CUresult get_attribute(int *value, unsigned a, const void *h, int32_t dev)
{
    uint64_t func = (uint64_t)(uintptr_t)h;
    int known_handle = func_lookup(h) != NULL && a < FUNC_ATTR_COUNT;
    if (known_handle && a < FUNC_ATTR_FIXED && cached(func, dev, a, value)) {
        stats_add(STATS_ATTR_HITS);
        return CUDA_SUCCESS;
    }
    if (known_handle && !cached(func, dev, FUNC_ATTR_COUNT, value)) {
        CUresult r = fetch_all(h, dev);
        if (r != CUDA_SUCCESS) return r;
        if (a < FUNC_ATTR_FIXED && cached(func, dev, a, value)) return CUDA_SUCCESS;
        if (a >= FUNC_ATTR_FIXED) return one_attribute(value, a, h, dev >= 0, dev, 0); /* the memo has it now */
    }
    return one_attribute(value, a, h, dev >= 0, dev, 1);
}

EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SHIM_ENTER(cuFuncGetAttribute, (pi, attrib, hfunc));
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    return get_attribute(pi, (unsigned)attrib, hfunc, -1);
}

EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    SHIM_ENTER(cuKernelGetAttribute, (pi, attrib, kernel, dev));
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0) return one_attribute(pi, (unsigned)attrib, kernel, 1, (int32_t)dev, 1); /* the driver's error */
    return get_attribute(pi, (unsigned)attrib, kernel, (int32_t)dev);
}
