/* module_cache.c - the server's module cache (docs/architecture.md, 3.8 Modules).
 *
 * Each session logs one summary line when it ends ("module cache:
 * hits_memory=.. hits_disk=.. misses=.. images_received=.. bytes_received=..
 * stored=.. evicted=.. corrupt=.."); images_received counts the loads whose
 * request carried the image, so it is the figure that shows bytes crossed.
 * Every client is a child process of its own (a new session).
 *
 *   warm      a second process loading the same image sends none of it
 *             (images_received=0, a disk hit), with other JIT options and
 *             as a library too, and its kernel runs.
 *   corrupt   a cache file with a flipped byte, and one cut short, are
 *             found out, deleted and stored again; the loads work.
 *   evict     with room for two images, a third evicts the least recently
 *             used one, where a hit counts as a use.
 *   race      six processes load five images at once into a cache with
 *             room for three: all loads work, every file left is whole
 *             and under its own digest, and the bound holds.
 *   large     an image over 1 MiB (the session receives it straight into
 *             staging memory) loads and runs, and the next process finds
 *             it on disk.
 *   poison    a raw client names digest H, then sends bytes B: the server
 *             files them under sha256(B), and H stays a miss.
 *   bounds    malformed by-hash requests get INVALID_VALUE.
 *   unusable  a cache directory that cannot be created: one warning that
 *             names it, and loads still work.
 *   vanished  the directory removed while the server runs: the session
 *             warns once, stores nothing more, and loads still work.
 *   off       --module-cache off: no directory, loads still work. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/ops.gen.h"
#include "common/protocol.h"
#include "common/wire.h"
#include "harness.h"

/* ---- images --------------------------------------------------------------- */

/* kernels.ptx behind a first line of its own: a distinct image (another
 * digest) of the same length for every variant below 10. */
static char *image_variant(int v)
{
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CHECK(len > 0, "cannot read %s", h_ptx_path());
    char *img = malloc(len + 32);
    CHECK(img != NULL);
    snprintf(img, len + 32, "// variant %d\n%s", v, ptx);
    free(ptx);
    return img;
}

/* The client hashes exactly what it sends: PTX text with its NUL. */
static size_t image_len(const char *img) { return strlen(img) + 1; }

static void key_file(const char *dir, const char *img, char *out, size_t outlen)
{
    uint8_t d[AUTH_SHA256_LEN];
    char hex[2 * AUTH_SHA256_LEN + 1];
    auth_sha256_digest(img, image_len(img), d);
    for (int i = 0; i < AUTH_SHA256_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    snprintf(out, outlen, "%s/%s", dir, hex);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int files_in(const char *dir)
{
    char cmd[700];
    /* images only: users' markers ("IMAGE.USER") are not images */
    snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | grep -v '[.]' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    CHECK(p && fscanf(p, "%d", &n) == 1);
    pclose(p);
    return n;
}

/* ---- clients ------------------------------------------------------------- */

static void run_fill(CUmodule m)
{
    CUfunction f;
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CUdeviceptr d;
    uint64_t n = 64;
    uint32_t value = 0x5ca1ab1e, out[64];
    CU(cuMemAlloc_v2(&d, sizeof out));
    void *args[] = {&d, &value, &n};
    CU(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    for (int i = 0; i < 64; i++) CHECK(out[i] == value, "word %d is %08x", i, out[i]);
    CU(cuMemFree_v2(d));
}

/* Loads each image of a list (NULL-terminated), runs the first's kernel. */
struct load_list {
    const char *img[8];
    unsigned pause_ms; /* between loads, so that file times differ */
};

static int load_all(void *arg)
{
    const struct load_list *l = arg;
    h_cuda_setup();
    for (int i = 0; l->img[i]; i++) {
        if (i && l->pause_ms) h_sleep_ms(l->pause_ms);
        CUmodule m;
        CU(cuModuleLoadData(&m, l->img[i]));
        if (i == 0) run_fill(m);
    }
    return 0;
}

/* The same image three ways: plain, with JIT options, as a library. */
static int load_three_ways(void *arg)
{
    const char *img = arg;
    h_cuda_setup();
    CUmodule m;
    CUjit_option opt[] = {CU_JIT_MAX_REGISTERS, CU_JIT_OPTIMIZATION_LEVEL};
    void *val[] = {(void *)(uintptr_t)32, (void *)(uintptr_t)1};
    CU(cuModuleLoadDataEx(&m, img, 2, opt, val));
    run_fill(m);
    CUlibrary lib;
    CUkernel k;
    CU(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    return 0;
}

static void client(int (*fn)(void *), void *arg, const char *what)
{
    h_wait_ok(h_spawn(fn, arg, 20, -1, -1), 20000, what);
}

/* ---- session summaries ------------------------------------------------- */

struct summary {
    unsigned long long hits_memory, hits_disk, misses, images_received, bytes_received, stored, evicted, corrupt;
};

static const char SUMMARY[] = "module cache: hits_memory=";

/* The n-th summary line of the log (1-based), waiting for it. */
static struct summary summary_of(const struct h_server *s, int n)
{
    uint64_t deadline = h_now_ms() + 10000;
    while (h_server_log_count(s, SUMMARY) < n) {
        CHECK(h_now_ms() < deadline, "no module cache summary for session %d", n);
        h_sleep_ms(10);
    }
    char *log = h_server_log(s);
    const char *p = log;
    for (int i = 0; i < n; i++) p = strstr(p, SUMMARY) + 1;
    struct summary m;
    CHECK(sscanf(p - 1,
                 "module cache: hits_memory=%llu hits_disk=%llu misses=%llu images_received=%llu "
                 "bytes_received=%llu stored=%llu evicted=%llu corrupt=%llu",
                 &m.hits_memory, &m.hits_disk, &m.misses, &m.images_received, &m.bytes_received, &m.stored,
                 &m.evicted, &m.corrupt) == 8,
          "cannot parse: %.200s", p - 1);
    free(log);
    return m;
}

/* ---- warm, corrupt -------------------------------------------------------- */

static void warm(const struct h_server *srv, const char *img)
{
    char file[1024];
    key_file(srv->cache_dir, img, file, sizeof file);
    struct load_list twice = {{img, img, NULL}, 0};
    client(load_all, &twice, "first process");
    struct summary a = summary_of(srv, 1);
    CHECK(a.misses == 1 && a.images_received == 1 && a.bytes_received == image_len(img) && a.stored == 1,
          "first process: misses=%llu received=%llu (%llu bytes) stored=%llu", a.misses, a.images_received,
          a.bytes_received, a.stored);
    CHECK(a.hits_memory == 1, "a second load in the same process is a memory hit (%llu)", a.hits_memory);
    CHECK(exists(file), "%s was not stored", file);
    struct stat st;
    CHECK(stat(srv->cache_dir, &st) == 0 && (st.st_mode & 0777) == 0700, "cache directory mode %o",
          st.st_mode & 0777);

    client(load_three_ways, (void *)img, "second process");
    struct summary b = summary_of(srv, 2);
    CHECK(b.images_received == 0 && b.bytes_received == 0,
          "a new process sent the image again: received=%llu (%llu bytes)", b.images_received, b.bytes_received);
    CHECK(b.hits_disk == 1 && b.hits_memory == 1 && b.misses == 0, "second process: disk %llu memory %llu miss %llu",
          b.hits_disk, b.hits_memory, b.misses);
}

/* Damage the stored file, load again in a new process: the damage is
 * found, the image received again and the file whole again. */
static void corrupt(const struct h_server *srv, const char *img, int session, int cut_short)
{
    char file[1024];
    key_file(srv->cache_dir, img, file, sizeof file);
    int fd = open(file, O_RDWR);
    CHECK(fd >= 0, "%s: %s", file, strerror(errno));
    if (cut_short) {
        CHECK(ftruncate(fd, 16 + 100) == 0);
    } else {
        char c;
        CHECK(pread(fd, &c, 1, 16 + 200) == 1);
        c ^= 0x20;
        CHECK(pwrite(fd, &c, 1, 16 + 200) == 1);
    }
    io_close(fd);
    int warned = h_server_log_count(srv, "was damaged");
    struct load_list once = {{img, NULL}, 0};
    client(load_all, &once, cut_short ? "load after a cut" : "load after a flipped byte");
    struct summary s = summary_of(srv, session);
    CHECK(s.corrupt == 1 && s.misses == 1 && s.images_received == 1 && s.stored == 1,
          "%s: corrupt=%llu misses=%llu received=%llu stored=%llu", cut_short ? "cut short" : "flipped byte",
          s.corrupt, s.misses, s.images_received, s.stored);
    CHECK(h_server_log_count(srv, "was damaged") == warned + 1, "no warning about the damaged file");
    size_t len;
    char *now = h_read_file(file, &len);
    CHECK(len == 16 + image_len(img) && memcmp(now + 16, img, image_len(img)) == 0, "the file was not stored again");
    free(now);
}

/* ---- evict ---------------------------------------------------------------- */

static void evict(void)
{
    char *v1 = image_variant(1), *v2 = image_variant(2), *v3 = image_variant(3);
    char size[32];
    /* Room for two files (header + image), not three. */
    snprintf(size, sizeof size, "%zu", (16 + image_len(v1)) * 5 / 2);
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--module-cache-size", size}};
    h_server_start(&srv, "evict", &opt);
    char f1[1024], f2[1024], f3[1024];
    key_file(srv.cache_dir, v1, f1, sizeof f1);
    key_file(srv.cache_dir, v2, f2, sizeof f2);
    key_file(srv.cache_dir, v3, f3, sizeof f3);

    /* v1, v2 stored; v1 used again (a memory hit, which touches its file);
     * then v3 must push out v2, the least recently used. */
    struct load_list l = {{v1, v2, v1, v3, NULL}, 30};
    client(load_all, &l, "evicting process");
    struct summary s = summary_of(&srv, 1);
    CHECK(s.stored == 3 && s.evicted == 1, "stored=%llu evicted=%llu", s.stored, s.evicted);
    CHECK(exists(f1) && !exists(f2) && exists(f3), "expected v1 and v3 kept, v2 evicted (%d %d %d)", exists(f1),
          exists(f2), exists(f3));
    CHECK(files_in(srv.cache_dir) == 2, "%d files in the cache", files_in(srv.cache_dir));

    /* An evicted image is simply a miss. */
    struct load_list again = {{v2, NULL}, 0};
    client(load_all, &again, "load of an evicted image");
    s = summary_of(&srv, 2);
    CHECK(s.misses == 1 && s.images_received == 1, "evicted image: misses=%llu received=%llu", s.misses,
          s.images_received);
    h_server_stop(&srv);
    free(v1);
    free(v2);
    free(v3);
}

/* ---- race ------------------------------------------------------------------ */

/* Every file in dir is a whole image under its own digest; returns their
 * total size. No temporary file is left behind. */
static uint64_t check_files(const char *dir)
{
    char cmd[700], name[256];
    snprintf(cmd, sizeof cmd, "ls -A '%s'", dir);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    uint64_t total = 0;
    while (fgets(name, sizeof name, p)) {
        name[strcspn(name, "\n")] = '\0';
        CHECK(strncmp(name, ".tmp-", 5) != 0, "temporary file %s left behind", name);
        if (strchr(name, '.')) {
            /* a user's marker: empty, named after an image that is there (or
             * one the next eviction deletes) */
            CHECK(strlen(name) == 64 + 1 + 16, "%s: not a marker's name", name);
            continue;
        }
        char path[1024], hex[2 * AUTH_SHA256_LEN + 1];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t len;
        char *f = h_read_file(path, &len);
        uint64_t n;
        CHECK(len >= 16 && memcmp(f, "SCUDAMI1", 8) == 0, "%s: no header", name);
        memcpy(&n, f + 8, 8);
        CHECK(n + 16 == len, "%s: %zu bytes, header says %llu", name, len, (unsigned long long)n);
        uint8_t d[AUTH_SHA256_LEN];
        auth_sha256_digest(f + 16, n, d);
        for (int i = 0; i < AUTH_SHA256_LEN; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
        CHECK(strcmp(hex, name) == 0, "%s holds an image with digest %s", name, hex);
        total += len;
        free(f);
    }
    pclose(p);
    return total;
}

/* Sessions storing, reading and evicting the same files at once. */
static void race(void)
{
    enum { IMAGES = 5, CLIENTS = 6 };
    char *v[IMAGES];
    for (int i = 0; i < IMAGES; i++) v[i] = image_variant(i + 1);
    uint64_t limit = (16 + image_len(v[0])) * 3;
    char size[32];
    snprintf(size, sizeof size, "%llu", (unsigned long long)limit);
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--module-cache-size", size}};
    h_server_start(&srv, "race", &opt);
    static struct load_list lists[CLIENTS];
    pid_t pid[CLIENTS];
    for (int c = 0; c < CLIENTS; c++) {
        for (int i = 0; i < IMAGES; i++) lists[c].img[i] = v[(c + i) % IMAGES];
        lists[c].img[IMAGES] = NULL;
    }
    for (int c = 0; c < CLIENTS; c++) pid[c] = h_spawn(load_all, &lists[c], 30, -1, -1);
    for (int c = 0; c < CLIENTS; c++) h_wait_ok(pid[c], 30000, "racing client");
    uint64_t total = check_files(srv.cache_dir);
    CHECK(total <= limit, "the cache holds %llu bytes, limit %llu", (unsigned long long)total,
          (unsigned long long)limit);
    CHECK(h_server_log_count(&srv, "was damaged") == 0, "a racing session saw a damaged file");
    h_server_stop(&srv);
    for (int i = 0; i < IMAGES; i++) free(v[i]);
}

/* ---- large ------------------------------------------------------------------ */

/* A variant behind a 3 MiB comment line: over the 1 MiB from which a
 * session receives a load's bytes into staging memory, under its 8 MiB. */
static char *image_large(void)
{
    char *ptx = image_variant(9);
    size_t len = strlen(ptx) + 1, pad = 3u << 20;
    char *img = malloc(pad + len);
    CHECK(img != NULL);
    memcpy(img, "// ", 3);
    memset(img + 3, 'x', pad - 4);
    img[pad - 1] = '\n';
    memcpy(img + pad, ptx, len);
    free(ptx);
    return img;
}

static void large(const struct h_server *srv, int session)
{
    char *img = image_large();
    struct load_list once = {{img, NULL}, 0};
    client(load_all, &once, "large image");
    struct summary a = summary_of(srv, session);
    CHECK(a.images_received == 1 && a.bytes_received == image_len(img) && a.stored == 1,
          "large image: received=%llu (%llu bytes) stored=%llu", a.images_received, a.bytes_received, a.stored);
    client(load_all, &once, "large image again");
    struct summary b = summary_of(srv, session + 1);
    CHECK(b.images_received == 0 && b.hits_disk == 1, "large image again: received=%llu disk hits=%llu",
          b.images_received, b.hits_disk);
    free(img);
}

/* ---- poison, bounds (raw protocol) -------------------------------------- */

static const uint32_t CTX = 0x200;
static uint32_t seq = 1;

static long raw_call(int fd, uint16_t op, const wire_buf *b, uint8_t **out, size_t *out_len)
{
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, op, 0, s, CTX, b->data, (uint32_t)b->len) == 0, "send: %s", strerror(errno));
    long r = h_raw_call_reply(fd, s, 15000, out, out_len);
    CHECK(r >= 0, "no reply");
    return r;
}

static int raw_session(const struct h_server *srv)
{
    uint32_t status;
    int fd = h_raw_connect(srv->addr, NULL, &status);
    CHECK(fd >= 0, "handshake failed (status %u)", status);
    struct msg_scuda_primary_ctx_retain_req m = {.dev = 0, .ctx = CTX};
    wire_buf b;
    wb_init(&b);
    msg_scuda_primary_ctx_retain_req_put(&b, &m);
    uint32_t s = seq++;
    CHECK(h_raw_send(fd, OP_scuda_primary_ctx_retain, 0, s, 0, b.data, (uint32_t)b.len) == 0);
    CHECK(h_raw_call_reply(fd, s, 15000, NULL, NULL) == CUDA_SUCCESS);
    wb_free(&b);
    return fd;
}

static uint64_t next_id = 0x7770000;

/* A by-hash load of (key, len): 1 found, 0 the session wants the bytes. */
static int by_hash(int fd, const uint8_t key[AUTH_SHA256_LEN], uint64_t len)
{
    int found = -1;
    long r = h_raw_load_by_hash(fd, CTX, next_id += 16, 0, key, len, &found);
    CHECK(r == CUDA_SUCCESS && found >= 0, "by-hash load: result %ld, found %d", r, found);
    return found;
}

static void poison(const struct h_server *srv)
{
    char *a = image_variant(7), *b = image_variant(8);
    uint8_t ka[AUTH_SHA256_LEN], kb[AUTH_SHA256_LEN];
    auth_sha256_digest(a, image_len(a), ka);
    auth_sha256_digest(b, image_len(b), kb);
    char fa[1024], fb[1024];
    key_file(srv->cache_dir, a, fa, sizeof fa);
    key_file(srv->cache_dir, b, fb, sizeof fb);

    int fd = raw_session(srv);
    CHECK(by_hash(fd, ka, image_len(a)) == 0, "digest of an image never sent was found");
    /* Answer the miss with other bytes: B claimed as A. */
    CHECK(h_raw_load(fd, CTX, next_id += 16, 0, b, image_len(b)) == CUDA_SUCCESS);
    CHECK(!exists(fa), "bytes of B were filed under A's digest");
    CHECK(exists(fb), "B was not filed under its own digest");
    CHECK(by_hash(fd, ka, image_len(a)) == 0, "A's digest finds B's bytes in the same session");
    CHECK(by_hash(fd, kb, image_len(b)) == 1, "B's own digest does not find it");
    io_close(fd);

    fd = raw_session(srv);
    CHECK(by_hash(fd, ka, image_len(a)) == 0, "A's digest finds B's bytes in a new session");
    CHECK(by_hash(fd, kb, image_len(b) + 1) == 0, "B's digest with another length was found");
    io_close(fd);

    /* A real client loading A now sends it, and runs A. */
    struct load_list l = {{a, NULL}, 0};
    client(load_all, &l, "load of the image named by the liar");
    free(a);
    free(b);
}

static void bounds(const struct h_server *srv)
{
    int fd = raw_session(srv);
    uint8_t key[AUTH_SHA256_LEN] = {1, 2, 3};
    struct {
        const char *what;
        uint64_t len;
        size_t cut;  /* bytes cut off the end */
        int trailing;
    } cases[] = {
        {"a short digest", 100, 12, 0},
        {"no length", 100, 8, 0},
        {"length 0", 0, 0, 0},
        {"length over the frame limit", (uint64_t)SCUDA_MAX_FRAME + 1, 0, 0},
        {"trailing bytes", 100, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct msg_scuda_module_load_by_hash_req m = {.head = {.id = next_id += 16}, .image_len = cases[i].len};
        memcpy(m.digest, key, sizeof m.digest);
        wire_buf b;
        wb_init(&b);
        msg_scuda_module_load_by_hash_req_put(&b, &m);
        b.len -= cases[i].cut;
        if (cases[i].trailing) wb_put_u8(&b, 9);
        long r = raw_call(fd, OP_scuda_module_load_by_hash, &b, NULL, NULL);
        CHECK(r == CUDA_ERROR_INVALID_VALUE, "%s: result %ld", cases[i].what, r);
        wb_free(&b);
    }
    CHECK(by_hash(fd, key, 100) == 0, "the session no longer answers well-formed requests");
    io_close(fd);
}

/* ---- another user's image ------------------------------------------------ */

/* An image in the store that this server's user ("anonymous") never loaded
 * (another user of a server with named tokens, or a store shared with
 * another server) is "not cached" to this user: the client sends it, and
 * from then on it is this user's hit too. */
static void other_users(const struct h_server *srv)
{
    char *img = image_variant(9);
    uint8_t key[AUTH_SHA256_LEN];
    auth_sha256_digest(img, image_len(img), key);
    char path[1024];
    key_file(srv->cache_dir, img, path, sizeof path);
    FILE *f = fopen(path, "wb");
    uint64_t len = image_len(img);
    CHECK(f && fwrite("SCUDAMI1", 1, 8, f) == 8 && fwrite(&len, 8, 1, f) == 1 && fwrite(img, 1, len, f) == len);
    fclose(f);
    int fd = raw_session(srv);
    CHECK(by_hash(fd, key, len) == 0, "an image only another user loaded was reported cached");
    CHECK(h_raw_load(fd, CTX, next_id += 16, 0, img, len) == CUDA_SUCCESS);
    close(fd);
    fd = raw_session(srv); /* a new session: its memory table is empty, the disk answers */
    CHECK(by_hash(fd, key, len) == 1, "the user who sent the image does not get the hit");
    close(fd);
    free(img);
    printf("ok another user's cached image is a miss; the user's own load is a hit\n");
}

/* ---- unusable, off ------------------------------------------------------ */

static void unusable(void)
{
    char file[600], dir[700];
    int fd = h_temp_file("not-a-dir", file, sizeof file);
    io_close(fd);
    snprintf(dir, sizeof dir, "%s/modules", file); /* under a regular file: even root cannot */
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--module-cache", dir}};
    h_server_start(&srv, "unusable", &opt);
    char *img = image_variant(4);
    struct load_list l = {{img, NULL}, 0};
    client(load_all, &l, "load without a usable cache");
    client(load_all, &l, "second load without a usable cache");
    CHECK(summary_of(&srv, 2).images_received == 1, "no disk cache, yet the image was not sent");
    CHECK(h_server_log_count(&srv, dir) == 1, "expected one warning naming %s", dir);
    char *log = h_server_log(&srv);
    const char *w = strstr(log, dir);
    CHECK(w && strstr(w, "--module-cache DIR") && strstr(w, "Going on without it"),
          "the warning does not say what happens and how to fix it");
    free(log);
    h_server_stop(&srv);
    unlink(file);
    free(img);
}

/* The directory goes away while the server runs: one warning per session,
 * no more stores, loads still work. */
static void vanished(void)
{
    struct h_server srv;
    h_server_start(&srv, "vanished", NULL);
    CHECK(exists(srv.cache_dir), "the server did not create %s", srv.cache_dir);
    h_remove_tree(srv.cache_dir);
    char *a = image_variant(6), *b = image_variant(7);
    struct load_list l = {{a, b, NULL}, 0};
    client(load_all, &l, "load into a vanished cache");
    struct summary s = summary_of(&srv, 1);
    CHECK(s.images_received == 2 && s.stored == 0, "received=%llu stored=%llu", s.images_received, s.stored);
    CHECK(h_server_log_count(&srv, "cannot write to") == 1, "expected one warning, got %d",
          h_server_log_count(&srv, "cannot write to"));
    h_server_stop(&srv);
    free(a);
    free(b);
}

static void off(void)
{
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--module-cache", "off"}};
    h_server_start(&srv, "off", &opt);
    char *img = image_variant(5);
    struct load_list l = {{img, img, NULL}, 0};
    client(load_all, &l, "load with the cache off");
    client(load_all, &l, "second load with the cache off");
    struct summary s = summary_of(&srv, 2);
    CHECK(s.images_received == 1 && s.hits_memory == 1, "cache off: received=%llu memory hits=%llu",
          s.images_received, s.hits_memory);
    CHECK(!exists(srv.cache_dir), "%s was created with the cache off", srv.cache_dir);
    h_server_stop(&srv);
    free(img);
}

int main(void)
{
    h_begin("module_cache", 100);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    char *img = image_variant(0);
    warm(&srv, img);
    corrupt(&srv, img, 3, 0);
    corrupt(&srv, img, 4, 1);
    large(&srv, 5);
    poison(&srv);
    bounds(&srv);
    other_users(&srv);
    h_server_stop(&srv);
    free(img);

    evict();
    race();
    unusable();
    vanished();
    off();
    printf("PASS module_cache\n");
    return 0;
}
