/* compile_cache.c - the client's compile cache. See compile_cache.h. */
#define _GNU_SOURCE
#include "compile_cache.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../common/auth.h"
#include "../common/config.h"
#include "../common/log.h"
#include "../common/module_store.h"
#include "stats.h"

/* How much of the strings a caller passes is read: options are a few
 * hundred bytes; the compiler's build is "HOST64", a NUL, and a date. */
#define OPTIONS_MAX 65536
#define COMPILER_PART_MAX 64

static const char KEY_DOMAIN[] = "scuda compile cache 1";

struct entry {
    uint8_t key[MODULE_KEY_LEN];
};

/* The cache's place, from the environment at first use. */
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char cache_dir[PATH_MAX];
static int cache_on;
static uint64_t cache_limit = COMPILE_CACHE_DEFAULT_LIMIT;

/* What the callers hold: entries and output buffers they were handed. A
 * pointer that is not here is refused, not freed. */
struct held {
    void **items;
    size_t n, cap;
};
static struct held entries, outputs;

/* Hold p; when that fails (out of memory) p is freed. Returns 0 or -1. */
static int held_add(struct held *h, void *p)
{
    pthread_mutex_lock(&mu);
    int ok = h->n < h->cap;
    if (!ok) {
        size_t c = h->cap ? h->cap * 2 : 16;
        void **items = realloc(h->items, c * sizeof *items);
        if (items != NULL) {
            h->items = items;
            h->cap = c;
            ok = 1;
        }
    }
    if (ok) h->items[h->n++] = p;
    pthread_mutex_unlock(&mu);
    if (!ok) free(p);
    return ok ? 0 : -1;
}

/* 1 and forgotten when p was held (drop), or 1 when it is held (!drop). */
static int held_find(struct held *h, const void *p, int drop)
{
    pthread_mutex_lock(&mu);
    int found = 0;
    for (size_t i = 0; i < h->n && !found; i++) {
        if (h->items[i] != p) continue;
        if (drop) h->items[i] = h->items[--h->n];
        found = 1;
    }
    pthread_mutex_unlock(&mu);
    return found;
}

static void use_dir(const char *dir, uint64_t limit)
{
    char err[PATH_MAX + 128];
    cache_on = 0;
    cache_limit = limit;
    if (dir == NULL) return;
    snprintf(cache_dir, sizeof cache_dir, "%s", dir);
    if (module_store_prepare(cache_dir, err, sizeof err) != 0) {
        LOG_WARN("compile cache: %s; NVRTC's compiles are not kept, and each costs its full time. "
                 "Set SCUDA_COMPILE_CACHE to a directory this user can write, or to off",
                 err);
        return;
    }
    cache_on = 1;
    LOG_DEBUG("compile cache: %s, at most %llu bytes", cache_dir, (unsigned long long)limit);
}

static void configure_from_env(void)
{
    char dir[PATH_MAX];
    uint64_t limit = COMPILE_CACHE_DEFAULT_LIMIT;
    const char *max = getenv("CUDA_CACHE_MAXSIZE"); /* bytes, as for the driver's cache */
    if (max != NULL && max[0] != '\0') {
        char *end;
        unsigned long long v = strtoull(max, &end, 10);
        if (*end == '\0' && v > 0) limit = v;
    }
    int got = scuda_compile_cache_dir(dir, sizeof dir);
    if (got < 0)
        LOG_WARN("compile cache: no home directory is known; NVRTC's compiles are not kept. "
                 "Set SCUDA_COMPILE_CACHE to a directory");
    use_dir(got == 1 ? dir : NULL, limit);
}

void compile_cache_configure(const char *dir, uint64_t limit)
{
    pthread_once(&config_once, configure_from_env);
    pthread_mutex_lock(&mu);
    use_dir(dir, limit);
    pthread_mutex_unlock(&mu);
}

static void hash_string(auth_sha256 *c, const char *s, size_t max)
{
    uint32_t n = s ? (uint32_t)strnlen(s, max) : 0;
    auth_sha256_update(c, &n, sizeof n);
    if (n) auth_sha256_update(c, s, n);
}

CUresult compile_cache_open(void **handle, unsigned stage, const void *input, unsigned len, const char *options,
                            const char *compiler)
{
    pthread_once(&config_once, configure_from_env);
    stats_add(STATS_COMPILE_SERVICE);
    if (handle == NULL || (input == NULL && len > 0)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    int on = cache_on;
    pthread_mutex_unlock(&mu);
    if (!on) return CUDA_ERROR_NOT_INITIALIZED;
    struct entry *e = malloc(sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    auth_sha256 c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, KEY_DOMAIN, sizeof KEY_DOMAIN);
    auth_sha256_update(&c, &stage, sizeof stage);
    hash_string(&c, options, OPTIONS_MAX);
    hash_string(&c, compiler, COMPILER_PART_MAX);
    /* The build's date follows its target, after the NUL. */
    if (compiler != NULL && strnlen(compiler, COMPILER_PART_MAX) < COMPILER_PART_MAX)
        hash_string(&c, compiler + strlen(compiler) + 1, COMPILER_PART_MAX);
    uint64_t n = len;
    auth_sha256_update(&c, &n, sizeof n);
    auth_sha256_update(&c, input, len);
    auth_sha256_final(&c, e->key);
    if (held_add(&entries, e) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *handle = e;
    return CUDA_SUCCESS;
}

CUresult compile_cache_close(void *handle)
{
    if (!held_find(&entries, handle, 1)) return CUDA_ERROR_INVALID_HANDLE;
    free(handle);
    return CUDA_SUCCESS;
}

/* The entry's key for these flags: an unknown flag may ask for another
 * output, so each has entries of its own. */
static int file_key(void *handle, unsigned flags, uint8_t key[MODULE_KEY_LEN])
{
    if (!held_find(&entries, handle, 0)) return -1;
    const struct entry *e = handle;
    memcpy(key, e->key, MODULE_KEY_LEN);
    if (flags != 0) {
        auth_sha256 c;
        auth_sha256_init(&c);
        auth_sha256_update(&c, e->key, MODULE_KEY_LEN);
        auth_sha256_update(&c, &flags, sizeof flags);
        auth_sha256_final(&c, key);
    }
    return 0;
}

CUresult compile_cache_lookup(void *handle, unsigned flags, void **data, unsigned *len)
{
    uint8_t key[MODULE_KEY_LEN];
    if (data == NULL || len == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (file_key(handle, flags, key) != 0) return CUDA_ERROR_INVALID_HANDLE;
    void *buf;
    uint64_t n;
    const char *why;
    enum store_result r = module_store_read_keyed(cache_dir, key, COMPILE_CACHE_MAX_ENTRY, &buf, &n, &why);
    if (r == STORE_CORRUPT) {
        char hex[2 * MODULE_KEY_LEN + 1];
        module_key_hex(key, hex);
        LOG_WARN("compile cache: %s/%s was damaged (%s); deleted it, the compile runs again", cache_dir, hex, why);
    }
    if (r != STORE_HIT) return CUDA_ERROR_NOT_FOUND;
    if (held_add(&outputs, buf) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    stats_add(STATS_COMPILE_HITS);
    *data = buf;
    *len = (unsigned)n;
    return CUDA_SUCCESS;
}

CUresult compile_cache_store(void *handle, unsigned flags, const void *data, unsigned len)
{
    uint8_t key[MODULE_KEY_LEN];
    if (data == NULL || len == 0) return CUDA_ERROR_INVALID_VALUE;
    if (file_key(handle, flags, key) != 0) return CUDA_ERROR_INVALID_HANDLE;
    if (len > COMPILE_CACHE_MAX_ENTRY) return CUDA_SUCCESS; /* not kept, as for any entry evicted */
    if (module_store_write_keyed(cache_dir, key, data, len) != 0) {
        static _Atomic int once;
        if (!atomic_exchange(&once, 1))
            LOG_WARN("compile cache: cannot write to %s (%s); compiles are not kept", cache_dir, strerror(errno));
        return CUDA_SUCCESS; /* the caller has its output: a cache that cannot keep it is no error */
    }
    static struct store_evict_pace pace;
    module_store_evict_paced(cache_dir, cache_limit, &pace, (uint64_t)len + MODULE_STORE_HEADER);
    return CUDA_SUCCESS;
}

CUresult compile_cache_release(void *data)
{
    if (!held_find(&outputs, data, 1)) return CUDA_ERROR_INVALID_VALUE;
    free(data);
    return CUDA_SUCCESS;
}
