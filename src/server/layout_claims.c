/* layout_claims.c - see layout_claims.h. Each image's claims are one
 * block, its kernels sorted by name for the lookup at each binding. */
#define _GNU_SOURCE
#include "layout_claims.h"

#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "host_quota.h"
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
    if (!idmap_get(&images, id, &tag, &v)) return CUDA_SUCCESS;
    const struct claims *c = v;
    struct claim key = {.name = name};
    const struct claim *found = bsearch(&key, c->c, c->n, sizeof *c->c, by_name);
    uint32_t n = 0, bytes = 0;
    if (!found || same_layout(found, h, is_kernel, &n, &bytes) != 0) return CUDA_SUCCESS;
    LOG_WARN("kernel %s: the client read %u parameters (%u bytes) from its image, this driver's layout has %u "
             "(%u bytes): its binding is refused (CUDA_ERROR_INVALID_IMAGE at the client's next synchronizing "
             "call); set SCUDA_READ_KERNELS=0 on the client",
             name, found->n, end_of(found->slots, found->n), n, bytes);
    return CUDA_ERROR_INVALID_IMAGE;
}

void layout_claims_drop(uint64_t id) { host_quota_free(idmap_del(&images, id)); }
