/* module_cache.c - the session's memory table in front of the disk store.
 * See module_cache.h. */
#define _GNU_SOURCE
#include "module_cache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host_quota.h"
#include "identity.h"
#include "../common/auth.h"
#include "../common/log.h"

struct entry {
    uint8_t key[MODULE_KEY_LEN];
    uint8_t user[MODULE_USER_TAG_LEN]; /* who loaded it (user_tag) */
    void *image; /* len + 1 bytes, NUL-terminated */
    size_t len;
    uint64_t used; /* clock value of the last use: the smallest goes first */
};

static struct {
    pthread_mutex_t lock;
    const char *dir;
    uint64_t disk_limit;
    int write_failed; /* a store failed: this session stores no more */
    struct store_evict_pace pace; /* when the directory is scanned for eviction */
    struct entry *e;
    size_t n, cap;
    uint64_t bytes, clock;
    /* for the summary line */
    uint64_t hits_memory, hits_disk, misses, received, bytes_received, stored, evicted, corrupt;
    uint64_t disk_read_ns, disk_read_bytes; /* reading and checking hits on disk */
} mc = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* Hits, memory and disk, readable without the lock: every call's end
 * reads it for the session's counters (session_stats.h). */
static _Atomic uint64_t hits_total;

void module_cache_init(const char *dir, uint64_t disk_limit)
{
    mc.dir = dir && disk_limit ? dir : NULL;
    mc.disk_limit = disk_limit;
}

/* ---- whose images ---------------------------------------------------------- */

/* The session's user as the store names it: a digest of the name, so that
 * names never become file names. A session has one identity; it is read
 * at every use all the same (cheap: one short SHA-256). */
static void user_tag(uint8_t tag[MODULE_USER_TAG_LEN])
{
    static const char domain[] = "scuda module cache user";
    char buf[sizeof domain + SCUDA_IDENTITY_MAX];
    const char *name = session_identity();
    size_t n = strlen(name);
    memcpy(buf, domain, sizeof domain); /* with its NUL: no name can pose as another */
    memcpy(buf + sizeof domain, name, n);
    uint8_t d[MODULE_KEY_LEN];
    auth_sha256_digest(buf, sizeof domain + n, d);
    memcpy(tag, d, MODULE_USER_TAG_LEN);
}

/* ---- the memory table (mc.lock held) ------------------------------------ */

static struct entry *mem_find(const uint8_t key[MODULE_KEY_LEN], uint64_t len, const uint8_t user[MODULE_USER_TAG_LEN])
{
    for (size_t i = 0; i < mc.n; i++)
        if (mc.e[i].len == len && memcmp(mc.e[i].key, key, MODULE_KEY_LEN) == 0 &&
            memcmp(mc.e[i].user, user, MODULE_USER_TAG_LEN) == 0)
            return &mc.e[i];
    return NULL;
}

static void mem_drop_oldest(void)
{
    size_t old = 0;
    for (size_t i = 1; i < mc.n; i++)
        if (mc.e[i].used < mc.e[old].used) old = i;
    mc.bytes -= mc.e[old].len;
    host_quota_release(mc.e[old].len + 1);
    free(mc.e[old].image);
    mc.e[old] = mc.e[--mc.n];
}

static void *copy_image(const void *image, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, image, len);
        p[len] = '\0';
    }
    return p;
}

static void mem_add(const uint8_t key[MODULE_KEY_LEN], const uint8_t user[MODULE_USER_TAG_LEN], const void *image,
                    size_t len)
{
    if (len > MODULE_MEMORY_ENTRY_MAX || mem_find(key, len, user)) return;
    while (mc.n && mc.bytes + len > MODULE_MEMORY_MAX) mem_drop_oldest();
    if (mc.n == mc.cap) {
        size_t cap = mc.cap ? mc.cap * 2 : 64;
        struct entry *e = realloc(mc.e, cap * sizeof *e);
        if (!e) return;
        mc.e = e;
        mc.cap = cap;
    }
    struct entry *e = &mc.e[mc.n];
    /* The table is the session's memory (host_quota.h); a refusal only
     * means this image is not kept. */
    if (host_quota_charge(len + 1, "the session's module table") != 0) return;
    if (!(e->image = copy_image(image, len))) {
        host_quota_release(len + 1);
        return;
    }
    memcpy(e->key, key, MODULE_KEY_LEN);
    memcpy(e->user, user, MODULE_USER_TAG_LEN);
    e->len = len;
    e->used = ++mc.clock;
    mc.bytes += len;
    mc.n++;
}

/* ---- lookups and stores ------------------------------------------------- */

static void *disk_get(const uint8_t key[MODULE_KEY_LEN], uint64_t len, const uint8_t user[MODULE_USER_TAG_LEN])
{
    /* Not this user's: a miss, decided without opening the image, so that
     * "stored for someone else" and "not stored" look and take the same. */
    if (!module_store_user_has(mc.dir, key, user)) return NULL;
    void *image;
    const char *why;
    char hex[2 * MODULE_KEY_LEN + 1];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    enum store_result r = module_store_read(mc.dir, key, len, &image, &why);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r == STORE_CORRUPT) {
        module_key_hex(key, hex);
        LOG_WARN("module cache: %s/%s was damaged (%s); deleted it, the client sends the image again", mc.dir,
                 hex, why);
    }
    pthread_mutex_lock(&mc.lock);
    if (r == STORE_CORRUPT) mc.corrupt++;
    if (r == STORE_HIT) {
        mc.hits_disk++;
        atomic_fetch_add_explicit(&hits_total, 1, memory_order_relaxed);
        mc.disk_read_ns += (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec;
        mc.disk_read_bytes += len;
        mem_add(key, user, image, len);
    }
    pthread_mutex_unlock(&mc.lock);
    return image;
}

void *module_cache_get(const uint8_t key[MODULE_KEY_LEN], uint64_t len)
{
    void *image = NULL;
    if (len > MODULE_IMAGE_MAX) return NULL;
    uint8_t user[MODULE_USER_TAG_LEN];
    user_tag(user);
    pthread_mutex_lock(&mc.lock);
    struct entry *e = mem_find(key, len, user);
    if (e) {
        e->used = ++mc.clock;
        if ((image = copy_image(e->image, e->len))) {
            mc.hits_memory++;
            atomic_fetch_add_explicit(&hits_total, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&mc.lock);
    const char *found = image ? "hit in memory" : "miss";
    if (image && mc.dir) {
        module_store_touch(mc.dir, key);
        module_store_user_has(mc.dir, key, user); /* touches the user's marker too */
    }
    if (!image && mc.dir && (image = disk_get(key, len, user))) found = "hit on disk";
    if (!image) {
        pthread_mutex_lock(&mc.lock);
        mc.misses++;
        pthread_mutex_unlock(&mc.lock);
    }
    if (scuda_log_enabled(SCUDA_LOG_DEBUG)) {
        char hex[2 * MODULE_KEY_LEN + 1];
        module_key_hex(key, hex);
        LOG_DEBUG("module cache: %s (%llu bytes): %s", hex, (unsigned long long)len, found);
    }
    return image;
}

void module_cache_hit_kept(const uint8_t key[MODULE_KEY_LEN], uint64_t len)
{
    uint8_t user[MODULE_USER_TAG_LEN];
    user_tag(user);
    pthread_mutex_lock(&mc.lock);
    struct entry *e = mem_find(key, len, user);
    if (e) e->used = ++mc.clock;
    mc.hits_memory++;
    atomic_fetch_add_explicit(&hits_total, 1, memory_order_relaxed);
    pthread_mutex_unlock(&mc.lock);
    if (mc.dir) module_store_touch(mc.dir, key);
}

void module_cache_received(size_t len)
{
    pthread_mutex_lock(&mc.lock);
    mc.received++;
    mc.bytes_received += len;
    pthread_mutex_unlock(&mc.lock);
}

/* Disk trouble (full, read-only, removed) costs transfers, never a load:
 * say so once and stop storing for the rest of the session (lookups go on). */
static void disk_put(const uint8_t key[MODULE_KEY_LEN], const uint8_t user[MODULE_USER_TAG_LEN], const void *image,
                     size_t len)
{
    if (len + MODULE_STORE_HEADER > mc.disk_limit) return; /* it would evict everything, itself included */
    pthread_mutex_lock(&mc.lock);
    int broken = mc.write_failed;
    pthread_mutex_unlock(&mc.lock);
    if (broken) return;
    /* The image first, then the user's marker: a marker never points at
     * nothing (eviction deletes those). */
    if (module_store_write(mc.dir, key, image, len) != 0 || module_store_user_mark(mc.dir, key, user) != 0) {
        int err = errno;
        pthread_mutex_lock(&mc.lock);
        int warn = !mc.write_failed;
        mc.write_failed = 1;
        pthread_mutex_unlock(&mc.lock);
        if (warn)
            LOG_WARN("module cache: cannot write to %s (%s); this session stores no more modules there. "
                     "Free space or fix the directory's permissions, or start the server with "
                     "--module-cache DIR or --module-cache off", mc.dir, strerror(err));
        return;
    }
    int evicted = module_store_evict_paced(mc.dir, mc.disk_limit, &mc.pace, len + MODULE_STORE_HEADER);
    if (scuda_log_enabled(SCUDA_LOG_DEBUG)) {
        char hex[2 * MODULE_KEY_LEN + 1];
        module_key_hex(key, hex);
        LOG_DEBUG("module cache: stored %s (%zu bytes); evicted %d", hex, len, evicted);
    }
    pthread_mutex_lock(&mc.lock);
    mc.stored++;
    mc.evicted += (uint64_t)evicted;
    pthread_mutex_unlock(&mc.lock);
}

void module_cache_put(const void *image, size_t len)
{
    uint8_t key[MODULE_KEY_LEN];
    module_cache_put_key(image, len, key);
}

void module_cache_put_key(const void *image, size_t len, uint8_t key[MODULE_KEY_LEN])
{
    auth_sha256_digest(image, len, key); /* never the client's word for it */
    if (len > MODULE_IMAGE_MAX) return;
    uint8_t user[MODULE_USER_TAG_LEN];
    user_tag(user);
    pthread_mutex_lock(&mc.lock);
    mem_add(key, user, image, len);
    pthread_mutex_unlock(&mc.lock);
    if (mc.dir) disk_put(key, user, image, len);
}

int module_cache_listing(uint8_t (*keys)[MODULE_KEY_LEN], int max)
{
    if (!mc.dir) return 0;
    uint8_t user[MODULE_USER_TAG_LEN];
    user_tag(user);
    return module_store_user_images(mc.dir, user, keys, max);
}

int module_cache_map(const uint8_t key[MODULE_KEY_LEN], struct store_mapping *m)
{
    return mc.dir ? module_store_map(mc.dir, key, m) : -1;
}

void module_cache_log_summary(void)
{
    pthread_mutex_lock(&mc.lock);
    if (mc.hits_memory + mc.hits_disk + mc.misses + mc.received)
        LOG_INFO("module cache: hits_memory=%llu hits_disk=%llu misses=%llu images_received=%llu "
                 "bytes_received=%llu stored=%llu evicted=%llu corrupt=%llu disk_read_ms=%.1f disk_read_mib=%.1f",
                 (unsigned long long)mc.hits_memory, (unsigned long long)mc.hits_disk,
                 (unsigned long long)mc.misses, (unsigned long long)mc.received,
                 (unsigned long long)mc.bytes_received, (unsigned long long)mc.stored,
                 (unsigned long long)mc.evicted, (unsigned long long)mc.corrupt, (double)mc.disk_read_ns / 1e6,
                 (double)mc.disk_read_bytes / 1048576.0);
    pthread_mutex_unlock(&mc.lock);
}

uint64_t module_cache_hits(void) { return atomic_load_explicit(&hits_total, memory_order_relaxed); }
