/* module_roundtrips.c - module loads, unloads and function attributes
 * without round trips (docs/architecture.md, 3.8.1).
 *
 *   repeat   through the shim, with SCUDA_STATS=1: the same PTX image
 *            loaded LOADS times as a module and twice as a library is
 *            hashed once per kind of load and asked for with a round
 *            trip once per kind: every later load is one-way, as is every
 *            unload; a kernel launched from each one-way-loaded module
 *            writes exactly what it should (its parameter layout known
 *            from the first module's launch), and its global is its own
 *            (initialized, whatever the last module wrote to its own);
 *            the fixed attributes of each
 *            function come from one round trip (and have the stand-in's
 *            values), later queries from the client; so do the
 *            settable ones until a cuFuncSetAttribute, which they follow.
 *   misses   30 PTX images new to the server (the same kernels, each
 *            with a comment of its own): the first 8 ask by digest, miss,
 *            then send their bytes; after that streak the others send
 *            their bytes at once, but for one in 16, which still asks;
 *            every module works.
 *   digest   a raw session's one-way load of a digest it never loaded is
 *            reported by the next observing call (INVALID_IMAGE), the
 *            module does not exist, and the session carries on; so is one
 *            of an impossible length.
 *   users    on a server with named tokens: alice's one-way load of her
 *            own image works, in her session and in a new one; bob's
 *            one-way load of alice's image is an error, as for an image
 *            nobody loaded. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/messages.gen.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "harness.h"

#define LOADS 8
#define ALICE "alice-t0ken-5c2e"
#define BOB "bob-t0ken-91d4"

/* ---- repeat: through the shim -------------------------------------------- */

/* fill_u32 of module m writes `value` to 64 words, byte-exact. */
static void run_fill(CUmodule m, uint32_t value)
{
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CUdeviceptr d;
    uint64_t n = 64;
    uint32_t out[64], want[64];
    CU(cuMemAlloc_v2(&d, sizeof out));
    CU(cuMemsetD8_v2(d, 0, sizeof out));
    void *args[] = {&d, &value, &n};
    CU(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    for (int i = 0; i < 64; i++) want[i] = value;
    CHECK(h_diff(out, want, sizeof out) < 0, "fill from a one-way-loaded module: word 0 is %08x", out[0]);
    CU(cuMemFree_v2(d));
}

/* Every fixed attribute of f (0..7), twice; the stand-in's values. */
static void check_attributes(CUfunction f, int first[8])
{
    int v[8], again;
    for (int a = 0; a < 8; a++) CU(cuFuncGetAttribute(&v[a], (CUfunction_attribute)a, f));
    CHECK(v[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] == 1024 && v[CU_FUNC_ATTRIBUTE_PTX_VERSION] == 75 &&
              v[CU_FUNC_ATTRIBUTE_BINARY_VERSION] == 90,
          "fixed attributes: max threads %d, ptx %d, binary %d", v[0], v[5], v[6]);
    for (int a = 0; a < 8; a++) {
        CU(cuFuncGetAttribute(&again, (CUfunction_attribute)a, f));
        CHECK(again == v[a] && (first[0] < 0 || v[a] == first[a]), "attribute %d: %d, then %d (first load: %d)", a,
              v[a], again, first[a]);
    }
    if (first[0] < 0) memcpy(first, v, sizeof v);
}

static int repeat_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CHECK(len > 0);
    int first[8] = {-1};
    for (int i = 0; i < LOADS; i++) {
        CUmodule m;
        CU(cuModuleLoadData(&m, ptx));
        CUfunction f;
        CU(cuModuleGetFunction(&f, m, "fill_u32"));
        check_attributes(f, first);
        /* the settable ones, as cudaFuncGetAttributes asks: from the batch */
        for (int a = 8; a < 16; a++) {
            int v = -1;
            CU(cuFuncGetAttribute(&v, (CUfunction_attribute)a, f));
        }
        /* and one follows a set */
        int dyn = 0;
        CU(cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
        CHECK(dyn == 49152, "max dynamic shared %d", dyn);
        CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
        CU(cuFuncGetAttribute(&dyn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
        CHECK(dyn == 65536, "max dynamic shared after the set: %d", dyn);
        run_fill(m, 0x5ca1ab1eu + (uint32_t)i);
        /* a global of a one-way-loaded module: its own, initialized */
        CUdeviceptr g;
        size_t gsize = 0;
        uint32_t counter = 0;
        CU(cuModuleGetGlobal_v2(&g, &gsize, m, "g_counter"));
        CU(cuMemcpyDtoH_v2(&counter, g, sizeof counter));
        CHECK(gsize == 4 && counter == 42, "g_counter: %zu bytes, %u", gsize, counter);
        uint32_t mine = 1000u + (uint32_t)i;
        CU(cuMemcpyHtoD_v2(g, &mine, sizeof mine));
        CU(cuModuleUnload(m));
        CHECK(cuModuleGetFunction(&f, m, "fill_u32") == CUDA_ERROR_INVALID_HANDLE, "an unloaded module still works");
        CHECK(cuModuleUnload(m) == CUDA_ERROR_INVALID_HANDLE, "a module unloaded twice");
    }
    for (int i = 0; i < 2; i++) {
        CUlibrary lib;
        CUkernel k;
        int v = 0;
        CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
        CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
        CU(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k, 0));
        CHECK(v == 1024, "a kernel's max threads per block: %d", v);
        CU(cuKernelGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, k, 0));
        CU(cuLibraryUnload(lib));
    }
    CU(cuCtxSynchronize()); /* no one-way load or unload failed */
    free(ptx);
    return 0;
}

/* The figure of a "scuda stats: WHAT: N" line; 0 when there is none. */
static unsigned long long figure(const char *stats, const char *what)
{
    char needle[128];
    snprintf(needle, sizeof needle, "scuda stats: %s: ", what);
    const char *p = strstr(stats, needle);
    return p ? strtoull(p + strlen(needle), NULL, 10) : 0;
}

static void repeat(void)
{
    struct h_server srv;
    h_server_start(&srv, "repeat", NULL);
    char *stats = h_client_stats(repeat_client, NULL, 60, "module_roundtrips-stats");
    /* Once per kind of load: the module's first asks by digest, then
     * sends the bytes; the library's first asks by digest (found). */
    unsigned by_hash = h_stats_count(stats, "sync", "scuda_module_load_by_hash");
    unsigned sent = h_stats_count(stats, "sync", "scuda_module_load");
    unsigned one_way = h_stats_count(stats, "async", "scuda_module_load_known");
    /* A call that waited says how long, in all: the tool for finding the
     * round trips a workload should not pay. */
    const char *line = strstr(stats, "scuda_module_load_by_hash");
    const char *eol = line ? strchr(line, '\n') : NULL;
    const char *ms = line ? strstr(line, " ms waited") : NULL;
    CHECK(ms && (!eol || ms < eol), "the by-hash loads' line gives the time they waited\n%s", stats);
    CHECK(by_hash == 2 && sent == 1 && one_way == LOADS - 1 + 1,
          "loads: %u by digest, %u with bytes, %u one-way\n%s", by_hash, sent, one_way, stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_load_known") == 0, "a one-way load waited\n%s", stats);
    /* The first launch of the first module asks for fill_u32's parameter
     * layout; the image's later modules know it from the start. */
    CHECK(h_stats_count(stats, "sync", "scuda_param_info") == 1, "%u layouts asked for\n%s",
          h_stats_count(stats, "sync", "scuda_param_info"), stats);
    CHECK(figure(stats, "module loads sent one-way") == LOADS, "stats line for one-way loads\n%s", stats);
    /* The image is hashed once: every other load (the library's too: the
     * same bytes at the same address) finds its digest. */
    CHECK(figure(stats, "module image hashes skipped") == LOADS + 1, "hashes skipped\n%s", stats);
    CHECK(strstr(stats, "scuda stats: hashing module images: 1 times"), "the image was hashed more than once\n%s",
          stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_unload") == 0 &&
              h_stats_count(stats, "async", "scuda_module_unload") == LOADS + 2,
          "unloads: %u waited, %u one-way\n%s", h_stats_count(stats, "sync", "scuda_module_unload"),
          h_stats_count(stats, "async", "scuda_module_unload"), stats);
    /* Attributes: one batch per function (and per kernel and device),
     * the first of each; the same function of the image loaded again
     * finds its answers in the attribute cache (attr_store.h), a set on
     * an earlier load notwithstanding; the fixed ones never one by one; a
     * settable one alone only after a set (which clears the memo). */
    unsigned batches = h_stats_count(stats, "sync", "scuda_func_attributes");
    CHECK(batches == 2, "%u attribute batches\n%s", batches, stats);
    CHECK(figure(stats, "functions whose attributes came from the client's attribute cache") ==
              LOADS - 1 + 1,
          "attribute cache hits\n%s", stats);
    CHECK(h_stats_count(stats, "sync", "cuKernelGetAttribute") == 0, "a kernel's fixed attribute went alone\n%s", stats);
    CHECK(h_stats_count(stats, "sync", "cuFuncGetAttribute") == LOADS, "%u single attribute calls\n%s",
          h_stats_count(stats, "sync", "cuFuncGetAttribute"), stats);
    /* Per module: 16 fixed queries, 1 fetched; the 8 settable ones and max
     * dynamic shared before the set, from the batch; the launch's checks of
     * max threads per block and max dynamic shared (launch.c). Per
     * library: 2, 1 fetched. */
    CHECK(figure(stats, "function attributes answered here") == LOADS * (15 + 9 + 2) + 2, "attribute hits\n%s",
          stats);
    free(stats);
    h_server_stop(&srv);
    printf("ok %d loads of one image: one round trip per kind of load, one hash, one-way unloads, one attribute "
           "batch per function, and byte-exact launches\n",
           LOADS);
}

/* ---- misses: images new every time ------------------------------------------ */

#define NEW_IMAGES 30

static int misses_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CHECK(len > 0);
    for (int i = 0; i < NEW_IMAGES; i++) {
        char *mine = NULL;
        CHECK(asprintf(&mine, "%s\n// image %d of the misses test\n", ptx, i) > 0);
        CUmodule m;
        CU(cuModuleLoadData(&m, mine));
        run_fill(m, 0xabc00000u + (uint32_t)i);
        CU(cuModuleUnload(m));
        free(mine);
    }
    free(ptx);
    return 0;
}

static void misses(void)
{
    struct h_server srv;
    h_server_start(&srv, "misses", NULL);
    char *stats = h_client_stats(misses_client, NULL, 60, "module_roundtrips-misses");
    /* 8 ask and miss; of the 22 after the streak, the 16th asks. */
    unsigned by_hash = h_stats_count(stats, "sync", "scuda_module_load_by_hash");
    unsigned sent = h_stats_count(stats, "sync", "scuda_module_load");
    CHECK(by_hash == 9 && sent == NEW_IMAGES, "%d new images: %u asked by digest, %u sent\n%s", NEW_IMAGES, by_hash,
          sent, stats);
    free(stats);
    h_server_stop(&srv);
    printf("ok %d new images: 9 lookups by digest (8 misses, then 1 in 16), every image's bytes sent once\n",
           NEW_IMAGES);
}

/* ---- raw sessions: digests and users --------------------------------------- */

static uint32_t seq = 1u << 20; /* apart from the harness's h_raw_call */
static uint64_t next_id = 0x7700000;

static long call(int fd, uint16_t op, const wire_buf *b)
{
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, op, 0, s, H_RAW_CTX, b ? b->data : NULL, b ? (uint32_t)b->len : 0) == 0);
    return h_raw_call_reply(fd, s, 10000, NULL, NULL);
}

/* A one-way load of the image with this digest as module `id`. */
static void post_known(int fd, uint64_t id, const uint8_t digest[IMAGE_DIGEST_LEN], uint64_t len)
{
    struct msg_scuda_module_load_known_req m = {.head = {.id = id}, .image_len = len};
    memcpy(m.digest, digest, IMAGE_DIGEST_LEN);
    wire_buf b;
    wb_init(&b);
    msg_scuda_module_load_known_req_put(&b, &m);
    CHECK(h_raw_send(fd, OP_scuda_module_load_known, FRAME_ASYNC, seq++, H_RAW_CTX, b.data, (uint32_t)b.len) == 0);
    wb_free(&b);
}

/* An observing call: the first one-way error since the last one, or 0. */
static long ctx_sync(int fd)
{
    struct msg_scuda_ctx_synchronize_req m = {.ctx = H_RAW_CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_ctx_synchronize_req_put(&b, &m);
    long r = call(fd, OP_scuda_ctx_synchronize, &b);
    wb_free(&b);
    return r;
}

static long bind(int fd, uint64_t module, uint64_t id)
{
    return h_raw_bind(fd, H_RAW_CTX, OP_scuda_module_get_function, module, id, "fill_u32");
}

static char *ptx_image(size_t *len)
{
    char *ptx = h_read_file(h_ptx_path(), len);
    CHECK(*len > 0);
    *len = strlen(ptx) + 1; /* what the shim sends: the text and its NUL */
    return ptx;
}

static void digest(void)
{
    struct h_server srv;
    h_server_start(&srv, "digest", NULL);
    int fd = h_raw_session(srv.addr);
    uint8_t nobody[IMAGE_DIGEST_LEN];
    memset(nobody, 0xa5, sizeof nobody);
    uint64_t id = next_id += 16;
    post_known(fd, id, nobody, 4096);
    long r = ctx_sync(fd);
    CHECK(r == CUDA_ERROR_INVALID_IMAGE, "a one-way load of an unknown digest: next sync gave %ld", r);
    CHECK(bind(fd, id, next_id += 16) == CUDA_ERROR_INVALID_HANDLE, "the module of a failed one-way load exists");
    post_known(fd, next_id += 16, nobody, 0);
    CHECK(ctx_sync(fd) == CUDA_ERROR_INVALID_VALUE, "a one-way load of length 0 was not refused");
    post_known(fd, next_id += 16, nobody, (uint64_t)1 << 40);
    CHECK(ctx_sync(fd) == CUDA_ERROR_INVALID_VALUE, "a one-way load of 1 TiB was not refused");
    CHECK(ctx_sync(fd) == CUDA_SUCCESS, "the error was reported twice, or the session broke");
    close(fd);
    h_server_stop(&srv);
    printf("ok a one-way load of a digest the session does not hold is an error at the next sync\n");
}

static int session_as(const struct h_server *srv, const char *token)
{
    uint32_t status;
    int fd = h_raw_connect(srv->addr, token, &status);
    CHECK(fd >= 0, "handshake refused (status %u)", status);
    h_raw_retain_ctx(fd);
    return fd;
}

static void users(void)
{
    char tokens[1024];
    int tfd = h_temp_file("module_roundtrips-tokens", tokens, sizeof tokens);
    const char text[] = "alice " ALICE "\nbob " BOB "\n";
    CHECK(write(tfd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
    close(tfd);
    struct h_server srv;
    struct h_server_opts opt = {.token_file = tokens};
    h_server_start(&srv, "users", &opt);
    size_t len;
    char *img = ptx_image(&len);
    uint8_t key[AUTH_SHA256_LEN];
    auth_sha256_digest(img, len, key);

    int alice = session_as(&srv, ALICE);
    uint64_t first = next_id += 16, again = next_id += 16;
    CHECK(h_raw_load(alice, H_RAW_CTX, first, 0, img, len) == CUDA_SUCCESS);
    post_known(alice, again, key, len);
    CHECK(bind(alice, again, next_id += 16) == CUDA_SUCCESS, "alice's one-way-loaded module has no fill_u32");
    CHECK(ctx_sync(alice) == CUDA_SUCCESS, "alice's one-way load of her own image failed");

    int bob = session_as(&srv, BOB);
    uint64_t stolen = next_id += 16;
    post_known(bob, stolen, key, len);
    long r = ctx_sync(bob);
    CHECK(r == CUDA_ERROR_INVALID_IMAGE, "bob's one-way load of alice's image: next sync gave %ld", r);
    CHECK(bind(bob, stolen, next_id += 16) == CUDA_ERROR_INVALID_HANDLE, "bob got a module of alice's image");
    close(bob);

    int alice2 = session_as(&srv, ALICE); /* a new session keeps nothing: her cached image answers */
    uint64_t later = next_id += 16;
    post_known(alice2, later, key, len);
    CHECK(ctx_sync(alice2) == CUDA_SUCCESS, "alice's one-way load in a new session failed");
    CHECK(bind(alice2, later, next_id += 16) == CUDA_SUCCESS);
    close(alice2);
    close(alice);
    free(img);
    h_server_stop(&srv);
    unlink(tokens);
    printf("ok one-way loads answer only the user who loaded the image\n");
}

int main(void)
{
    h_begin("module_roundtrips", 120);
    repeat();
    misses();
    digest();
    users();
    printf("PASS module_roundtrips\n");
    return 0;
}
