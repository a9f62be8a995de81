/* param_layout.c - see param_layout.h. */
#include "param_layout.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "../common/log.h"

/* ---- asking the driver ------------------------------------------------- */

/* The function that answers for h. A library kernel is asked through its
 * function in the current context: cuKernelGetParamInfo reports no
 * parameters for kernels of cudart's libraries (driver 580), which are
 * loaded before any context exists. Without a context only the kernel
 * itself can be asked, and that answer is not kept (*cacheable = 0). */
static CUfunction answering_function(void *h, int is_kernel, int *cacheable)
{
    CUfunction f = (CUfunction)h;
    CUcontext ctx = NULL;
    *cacheable = 1;
    if (!is_kernel) return f;
    if (REAL(cuCtxGetCurrent, &ctx) == CUDA_SUCCESS && ctx &&
        REAL(cuKernelGetFunction, &f, (CUkernel)h) == CUDA_SUCCESS)
        return f;
    *cacheable = 0;
    return NULL;
}

static int add_param(struct param_layout **l, uint32_t *cap, size_t off, size_t size)
{
    if (off > UINT32_MAX || size > UINT32_MAX - off) return -1;
    if ((*l)->n == *cap) {
        *cap *= 2;
        struct param_layout *bigger = realloc(*l, sizeof **l + *cap * sizeof (*l)->p[0]);
        if (!bigger) return -1;
        *l = bigger;
    }
    struct param_layout *m = *l;
    m->p[m->n].offset = (uint32_t)off;
    m->p[m->n].size = (uint32_t)size;
    if (off + size > m->bytes) m->bytes = (uint32_t)(off + size);
    m->n++;
    return 0;
}

/* Parameter after parameter until the driver says INVALID_VALUE (the index
 * past the last). Any other answer, or more parameters than a request can
 * carry, and the layout is unknown: NULL. */
static struct param_layout *query(void *h, int is_kernel, int *cacheable)
{
    CUfunction f = answering_function(h, is_kernel, cacheable);
    uint32_t cap = 16;
    struct param_layout *l = malloc(sizeof *l + cap * sizeof l->p[0]);
    if (!l) return NULL;
    l->n = l->bytes = 0;
    for (;;) {
        size_t off = 0, size = 0;
        CUresult r = f ? REAL(cuFuncGetParamInfo, f, l->n, &off, &size)
                       : REAL(cuKernelGetParamInfo, (CUkernel)h, l->n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) return l;
        if (r != CUDA_SUCCESS || l->n == LAUNCH_MAX_PARAMS || add_param(&l, &cap, off, size) != 0) break;
    }
    free(l);
    return NULL;
}

/* ---- the cache ----------------------------------------------------------------- */

#define BUCKETS 1024

struct entry {
    struct entry *next;
    const void *h;
    struct param_layout *layout;
};

static struct entry *buckets[BUCKETS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* workers load and destroy too */

static struct entry **bucket_of(const void *h)
{
    uint64_t x = (uint64_t)(uintptr_t)h * 0x9e3779b97f4a7c15ull;
    return &buckets[(x >> 40) & (BUCKETS - 1)];
}

static void forget_all(void)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < BUCKETS; i++) {
        while (buckets[i]) {
            struct entry *e = buckets[i];
            buckets[i] = e->next;
            free(e->layout);
            free(e);
        }
    }
    pthread_mutex_unlock(&lock);
}

/* With the lock held: h's layout (NULL: unknown). One the cache may not
 * keep is handed over in *uncached, for the caller to free. */
static const struct param_layout *layout_locked(void *h, int is_kernel, struct param_layout **uncached)
{
    *uncached = NULL;
    if (!h) return NULL; /* no function: the driver refuses the call itself */
    struct entry **head = bucket_of(h);
    for (struct entry *e = *head; e; e = e->next)
        if (e->h == h) return e->layout;
    int cacheable;
    struct param_layout *l = query(h, is_kernel, &cacheable);
    struct entry *e = l && cacheable ? malloc(sizeof *e) : NULL;
    if (!e) return *uncached = l;
    *e = (struct entry){.next = *head, .h = h, .layout = l};
    *head = e;
    return l;
}

struct param_layout *param_layout_dup(void *h, int is_kernel)
{
    pthread_mutex_lock(&lock);
    struct param_layout *uncached;
    const struct param_layout *l = layout_locked(h, is_kernel, &uncached);
    struct param_layout *copy = uncached;
    if (l && !uncached) {
        size_t size = sizeof *l + l->n * sizeof l->p[0];
        if ((copy = malloc(size))) memcpy(copy, l, size);
    }
    pthread_mutex_unlock(&lock);
    return copy;
}

/* ---- checking a request ------------------------------------------------------- */

/* NULL when the driver, reading layout l, stays inside what lp carries;
 * else why not, in why. */
static const char *mismatch(const struct param_layout *l, const struct launch_params *lp, char *why, size_t len)
{
    int raw = lp->nparams == LAUNCH_RAW_PARAMS;
    if (!l) {
        if (raw ? lp->len == 0 : lp->nparams == 0) return NULL;
        return "the driver cannot report its parameter layout (cuFuncGetParamInfo), so no parameters are passed";
    }
    if (raw) {
        if (lp->len >= l->bytes) return NULL;
        snprintf(why, len, "a raw parameter buffer of %zu bytes, where the kernel reads %u", lp->len, l->bytes);
        return why;
    }
    if (lp->nparams != l->n) {
        snprintf(why, len, "%u parameters sent, where the kernel has %u", lp->nparams, l->n);
        return why;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        uint32_t off, size;
        memcpy(&off, lp->layout + 8 * i, 4);
        memcpy(&size, lp->layout + 8 * i + 4, 4);
        if (off != l->p[i].offset || size != l->p[i].size) {
            snprintf(why, len, "parameter %u sent at offset %u, %u bytes, where the kernel has it at %u, %u bytes", i,
                     off, size, l->p[i].offset, l->p[i].size);
            return why;
        }
    }
    return NULL;
}

static const char *name_of(void *h, int is_kernel)
{
    const char *name = NULL;
    if (is_kernel) REAL(cuKernelGetName, &name, (CUkernel)h);
    else REAL(cuFuncGetName, &name, (CUfunction)h);
    return name ? name : "?";
}

CUresult param_layout_check(void *h, int is_kernel, const struct launch_params *lp)
{
    char why[160];
    pthread_mutex_lock(&lock);
    struct param_layout *uncached;
    const char *bad = mismatch(layout_locked(h, is_kernel, &uncached), lp, why, sizeof why);
    pthread_mutex_unlock(&lock);
    free(uncached);
    if (!bad) return CUDA_SUCCESS;
    LOG_WARN("kernel %s refused: %s", name_of(h, is_kernel), bad);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- when functions die -------------------------------------------------------- */

static struct driver_table orig;

/* Call the driver, then forget every layout: the handles it freed may come
 * back as other functions. */
#define FORGET_AFTER(name, params, args)       \
    static CUresult forget_##name params       \
    {                                          \
        CUresult r = orig.name args;           \
        forget_all();                          \
        return r;                              \
    }

FORGET_AFTER(cuModuleUnload, (CUmodule m), (m))
FORGET_AFTER(cuLibraryUnload, (CUlibrary l), (l))
FORGET_AFTER(cuCtxDestroy, (CUcontext c), (c))
FORGET_AFTER(cuCtxDestroy_v2, (CUcontext c), (c))
FORGET_AFTER(cuDevicePrimaryCtxRelease, (CUdevice d), (d))
FORGET_AFTER(cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
FORGET_AFTER(cuDevicePrimaryCtxReset, (CUdevice d), (d))
FORGET_AFTER(cuDevicePrimaryCtxReset_v2, (CUdevice d), (d))
FORGET_AFTER(cuGreenCtxDestroy, (CUgreenCtx g), (g))

#define WRAP(name) \
    if (t->name) t->name = forget_##name

void param_layout_install(struct driver_table *t)
{
    orig = *t;
    WRAP(cuModuleUnload);
    WRAP(cuLibraryUnload);
    WRAP(cuCtxDestroy);
    WRAP(cuCtxDestroy_v2);
    WRAP(cuDevicePrimaryCtxRelease);
    WRAP(cuDevicePrimaryCtxRelease_v2);
    WRAP(cuDevicePrimaryCtxReset);
    WRAP(cuDevicePrimaryCtxReset_v2);
    WRAP(cuGreenCtxDestroy);
}
