/* module_pins.c - see module_pins.h. */
#include "module_pins.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "host_quota.h"
#include "../common/log.h"
#include "../common/messages.gen.h"

#define PIN_BUCKETS 1024

struct pin {
    uint8_t key[MODULE_KEY_LEN];
    uint64_t len;
    void *image;
    struct pin *next;
};

static struct pin *pins[PIN_BUCKETS];
/* Bytes counted against MODULE_PIN_MAX, as the client counts them: an
 * image is counted when it fits, also when keeping it failed. */
static uint64_t counted;
static pthread_mutex_t pins_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pin **bucket_of(const uint8_t key[MODULE_KEY_LEN])
{
    uint32_t h;
    memcpy(&h, key, sizeof h);
    return &pins[h & (PIN_BUCKETS - 1)];
}

static struct pin *find(const uint8_t key[MODULE_KEY_LEN], uint64_t len)
{
    for (struct pin *p = *bucket_of(key); p; p = p->next)
        if (p->len == len && memcmp(p->key, key, MODULE_KEY_LEN) == 0) return p;
    return NULL;
}

void module_pin(const uint8_t key[MODULE_KEY_LEN], const void *image, size_t len)
{
    pthread_mutex_lock(&pins_lock);
    int fits = !find(key, len) && len <= MODULE_PIN_MAX && counted <= MODULE_PIN_MAX - len;
    if (fits) counted += len;
    pthread_mutex_unlock(&pins_lock);
    if (!fits) return;
    struct pin *p = malloc(sizeof *p);
    char *copy = host_quota_alloc(len + 1, "a kept module image");
    if (!p || !copy) {
        static _Atomic int warned;
        if (!atomic_exchange(&warned, 1))
            LOG_WARN("could not keep a module image of %zu bytes (host memory quota): loading it again in this "
                     "process may fail, unless the module cache still has it",
                     len);
        free(p);
        host_quota_free(copy);
        return;
    }
    memcpy(copy, image, len);
    copy[len] = 0;
    memcpy(p->key, key, MODULE_KEY_LEN);
    p->len = len;
    p->image = copy;
    pthread_mutex_lock(&pins_lock);
    struct pin **head = bucket_of(key);
    p->next = *head;
    *head = p;
    pthread_mutex_unlock(&pins_lock);
}

const void *module_pinned(const uint8_t key[MODULE_KEY_LEN], uint64_t len)
{
    pthread_mutex_lock(&pins_lock);
    struct pin *p = find(key, len);
    pthread_mutex_unlock(&pins_lock);
    return p ? p->image : NULL;
}
