/* idmap.h - a thread-safe map from 64-bit ids to tagged pointers.
 *
 * Used for virtual handles: the server maps client ids to real driver
 * handles, the client maps function and module ids to what it knows of
 * them. Id 0 and UINT64_MAX are reserved. */
#ifndef SCUDA_IDMAP_H
#define SCUDA_IDMAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct idmap_slot {
    uint64_t id;
    uint32_t tag;
    void *value;
};

struct idmap {
    pthread_mutex_t lock;
    struct idmap_slot *slots;
    size_t cap;  /* power of two, or 0 before first use */
    size_t used; /* live + deleted slots */
};

#define IDMAP_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* Returns 1 and fills tag and value (either may be NULL) when id is present. */
int idmap_get(struct idmap *m, uint64_t id, uint32_t *tag, void **value);
/* Returns 0, -1 when id is reserved or already present, -2 on oom. */
int idmap_put(struct idmap *m, uint64_t id, uint32_t tag, void *value);
/* Removes id; returns its value (NULL when absent). */
void *idmap_del(struct idmap *m, uint64_t id);
/* Removes up to max entries whose value is `value`, storing their ids;
 * returns how many it removed (call again while it returns max). */
size_t idmap_take_by_value(struct idmap *m, const void *value, uint64_t *ids, size_t max);
/* Empties the map and frees its memory. */
void idmap_clear(struct idmap *m);
/* Finds the id of a value with this tag (a linear scan: rare calls only). */
uint64_t idmap_find_value(struct idmap *m, uint32_t tag, const void *value);

#endif
