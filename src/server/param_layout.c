/* param_layout.c - see param_layout.h. */
#include "param_layout.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "layout_claims.h"
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
 * keep is handed over in *uncached, for the caller to free. A layout the
 * client read otherwise (layout_claims.h) is checked here, when the driver
 * is first asked: *refused is then CUDA_ERROR_INVALID_IMAGE, and nothing
 * is kept, so that every launch of h is refused. */
static const struct param_layout *layout_locked(void *h, int is_kernel, struct param_layout **uncached,
                                                CUresult *refused)
{
    *uncached = NULL;
    *refused = CUDA_SUCCESS;
    if (!h) return NULL; /* no function: the driver refuses the call itself */
    struct entry **head = bucket_of(h);
    for (struct entry *e = *head; e; e = e->next)
        if (e->h == h) return e->layout;
    int cacheable;
    struct param_layout *l = query(h, is_kernel, &cacheable);
    if (l && cacheable && layout_claims_settle(h, l) != 0) {
        free(l);
        *refused = CUDA_ERROR_INVALID_IMAGE;
        return NULL;
    }
    struct entry *e = l && cacheable ? malloc(sizeof *e) : NULL;
    if (!e) return *uncached = l;
    *e = (struct entry){.next = *head, .h = h, .layout = l};
    *head = e;
    return l;
}

struct param_layout *param_layout_dup(void *h, int is_kernel, CUresult *refused)
{
    pthread_mutex_lock(&lock);
    struct param_layout *uncached;
    CUresult why;
    const struct param_layout *l = layout_locked(h, is_kernel, &uncached, &why);
    if (refused) *refused = why;
    struct param_layout *copy = uncached;
    if (l && !uncached) {
        size_t size = sizeof *l + l->n * sizeof l->p[0];
        if ((copy = malloc(size))) memcpy(copy, l, size);
    }
    pthread_mutex_unlock(&lock);
    return copy;
}

/* ---- building a launch's arguments ---------------------------------------------- */

static const char *name_of(void *h, int is_kernel)
{
    const char *name = NULL;
    if (is_kernel) REAL(cuKernelGetName, &name, (CUkernel)h);
    else REAL(cuFuncGetName, &name, (CUfunction)h);
    return name ? name : "?";
}

/* The driver's own `extra` form, around a raw buffer. */
static void point_extra(struct launch_params *lp)
{
    lp->extra_words[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
    lp->extra_words[1] = lp->buf;
    lp->extra_words[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
    lp->extra_words[3] = &lp->size;
    lp->extra_words[4] = CU_LAUNCH_PARAM_END;
    lp->extra = lp->extra_words;
}

/* With the lock held: lp from p and layout l (NULL: unknown). */
static CUresult bind_locked(const struct param_layout *l, const struct msg_launch_params *p,
                            struct launch_params *lp, char *why, size_t why_len)
{
    if (!l) {
        if (p->data_len == 0) return CUDA_SUCCESS;
        snprintf(why, why_len, "the driver cannot report its parameter layout (cuFuncGetParamInfo), "
                               "so no parameters can be passed");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (p->data_len < l->bytes) {
        snprintf(why, why_len, "%s%" PRIu64 " parameter bytes sent, where the kernel reads %u",
                 p->raw ? "a raw buffer: " : "", p->data_len, l->bytes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    lp->size = (size_t)p->data_len;
    lp->buf = lp->size <= sizeof lp->small ? (void *)lp->small : malloc(lp->size);
    if (!lp->buf) return CUDA_ERROR_OUT_OF_MEMORY;
    if (lp->size) memcpy(lp->buf, p->data, lp->size);
    if (p->raw) {
        if (lp->size) point_extra(lp);
        return CUDA_SUCCESS;
    }
    if (l->n == 0) return CUDA_SUCCESS;
    void **ptrs = l->n <= 64 ? lp->small_ptrs : malloc(l->n * sizeof *ptrs);
    if (!ptrs) return CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < l->n; i++) ptrs[i] = (char *)lp->buf + l->p[i].offset;
    lp->kernel_params = ptrs;
    return CUDA_SUCCESS;
}

CUresult launch_params_build(void *h, int is_kernel, const struct msg_launch_params *p, struct launch_params *lp)
{
    char why[160];
    lp->kernel_params = lp->extra = NULL;
    lp->buf = NULL;
    lp->size = 0;
    pthread_mutex_lock(&lock);
    struct param_layout *uncached;
    CUresult refused;
    const struct param_layout *l = layout_locked(h, is_kernel, &uncached, &refused);
    CUresult r = refused != CUDA_SUCCESS ? refused : bind_locked(l, p, lp, why, sizeof why);
    pthread_mutex_unlock(&lock);
    free(uncached);
    if (r == CUDA_SUCCESS) return r;
    launch_params_free(lp);
    if (r == CUDA_ERROR_INVALID_VALUE) LOG_WARN("kernel %s refused: %s", name_of(h, is_kernel), why);
    return r;
}

void launch_params_free(struct launch_params *lp)
{
    if (lp->buf != lp->small) free(lp->buf);
    if (lp->kernel_params != lp->small_ptrs) free(lp->kernel_params);
    lp->buf = NULL;
    lp->kernel_params = NULL;
    lp->extra = NULL;
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
