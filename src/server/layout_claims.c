/* layout_claims.c - see layout_claims.h. Each image's claims are one
 * block, its kernels sorted by name for the lookup at each binding,
 * shared by the modules loaded from the image: those it was sent with,
 * and re-loads of it (while the session keeps the image for them, so
 * does it keep the block, under the image's key). */
#define _GNU_SOURCE
#include "layout_claims.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "host_quota.h"
#include "module_cache.h"
#include "param_layout.h"
#include "../common/idmap.h"
#include "../common/log.h"

struct claim {
    const char *name;
    uint32_t n;
    const struct msg_param_slot *slots;
};

struct claims {
    struct claims *next_kept; /* the kept blocks' list */
    uint8_t key[MODULE_KEY_LEN];
    int kept;                 /* on that list: the session keeps the image for re-loads */
    unsigned refs;            /* modules, and the list */
    uint32_t n;
    struct claim c[];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct idmap modules = IDMAP_INIT; /* module id -> its image's block (under lock) */
/* A bound kernel or function whose layout the driver has not yet been
 * asked: its real handle -> its module's id, tagged with its claim's
 * index in the module's block (under lock). */
static struct idmap bound = IDMAP_INIT;
static struct claims *kept_list;

static void unref_locked(struct claims *c)
{
    if (c && --c->refs == 0) host_quota_free(c);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct claim *)a)->name, ((const struct claim *)b)->name);
}

static uint32_t end_of(const struct msg_param_slot *s, uint32_t n)
{
    uint32_t end = 0;
    for (uint32_t i = 0; i < n; i++)
        if (s[i].offset + s[i].size > end) end = s[i].offset + s[i].size;
    return end;
}

/* One allocation: the table, every layout's slots, then every name. */
static struct claims *build(uint32_t n, const struct msg_func_desc *f, const struct msg_layout_info *l)
{
    size_t bytes = sizeof(struct claims) + (size_t)n * sizeof(struct claim);
    for (uint32_t i = 0; i < n; i++) bytes += (size_t)l[i].slots_count * sizeof *l[i].slots + strlen(f[i].name) + 1;
    struct claims *c = host_quota_alloc(bytes, "a module's kernel layouts"); /* the session's memory */
    if (!c) return NULL;
    c->n = n;
    struct msg_param_slot *slots = (struct msg_param_slot *)&c->c[n];
    for (uint32_t i = 0; i < n; i++) {
        c->c[i] = (struct claim){.n = l[i].slots_count, .slots = slots};
        if (l[i].slots_count) memcpy(slots, l[i].slots, (size_t)l[i].slots_count * sizeof *slots);
        slots += l[i].slots_count;
    }
    char *names = (char *)slots;
    for (uint32_t i = 0; i < n; i++) {
        c->c[i].name = strcpy(names, f[i].name);
        names += strlen(f[i].name) + 1;
    }
    qsort(c->c, n, sizeof *c->c, by_name);
    return c;
}

int layout_claims_keep(uint64_t id, const uint8_t key[MODULE_KEY_LEN], int image_kept, uint32_t n,
                       const struct msg_func_desc *driver_funcs, const struct msg_layout_info *client_layouts)
{
    struct claims *c = build(n, driver_funcs, client_layouts);
    if (!c) return -1;
    memcpy(c->key, key, MODULE_KEY_LEN);
    c->refs = 1;
    pthread_mutex_lock(&lock);
    int rc = idmap_put(&modules, id, 0, c);
    if (rc != 0) {
        c->refs = 0;
        host_quota_free(c);
    } else if (image_kept) {
        c->kept = 1, c->refs++;
        c->next_kept = kept_list;
        kept_list = c;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void layout_claims_share(uint64_t id, const uint8_t key[MODULE_KEY_LEN])
{
    pthread_mutex_lock(&lock);
    struct claims *c = kept_list;
    while (c && memcmp(c->key, key, MODULE_KEY_LEN) != 0) c = c->next_kept;
    if (c && idmap_put(&modules, id, 0, c) == 0) c->refs++;
    pthread_mutex_unlock(&lock);
}

/* h waits on claim idx of module id's block; an earlier entry for h (bound
 * again, or a handle value reused) is replaced. */
static int bound_put_locked(const void *h, uint32_t idx, uint64_t id)
{
    idmap_del(&bound, (uint64_t)(uintptr_t)h);
    return idmap_put(&bound, (uint64_t)(uintptr_t)h, idx, (void *)(uintptr_t)id);
}

CUresult layout_claims_bind(uint64_t id, const char *name, const void *h)
{
    uint32_t tag;
    void *v;
    pthread_mutex_lock(&lock);
    const struct claims *c = idmap_get(&modules, id, &tag, &v) ? v : NULL;
    struct claim key = {.name = name};
    const struct claim *found = c ? bsearch(&key, c->c, c->n, sizeof *c->c, by_name) : NULL;
    int rc = found ? bound_put_locked(h, (uint32_t)(found - c->c), id) : 0;
    pthread_mutex_unlock(&lock);
    return rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

void layout_claims_alias(const void *f, const void *k)
{
    uint32_t idx;
    void *id;
    pthread_mutex_lock(&lock);
    if (idmap_get(&bound, (uint64_t)(uintptr_t)k, &idx, &id) && bound_put_locked(f, idx, (uint64_t)(uintptr_t)id) != 0)
        LOG_WARN("out of memory noting a kernel's function: its layout is not checked");
    pthread_mutex_unlock(&lock);
}

static int same_layout(const struct claim *c, const struct param_layout *l)
{
    if (c->n != l->n) return 0;
    for (uint32_t i = 0; i < l->n; i++)
        if (c->slots[i].offset != l->p[i].offset || c->slots[i].size != l->p[i].size) return 0;
    return 1;
}

int layout_claims_settle(const void *h, const struct param_layout *l)
{
    uint32_t idx;
    void *id, *v;
    pthread_mutex_lock(&lock);
    const struct claims *c = idmap_get(&bound, (uint64_t)(uintptr_t)h, &idx, &id) &&
                                     idmap_get(&modules, (uint64_t)(uintptr_t)id, NULL, &v)
                                 ? v
                                 : NULL;
    const struct claim *claim = c && idx < c->n ? &c->c[idx] : NULL;
    int same = !claim || same_layout(claim, l);
    if (claim && same) idmap_del(&bound, (uint64_t)(uintptr_t)h); /* checked: launches go on unasked */
    if (!same) /* under the lock: the name is the block's */
        LOG_WARN("kernel %s: the client read %u parameters (%u bytes) from its image, this driver's layout has %u "
                 "(%u bytes): its launches are refused (CUDA_ERROR_INVALID_IMAGE at the client's next "
                 "synchronizing call); set SCUDA_READ_KERNELS=0 on the client",
                 claim->name, claim->n, end_of(claim->slots, claim->n), l->n, l->bytes);
    pthread_mutex_unlock(&lock);
    return same ? 0 : -1;
}

void layout_claims_drop(uint64_t id)
{
    uint64_t handles[256];
    pthread_mutex_lock(&lock);
    while (idmap_take_by_value(&bound, (void *)(uintptr_t)id, handles, 256) == 256) {
    }
    unref_locked(idmap_del(&modules, id));
    pthread_mutex_unlock(&lock);
}
