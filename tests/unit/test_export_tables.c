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
 * from the real driver 580 on an H100 (see docs/export-tables.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "client/export_tables.h"

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
    {"unknown_f8cf", "f8cff95121468b4eb9e2fb469e7c0dd9", 3, 1, 0},
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
        {1, 1}, {1, 6}, {1, 8}, {3, 1}, {7, 3}, {7, 39}, {7, 51}, {8, 7},
        {9, 19}, {9, 21}, {9, 24}, {9, 25}, {10, 4}, {10, 13}, {11, 1}, {11, 6}, {2, 1},
    };
    for (size_t i = 0; i < sizeof unimplemented / sizeof unimplemented[0]; i++) {
        int ti = unimplemented[i].table, s = unimplemented[i].slot;
        void *const *t = table_of(known[ti].uuid);
        any_slot_fn fn = (any_slot_fn)t[s];
        CHECK(fn() == CUDA_ERROR_NOT_SUPPORTED, "%s[%d] returns CUDA_ERROR_NOT_SUPPORTED", known[ti].name, s);
        CHECK(fn() == CUDA_ERROR_NOT_SUPPORTED, "%s[%d] again (logged once)", known[ti].name, s);
    }
    void *const *t = table_of(known[7].uuid);
    CHECK(t[3] != t[39] && t[39] != t[51], "each unimplemented slot has its own function");
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
    test_simple_slots();
    test_cls();
    test_md2_reference();
    test_integrity_known_answers();
    test_integrity();
    printf("%d checks, %d failed\n", checks, failures);
    return failures != 0;
}
