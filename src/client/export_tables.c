/* export_tables.c - the driver's private tables (cuGetExportTable), answered
 * by the shim with its own code.
 *
 * Every table is a static array of pointers. Entry 0 holds the table's size
 * in bytes, except in the context-local-storage table. Every slot holds a
 * valid function: the slots we understand have a real implementation below,
 * and every other slot gets its own small stub that logs its table and index
 * once and returns CUDA_ERROR_NOT_SUPPORTED, so that a library that fails
 * tells us what it wanted.
 *
 * docs/export-tables.md says what each table and slot is and how we know. */
#define _GNU_SOURCE
#include "export_tables.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile_cache.h"
#include "stats.h"
#include "../common/log.h"

/* ---------------------------------------------------------------------------
 * Stubs for the slots we don't implement.
 *
 * A distinct function per (table, slot), so that the log names the slot.
 * They take no parameters: on x86-64 and aarch64 a caller may pass any
 * arguments to such a function harmlessly. */

static void slot_not_implemented(_Atomic int *once, const char *table, int slot)
{
    if (atomic_exchange_explicit(once, 1, memory_order_relaxed)) return;
    LOG_WARN("export table %s slot %d called: not implemented", table, slot);
}

#define STUB(t, n)                                                      \
    __attribute__((unused)) static CUresult t##_slot_##n(void)          \
    {                                                                   \
        static _Atomic int once;                                        \
        slot_not_implemented(&once, #t, n);                             \
        return CUDA_ERROR_NOT_SUPPORTED;                                \
    }

/* Stubs in tens: STUBS_TENS(t, 3) defines slots 30..39. Stubs a table never
 * references are unused static functions, which the compiler drops. */
#define STUBS_ONES(t)                                                   \
    STUB(t, 0) STUB(t, 1) STUB(t, 2) STUB(t, 3) STUB(t, 4)              \
    STUB(t, 5) STUB(t, 6) STUB(t, 7) STUB(t, 8) STUB(t, 9)
#define STUBS_TENS(t, d)                                                \
    STUB(t, d##0) STUB(t, d##1) STUB(t, d##2) STUB(t, d##3) STUB(t, d##4) \
    STUB(t, d##5) STUB(t, d##6) STUB(t, d##7) STUB(t, d##8) STUB(t, d##9)

#define REF(t, n) (const void *)t##_slot_##n
#define REFS_ONES(t)                                                    \
    REF(t, 0), REF(t, 1), REF(t, 2), REF(t, 3), REF(t, 4),              \
    REF(t, 5), REF(t, 6), REF(t, 7), REF(t, 8), REF(t, 9)
#define REFS_TENS(t, d)                                                 \
    REF(t, d##0), REF(t, d##1), REF(t, d##2), REF(t, d##3), REF(t, d##4), \
    REF(t, d##5), REF(t, d##6), REF(t, d##7), REF(t, d##8), REF(t, d##9)

/* The size word of a table of n entries. */
#define TABLE_SIZE(n) (const void *)(uintptr_t)((n) * sizeof(void *))

/* Each table starts as all stubs; the implemented slots and the size word are
 * then written over them with designated initializers. */
#define OVERRIDES_BEGIN                                                 \
    _Pragma("GCC diagnostic push")                                      \
    _Pragma("GCC diagnostic ignored \"-Woverride-init\"")
#define OVERRIDES_END _Pragma("GCC diagnostic pop")

STUBS_ONES(error_log)
STUBS_ONES(cudart_iface) STUBS_TENS(cudart_iface, 1)
STUBS_ONES(tools_hooks)
STUBS_ONES(tools_tls)
STUBS_ONES(ctx_checks) STUBS_TENS(ctx_checks, 1)
STUBS_ONES(integrity)
STUBS_ONES(tools_ctx) STUBS_TENS(tools_ctx, 1) STUBS_TENS(tools_ctx, 2)
STUBS_TENS(tools_ctx, 3) STUBS_TENS(tools_ctx, 4) STUBS_TENS(tools_ctx, 5)
STUBS_TENS(tools_ctx, 6) STUBS_TENS(tools_ctx, 7) STUBS_TENS(tools_ctx, 8)
STUBS_TENS(tools_ctx, 9)
STUBS_ONES(tools_module) STUBS_TENS(tools_module, 1) STUBS_TENS(tools_module, 2)
STUBS_TENS(tools_module, 3) STUBS_TENS(tools_module, 4) STUBS_TENS(tools_module, 5)
STUBS_TENS(tools_module, 6) STUBS_TENS(tools_module, 7) STUBS_TENS(tools_module, 8)
STUBS_TENS(tools_module, 9)
STUBS_ONES(unknown_69a2) STUBS_TENS(unknown_69a2, 1) STUBS_TENS(unknown_69a2, 2)
STUBS_TENS(unknown_69a2, 3)
STUBS_ONES(unknown_1734) STUBS_TENS(unknown_1734, 1)
STUBS_ONES(unknown_da91)
STUBS_ONES(ctx_create_bypass)
STUBS_ONES(device_ext_rt) STUBS_TENS(device_ext_rt, 1) STUBS_TENS(device_ext_rt, 2)

/* ---------------------------------------------------------------------------
 * Cudart interface (6bd5fb6c...), slot 2: cudart asks once, per cudart
 * instance, for a device's primary context handle. Driver 580 hands it out
 * without taking a reference and without activating the context. No public
 * call does that, so the shim may provide scuda_primary_ctx_lookup(); until
 * it does, we retain, which leaves one extra reference on the context. */

static CUresult cudart_get_primary_ctx(CUcontext *pctx, CUdevice dev)
{
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = scuda_primary_ctx_lookup != NULL ? scuda_primary_ctx_lookup(dev, pctx)
                                                   : cuDevicePrimaryCtxRetain(pctx, dev);
    LOG_DEBUG("cudart_iface[2]: primary context of device %d: %p, rc %d", (int)dev,
              rc == CUDA_SUCCESS ? (void *)*pctx : NULL, (int)rc);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Tools runtime callback hooks (a094798c...), slots 2 and 6: each hands
 * cudart a driver-owned buffer and its size (1024 and 14 on driver 580, which
 * also returns the buffer). Profiling tools (CUPTI) write callback state
 * there; cudart reads it on its API calls. With no tool attached the buffers
 * stay zero, which means "no callbacks". Ours are 8 bytes a unit, which is
 * room enough whatever the unit is. */

static uint64_t hooks_buffer2[1024];
static uint64_t hooks_buffer6[14];

static void *tools_hooks_buffer2(void **ptr, size_t *size)
{
    if (ptr) *ptr = hooks_buffer2;
    if (size) *size = 1024;
    return hooks_buffer2;
}

static void *tools_hooks_buffer6(void **ptr, size_t *size)
{
    if (ptr) *ptr = hooks_buffer6;
    if (size) *size = 14;
    return hooks_buffer6;
}

/* ---------------------------------------------------------------------------
 * Tools TLS (42d85a81...), slot 2: the calling thread's current context.
 * The cudart inside cuBLAS, cuDNN and JAX's libraries asks before most of its
 * calls, then asks tools context slot 4 for that context's number. Traces on
 * driver 580 show only the first argument used, an out-pointer. */

static CUresult tools_tls_current_ctx(CUcontext *pctx)
{
    if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
    return cuCtxGetCurrent(pctx);
}

/* ---------------------------------------------------------------------------
 * Tools context (21318c60...), slot 4: a context's number, a 64-bit value
 * unique in the process (1 for the first context). That is what the public
 * cuCtxGetId() returns. */

static CUresult tools_ctx_number(CUcontext ctx, uint64_t *number)
{
    if (number == NULL) return CUDA_ERROR_INVALID_VALUE;
    unsigned long long id = 0;
    CUresult rc = cuCtxGetId(ctx, &id);
    if (rc == CUDA_SUCCESS) *number = id;
    return rc;
}

/* ---------------------------------------------------------------------------
 * Tools context (21318c60...), slots 51 and 39: a stream's driver object, and
 * that object's stream number. cuBLAS calls them one after the other when it
 * runs on a stream (cuSOLVER's getrs through it), to key its per-stream state.
 *
 * Driver 580 [trace, probe]:
 *   [51] CUresult (CUcontext ctx, CUstream stream, void **object, unsigned flags)
 *        writes the driver's object for the stream: for NULL, the legacy
 *        stream's (the same object as CU_STREAM_LEGACY's), or with nonzero
 *        flags the per-thread stream's; for CU_STREAM_PER_THREAD the calling
 *        thread's per-thread stream's; an ordinary stream's own otherwise.
 *        The same stream always gets the same object. The special handles
 *        mean ctx's streams, whether or not ctx is current; with a NULL ctx
 *        they get CUDA_ERROR_INVALID_HANDLE (the current context is not
 *        used). An ordinary stream resolves with any ctx, NULL too. NULL
 *        object: CUDA_ERROR_INVALID_VALUE. cuBLAS passes flags 0.
 *   [39] CUresult (CUcontext ctx, const void *object, uint64_t *number)
 *        writes the stream's number, what cuStreamGetId gives for it, with or
 *        without a ctx. NULL object or NULL number: CUDA_ERROR_INVALID_VALUE.
 *
 * Ours: the object is a small record of ours holding the stream's number,
 * asked of cuStreamGetId once, in ctx (pushed for the question if it is not
 * the current one); one record per stream number, so a stream always gets
 * the same object and NULL shares CU_STREAM_LEGACY's. Slot 39 reads the
 * record back, and refuses what is not one of ours instead of trusting it.
 * A context's records go when it is destroyed. */

struct stream_object {
    CUcontext ctx; /* whose destruction drops this record */
    unsigned long long id;
};

static pthread_mutex_t stream_objects_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stream_object **stream_objects;
static size_t stream_objects_len, stream_objects_cap;

static bool stream_is_special(CUstream stream)
{
    return stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

/* The record for stream number id, created if need be. NULL if out of memory. */
static struct stream_object *stream_object_intern(CUcontext ctx, unsigned long long id)
{
    struct stream_object *found = NULL;
    pthread_mutex_lock(&stream_objects_lock);
    for (size_t i = 0; i < stream_objects_len && found == NULL; i++)
        if (stream_objects[i]->id == id) found = stream_objects[i];
    if (found == NULL && stream_objects_len == stream_objects_cap) {
        size_t cap = stream_objects_cap ? stream_objects_cap * 2 : 16;
        struct stream_object **grown = realloc(stream_objects, cap * sizeof *grown);
        if (grown != NULL) {
            stream_objects = grown;
            stream_objects_cap = cap;
        }
    }
    if (found == NULL && stream_objects_len < stream_objects_cap) {
        found = malloc(sizeof *found);
        if (found != NULL) {
            found->ctx = ctx;
            found->id = id;
            stream_objects[stream_objects_len++] = found;
        }
    }
    pthread_mutex_unlock(&stream_objects_lock);
    return found;
}

static void stream_objects_drop_context(CUcontext ctx)
{
    pthread_mutex_lock(&stream_objects_lock);
    for (size_t i = 0; i < stream_objects_len;) {
        if (stream_objects[i]->ctx != ctx) { i++; continue; }
        free(stream_objects[i]);
        stream_objects[i] = stream_objects[--stream_objects_len];
    }
    pthread_mutex_unlock(&stream_objects_lock);
}

/* cuStreamGetId of stream as seen from ctx: a special handle means ctx's own
 * special stream, so ctx is made current for the question if it is not. */
static CUresult stream_id_in(CUcontext ctx, CUstream stream, unsigned long long *id)
{
    CUcontext current = NULL;
    CUresult rc = cuCtxGetCurrent(&current);
    if (rc != CUDA_SUCCESS) return rc;
    if (!stream_is_special(stream) || ctx == current) return cuStreamGetId(stream, id);

    rc = cuCtxPushCurrent_v2(ctx);
    if (rc != CUDA_SUCCESS) return rc;
    rc = cuStreamGetId(stream, id);
    CUcontext popped;
    CUresult pop = cuCtxPopCurrent_v2(&popped);
    return rc != CUDA_SUCCESS ? rc : pop;
}

static CUresult tools_ctx_stream_object(CUcontext ctx, CUstream stream, void **object, unsigned flags)
{
    if (object == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (stream_is_special(stream) && ctx == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (stream == NULL && flags != 0) stream = CU_STREAM_PER_THREAD;

    unsigned long long id = 0;
    CUresult rc = stream_id_in(ctx, stream, &id);
    if (rc == CUDA_SUCCESS && ctx == NULL) rc = cuCtxGetCurrent(&ctx);
    LOG_DEBUG("tools_ctx[51]: ctx %p stream %p: stream number %llu, rc %d", (void *)ctx, (void *)stream, id, (int)rc);
    if (rc != CUDA_SUCCESS) return rc;

    struct stream_object *o = stream_object_intern(ctx, id);
    if (o == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    *object = o;
    return CUDA_SUCCESS;
}

static CUresult tools_ctx_stream_number(CUcontext ctx, const void *object, uint64_t *number)
{
    (void)ctx; /* the object knows its stream */
    if (object == NULL || number == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&stream_objects_lock);
    for (size_t i = 0; i < stream_objects_len; i++) {
        if (stream_objects[i] != object) continue;
        *number = stream_objects[i]->id;
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&stream_objects_lock);
    return rc;
}

/* ---------------------------------------------------------------------------
 * Tools module (6e163fbe...), slot 7: calls back once per function of a
 * module. cuFFT loads each of its kernels as a module of its own, gets the
 * kernel's CUfunction through this, and then uses it with the public calls
 * (cuFuncGetAttribute, cuOccupancyMaxActiveBlocksPerMultiprocessor,
 * cuLaunchKernel) only; it never looks inside the handle.
 *
 * Driver 580 [trace, probe]:
 *   unsigned (CUcontext ctx, CUmodule mod,
 *             void (*callback)(void *user, CUfunction fn, const char *name),
 *             void *user)
 * calls callback(user, fn, name) for each function, in the order
 * cuModuleEnumerateFunctions lists them, name being the very pointer
 * cuFuncGetName gives; the callback's return value is ignored. It returns
 * the number of functions: 1 for cuFFT's modules, 3 for a module of three
 * kernels, 0 for a module without any and for an unloaded module; the same
 * with a NULL ctx, and with a NULL callback (which it then does not call).
 * A NULL module crashes the driver.
 *
 * Ours: cuModuleGetFunctionCount, cuModuleEnumerateFunctions and
 * cuFuncGetName, which the shim answers from its module registry; a module
 * it does not know counts as having no function. */

typedef void (*tools_module_function_cb)(void *user, CUfunction fn, const char *name);

static unsigned tools_module_each_function(CUcontext ctx, CUmodule mod, tools_module_function_cb cb, void *user)
{
    (void)ctx; /* the driver iterates with a NULL context as well */
    unsigned n = 0;
    if (cuModuleGetFunctionCount(&n, mod) != CUDA_SUCCESS) n = 0;
    LOG_DEBUG("tools_module[7]: module %p: %u functions", (void *)mod, n);
    if (cb == NULL || n == 0) return n;

    CUfunction *fns = calloc(n, sizeof *fns);
    if (fns == NULL || cuModuleEnumerateFunctions(fns, n, mod) != CUDA_SUCCESS) {
        free(fns);
        return 0;
    }
    for (unsigned i = 0; i < n; i++) {
        const char *name = NULL;
        if (cuFuncGetName(&name, fns[i]) != CUDA_SUCCESS) name = NULL;
        cb(user, fns[i], name);
    }
    free(fns);
    return n;
}

/* ---------------------------------------------------------------------------
 * Context checks (263e8860...). Slot 2 takes a context and two out-pointers;
 * driver 580 sets the 32-bit flag to 0 and leaves the second alone, for
 * every context we tried. Public reverse engineering reads it as "is this a
 * wrapped context, and which one is inside"; ours never are. Slot 3 takes
 * nothing and returns 0 on driver 580; what a nonzero answer would mean is
 * not known. */

static CUresult ctx_checks_is_wrapped(CUcontext ctx, uint32_t *is_wrapped, CUcontext *inner)
{
    (void)ctx;
    if (is_wrapped) *is_wrapped = 0;
    (void)inner;
    return CUDA_SUCCESS;
}

static uint32_t ctx_checks_mode(void)
{
    return 0;
}

/* ---------------------------------------------------------------------------
 * Context-local storage (c693336e...): cudart keeps its per-context state in
 * the driver, as a value under a key of its own choosing. A cudart instance
 * puts once and gets on nearly every API call, so get must be cheap: a
 * thread-local one-entry cache in front of a small locked array. Every change
 * bumps a generation counter, which invalidates all caches at once. */

typedef void (*cls_dtor_fn)(CUcontext ctx, void *key, void *value);

struct cls_entry {
    CUcontext ctx;
    void *key;
    void *value;
    cls_dtor_fn dtor;
};

static pthread_mutex_t cls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cls_entry *cls_entries;
static size_t cls_len, cls_cap;
static _Atomic unsigned long cls_generation = 1; /* 0 is never current */

static _Thread_local struct {
    unsigned long generation;
    CUcontext ctx;
    void *key;
    void *value;
} cls_cache;

/* A NULL context means the calling thread's current one. */
static CUresult cls_resolve_ctx(CUcontext *ctx)
{
    if (*ctx != NULL) return CUDA_SUCCESS;
    CUresult rc = cuCtxGetCurrent(ctx);
    if (rc != CUDA_SUCCESS) return rc;
    return *ctx != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Index of (ctx, key), or -1. Call with cls_lock held. */
static long cls_find(CUcontext ctx, void *key)
{
    for (size_t i = 0; i < cls_len; i++)
        if (cls_entries[i].ctx == ctx && cls_entries[i].key == key) return (long)i;
    return -1;
}

/* Call with cls_lock held. */
static void cls_remove_at(size_t i)
{
    cls_entries[i] = cls_entries[--cls_len];
    atomic_fetch_add_explicit(&cls_generation, 1, memory_order_release);
}

/* Call with cls_lock held. */
static bool cls_append(struct cls_entry e)
{
    if (cls_len == cls_cap) {
        size_t cap = cls_cap ? cls_cap * 2 : 16;
        struct cls_entry *grown = realloc(cls_entries, cap * sizeof *grown);
        if (grown == NULL) return false;
        cls_entries = grown;
        cls_cap = cap;
    }
    cls_entries[cls_len++] = e;
    return true;
}

/* A key that is already there is refused and keeps its value, as in the
 * real driver: of two threads racing to set up the same state, the loser
 * learns it lost. */
static CUresult cls_put(CUcontext ctx, void *key, void *value, cls_dtor_fn dtor)
{
    CUresult rc = cls_resolve_ctx(&ctx);
    LOG_DEBUG("cls[0]: put ctx %p key %p value %p, rc %d", (void *)ctx, key, value, (int)rc);
    if (rc != CUDA_SUCCESS) return rc;

    pthread_mutex_lock(&cls_lock);
    if (cls_find(ctx, key) >= 0)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (!cls_append((struct cls_entry){ctx, key, value, dtor}))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
        atomic_fetch_add_explicit(&cls_generation, 1, memory_order_release);
    pthread_mutex_unlock(&cls_lock);
    return rc;
}

/* cudart removes its own state; its destructor is not run for that. */
static CUresult cls_delete(CUcontext ctx, void *key)
{
    CUresult rc = cls_resolve_ctx(&ctx);
    LOG_DEBUG("cls[1]: delete ctx %p key %p, rc %d", (void *)ctx, key, (int)rc);
    if (rc != CUDA_SUCCESS) return rc;

    pthread_mutex_lock(&cls_lock);
    long i = cls_find(ctx, key);
    if (i >= 0) cls_remove_at((size_t)i);
    pthread_mutex_unlock(&cls_lock);
    return i >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult cls_get(void **value, CUcontext ctx, void *key)
{
    if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cls_resolve_ctx(&ctx);
    if (rc != CUDA_SUCCESS) return rc;

    unsigned long gen = atomic_load_explicit(&cls_generation, memory_order_acquire);
    if (cls_cache.generation == gen && cls_cache.ctx == ctx && cls_cache.key == key) {
        *value = cls_cache.value;
        return CUDA_SUCCESS;
    }

    pthread_mutex_lock(&cls_lock);
    gen = atomic_load_explicit(&cls_generation, memory_order_relaxed);
    long i = cls_find(ctx, key);
    void *found = i >= 0 ? cls_entries[i].value : NULL;
    pthread_mutex_unlock(&cls_lock);

    if (i < 0) return CUDA_ERROR_INVALID_HANDLE;
    cls_cache.generation = gen;
    cls_cache.ctx = ctx;
    cls_cache.key = key;
    cls_cache.value = found;
    *value = found;
    return CUDA_SUCCESS;
}

/* Take the context's entries out under the lock, run their destructors
 * without it: a destructor may well call back into this table. */
void scuda_export_tables_context_destroyed(CUcontext ctx)
{
    struct cls_entry *dead = NULL;
    size_t ndead = 0;

    pthread_mutex_lock(&cls_lock);
    for (size_t i = 0; i < cls_len; i++)
        if (cls_entries[i].ctx == ctx) ndead++;
    if (ndead > 0) dead = malloc(ndead * sizeof *dead);
    ndead = 0;
    for (size_t i = 0; i < cls_len;) {
        if (cls_entries[i].ctx != ctx) { i++; continue; }
        if (dead != NULL) dead[ndead++] = cls_entries[i];
        cls_remove_at(i);
    }
    pthread_mutex_unlock(&cls_lock);

    for (size_t i = 0; i < ndead; i++)
        if (dead[i].dtor != NULL) dead[i].dtor(ctx, dead[i].key, dead[i].value);
    free(dead);

    stream_objects_drop_context(ctx);
}

/* ---------------------------------------------------------------------------
 * Integrity check (d4082055...), slot 1.
 *
 * cudart calls it three times at init, with runtime versions ending in 0, 1
 * and 2 (13000, 13001, 13002 for cudart 13.0), and checks each answer against
 * its own computation. For the first two the answer is a constant. For the
 * third it is HMAC-MD2, keyed with a fixed 16-byte key, over: the driver
 * version, the runtime version, the process id, the thread id, the addresses
 * of the cudart interface table, of the integrity table and of this function,
 * the time cudart passed in, and then each device's UUID and PCI location.
 * Since the addresses are ours, only our own code can give the right answer.
 *
 * MD2 is RFC 1319. Its block is 16 bytes, so HMAC's padded key is exactly one
 * block (RFC 2104). */

static const unsigned char md2_s[256] = {
    0x29, 0x2E, 0x43, 0xC9, 0xA2, 0xD8, 0x7C, 0x01, 0x3D, 0x36, 0x54, 0xA1, 0xEC, 0xF0, 0x06, 0x13,
    0x62, 0xA7, 0x05, 0xF3, 0xC0, 0xC7, 0x73, 0x8C, 0x98, 0x93, 0x2B, 0xD9, 0xBC, 0x4C, 0x82, 0xCA,
    0x1E, 0x9B, 0x57, 0x3C, 0xFD, 0xD4, 0xE0, 0x16, 0x67, 0x42, 0x6F, 0x18, 0x8A, 0x17, 0xE5, 0x12,
    0xBE, 0x4E, 0xC4, 0xD6, 0xDA, 0x9E, 0xDE, 0x49, 0xA0, 0xFB, 0xF5, 0x8E, 0xBB, 0x2F, 0xEE, 0x7A,
    0xA9, 0x68, 0x79, 0x91, 0x15, 0xB2, 0x07, 0x3F, 0x94, 0xC2, 0x10, 0x89, 0x0B, 0x22, 0x5F, 0x21,
    0x80, 0x7F, 0x5D, 0x9A, 0x5A, 0x90, 0x32, 0x27, 0x35, 0x3E, 0xCC, 0xE7, 0xBF, 0xF7, 0x97, 0x03,
    0xFF, 0x19, 0x30, 0xB3, 0x48, 0xA5, 0xB5, 0xD1, 0xD7, 0x5E, 0x92, 0x2A, 0xAC, 0x56, 0xAA, 0xC6,
    0x4F, 0xB8, 0x38, 0xD2, 0x96, 0xA4, 0x7D, 0xB6, 0x76, 0xFC, 0x6B, 0xE2, 0x9C, 0x74, 0x04, 0xF1,
    0x45, 0x9D, 0x70, 0x59, 0x64, 0x71, 0x87, 0x20, 0x86, 0x5B, 0xCF, 0x65, 0xE6, 0x2D, 0xA8, 0x02,
    0x1B, 0x60, 0x25, 0xAD, 0xAE, 0xB0, 0xB9, 0xF6, 0x1C, 0x46, 0x61, 0x69, 0x34, 0x40, 0x7E, 0x0F,
    0x55, 0x47, 0xA3, 0x23, 0xDD, 0x51, 0xAF, 0x3A, 0xC3, 0x5C, 0xF9, 0xCE, 0xBA, 0xC5, 0xEA, 0x26,
    0x2C, 0x53, 0x0D, 0x6E, 0x85, 0x28, 0x84, 0x09, 0xD3, 0xDF, 0xCD, 0xF4, 0x41, 0x81, 0x4D, 0x52,
    0x6A, 0xDC, 0x37, 0xC8, 0x6C, 0xC1, 0xAB, 0xFA, 0x24, 0xE1, 0x7B, 0x08, 0x0C, 0xBD, 0xB1, 0x4A,
    0x78, 0x88, 0x95, 0x8B, 0xE3, 0x63, 0xE8, 0x6D, 0xE9, 0xCB, 0xD5, 0xFE, 0x3B, 0x00, 0x1D, 0x39,
    0xF2, 0xEF, 0xB7, 0x0E, 0x66, 0x58, 0xD0, 0xE4, 0xA6, 0x77, 0x72, 0xF8, 0xEB, 0x75, 0x4B, 0x0A,
    0x31, 0x44, 0x50, 0xB4, 0x8F, 0xED, 0x1F, 0x1A, 0xDB, 0x99, 0x8D, 0x33, 0x9F, 0x11, 0x83, 0x14,
};

struct md2 {
    unsigned char state[48];
    unsigned char checksum[16];
    unsigned char block[16];
    unsigned used; /* bytes in block */
};

static void md2_init(struct md2 *m)
{
    memset(m, 0, sizeof *m);
}

static void md2_compress(struct md2 *m)
{
    unsigned char l = m->checksum[15];
    for (int j = 0; j < 16; j++) {
        m->state[16 + j] = m->block[j];
        m->state[32 + j] = m->block[j] ^ m->state[j];
        l = m->checksum[j] ^= md2_s[m->block[j] ^ l];
    }
    unsigned char t = 0;
    for (int round = 0; round < 18; round++) {
        for (int k = 0; k < 48; k++) t = m->state[k] ^= md2_s[t];
        t = (unsigned char)(t + round);
    }
}

static void md2_update(struct md2 *m, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len-- > 0) {
        m->block[m->used++] = *p++;
        if (m->used == 16) {
            md2_compress(m);
            m->used = 0;
        }
    }
}

static void md2_final(struct md2 *m, unsigned char digest[16])
{
    unsigned char pad = (unsigned char)(16 - m->used);
    unsigned char padding[16];
    memset(padding, pad, sizeof padding);
    md2_update(m, padding, pad);
    unsigned char checksum[16];
    memcpy(checksum, m->checksum, 16);
    md2_update(m, checksum, 16);
    memcpy(digest, m->state, 16);
}

/* The HMAC key. Fixed; cudart has the same bytes. */
static const unsigned char integrity_key[16] = {
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52,
    0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
};

static void hmac_md2_start(struct md2 *m, unsigned char pad_byte)
{
    unsigned char pad[16];
    for (int i = 0; i < 16; i++) pad[i] = integrity_key[i] ^ pad_byte;
    md2_init(m);
    md2_update(m, pad, sizeof pad);
}

_Static_assert(sizeof(struct scuda_integrity_input) == 48, "integrity input layout");
_Static_assert(sizeof(struct scuda_integrity_device) == 28, "integrity device layout");

void scuda_integrity_digest(const struct scuda_integrity_input *in,
                            const struct scuda_integrity_device *devs, int ndevs,
                            uint64_t out[2])
{
    struct md2 m;
    unsigned char inner[16], outer[16];

    hmac_md2_start(&m, 0x36);
    md2_update(&m, in, sizeof *in);
    for (int i = 0; i < ndevs; i++) md2_update(&m, &devs[i], sizeof devs[i]);
    md2_final(&m, inner);

    hmac_md2_start(&m, 0x5c);
    md2_update(&m, inner, sizeof inner);
    md2_final(&m, outer);
    memcpy(out, outer, sizeof outer);
}

/* Hashes cover at most this many devices; more would be a very large box. */
#define INTEGRITY_MAX_DEVICES 64

static CUresult integrity_device(int ordinal, struct scuda_integrity_device *d)
{
    CUdevice dev;
    CUuuid uuid;
    CUresult rc = cuDeviceGet(&dev, ordinal);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetUuid(&uuid, dev);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetAttribute(&d->pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetAttribute(&d->pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetAttribute(&d->pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev);
    if (rc == CUDA_SUCCESS) memcpy(d->uuid, uuid.bytes, sizeof d->uuid);
    return rc;
}

/* Defined with the other tables below; the hash needs their addresses. */
static const void *const integrity_table[3];
static const void *const cudart_iface_table[13];

static CUresult integrity_check(uint32_t runtime_version, uint64_t unix_seconds, uint64_t result[2])
{
    LOG_DEBUG("integrity[1]: runtime version %u, time %llu", runtime_version, (unsigned long long)unix_seconds);
    if (result == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (runtime_version % 10 == 0) {
        result[0] = 0x3341181C03CB675CULL;
        result[1] = 0x8ED383AA1F4CD1E8ULL;
        return CUDA_SUCCESS;
    }
    if (runtime_version % 10 == 1) {
        result[0] = 0x1841181C03CB675CULL;
        result[1] = 0x8ED383AA1F4CD1E8ULL;
        return CUDA_SUCCESS;
    }

    int driver_version = 0, ndevs = 0;
    CUresult rc = cuDriverGetVersion(&driver_version);
    if (rc == CUDA_SUCCESS) rc = cuDeviceGetCount(&ndevs);
    if (rc != CUDA_SUCCESS) return rc;
    if (ndevs > INTEGRITY_MAX_DEVICES) ndevs = INTEGRITY_MAX_DEVICES;

    struct scuda_integrity_device devs[INTEGRITY_MAX_DEVICES];
    memset(devs, 0, sizeof devs);
    for (int i = 0; i < ndevs; i++) {
        rc = integrity_device(i, &devs[i]);
        if (rc != CUDA_SUCCESS) return rc;
    }

    struct scuda_integrity_input in;
    memset(&in, 0, sizeof in);
    in.driver_version = (uint32_t)driver_version;
    in.runtime_version = runtime_version;
    in.pid = (uint32_t)getpid();
    in.thread = (uint32_t)(uintptr_t)pthread_self();
    in.cudart_table = cudart_iface_table;
    in.integrity_table = integrity_table;
    in.integrity_fn = (const void *)integrity_check;
    in.unix_seconds = unix_seconds;
    scuda_integrity_digest(&in, devs, ndevs, result);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * Error log (f8cff951...), slot 1: a library's message for the driver's error
 * log, the one cuLogsCurrent, cuLogsDumpToMemory and cuLogsRegisterCallback
 * read. cuDNN uses it to report a failed launch; nothing calls it when all
 * goes well.
 *
 * Driver 580 [probe]: CUresult (const char *domain, int level, const char
 * *format, va_list args) formats the message and appends it to the log as
 * "[time][thread][domain][E] message" for level 0, "[W]" for any other
 * level (the driver's own entries have domain "CUDA"); callbacks registered
 * with cuLogsRegisterCallback get (level as passed, message, length). It
 * returns 0. NULL arguments crash it.
 *
 * Ours: the shim's cuLogs* calls read the server's driver log, and no public
 * call adds to it, so the message goes to the shim's own log instead, as
 * "[domain] message", at info level: the driver prints nothing, and a
 * program's stderr through SCUDA carries nothing native does not (cuDNN
 * reports every duplicate kernel name of its libraries this way). */

static CUresult error_log_message(const char *domain, int level, const char *format, va_list args)
{
    if (format == NULL) return CUDA_ERROR_INVALID_VALUE;
    char message[1024];
    vsnprintf(message, sizeof message, format, args);
    if (domain == NULL) domain = "?";
    LOG_INFO("[%s] %s: %s", domain, level == 0 ? "error" : "warning", message);
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * The tables. Sizes are what driver 580 reports (docs/export-tables.md). */

OVERRIDES_BEGIN

/* f8cff951...: cudart 13 asks for it before cuInit; cuDNN calls slot 1 to
 * report errors. Slot 2 has never been seen called. */
static const void *const error_log_table[3] = {
    REF(error_log, 0), REF(error_log, 1), REF(error_log, 2),
    [0] = TABLE_SIZE(3),
    [1] = (const void *)error_log_message,
};

/* Entry 10 is NULL in the real table, and so in ours: a caller may test it. */
static const void *const cudart_iface_table[13] = {
    REFS_ONES(cudart_iface), NULL, REF(cudart_iface, 11), REF(cudart_iface, 12),
    [0] = TABLE_SIZE(13),
    [2] = (const void *)cudart_get_primary_ctx,
};

static const void *const tools_hooks_table[7] = {
    REF(tools_hooks, 0), REF(tools_hooks, 1), REF(tools_hooks, 2), REF(tools_hooks, 3),
    REF(tools_hooks, 4), REF(tools_hooks, 5), REF(tools_hooks, 6),
    [0] = TABLE_SIZE(7),
    [2] = (const void *)tools_hooks_buffer2,
    [6] = (const void *)tools_hooks_buffer6,
};

static const void *const tools_tls_table[3] = {
    REF(tools_tls, 0), REF(tools_tls, 1), REF(tools_tls, 2),
    [0] = TABLE_SIZE(3),
    [2] = (const void *)tools_tls_current_ctx,
};

/* No size word: cudart reads exactly four entries, the last of them NULL. */
static const void *const cls_table[4] = {
    (const void *)cls_put,
    (const void *)cls_delete,
    (const void *)cls_get,
    NULL,
};

static const void *const ctx_checks_table[15] = {
    REFS_ONES(ctx_checks), REF(ctx_checks, 10), REF(ctx_checks, 11), REF(ctx_checks, 12),
    REF(ctx_checks, 13), REF(ctx_checks, 14),
    [0] = TABLE_SIZE(15),
    [2] = (const void *)ctx_checks_is_wrapped,
    [3] = (const void *)ctx_checks_mode,
};

static const void *const integrity_table[3] = {
    REF(integrity, 0), REF(integrity, 1), REF(integrity, 2),
    [0] = TABLE_SIZE(3),
    [1] = (const void *)integrity_check,
};

/* 93 entries on driver 580 (newer drivers have more); entry 91 is NULL.
 * Slot 4 is the context number, 51 and 39 a stream's object and number,
 * above. */
static const void *const tools_ctx_table[93] = {
    REFS_ONES(tools_ctx), REFS_TENS(tools_ctx, 1), REFS_TENS(tools_ctx, 2),
    REFS_TENS(tools_ctx, 3), REFS_TENS(tools_ctx, 4), REFS_TENS(tools_ctx, 5),
    REFS_TENS(tools_ctx, 6), REFS_TENS(tools_ctx, 7), REFS_TENS(tools_ctx, 8),
    REF(tools_ctx, 90), NULL, REF(tools_ctx, 92),
    [0] = TABLE_SIZE(93),
    [4] = (const void *)tools_ctx_number,
    [39] = (const void *)tools_ctx_stream_number,
    [51] = (const void *)tools_ctx_stream_object,
};

/* 99 entries; entry 93 is NULL. Slot 7 is cuFFT's: one callback per function
 * of a module, above. */
static const void *const tools_module_table[99] = {
    REFS_ONES(tools_module), REFS_TENS(tools_module, 1), REFS_TENS(tools_module, 2),
    REFS_TENS(tools_module, 3), REFS_TENS(tools_module, 4), REFS_TENS(tools_module, 5),
    REFS_TENS(tools_module, 6), REFS_TENS(tools_module, 7), REFS_TENS(tools_module, 8),
    REF(tools_module, 90), REF(tools_module, 91), REF(tools_module, 92), NULL,
    REF(tools_module, 94), REF(tools_module, 95), REF(tools_module, 96), REF(tools_module, 97),
    REF(tools_module, 98),
    [0] = TABLE_SIZE(99),
    [7] = (const void *)tools_module_each_function,
};

/* Asked for and called by libnvidia-ml (NVML), not by cudart. SCUDA ships
 * its own NVML, which never asks; the slots stay stubs. */
static const void *const unknown_69a2_table[34] = {
    REFS_ONES(unknown_69a2), REFS_TENS(unknown_69a2, 1), REFS_TENS(unknown_69a2, 2),
    REF(unknown_69a2, 30), REF(unknown_69a2, 31), REF(unknown_69a2, 32), REF(unknown_69a2, 33),
    [0] = TABLE_SIZE(34),
};

/* 17 entries, size word (driver 580 serves it). cuBLASLt calls [4] and then
 * [13] once, on its first half-precision matmul. [4] (void **a, void **b)
 * returns 0 and two fresh 72-byte heap blocks holding fixed byte patterns;
 * [13] (a, b, 12, 4, pointer, 0) then writes a pointer and a 64-bit value
 * into each. What [13] computes is not known, so neither is implemented:
 * with [4] failing, cuBLASLt skips [13] and the matmul works. */
static CUresult unknown_1734_refused(void)
{
    /* Refused on purpose, and cuBLASLt copes: no news for the program's
     * stderr (the driver prints nothing here either). */
    static _Atomic int once;
    if (!atomic_exchange_explicit(&once, 1, memory_order_relaxed))
        LOG_INFO("export table unknown_1734 slot 4 called: refused on purpose (cuBLASLt then skips slot 13)");
    return CUDA_ERROR_NOT_SUPPORTED;
}

static const void *const unknown_1734_table[17] = {
    REFS_ONES(unknown_1734), REF(unknown_1734, 10), REF(unknown_1734, 11), REF(unknown_1734, 12),
    REF(unknown_1734, 13), REF(unknown_1734, 14), REF(unknown_1734, 15), REF(unknown_1734, 16),
    [0] = TABLE_SIZE(17),
    [4] = (const void *)unknown_1734_refused,
};

/* The driver's compile cache (compile_cache.h): NVRTC opens an entry for
 * each stage of a compile, looks it up, stores what it compiled on a miss,
 * releases what a hit handed it and closes the entry. Traced against driver
 * 580 on an H200 (docs/export-tables.md); the argument widths are the ones
 * NVRTC's stack layout shows. CuPy and JAX (through the JIT libraries) use
 * the same calls. [5] was never seen called. */
static CUresult da91_open(void **handle, unsigned stage, const void *input, unsigned len, const char *options,
                          const char *compiler)
{
    return compile_cache_open(handle, stage, input, len, options, compiler);
}
static CUresult da91_close(void *handle)
{
    return compile_cache_close(handle);
}
static CUresult da91_lookup(void *handle, unsigned flags, void **data, unsigned *len)
{
    return compile_cache_lookup(handle, flags, data, len);
}
static CUresult da91_store(void *handle, unsigned flags, const void *data, unsigned len)
{
    return compile_cache_store(handle, flags, data, len);
}
static CUresult da91_release(void *data)
{
    return compile_cache_release(data);
}

static const void *const unknown_da91_table[7] = {
    REF(unknown_da91, 0), REF(unknown_da91, 1), REF(unknown_da91, 2), REF(unknown_da91, 3),
    REF(unknown_da91, 4), REF(unknown_da91, 5), REF(unknown_da91, 6),
    [0] = TABLE_SIZE(7),
    [1] = (const void *)da91_open,
    [2] = (const void *)da91_close,
    [3] = (const void *)da91_lookup,
    [4] = (const void *)da91_store,
    [6] = (const void *)da91_release,
};

/* Known from public reverse engineering and served by driver 580, but not
 * asked for on our stack. (The "heap access" table 195bcbf4... is refused by
 * driver 580, and so by us.) */
static const void *const ctx_create_bypass_table[2] = {
    REF(ctx_create_bypass, 0), REF(ctx_create_bypass, 1),
    [0] = TABLE_SIZE(2),
};

/* 31 entries; entry 30 is NULL. */
static const void *const device_ext_rt_table[31] = {
    REFS_ONES(device_ext_rt), REFS_TENS(device_ext_rt, 1), REFS_TENS(device_ext_rt, 2),
    NULL,
    [0] = TABLE_SIZE(31),
};

OVERRIDES_END

/* ---------------------------------------------------------------------------
 * Lookup by UUID. The bytes are CUuuid's, in memory order. */

struct export_table {
    const char *name;
    unsigned char uuid[16];
    const void *const *table;
};

#define UUID16(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p) \
    {0x##a, 0x##b, 0x##c, 0x##d, 0x##e, 0x##f, 0x##g, 0x##h,  \
     0x##i, 0x##j, 0x##k, 0x##l, 0x##m, 0x##n, 0x##o, 0x##p}

static const struct export_table export_tables[] = {
    {"error_log", UUID16(f8,cf,f9,51,21,46,8b,4e,b9,e2,fb,46,9e,7c,0d,d9), error_log_table},
    {"cudart_iface", UUID16(6b,d5,fb,6c,5b,f4,e7,4a,89,87,d9,39,12,fd,9d,f9), cudart_iface_table},
    {"tools_hooks", UUID16(a0,94,79,8c,2e,74,2e,74,93,f2,08,00,20,0c,0a,66), tools_hooks_table},
    {"tools_tls", UUID16(42,d8,5a,81,23,f6,cb,47,82,98,f6,e7,8a,3a,ec,dc), tools_tls_table},
    {"cls", UUID16(c6,93,33,6e,11,21,df,11,a8,c3,68,f3,55,d8,95,93), cls_table},
    {"ctx_checks", UUID16(26,3e,88,60,7c,d2,61,43,92,f6,bb,d5,00,6d,fa,7e), ctx_checks_table},
    {"integrity", UUID16(d4,08,20,55,bd,e6,70,4b,8d,34,ba,12,3c,66,e1,f2), integrity_table},
    {"tools_ctx", UUID16(21,31,8c,60,97,14,32,48,8c,a6,41,ff,73,24,c8,f2), tools_ctx_table},
    {"tools_module", UUID16(6e,16,3f,be,b9,58,44,4d,83,5c,e1,82,af,f1,99,1e), tools_module_table},
    {"unknown_69a2", UUID16(69,a2,8e,9f,24,49,8b,47,b0,30,c5,da,33,0e,a4,e9), unknown_69a2_table},
    {"unknown_1734", UUID16(17,34,dc,26,80,0d,47,45,87,26,c0,f1,e7,dd,8b,ca), unknown_1734_table},
    {"unknown_da91", UUID16(da,91,51,d3,3a,e6,cc,41,a5,c0,4f,26,d5,33,e3,28), unknown_da91_table},
    {"ctx_create_bypass", UUID16(0c,a5,0b,8c,10,04,92,9a,89,a7,d0,df,10,e7,72,86), ctx_create_bypass_table},
    {"device_ext_rt", UUID16(b1,05,41,e1,f7,c7,c7,4a,9f,64,f2,23,be,99,f1,e2), device_ext_rt_table},
};

#define NTABLES (sizeof export_tables / sizeof export_tables[0])

static void uuid_hex(const unsigned char *b, char out[33])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[32] = '\0';
}

/* Log an unknown UUID the first time it is asked for. We remember a few;
 * past that, a library asking for many unknown tables logs each request. */
#define UNKNOWN_REMEMBERED 32
static pthread_mutex_t unknown_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char unknown_seen[UNKNOWN_REMEMBERED][16];
static int unknown_nseen;

static void log_unknown_once(const unsigned char *uuid)
{
    bool seen = false;
    pthread_mutex_lock(&unknown_lock);
    for (int i = 0; i < unknown_nseen && !seen; i++)
        seen = memcmp(unknown_seen[i], uuid, 16) == 0;
    if (!seen && unknown_nseen < UNKNOWN_REMEMBERED)
        memcpy(unknown_seen[unknown_nseen++], uuid, 16);
    pthread_mutex_unlock(&unknown_lock);
    if (seen) return;

    char hex[33];
    uuid_hex(uuid, hex);
    LOG_WARN("cuGetExportTable: unknown table %s; returning CUDA_ERROR_INVALID_VALUE", hex);
}

CUresult scuda_get_export_table(const void **ppExportTable, const CUuuid *pExportTableId)
{
    if (ppExportTable == NULL || pExportTableId == NULL) return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *uuid = (const unsigned char *)pExportTableId->bytes;

    for (size_t i = 0; i < NTABLES; i++) {
        if (memcmp(export_tables[i].uuid, uuid, 16) != 0) continue;
        LOG_DEBUG("cuGetExportTable: %s", export_tables[i].name);
        *ppExportTable = export_tables[i].table;
        return CUDA_SUCCESS;
    }
    *ppExportTable = NULL;
    log_unknown_once(uuid);
    return CUDA_ERROR_INVALID_VALUE;
}
