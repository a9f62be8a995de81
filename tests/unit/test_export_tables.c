/* test_export_tables.c - unit test of src/client/export_tables.c.
 *
 * Links export_tables.c and log.c with a tiny fake of the public driver
 * functions they call (defined below). Prints each check; exits nonzero if
 * any failed.
 *
 * The integrity slot is checked against a reference written here from the
 * published algorithm (HMAC-MD2 over a byte string we lay out by hand), not
 * against the production code's own helpers. The reference MD2 is checked
 * against the test vectors of RFC 1319 first, and then against answers read
 * from the real driver 580 on an H100 (see docs/export-tables.md).
 *
 * The stream-object, per-function and error-log slots are checked against
 * what driver 580 did in the probes of docs/export-tables.md, on fakes that
 * model the same rules (special streams per context and thread, modules with
 * three functions and with none). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "client/compile_cache.h"
#include "client/export_tables.h"
#include "client/stats.h"
#include "common/log.h"

static int failures, checks;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        checks++;                                                \
        if (cond) {                                              \
            printf("ok   ");                                     \
        } else {                                                 \
            printf("FAIL ");                                     \
            failures++;                                          \
        }                                                        \
        printf(__VA_ARGS__);                                     \
        printf("\n");                                            \
    } while (0)

/* ---------------------------------------------------------------------------
 * The fake driver: two devices, one current context per thread. */

#define FAKE_DRIVER_VERSION 13000
#define FAKE_NDEVS 2
static const struct {
    unsigned char uuid[16];
    int domain, bus, device;
} fake_devs[FAKE_NDEVS] = {
    {{0x8a, 0x2b, 0xfe, 0x9a, 0x38, 0x2d, 0x25, 0xac, 0xc5, 0xae, 0x37, 0xea, 0x5f, 0x32, 0x71, 0x6d}, 0, 0x19, 0},
    {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}, 1, 0xc3, 7},
};

static _Thread_local CUcontext fake_current;
static int fake_retains, fake_lookups;
#define FAKE_PRIMARY_CTX ((CUcontext)(uintptr_t)0x5000)

/* The shim's SCUDA_STATS counters (stats.c): counted here. */
static int fake_compile_service_calls;
void stats_add(enum stats_counter c)
{
    if (c == STATS_COMPILE_SERVICE) fake_compile_service_calls++;
}

/* The shim's optional hook: a primary context handle, no reference taken. */
CUresult scuda_primary_ctx_lookup(CUdevice dev, CUcontext *pctx)
{
    if (dev < 0 || dev >= FAKE_NDEVS) return CUDA_ERROR_INVALID_DEVICE;
    fake_lookups++;
    *pctx = (CUcontext)((uintptr_t)FAKE_PRIMARY_CTX + (uintptr_t)dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    *pctx = fake_current;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (dev < 0 || dev >= FAKE_NDEVS) return CUDA_ERROR_INVALID_DEVICE;
    fake_retains++;
    *pctx = (CUcontext)((uintptr_t)FAKE_PRIMARY_CTX + (uintptr_t)dev);
    return CUDA_SUCCESS;
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    if (ctx == NULL) ctx = fake_current;
    if (ctx == NULL) return CUDA_ERROR_INVALID_CONTEXT;
    *id = (uintptr_t)ctx >> 12; /* any number unique per context */
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *v)
{
    *v = FAKE_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *n)
{
    *n = FAKE_NDEVS;
    return CUDA_SUCCESS;
}

/* Handles differ from ordinals, so that a mix-up shows. */
CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= FAKE_NDEVS) return CUDA_ERROR_INVALID_DEVICE;
    *dev = 100 + ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    if (dev < 100 || dev >= 100 + FAKE_NDEVS) return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, fake_devs[dev - 100].uuid, 16);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attr, CUdevice dev)
{
    if (dev < 100 || dev >= 100 + FAKE_NDEVS) return CUDA_ERROR_INVALID_DEVICE;
    int d = dev - 100;
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = fake_devs[d].domain; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = fake_devs[d].bus; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = fake_devs[d].device; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}


/* Contexts pushed on the calling thread, as cuCtxPushCurrent does. */
static _Thread_local CUcontext fake_pushed[8];
static _Thread_local int fake_npushed;
static int fake_pushes;

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    if (ctx == NULL || fake_npushed == 8) return CUDA_ERROR_INVALID_VALUE;
    fake_pushed[fake_npushed++] = fake_current;
    fake_current = ctx;
    fake_pushes++;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (fake_npushed == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx) *pctx = fake_current;
    fake_current = fake_pushed[--fake_npushed];
    return CUDA_SUCCESS;
}

/* Stream numbers: the current context's legacy stream 1000 + its number, its
 * per-thread stream 2000 + its number + 100 per thread (a thread gets its
 * index on first use), an ordinary stream (handle 0x9X00) its handle >> 8.
 * Handles 0xdead0 and up are not streams. */
static _Atomic int fake_threads;
static _Thread_local int fake_thread_index = -1;
static int fake_stream_id_calls;

CUresult cuStreamGetId(CUstream stream, unsigned long long *id)
{
    fake_stream_id_calls++;
    uintptr_t h = (uintptr_t)stream;
    if (stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
        if (fake_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
        unsigned long long ctxno = (uintptr_t)fake_current >> 8;
        if (stream != CU_STREAM_PER_THREAD) {
            *id = 1000 + ctxno;
        } else {
            if (fake_thread_index < 0) fake_thread_index = atomic_fetch_add(&fake_threads, 1);
            *id = 2000 + ctxno + 100 * (unsigned long long)fake_thread_index;
        }
        return CUDA_SUCCESS;
    }
    if (h >= 0xdead0) return CUDA_ERROR_INVALID_HANDLE;
    *id = h >> 8;
    return CUDA_SUCCESS;
}

/* Modules: 0x4000 has three functions, 0x4100 none; nothing else is one. */
#define FAKE_MODULE ((CUmodule)(uintptr_t)0x4000)
#define FAKE_EMPTY_MODULE ((CUmodule)(uintptr_t)0x4100)
static const char *const fake_fn_names[3] = {"k_first", "k_second", "k_third"};
static CUfunction fake_fn(int i) { return (CUfunction)(uintptr_t)(0x4010 + 0x10 * i); }

CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    if (mod == FAKE_MODULE) *count = 3;
    else if (mod == FAKE_EMPTY_MODULE) *count = 0;
    else return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int n, CUmodule mod)
{
    if (mod != FAKE_MODULE && mod != FAKE_EMPTY_MODULE) return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < n && mod == FAKE_MODULE && i < 3; i++) functions[i] = fake_fn((int)i);
    return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction fn)
{
    for (int i = 0; i < 3; i++)
        if (fn == fake_fn(i)) {
            *name = fake_fn_names[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

/* ---------------------------------------------------------------------------
 * Helpers. */

static void uuid_from_hex(const char *hex, CUuuid *out)
{
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out->bytes[i] = (char)v;
    }
}

static void *const *table_of(const char *hex)
{
    CUuuid id;
    const void *t = NULL;
    uuid_from_hex(hex, &id);
    if (scuda_get_export_table(&t, &id) != CUDA_SUCCESS) return NULL;
    return (void *const *)t;
}

typedef CUresult (*any_slot_fn)(void);

/* ---------------------------------------------------------------------------
 * Reference MD2 (RFC 1319), written the way the RFC describes it: pad the
 * whole message, append its checksum, then run the 18 rounds per block. */

static const unsigned char S[256] = {
    41, 46, 67, 201, 162, 216, 124, 1, 61, 54, 84, 161, 236, 240, 6, 19,
    98, 167, 5, 243, 192, 199, 115, 140, 152, 147, 43, 217, 188, 76, 130, 202,
    30, 155, 87, 60, 253, 212, 224, 22, 103, 66, 111, 24, 138, 23, 229, 18,
    190, 78, 196, 214, 218, 158, 222, 73, 160, 251, 245, 142, 187, 47, 238, 122,
    169, 104, 121, 145, 21, 178, 7, 63, 148, 194, 16, 137, 11, 34, 95, 33,
    128, 127, 93, 154, 90, 144, 50, 39, 53, 62, 204, 231, 191, 247, 151, 3,
    255, 25, 48, 179, 72, 165, 181, 209, 215, 94, 146, 42, 172, 86, 170, 198,
    79, 184, 56, 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4, 241,
    69, 157, 112, 89, 100, 113, 135, 32, 134, 91, 207, 101, 230, 45, 168, 2,
    27, 96, 37, 173, 174, 176, 185, 246, 28, 70, 97, 105, 52, 64, 126, 15,
    85, 71, 163, 35, 221, 81, 175, 58, 195, 92, 249, 206, 186, 197, 234, 38,
    44, 83, 13, 110, 133, 40, 132, 9, 211, 223, 205, 244, 65, 129, 77, 82,
    106, 220, 55, 200, 108, 193, 171, 250, 36, 225, 123, 8, 12, 189, 177, 74,
    120, 136, 149, 139, 227, 99, 232, 109, 233, 203, 213, 254, 59, 0, 29, 57,
    242, 239, 183, 14, 102, 88, 208, 228, 166, 119, 114, 248, 235, 117, 75, 10,
    49, 68, 80, 180, 143, 237, 31, 26, 219, 153, 141, 51, 159, 17, 131, 20,
};

static void ref_md2(const unsigned char *msg, size_t len, unsigned char out[16])
{
    size_t padded = (len / 16 + 1) * 16;
    unsigned char *m = malloc(padded + 16);
    memcpy(m, msg, len);
    memset(m + len, (int)(padded - len), padded - len);

    unsigned char c[16] = {0}, l = 0;
    for (size_t i = 0; i < padded / 16; i++)
        for (int j = 0; j < 16; j++) {
            c[j] ^= S[m[16 * i + j] ^ l];
            l = c[j];
        }
    memcpy(m + padded, c, 16);

    unsigned char x[48] = {0};
    for (size_t i = 0; i < padded / 16 + 1; i++) {
        for (int j = 0; j < 16; j++) {
            x[16 + j] = m[16 * i + j];
            x[32 + j] = x[16 + j] ^ x[j];
        }
        unsigned t = 0;
        for (unsigned j = 0; j < 18; j++) {
            for (int k = 0; k < 48; k++) {
                x[k] ^= S[t];
                t = x[k];
            }
            t = (t + j) % 256;
        }
    }
    memcpy(out, x, 16);
    free(m);
}

static const unsigned char hmac_key[16] = {
    0x14, 0x6A, 0xDD, 0xAE, 0x53, 0xA9, 0xA7, 0x52, 0xAA, 0x08, 0x41, 0x36, 0x0B, 0xF5, 0x5A, 0x9F,
};

/* RFC 2104 with a 16-byte block: H(K^opad || H(K^ipad || msg)). */
static void ref_hmac_md2(const unsigned char *msg, size_t len, unsigned char out[16])
{
    unsigned char *buf = malloc(16 + len);
    for (int i = 0; i < 16; i++) buf[i] = hmac_key[i] ^ 0x36;
    memcpy(buf + 16, msg, len);
    unsigned char inner[16];
    ref_md2(buf, 16 + len, inner);
    unsigned char outer_msg[32];
    for (int i = 0; i < 16; i++) outer_msg[i] = hmac_key[i] ^ 0x5c;
    memcpy(outer_msg + 16, inner, 16);
    ref_md2(outer_msg, 32, out);
    free(buf);
}

static unsigned char *put_le(unsigned char *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

struct ref_device {
    unsigned char uuid[16];
    int32_t domain, bus, device;
};

/* The integrity message, laid out by hand: four 32-bit words, three
 * addresses, the time, then 28 bytes per device. */
static void ref_integrity(uint32_t driver, uint32_t runtime, uint32_t pid, uint32_t thread,
                          uint64_t cudart_table, uint64_t integrity_table, uint64_t fn,
                          uint64_t seconds, const struct ref_device *devs, int ndevs,
                          uint64_t out[2])
{
    unsigned char msg[48 + 28 * 8], *p = msg;
    p = put_le(p, driver, 4);
    p = put_le(p, runtime, 4);
    p = put_le(p, pid, 4);
    p = put_le(p, thread, 4);
    p = put_le(p, cudart_table, 8);
    p = put_le(p, integrity_table, 8);
    p = put_le(p, fn, 8);
    p = put_le(p, seconds, 8);
    for (int i = 0; i < ndevs; i++) {
        memcpy(p, devs[i].uuid, 16);
        p += 16;
        p = put_le(p, (uint32_t)devs[i].domain, 4);
        p = put_le(p, (uint32_t)devs[i].bus, 4);
        p = put_le(p, (uint32_t)devs[i].device, 4);
    }
    unsigned char d[16];
    ref_hmac_md2(msg, (size_t)(p - msg), d);
    out[0] = out[1] = 0;
    for (int i = 7; i >= 0; i--) out[0] = out[0] << 8 | d[i];
    for (int i = 15; i >= 8; i--) out[1] = out[1] << 8 | d[i];
}

static void hex16(const unsigned char d[16], char out[33])
{
    for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

/* ---------------------------------------------------------------------------
 * Tests. */

/* Layouts as driver 580 serves them (read on an H200, docs/export-tables.md). */
static const struct {
    const char *name;
    const char *uuid;
    int entries;  /* size word / 8, or the number of entries */
    int sized;    /* entry 0 is the size in bytes */
    int null_at;  /* the one entry that is NULL in the real table, or 0 */
} known[] = {
    {"error_log", "f8cff95121468b4eb9e2fb469e7c0dd9", 3, 1, 0},
    {"cudart_iface", "6bd5fb6c5bf4e74a8987d93912fd9df9", 13, 1, 10},
    {"tools_hooks", "a094798c2e742e7493f20800200c0a66", 7, 1, 0},
    {"tools_tls", "42d85a8123f6cb478298f6e78a3aecdc", 3, 1, 0},
    {"cls", "c693336e1121df11a8c368f355d89593", 4, 0, 3},
    {"ctx_checks", "263e88607cd2614392f6bbd5006dfa7e", 15, 1, 0},
    {"integrity", "d4082055bde6704b8d34ba123c66e1f2", 3, 1, 0},
    {"tools_ctx", "21318c60971432488ca641ff7324c8f2", 93, 1, 91},
    {"tools_module", "6e163fbeb958444d835ce182aff1991e", 99, 1, 93},
    {"unknown_69a2", "69a28e9f24498b47b030c5da330ea4e9", 34, 1, 0},
    {"unknown_1734", "1734dc26800d47458726c0f1e7dd8bca", 17, 1, 0},
    {"unknown_da91", "da9151d33ae6cc41a5c04f26d533e328", 7, 1, 0},
    {"ctx_create_bypass", "0ca50b8c1004929a89a7d0df10e77286", 2, 1, 0},
    {"device_ext_rt", "b10541e1f7c7c74a9f64f223be99f1e2", 31, 1, 30},
};
#define NKNOWN (int)(sizeof known / sizeof known[0])

static void test_lookup(void)
{
    for (int i = 0; i < NKNOWN; i++) {
        void *const *t = table_of(known[i].uuid);
        CHECK(t != NULL, "table %s resolves", known[i].name);
        if (t == NULL) continue;
        if (known[i].sized)
            CHECK((uintptr_t)t[0] == (uintptr_t)known[i].entries * sizeof(void *),
                  "table %s: entry 0 is its size, %d bytes", known[i].name, known[i].entries * 8);
        int all = 1;
        for (int s = known[i].sized ? 1 : 0; s < known[i].entries; s++)
            if (s != known[i].null_at) all &= t[s] != NULL;
        CHECK(all, "table %s: every slot but the real table's NULL one is a function", known[i].name);
        if (known[i].null_at)
            CHECK(t[known[i].null_at] == NULL, "table %s: entry %d is NULL, as in driver 580", known[i].name,
                  known[i].null_at);
    }

    CUuuid id;
    const void *t = (const void *)1;
    uuid_from_hex("00112233445566778899aabbccddeeff", &id);
    CHECK(scuda_get_export_table(&t, &id) == CUDA_ERROR_INVALID_VALUE && t == NULL,
          "unknown UUID: CUDA_ERROR_INVALID_VALUE and NULL");
    t = (const void *)1;
    uuid_from_hex("195bcbf4d67d024aacc51d29cea631ae", &id);
    CHECK(scuda_get_export_table(&t, &id) == CUDA_ERROR_INVALID_VALUE && t == NULL,
          "heap access table 195bcbf4...: refused, as driver 580 does");
    CHECK(scuda_get_export_table(&t, &id) == CUDA_ERROR_INVALID_VALUE, "unknown UUID again (logged once)");
    CHECK(scuda_get_export_table(NULL, &id) == CUDA_ERROR_INVALID_VALUE, "NULL table pointer");
    CHECK(scuda_get_export_table(&t, NULL) == CUDA_ERROR_INVALID_VALUE, "NULL UUID");

    const void *a = NULL, *b = NULL;
    uuid_from_hex(known[1].uuid, &id);
    scuda_get_export_table(&a, &id);
    scuda_get_export_table(&b, &id);
    CHECK(a == b, "the same table comes back at the same address");
}

static void test_stubs(void)
{
    static const struct { int table, slot; } unimplemented[] = {
        {1, 1}, {1, 6}, {1, 8}, {3, 1}, {7, 3}, {7, 40}, {7, 52}, {8, 6}, {0, 2},
        {9, 19}, {9, 21}, {9, 24}, {9, 25}, {10, 4}, {10, 13}, {11, 5}, {2, 1},
    };
    for (size_t i = 0; i < sizeof unimplemented / sizeof unimplemented[0]; i++) {
        int ti = unimplemented[i].table, s = unimplemented[i].slot;
        void *const *t = table_of(known[ti].uuid);
        any_slot_fn fn = (any_slot_fn)t[s];
        CHECK(fn() == CUDA_ERROR_NOT_SUPPORTED, "%s[%d] returns CUDA_ERROR_NOT_SUPPORTED", known[ti].name, s);
        CHECK(fn() == CUDA_ERROR_NOT_SUPPORTED, "%s[%d] again (logged once)", known[ti].name, s);
    }
    void *const *t = table_of(known[7].uuid);
    CHECK(t[3] != t[40] && t[40] != t[52], "each unimplemented slot has its own function");
}

/* The compile cache (export table da91), called as NVRTC calls it: open an
 * entry per stage, look it up, store on a miss, release a hit's output. */
typedef CUresult (*cc_open_fn)(void **, unsigned, const void *, unsigned, const char *, const char *);
typedef CUresult (*cc_close_fn)(void *);
typedef CUresult (*cc_lookup_fn)(void *, unsigned, void **, unsigned *);
typedef CUresult (*cc_store_fn)(void *, unsigned, const void *, unsigned);

static void test_compile_cache(void)
{
    void *const *t = table_of(known[11].uuid);
    cc_open_fn open_entry = (cc_open_fn)t[1];
    cc_close_fn close_entry = (cc_close_fn)t[2], release = (cc_close_fn)t[6];
    cc_lookup_fn lookup = (cc_lookup_fn)t[3];
    cc_store_fn store = (cc_store_fn)t[4];
    static const unsigned char bitcode[16] = {'B', 'C', 0xc0, 0xde, 0x35, 0x14};
    static const char options[] = " -arch=compute_90a -ftz=1", compiler[] = "HOST64\0Aug 20 202514:13:52";
    static const char other_date[] = "HOST64\0Aug 21 202514:13:52";
    static const char ptx[] = ".version 9.0\n.target sm_90a\n// the stage's output";

    compile_cache_configure(NULL, 0);
    void *h = (void *)0x5a5a;
    int counted = fake_compile_service_calls;
    CHECK(open_entry(&h, 2, bitcode, sizeof bitcode, options, compiler) == CUDA_ERROR_NOT_INITIALIZED &&
              h == (void *)0x5a5a,
          "da91[1] with the cache off: CUDA_ERROR_NOT_INITIALIZED, nothing written (driver 580 with "
          "CUDA_CACHE_DISABLE=1)");
    CHECK(fake_compile_service_calls == counted + 1, "each da91[1] call is counted for SCUDA_STATS");

    char dir[] = "/tmp/scuda-cc-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a directory for the cache");
    compile_cache_configure(dir, 1 << 20);
    void *data = NULL;
    unsigned len = 0;
    CHECK(open_entry(&h, 2, bitcode, sizeof bitcode, options, compiler) == CUDA_SUCCESS && h != (void *)0x5a5a,
          "da91[1] opens an entry");
    CHECK(lookup(h, 0, &data, &len) == CUDA_ERROR_NOT_FOUND && data == NULL, "da91[3]: a new compile misses (500)");
    CHECK(store(h, 0, ptx, sizeof ptx) == CUDA_SUCCESS, "da91[4] keeps the stage's output");
    CHECK(close_entry(h) == CUDA_SUCCESS, "da91[2] closes the entry");
    CHECK(close_entry(h) == CUDA_ERROR_INVALID_HANDLE, "da91[2] twice: refused, not freed again");

    CHECK(open_entry(&h, 2, bitcode, sizeof bitcode, options, compiler) == CUDA_SUCCESS &&
              lookup(h, 0, &data, &len) == CUDA_SUCCESS && len == sizeof ptx && data != NULL &&
              memcmp(data, ptx, sizeof ptx) == 0,
          "the same compile again: da91[3] hands back the stored output, byte for byte");
    CHECK(release(data) == CUDA_SUCCESS && release(data) == CUDA_ERROR_INVALID_VALUE,
          "da91[6] releases the output once; a second time is refused");
    CHECK(lookup(h, 1, &data, &len) == CUDA_ERROR_NOT_FOUND, "other flags name another entry");
    CHECK(lookup((void *)0x1234, 0, &data, &len) == CUDA_ERROR_INVALID_HANDLE, "an unknown entry is refused");
    close_entry(h);

    struct { unsigned stage; const char *options, *compiler; unsigned len; const char *what; } others[] = {
        {1, options, compiler, sizeof bitcode, "another stage"},
        {2, " -arch=compute_90", compiler, sizeof bitcode, "other options"},
        {2, options, other_date, sizeof bitcode, "another compiler build (the date after its NUL)"},
        {2, options, compiler, sizeof bitcode - 1, "other input"},
    };
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CHECK(open_entry(&h, others[i].stage, bitcode, others[i].len, others[i].options, others[i].compiler) ==
                      CUDA_SUCCESS &&
                  lookup(h, 0, &data, &len) == CUDA_ERROR_NOT_FOUND,
              "%s: a miss", others[i].what);
        close_entry(h);
    }
    CHECK(open_entry(NULL, 2, bitcode, sizeof bitcode, options, compiler) == CUDA_ERROR_INVALID_VALUE,
          "da91[1] without a place for the entry: CUDA_ERROR_INVALID_VALUE");
    compile_cache_configure(NULL, 0);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "the cache's directory removed");
}

static void test_simple_slots(void)
{
    void *const *cudart = table_of("6bd5fb6c5bf4e74a8987d93912fd9df9");
    CUresult (*primary)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))cudart[2];
    CUcontext ctx = NULL;
    int retains = fake_retains, lookups = fake_lookups;
    CHECK(primary(&ctx, 1) == CUDA_SUCCESS && ctx == (CUcontext)((uintptr_t)FAKE_PRIMARY_CTX + 1) &&
              fake_retains == retains && fake_lookups == lookups + 1,
          "cudart_iface[2] gives the device's primary context, taking no reference");
    CHECK(primary(NULL, 0) == CUDA_ERROR_INVALID_VALUE, "cudart_iface[2] with NULL: CUDA_ERROR_INVALID_VALUE");
    CHECK(primary(&ctx, 7) == CUDA_ERROR_INVALID_DEVICE, "cudart_iface[2] passes the driver's error through");

    void *const *hooks = table_of("a094798c2e742e7493f20800200c0a66");
    void (*buf)(void **, size_t *);
    void *(*buf_ret)(void **, size_t *);
    void *p2 = NULL, *p6 = NULL;
    size_t n2 = 0, n6 = 0;
    buf = (void (*)(void **, size_t *))hooks[2];
    buf(&p2, &n2);
    buf = (void (*)(void **, size_t *))hooks[6];
    buf(&p6, &n6);
    CHECK(p2 != NULL && n2 == 1024 && p6 != NULL && n6 == 14 && p2 != p6,
          "tools_hooks[2] and [6] hand out two buffers of 1024 and 14 units (%zu and %zu)", n2, n6);
    buf_ret = (void *(*)(void **, size_t *))hooks[2];
    CHECK(buf_ret(&p6, &n6) == p2, "tools_hooks[2] also returns its buffer, as driver 580 does");
    CHECK(((uint64_t *)p2)[0] == 0 && ((uint64_t *)p6)[0] == 0, "tools_hooks buffers start zeroed");

    void *const *tls = table_of("42d85a8123f6cb478298f6e78a3aecdc");
    CUresult (*current)(CUcontext *) = (CUresult (*)(CUcontext *))tls[2];
    fake_current = (CUcontext)(uintptr_t)0x7000;
    ctx = NULL;
    CHECK(current(&ctx) == CUDA_SUCCESS && ctx == fake_current, "tools_tls[2] gives the thread's current context");
    CHECK(current(NULL) == CUDA_ERROR_INVALID_VALUE, "tools_tls[2] with NULL: CUDA_ERROR_INVALID_VALUE");

    void *const *tctx = table_of("21318c60971432488ca641ff7324c8f2");
    CUresult (*number)(CUcontext, uint64_t *) = (CUresult (*)(CUcontext, uint64_t *))tctx[4];
    uint64_t id1 = 0, id2 = 0;
    CHECK(number((CUcontext)(uintptr_t)0x7000, &id1) == CUDA_SUCCESS && id1 == 7 &&
              number((CUcontext)(uintptr_t)0x9000, &id2) == CUDA_SUCCESS && id2 == 9,
          "tools_ctx[4] gives each context's number (cuCtxGetId)");
    CHECK(number(NULL, &id1) == CUDA_SUCCESS && id1 == 7, "tools_ctx[4] of NULL: the current context's number");
    fake_current = NULL;
    CHECK(number(NULL, &id1) == CUDA_ERROR_INVALID_CONTEXT, "tools_ctx[4] passes the driver's error through");
    CHECK(number(ctx, NULL) == CUDA_ERROR_INVALID_VALUE, "tools_ctx[4] with NULL out: CUDA_ERROR_INVALID_VALUE");

    void *const *checks_t = table_of("263e88607cd2614392f6bbd5006dfa7e");
    uint32_t wrapped = 7;
    CUcontext inner = (CUcontext)(uintptr_t)0x99;
    CUresult (*is_wrapped)(CUcontext, uint32_t *, CUcontext *) =
        (CUresult (*)(CUcontext, uint32_t *, CUcontext *))checks_t[2];
    CHECK(is_wrapped((CUcontext)(uintptr_t)0x1234, &wrapped, &inner) == CUDA_SUCCESS && wrapped == 0,
          "ctx_checks[2]: no context is a wrapper");
    uint32_t (*mode)(void) = (uint32_t (*)(void))checks_t[3];
    CHECK(mode() == 0, "ctx_checks[3] returns 0");
}

/* --- context-local storage --- */

typedef CUresult (*cls_put_fn)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *));
typedef CUresult (*cls_delete_fn)(CUcontext, void *);
typedef CUresult (*cls_get_fn)(void **, CUcontext, void *);

static struct { CUcontext ctx; void *key, *value; } dtor_calls[8];
static int ndtor_calls;

static void record_dtor(CUcontext ctx, void *key, void *value)
{
    if (ndtor_calls < 8) {
        dtor_calls[ndtor_calls].ctx = ctx;
        dtor_calls[ndtor_calls].key = key;
        dtor_calls[ndtor_calls].value = value;
    }
    ndtor_calls++;
}

static cls_get_fn thread_get;
static void *thread_key;
static CUresult thread_rc;
static void *thread_value;

static void *other_thread(void *ctx)
{
    thread_rc = thread_get(&thread_value, (CUcontext)ctx, thread_key);
    return NULL;
}

static void test_cls(void)
{
    void *const *t = table_of("c693336e1121df11a8c368f355d89593");
    cls_put_fn put = (cls_put_fn)t[0];
    cls_delete_fn del = (cls_delete_fn)t[1];
    cls_get_fn get = (cls_get_fn)t[2];

    CUcontext a = (CUcontext)(uintptr_t)0xa000, b = (CUcontext)(uintptr_t)0xb000;
    int key1, key2;
    void *v = NULL;

    CHECK(get(&v, a, &key1) != CUDA_SUCCESS, "cls get of a missing key fails");
    CHECK(put(a, &key1, (void *)11, record_dtor) == CUDA_SUCCESS, "cls put (a, key1) = 11");
    CHECK(get(&v, a, &key1) == CUDA_SUCCESS && v == (void *)11, "cls get (a, key1) -> 11");
    CHECK(get(&v, a, &key1) == CUDA_SUCCESS && v == (void *)11, "cls get (a, key1) again (cached) -> 11");
    CHECK(get(&v, b, &key1) != CUDA_SUCCESS, "cls keys are per context: (b, key1) is missing");
    CHECK(get(&v, a, &key2) != CUDA_SUCCESS, "cls (a, key2) is missing");
    CHECK(get(NULL, a, &key1) == CUDA_ERROR_INVALID_VALUE, "cls get with NULL out: CUDA_ERROR_INVALID_VALUE");

    CHECK(put(a, &key1, (void *)12, record_dtor) == CUDA_ERROR_INVALID_HANDLE,
          "cls put of an existing key: CUDA_ERROR_INVALID_HANDLE, as driver 580");
    CHECK(get(&v, a, &key1) == CUDA_SUCCESS && v == (void *)11, "cls (a, key1) keeps 11");
    CHECK(del(a, &key1) == CUDA_SUCCESS && put(a, &key1, (void *)12, record_dtor) == CUDA_SUCCESS,
          "cls delete then put (a, key1) = 12");
    CHECK(get(&v, a, &key1) == CUDA_SUCCESS && v == (void *)12, "cls get after re-put -> 12 (cache invalidated)");

    fake_current = NULL;
    CHECK(get(&v, NULL, &key1) == CUDA_ERROR_INVALID_CONTEXT, "cls NULL context with none current: CUDA_ERROR_INVALID_CONTEXT");
    fake_current = a;
    CHECK(get(&v, NULL, &key1) == CUDA_SUCCESS && v == (void *)12, "cls NULL context means the current one");
    CHECK(put(NULL, &key2, (void *)21, NULL) == CUDA_SUCCESS, "cls put (current, key2) = 21");
    CHECK(get(&v, a, &key2) == CUDA_SUCCESS && v == (void *)21, "cls get (a, key2) -> 21");
    CHECK(put(b, &key1, (void *)31, record_dtor) == CUDA_SUCCESS, "cls put (b, key1) = 31");

    thread_get = get;
    thread_key = &key1;
    pthread_t th;
    pthread_create(&th, NULL, other_thread, b);
    pthread_join(th, NULL);
    CHECK(thread_rc == CUDA_SUCCESS && thread_value == (void *)31, "cls get from another thread -> 31");

    CHECK(del(a, &key2) == CUDA_SUCCESS, "cls delete (a, key2)");
    CHECK(get(&v, a, &key2) != CUDA_SUCCESS, "cls (a, key2) is gone");
    CHECK(del(a, &key2) != CUDA_SUCCESS, "cls delete of a missing key fails");
    CHECK(ndtor_calls == 0, "cls delete runs no destructor");

    CHECK(get(&v, a, &key1) == CUDA_SUCCESS && v == (void *)12, "cls (a, key1) still 12 before destroy");
    scuda_export_tables_context_destroyed(a);
    CHECK(ndtor_calls == 1 && dtor_calls[0].ctx == a && dtor_calls[0].key == &key1 &&
              dtor_calls[0].value == (void *)12,
          "destroying context a runs its destructor once with (a, key1, 12)");
    CHECK(get(&v, a, &key1) != CUDA_SUCCESS, "cls (a, key1) is gone after destroy (cache invalidated)");
    CHECK(get(&v, b, &key1) == CUDA_SUCCESS && v == (void *)31, "cls (b, key1) survives a's destroy");
    scuda_export_tables_context_destroyed(a);
    CHECK(ndtor_calls == 1, "destroying a again runs nothing");
    scuda_export_tables_context_destroyed(b);
    CHECK(ndtor_calls == 2 && dtor_calls[1].ctx == b && dtor_calls[1].value == (void *)31,
          "destroying context b runs its destructor");
    fake_current = NULL;
}

/* --- tools_ctx[51] and [39]: a stream's object and its number --- */

typedef CUresult (*stream_object_fn)(CUcontext, CUstream, void **, unsigned);
typedef CUresult (*stream_number_fn)(CUcontext, const void *, uint64_t *);

static stream_object_fn t51;
static stream_number_fn t39;
static CUcontext thread_ctx;
static void *thread_object;
static uint64_t thread_number;

static void *per_thread_in_other_thread(void *arg)
{
    (void)arg;
    fake_current = thread_ctx;
    if (t51(thread_ctx, CU_STREAM_PER_THREAD, &thread_object, 0) != CUDA_SUCCESS) thread_object = NULL;
    if (thread_object == NULL || t39(NULL, thread_object, &thread_number) != CUDA_SUCCESS) thread_number = 0;
    return NULL;
}

static uint64_t number_of(const void *object)
{
    uint64_t n = 0;
    return t39(NULL, object, &n) == CUDA_SUCCESS ? n : 0;
}

static void test_stream_objects(void)
{
    void *const *t = table_of("21318c60971432488ca641ff7324c8f2");
    t51 = (stream_object_fn)t[51];
    t39 = (stream_number_fn)t[39];
    CUcontext a = (CUcontext)(uintptr_t)0xc100, b = (CUcontext)(uintptr_t)0xc200;
    CUstream s1 = (CUstream)(uintptr_t)0x9100, s2 = (CUstream)(uintptr_t)0x9200;
    void *legacy = NULL, *o = NULL;
    uint64_t n = 0;

    fake_current = a;
    CHECK(t51(a, NULL, &legacy, 0) == CUDA_SUCCESS && legacy != NULL, "tools_ctx[51](ctx, NULL): an object");
    CHECK(t39(a, legacy, &n) == CUDA_SUCCESS && n == 1000 + 0xc1,
          "tools_ctx[39]: its number is the legacy stream's (%llu)", (unsigned long long)n);
    CHECK(t51(a, CU_STREAM_LEGACY, &o, 0) == CUDA_SUCCESS && o == legacy,
          "tools_ctx[51]: CU_STREAM_LEGACY gets the same object as NULL, as in driver 580");
    CHECK(t51(a, NULL, &o, 0) == CUDA_SUCCESS && o == legacy, "tools_ctx[51]: the same stream, the same object");

    void *ptds = NULL;
    CHECK(t51(a, CU_STREAM_PER_THREAD, &ptds, 0) == CUDA_SUCCESS && ptds != legacy &&
              number_of(ptds) >= 2000 + 0xc1,
          "tools_ctx[51](CU_STREAM_PER_THREAD): the thread's per-thread stream (%llu)",
          (unsigned long long)number_of(ptds));
    CHECK(t51(a, NULL, &o, 1) == CUDA_SUCCESS && o == ptds,
          "tools_ctx[51](NULL, flags 1): the per-thread stream, as in driver 580");
    CHECK(t51(a, CU_STREAM_LEGACY, &o, 1) == CUDA_SUCCESS && o == legacy,
          "tools_ctx[51](CU_STREAM_LEGACY, flags 1): still the legacy stream");

    void *o1 = NULL, *o2 = NULL;
    CHECK(t51(a, s1, &o1, 0) == CUDA_SUCCESS && number_of(o1) == 0x91, "tools_ctx[51]: an ordinary stream's object");
    CHECK(t51(NULL, s1, &o, 0) == CUDA_SUCCESS && o == o1,
          "tools_ctx[51]: an ordinary stream needs no context, and gets the same object");
    CHECK(t51(a, s2, &o2, 0) == CUDA_SUCCESS && o2 != o1 && number_of(o2) == 0x92,
          "tools_ctx[51]: another stream, another object");

    o = (void *)0x77;
    CHECK(t51(NULL, NULL, &o, 0) == CUDA_ERROR_INVALID_HANDLE && o == (void *)0x77,
          "tools_ctx[51](NULL ctx, NULL stream): CUDA_ERROR_INVALID_HANDLE, output untouched, as in driver 580");
    CHECK(t51(NULL, CU_STREAM_PER_THREAD, &o, 0) == CUDA_ERROR_INVALID_HANDLE && o == (void *)0x77,
          "tools_ctx[51](NULL ctx, CU_STREAM_PER_THREAD): CUDA_ERROR_INVALID_HANDLE");
    CHECK(t51(a, (CUstream)(uintptr_t)0xdead0, &o, 0) == CUDA_ERROR_INVALID_HANDLE && o == (void *)0x77,
          "tools_ctx[51]: a bad stream fails with cuStreamGetId's error");
    CHECK(t51(a, NULL, NULL, 0) == CUDA_ERROR_INVALID_VALUE, "tools_ctx[51] with NULL out: CUDA_ERROR_INVALID_VALUE");

    /* The special handles mean the named context's streams, current or not. */
    int pushes = fake_pushes;
    void *legacy_b = NULL;
    CHECK(t51(b, NULL, &legacy_b, 0) == CUDA_SUCCESS && legacy_b != legacy && number_of(legacy_b) == 1000 + 0xc2 &&
              fake_current == a && fake_npushed == 0 && fake_pushes == pushes + 1,
          "tools_ctx[51](other ctx, NULL): that context's legacy stream, asked with it pushed and popped");
    CHECK(t51(a, NULL, &o, 0) == CUDA_SUCCESS && o == legacy && fake_pushes == pushes + 1,
          "tools_ctx[51](current ctx, NULL): nothing pushed");
    fake_current = NULL;
    CHECK(t51(a, NULL, &o, 0) == CUDA_SUCCESS && o == legacy && fake_current == NULL,
          "tools_ctx[51] with no current context: the named context's stream");
    fake_current = a;

    int calls = fake_stream_id_calls;
    CHECK(number_of(o1) == 0x91 && number_of(legacy) == 1000 + 0xc1 && fake_stream_id_calls == calls,
          "tools_ctx[39] reads the object: no driver call");
    CHECK(t39(a, legacy, NULL) == CUDA_ERROR_INVALID_VALUE, "tools_ctx[39] with NULL out: CUDA_ERROR_INVALID_VALUE");
    n = 5;
    CHECK(t39(a, NULL, &n) == CUDA_ERROR_INVALID_VALUE && n == 5,
          "tools_ctx[39] with NULL object: CUDA_ERROR_INVALID_VALUE, as in driver 580");
    int not_ours;
    CHECK(t39(a, &not_ours, &n) == CUDA_ERROR_INVALID_HANDLE && n == 5,
          "tools_ctx[39] refuses an object that is not one of ours");

    thread_ctx = a;
    pthread_t th;
    pthread_create(&th, NULL, per_thread_in_other_thread, NULL);
    pthread_join(th, NULL);
    CHECK(thread_object != NULL && thread_object != ptds && thread_number != number_of(ptds) &&
              thread_number >= 2000 + 0xc1,
          "tools_ctx[51](CU_STREAM_PER_THREAD) in another thread: that thread's stream (%llu)",
          (unsigned long long)thread_number);

    scuda_export_tables_context_destroyed(a);
    CHECK(t39(NULL, legacy, &n) == CUDA_ERROR_INVALID_HANDLE, "destroying a context drops its objects");
    CHECK(number_of(legacy_b) == 1000 + 0xc2, "another context's objects survive");
    CHECK(t51(a, NULL, &o, 0) == CUDA_SUCCESS && number_of(o) == 1000 + 0xc1, "asking again makes a new object");
    scuda_export_tables_context_destroyed(a);
    scuda_export_tables_context_destroyed(b);
    fake_current = NULL;
}

/* --- tools_module[7]: a callback per function of a module --- */

typedef void (*function_cb)(void *user, CUfunction fn, const char *name);
typedef unsigned (*each_function_fn)(CUcontext, CUmodule, function_cb, void *);

struct seen_functions {
    int n;
    CUfunction fn[8];
    const char *name[8];
};

static void record_function(void *user, CUfunction fn, const char *name)
{
    struct seen_functions *seen = user;
    if (seen->n < 8) {
        seen->fn[seen->n] = fn;
        seen->name[seen->n] = name;
    }
    seen->n++;
}

static void test_each_function(void)
{
    void *const *t = table_of("6e163fbeb958444d835ce182aff1991e");
    each_function_fn each = (each_function_fn)t[7];
    CUcontext ctx = (CUcontext)(uintptr_t)0xc300;
    struct seen_functions seen = {0};

    CHECK(each(ctx, FAKE_MODULE, record_function, &seen) == 3 && seen.n == 3,
          "tools_module[7]: three functions, three callbacks, returns 3 (%d callbacks)", seen.n);
    int in_order = seen.n == 3;
    for (int i = 0; i < 3 && in_order; i++) {
        const char *name = NULL;
        cuFuncGetName(&name, fake_fn(i));
        in_order = seen.fn[i] == fake_fn(i) && seen.name[i] == name;
    }
    CHECK(in_order, "tools_module[7]: (user, function, cuFuncGetName's name), in cuModuleEnumerateFunctions' order");

    memset(&seen, 0, sizeof seen);
    CHECK(each(NULL, FAKE_MODULE, record_function, &seen) == 3 && seen.n == 3,
          "tools_module[7] with a NULL context: the same, as in driver 580");
    CHECK(each(ctx, FAKE_MODULE, NULL, NULL) == 3, "tools_module[7] with no callback: still counts");

    memset(&seen, 0, sizeof seen);
    CHECK(each(ctx, FAKE_EMPTY_MODULE, record_function, &seen) == 0 && seen.n == 0,
          "tools_module[7] on a module without functions: 0, no callback");
    CHECK(each(ctx, (CUmodule)(uintptr_t)0x7700, record_function, &seen) == 0 && seen.n == 0,
          "tools_module[7] on an unknown module: 0, no callback (driver 580: the same for an unloaded one)");
}

/* --- error_log[1]: a library's message --- */

typedef CUresult (*log_message_fn)(const char *domain, int level, const char *format, va_list args);

static CUresult call_log(log_message_fn fn, const char *domain, int level, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    CUresult rc = fn(domain, level, format, ap);
    va_end(ap);
    return rc;
}

static void test_error_log(void)
{
    void *const *t = table_of("f8cff95121468b4eb9e2fb469e7c0dd9");
    log_message_fn log_message = (log_message_fn)t[1];
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(0, "pipe");
        return;
    }
    scuda_log_set_fd(fds[1]);
    CUresult r0 = call_log(log_message, "cuDNN", 0, "launch failed: %s (%d)", "bad", 77);
    CUresult r1 = call_log(log_message, "cuDNN", 2, "retrying %d", 3);
    CUresult r2 = call_log(log_message, NULL, 1, NULL);
    scuda_log_set_fd(2);
    close(fds[1]);
    char buf[2048];
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    buf[got > 0 ? got : 0] = '\0';

    CHECK(r0 == CUDA_SUCCESS && r1 == CUDA_SUCCESS, "error_log[1] returns 0, as in driver 580");
    /* The driver only files these in its log; at SCUDA's default level
     * (warn) nothing reaches stderr either (SCUDA_LOG=info shows them). */
    if (!scuda_log_enabled(SCUDA_LOG_INFO))
        CHECK(buf[0] == '\0', "error_log[1] prints nothing at the default level, as the driver: %s", buf);
    else
        CHECK(strstr(buf, "info: [cuDNN] error: launch failed: bad (77)\n") != NULL &&
                  strstr(buf, "info: [cuDNN] warning: retrying 3\n") != NULL,
              "error_log[1] at info level: the formatted messages");
    CHECK(r2 == CUDA_ERROR_INVALID_VALUE, "error_log[1] with no format: CUDA_ERROR_INVALID_VALUE");
}

/* --- integrity --- */

typedef CUresult (*integrity_fn)(uint32_t, uint64_t, uint64_t *);

static integrity_fn thread_integrity;
static uint64_t thread_result[2];
static uint32_t thread_id32;

static void *integrity_thread(void *arg)
{
    (void)arg;
    thread_id32 = (uint32_t)(uintptr_t)pthread_self();
    thread_integrity(13002, 0x682b9cee, thread_result);
    return NULL;
}

static void expected_integrity(uint32_t runtime, uint32_t thread, uint64_t seconds, uint64_t out[2])
{
    void *const *cudart = table_of("6bd5fb6c5bf4e74a8987d93912fd9df9");
    void *const *integ = table_of("d4082055bde6704b8d34ba123c66e1f2");
    struct ref_device devs[FAKE_NDEVS];
    for (int i = 0; i < FAKE_NDEVS; i++) {
        memcpy(devs[i].uuid, fake_devs[i].uuid, 16);
        devs[i].domain = fake_devs[i].domain;
        devs[i].bus = fake_devs[i].bus;
        devs[i].device = fake_devs[i].device;
    }
    ref_integrity(FAKE_DRIVER_VERSION, runtime, (uint32_t)getpid(), thread, (uintptr_t)cudart,
                  (uintptr_t)integ, (uintptr_t)integ[1], seconds, devs, FAKE_NDEVS, out);
}

static void test_md2_reference(void)
{
    static const struct { const char *msg, *digest; } rfc1319[] = {
        {"", "8350e5a3e24c153df2275c9f80692773"},
        {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
        {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
        {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
        {"abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"},
        {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
         "da33def2a42df13975352846c30338cd"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "d5976f79d83d3a0dc9806c3c66f3efd8"},
    };
    for (size_t i = 0; i < sizeof rfc1319 / sizeof rfc1319[0]; i++) {
        unsigned char d[16];
        char hex[33];
        ref_md2((const unsigned char *)rfc1319[i].msg, strlen(rfc1319[i].msg), d);
        hex16(d, hex);
        CHECK(strcmp(hex, rfc1319[i].digest) == 0, "reference MD2(\"%.20s\") = %s (RFC 1319)", rfc1319[i].msg, hex);
    }
}

/* Read from the real driver 580.159.04 on an H200 (probe in the GPU check of
 * docs/export-tables.md): its integrity slot's answers for these inputs. */
static void test_integrity_known_answers(void)
{
    static const struct ref_device dev = {
        {0xd5, 0x31, 0xa2, 0xd5, 0x0a, 0x41, 0xdd, 0x21, 0x3a, 0xe0, 0x17, 0x1a, 0xf5, 0x5a, 0xf3, 0x78}, 0, 0, 6};
    static const struct { uint32_t runtime; uint64_t want[2]; } kat[] = {
        {13002, {0x9eee5933c914343dULL, 0x4e46b8387cc0900cULL}},
        {12082, {0x1389f99a8b13f82dULL, 0x0186397d56ac5476ULL}},
        {13003, {0x72a4bc472754b71cULL, 0x731f33399ea276e1ULL}},
        {13009, {0xddac1a913f3ae7fcULL, 0xe358e8aeb6d22325ULL}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        uint64_t ref[2], ours[2];
        ref_integrity(13000, kat[i].runtime, 507, 0xafc76740u, 0x7fefb5814680ULL, 0x7fefb5814660ULL,
                      0x7fefb0173350ULL, 0x6b024e6d, &dev, 1, ref);
        struct scuda_integrity_input in = {13000, kat[i].runtime, 507, 0xafc76740u, (const void *)0x7fefb5814680ULL,
                                           (const void *)0x7fefb5814660ULL, (const void *)0x7fefb0173350ULL,
                                           0x6b024e6d};
        struct scuda_integrity_device d;
        memcpy(d.uuid, dev.uuid, 16);
        d.pci_domain = 0;
        d.pci_bus = 0;
        d.pci_device = 6;
        scuda_integrity_digest(&in, &d, 1, ours);
        CHECK(ref[0] == kat[i].want[0] && ref[1] == kat[i].want[1], "reference = real driver for version %u",
              kat[i].runtime);
        CHECK(ours[0] == kat[i].want[0] && ours[1] == kat[i].want[1], "scuda_integrity_digest = real driver for version %u",
              kat[i].runtime);
    }
}

static void test_integrity(void)
{
    void *const *integ = table_of("d4082055bde6704b8d34ba123c66e1f2");
    integrity_fn check = (integrity_fn)integ[1];
    uint64_t r[2], want[2];

    CHECK(check(13000, 1, r) == CUDA_SUCCESS && r[0] == 0x3341181C03CB675CULL && r[1] == 0x8ED383AA1F4CD1E8ULL,
          "integrity(13000): the constant answer for versions ending in 0");
    CHECK(check(13001, 1, r) == CUDA_SUCCESS && r[0] == 0x1841181C03CB675CULL && r[1] == 0x8ED383AA1F4CD1E8ULL,
          "integrity(13001): the constant answer for versions ending in 1");
    CHECK(check(13002, 1, NULL) == CUDA_ERROR_INVALID_VALUE, "integrity with NULL result: CUDA_ERROR_INVALID_VALUE");

    uint32_t self = (uint32_t)(uintptr_t)pthread_self();
    CHECK(check(13002, 0x682b9cee, r) == CUDA_SUCCESS, "integrity(13002) succeeds");
    expected_integrity(13002, self, 0x682b9cee, want);
    CHECK(r[0] == want[0] && r[1] == want[1], "integrity(13002) = %016llx %016llx, reference %016llx %016llx",
          (unsigned long long)r[0], (unsigned long long)r[1], (unsigned long long)want[0],
          (unsigned long long)want[1]);

    check(12082, 0x6a9c79c9, r);
    expected_integrity(12082, self, 0x6a9c79c9, want);
    CHECK(r[0] == want[0] && r[1] == want[1], "integrity(12082, other time) matches the reference");

    thread_integrity = check;
    pthread_t th;
    pthread_create(&th, NULL, integrity_thread, NULL);
    pthread_join(th, NULL);
    expected_integrity(13002, thread_id32, 0x682b9cee, want);
    CHECK(thread_result[0] == want[0] && thread_result[1] == want[1],
          "integrity from another thread hashes that thread's id");
}

int main(void)
{
    test_lookup();
    test_stubs();
    test_compile_cache();
    test_simple_slots();
    test_cls();
    test_stream_objects();
    test_each_function();
    test_error_log();
    test_md2_reference();
    test_integrity_known_answers();
    test_integrity();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
