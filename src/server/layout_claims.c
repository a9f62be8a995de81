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

#include "dispatch.h"
#include "host_quota.h"
#include "module_cache.h"
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

/* The driver's parameter `i` of h: a CUkernel's from the kernel itself,
 * never through cuKernelGetFunction, which would load the kernel into the
 * current context (lazy loading loads it at its first launch). */
static CUresult param_info(void *h, int is_kernel, uint32_t i, size_t *off, size_t *size)
{
    return is_kernel ? REAL(cuKernelGetParamInfo, (CUkernel)h, i, off, size)
                     : REAL(cuFuncGetParamInfo, (CUfunction)h, i, off, size);
}

/* 1 when the driver's layout of h is c's, 0 when it differs, -1 when the
 * driver cannot tell it. *n, *bytes: the driver's count and end. */
static int same_layout(const struct claim *c, void *h, int is_kernel, uint32_t *n, uint32_t *bytes)
{
    int same = 1;
    *bytes = 0;
    for (*n = 0;; (*n)++) {
        size_t off = 0, size = 0;
        CUresult r = param_info(h, is_kernel, *n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break; /* past the last */
        if (r != CUDA_SUCCESS || *n == LAUNCH_MAX_PARAMS) return -1;
        if (*n >= c->n || c->slots[*n].offset != off || c->slots[*n].size != size) same = 0;
        if (off + size > *bytes) *bytes = (uint32_t)(off + size);
    }
    return same && *n == c->n;
}

CUresult layout_claims_check(uint64_t id, const char *name, void *h, int is_kernel)
{
    uint32_t tag;
    void *v;
    pthread_mutex_lock(&lock);
    const struct claims *c = idmap_get(&modules, id, &tag, &v) ? v : NULL;
    struct claim key = {.name = name};
    const struct claim *found = c ? bsearch(&key, c->c, c->n, sizeof *c->c, by_name) : NULL;
    uint32_t n = 0, bytes = 0, claimed = 0, claimed_end = 0;
    int same = found ? same_layout(found, h, is_kernel, &n, &bytes) : 1;
    if (found) claimed = found->n, claimed_end = end_of(found->slots, found->n);
    pthread_mutex_unlock(&lock);
    if (same != 0) return CUDA_SUCCESS;
    LOG_WARN("kernel %s: the client read %u parameters (%u bytes) from its image, this driver's layout has %u "
             "(%u bytes): its binding is refused (CUDA_ERROR_INVALID_IMAGE at the client's next synchronizing "
             "call); set SCUDA_READ_KERNELS=0 on the client",
             name, claimed, claimed_end, n, bytes);
    return CUDA_ERROR_INVALID_IMAGE;
}

void layout_claims_drop(uint64_t id)
{
    pthread_mutex_lock(&lock);
    unref_locked(idmap_del(&modules, id));
    pthread_mutex_unlock(&lock);
}
