/* module_held.c - see module_held.h. */
#include "module_held.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "module_cache.h"
#include "../common/log.h"

struct held {
    uint8_t key[MODULE_KEY_LEN];
    struct store_mapping map;
    int checked; /* 0 not yet, 1 its bytes are its digest's, -1 they are not */
};

static struct {
    pthread_mutex_t lock;
    int listed;
    struct held *h; /* sorted by key */
    uint32_t n;
} held = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int by_key(const void *a, const void *b)
{
    return memcmp(((const struct held *)a)->key, ((const struct held *)b)->key, MODULE_KEY_LEN);
}

/* Under held.lock: list the user's images and map each one. */
static void make_list(void)
{
    uint8_t(*keys)[MODULE_KEY_LEN] = malloc((size_t)MODULE_HELD_MAX * MODULE_KEY_LEN);
    held.h = calloc(MODULE_HELD_MAX, sizeof *held.h);
    int n = keys && held.h ? module_cache_listing(keys, MODULE_HELD_MAX) : -1;
    if (n < 0) LOG_INFO("module cache: cannot list this user's images; the client sends them as it loads them");
    for (int i = 0; i < n; i++) {
        struct held *e = &held.h[held.n];
        memcpy(e->key, keys[i], MODULE_KEY_LEN);
        if (module_cache_map(e->key, &e->map) == 0) held.n++; /* evicted since the listing: not promised */
    }
    free(keys);
    if (held.n) qsort(held.h, held.n, sizeof *held.h, by_key);
    LOG_DEBUG("module cache: %u images promised to the client for one-way loads", held.n);
}

uint32_t module_held_list(uint32_t max, struct msg_held_image *out)
{
    pthread_mutex_lock(&held.lock);
    if (!held.listed) make_list();
    held.listed = 1;
    uint32_t n = held.n < max ? held.n : max;
    for (uint32_t i = 0; i < n; i++) {
        memcpy(out[i].digest, held.h[i].key, MODULE_KEY_LEN);
        out[i].image_len = held.h[i].map.len;
    }
    pthread_mutex_unlock(&held.lock);
    return n;
}

const void *module_held_image(const uint8_t key[IMAGE_DIGEST_LEN], uint64_t len)
{
    struct held probe = {0}, *e;
    memcpy(probe.key, key, MODULE_KEY_LEN);
    pthread_mutex_lock(&held.lock);
    e = held.n ? bsearch(&probe, held.h, held.n, sizeof *held.h, by_key) : NULL;
    if (e && e->map.len == len && e->checked == 0) {
        e->checked = module_store_mapping_check(&e->map, e->key) ? 1 : -1;
        if (e->checked < 0) LOG_WARN("module cache: a stored image does not match its digest; a one-way load of it fails");
    }
    const void *image = e && e->map.len == len && e->checked > 0 ? e->map.image : NULL;
    pthread_mutex_unlock(&held.lock);
    return image;
}
