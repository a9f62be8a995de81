/* idmap.c - open addressing with linear probing and tombstones. The load
 * (live + tombstones) stays under 3/4, so probes always reach an empty slot. */
#include "idmap.h"

#include <stdlib.h>

#define TOMBSTONE UINT64_MAX

static size_t hash_id(uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (size_t)id;
}

static struct idmap_slot *find(struct idmap *m, uint64_t id)
{
    if (m->cap == 0) return NULL;
    for (size_t i = hash_id(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].id == id) return &m->slots[i];
        if (m->slots[i].id == 0) return NULL;
    }
}

static int rehash(struct idmap *m, size_t cap)
{
    struct idmap_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    size_t live = 0;
    for (size_t i = 0; i < m->cap; i++) {
        struct idmap_slot *o = &m->slots[i];
        if (o->id == 0 || o->id == TOMBSTONE) continue;
        size_t j = hash_id(o->id) & (cap - 1);
        while (slots[j].id) j = (j + 1) & (cap - 1);
        slots[j] = *o;
        live++;
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    m->used = live;
    return 0;
}

int idmap_get(struct idmap *m, uint64_t id, uint32_t *tag, void **value)
{
    pthread_mutex_lock(&m->lock);
    struct idmap_slot *s = id && id != TOMBSTONE ? find(m, id) : NULL;
    if (s) {
        if (tag) *tag = s->tag;
        if (value) *value = s->value;
    }
    pthread_mutex_unlock(&m->lock);
    return s != NULL;
}

int idmap_put(struct idmap *m, uint64_t id, uint32_t tag, void *value)
{
    if (id == 0 || id == TOMBSTONE) return -1;
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    if (find(m, id)) {
        rc = -1;
    } else if ((m->used + 1) * 4 > m->cap * 3 && rehash(m, m->cap ? m->cap * 2 : 64) != 0) {
        rc = -2;
    } else {
        size_t i = hash_id(id) & (m->cap - 1);
        while (m->slots[i].id != 0 && m->slots[i].id != TOMBSTONE) i = (i + 1) & (m->cap - 1);
        if (m->slots[i].id == 0) m->used++;
        m->slots[i] = (struct idmap_slot){.id = id, .tag = tag, .value = value};
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void *idmap_del(struct idmap *m, uint64_t id)
{
    pthread_mutex_lock(&m->lock);
    struct idmap_slot *s = id && id != TOMBSTONE ? find(m, id) : NULL;
    void *v = NULL;
    if (s) {
        v = s->value;
        s->id = TOMBSTONE;
        s->value = NULL;
    }
    pthread_mutex_unlock(&m->lock);
    return v;
}

uint64_t idmap_find_value(struct idmap *m, uint32_t tag, const void *value)
{
    uint64_t id = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->cap && !id; i++)
        if (m->slots[i].id && m->slots[i].id != TOMBSTONE && m->slots[i].tag == tag && m->slots[i].value == value)
            id = m->slots[i].id;
    pthread_mutex_unlock(&m->lock);
    return id;
}

void idmap_clear(struct idmap *m)
{
    pthread_mutex_lock(&m->lock);
    free(m->slots);
    m->slots = NULL;
    m->cap = m->used = 0;
    pthread_mutex_unlock(&m->lock);
}

size_t idmap_take_by_value(struct idmap *m, const void *value, uint64_t *ids, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->cap && n < max; i++) {
        struct idmap_slot *s = &m->slots[i];
        if (s->id && s->id != TOMBSTONE && s->value == value) {
            ids[n++] = s->id;
            s->id = TOMBSTONE;
            s->value = NULL;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return n;
}
