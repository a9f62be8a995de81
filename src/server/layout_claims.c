/* layout_claims.c - see layout_claims.h. Each image's claims are one
 * block, its kernels sorted by name for the lookup at each binding. */
#define _GNU_SOURCE
#include "layout_claims.h"

#include <stdlib.h>
#include <string.h>

#include "host_quota.h"
#include "param_layout.h"
#include "../common/idmap.h"
#include "../common/log.h"

struct claim {
    const char *name;
    uint32_t n;
    const struct msg_param_slot *slots;
};

struct claims {
    uint32_t n;
    struct claim c[];
};

static struct idmap images = IDMAP_INIT;

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

int layout_claims_keep(uint64_t id, uint32_t n, const struct msg_func_desc *driver_funcs,
                       const struct msg_layout_info *client_layouts)
{
    struct claims *c = build(n, driver_funcs, client_layouts);
    if (!c || idmap_put(&images, id, 0, c) != 0) {
        host_quota_free(c);
        return -1;
    }
    return 0;
}

static int same_layout(const struct claim *c, const struct param_layout *l)
{
    if (c->n != l->n) return 0;
    for (uint32_t i = 0; i < l->n; i++)
        if (c->slots[i].offset != l->p[i].offset || c->slots[i].size != l->p[i].size) return 0;
    return 1;
}

CUresult layout_claims_check(uint64_t id, const char *name, void *h, int is_kernel)
{
    uint32_t tag;
    void *v;
    if (!idmap_get(&images, id, &tag, &v)) return CUDA_SUCCESS;
    const struct claims *c = v;
    struct claim key = {.name = name};
    const struct claim *found = bsearch(&key, c->c, c->n, sizeof *c->c, by_name);
    struct param_layout *l = found ? param_layout_dup(h, is_kernel) : NULL;
    CUresult r = CUDA_SUCCESS;
    if (l && !same_layout(found, l)) {
        LOG_WARN("kernel %s: the client read %u parameters (%u bytes) from its image, this driver's layout has %u "
                 "(%u bytes): its binding is refused (CUDA_ERROR_INVALID_IMAGE at the client's next synchronizing "
                 "call); set SCUDA_READ_KERNELS=0 on the client",
                 name, found->n, end_of(found->slots, found->n), l->n, l->bytes);
        r = CUDA_ERROR_INVALID_IMAGE;
    }
    free(l);
    return r;
}

void layout_claims_drop(uint64_t id) { host_quota_free(idmap_del(&images, id)); }
