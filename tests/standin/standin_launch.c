/* SCUDA CPU stand-in driver: kernel launches, built-in kernels, launch log.
 *
 * A kernel runs as a CPU implementation chosen by its PTX entry name; the
 * arguments are read from the parameter buffer at the offsets the PTX
 * declares (see README.md and kernels.ptx):
 *
 *   fill_u32(u64 out, u32 value, u64 n)      out[i] = value, i < n
 *   vec_add(u64 a, u64 b, u64 c, s32 n)      c[i] = a[i] + b[i] (float), i < n
 *   copy_params*(u64 out, ...)               out <- the whole parameter buffer
 *   sleep_ms(u32 ms)                          the stream is busy for ms
 *   fault()                                   sticky CUDA_ERROR_ILLEGAL_ADDRESS
 *   trap_assert()                             sticky CUDA_ERROR_ASSERT + message
 *   say_hello(s32 n)                          device printf: "hello from thread i"
 *   noop(), any other name                    nothing (the launch is logged)
 *
 * Element loops cover i < n whatever the grid (as a grid-stride loop
 * would). A kernel that would touch memory outside a live allocation
 * faults instead (sticky CUDA_ERROR_ILLEGAL_ADDRESS), like a real GPU.
 */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* launch log                                                          */

typedef struct si_log_ent {
    char name[128];
    unsigned grid[3], block[3], shmem;
    unsigned char *params;
    size_t psize;
} si_log_ent;

static si_log_ent si_log[STANDIN_LAUNCH_LOG_SIZE];
static unsigned long long si_log_count;

static void si_log_launch(const si_func *f, const unsigned grid[3], const unsigned block[3],
                          unsigned shmem, const unsigned char *params, size_t psize)
{
    si_log_ent *e = &si_log[si_log_count % STANDIN_LAUNCH_LOG_SIZE];
    free(e->params);
    snprintf(e->name, sizeof(e->name), "%s", f->entry->name);
    memcpy(e->grid, grid, sizeof(e->grid));
    memcpy(e->block, block, sizeof(e->block));
    e->shmem = shmem;
    e->params = si_xcalloc(psize ? psize : 1, 1);
    if (psize)
        memcpy(e->params, params, psize);
    e->psize = psize;
    si_log_count++;
}

unsigned long long standin_launch_count(void)
{
    si_enter();
    unsigned long long n = si_log_count;
    si_leave();
    return n;
}

int standin_launch_get(unsigned long long index, char *name, size_t name_size,
                       unsigned int grid[3], unsigned int block[3], unsigned int *shared_mem_bytes,
                       void *params, size_t params_cap, size_t *params_size)
{
    si_enter();
    int rc = -1;
    if (index < si_log_count && si_log_count - index <= STANDIN_LAUNCH_LOG_SIZE) {
        const si_log_ent *e = &si_log[index % STANDIN_LAUNCH_LOG_SIZE];
        if (name && name_size)
            snprintf(name, name_size, "%s", e->name);
        if (grid)
            memcpy(grid, e->grid, sizeof(e->grid));
        if (block)
            memcpy(block, e->block, sizeof(e->block));
        if (shared_mem_bytes)
            *shared_mem_bytes = e->shmem;
        if (params && params_cap)
            memcpy(params, e->params, e->psize < params_cap ? e->psize : params_cap);
        if (params_size)
            *params_size = e->psize;
        rc = 0;
    }
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* built-in kernels                                                    */

void si_kargs_free(si_kargs *k)
{
    free(k->blob);
    k->blob = NULL;
}

static bool si_sig(const si_entry *e, size_t n, const size_t *sizes)
{
    if (e->n_params != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (e->params[i].size != sizes[i])
            return false;
    return true;
}

static uint64_t si_rd(const unsigned char *buf, const si_entry *e, size_t i)
{
    uint64_t v = 0;
    size_t n = e->params[i].size < 8 ? e->params[i].size : 8;
    memcpy(&v, buf + e->params[i].offset, n); /* little endian */
    return v;
}

/* decodes the arguments of a built-in kernel; SI_BI_NONE if unknown */
/* a texture or surface kernel: the view is copied now, as the launch binds it */
static bool si_decode_tex(const si_entry *e, const unsigned char *buf, si_module *m, si_kargs *k)
{
    static const size_t tex_sig[] = {8, 8, 8, 4, 4}, ref_sig[] = {8, 8, 4}, surf_sig[] = {8, 4, 4, 4, 4};
    si_texview v;
    bool have = false;
    if (strcmp(e->name, "tex_sample") == 0) {
        if (!si_sig(e, 5, tex_sig))
            return false;
        k->builtin = SI_BI_TEX_SAMPLE;
        have = si_texobj_view(si_rd(buf, e, 1), false, &v);
        k->p[0] = si_rd(buf, e, 0);
        k->p[1] = si_rd(buf, e, 2);
        k->n = (uint32_t)si_rd(buf, e, 3);
    } else if (strcmp(e->name, "texref_sample") == 0) {
        if (!si_sig(e, 3, ref_sig))
            return false;
        k->builtin = SI_BI_TEX_SAMPLE;
        have = m && si_texref_view(m, "tex_ref", &v);
        k->p[0] = si_rd(buf, e, 0);
        k->p[1] = si_rd(buf, e, 1);
        k->n = (uint32_t)si_rd(buf, e, 2);
    } else {
        if (!si_sig(e, 5, surf_sig))
            return false;
        k->builtin = SI_BI_SURF_WRITE;
        have = si_texobj_view(si_rd(buf, e, 0), true, &v);
        for (int i = 0; i < 4; i++)
            k->dims[i] = (uint32_t)si_rd(buf, e, (size_t)i + 1);
    }
    if (have) { /* else no blob: the kernel faults, as a bad object does on a GPU */
        k->blob = si_xcalloc(1, sizeof v);
        memcpy(k->blob, &v, sizeof v);
        k->blob_len = sizeof v;
    }
    return true;
}

static void si_decode(const si_entry *e, const unsigned char *buf, si_module *m, si_kargs *k)
{
    static const size_t fill_sig[] = {8, 4, 8}, vec_sig[] = {8, 8, 8, 4}, one32[] = {4};
    const char *n = e->name;
    int want = SI_BI_NONE;
    bool ok = true;
    memset(k, 0, sizeof(*k));
    if (strcmp(n, "fill_u32") == 0) {
        want = SI_BI_FILL_U32;
        if ((ok = si_sig(e, 3, fill_sig))) {
            k->p[0] = si_rd(buf, e, 0);
            k->u32 = (uint32_t)si_rd(buf, e, 1);
            k->n = si_rd(buf, e, 2);
        }
    } else if (strcmp(n, "vec_add") == 0) {
        want = SI_BI_VEC_ADD;
        if ((ok = si_sig(e, 4, vec_sig))) {
            k->p[0] = si_rd(buf, e, 0);
            k->p[1] = si_rd(buf, e, 1);
            k->p[2] = si_rd(buf, e, 2);
            int32_t cnt = (int32_t)(uint32_t)si_rd(buf, e, 3);
            k->n = cnt > 0 ? (uint64_t)cnt : 0;
        }
    } else if (strncmp(n, "copy_params", 11) == 0) {
        want = SI_BI_COPY_PARAMS;
        if ((ok = e->n_params >= 1 && e->params[0].size == 8)) {
            k->p[0] = si_rd(buf, e, 0);
            k->blob_len = e->param_bytes;
            k->blob = si_xcalloc(e->param_bytes, 1);
            memcpy(k->blob, buf, e->param_bytes);
        }
    } else if (strcmp(n, "launch_shape") == 0) {
        want = SI_BI_LAUNCH_SHAPE; /* the configuration is added at submit */
        if ((ok = e->n_params == 1 && e->params[0].size == 8))
            k->p[0] = si_rd(buf, e, 0);
    } else if (strcmp(n, "sleep_ms") == 0) {
        want = SI_BI_SLEEP_MS;
        if ((ok = si_sig(e, 1, one32)))
            k->u32 = (uint32_t)si_rd(buf, e, 0);
    } else if (strcmp(n, "fault") == 0) {
        want = SI_BI_FAULT;
    } else if (strcmp(n, "trap_assert") == 0) {
        want = SI_BI_TRAP_ASSERT;
    } else if (strcmp(n, "tex_sample") == 0 || strcmp(n, "texref_sample") == 0 ||
               strcmp(n, "surf_write") == 0) {
        want = strcmp(n, "surf_write") == 0 ? SI_BI_SURF_WRITE : SI_BI_TEX_SAMPLE;
        ok = si_decode_tex(e, buf, m, k);
    } else if (strcmp(n, "bump_global") == 0) {
        want = SI_BI_BUMP_GLOBAL;
        CUdeviceptr g = 0, t = 0;
        if ((ok = si_sig(e, 1, one32) && m && si_module_global(m, "g_counter", &g, NULL) == CUDA_SUCCESS &&
                  si_module_global(m, "c_table", &t, NULL) == CUDA_SUCCESS)) {
            k->p[0] = g, k->p[1] = t;
            k->u32 = (uint32_t)si_rd(buf, e, 0);
        }
    } else if (strcmp(n, "say_hello") == 0) {
        want = SI_BI_SAY_HELLO;
        if ((ok = si_sig(e, 1, one32))) {
            int32_t cnt = (int32_t)(uint32_t)si_rd(buf, e, 0);
            k->n = cnt > 0 ? (uint64_t)cnt : 0;
        }
    }
    if (!ok) {
        if (!e->warned) {
            fprintf(stderr, "standin: kernel %s has an unexpected parameter list; it does nothing\n",
                    n);
            ((si_entry *)e)->warned = true;
        }
        si_kargs_free(k);
        want = SI_BI_NONE;
    }
    k->builtin = want;
}

#define SI_MAX_HELLO (1u << 20)

void si_kernel_exec(si_ctx *c, const si_kargs *k)
{
    if (si_g.sticky)
        return;
    switch (k->builtin) {
    case SI_BI_FILL_U32: {
        size_t bytes;
        if (!k->n)
            break;
        if (__builtin_mul_overflow((size_t)k->n, (size_t)4, &bytes) ||
            !si_range((uintptr_t)k->p[0], bytes)) {
            si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
            break;
        }
        unsigned char *out = (unsigned char *)(uintptr_t)k->p[0];
        for (uint64_t i = 0; i < k->n; i++)
            memcpy(out + 4 * i, &k->u32, 4);
        break;
    }
    case SI_BI_VEC_ADD: {
        size_t bytes;
        if (!k->n)
            break;
        if (__builtin_mul_overflow((size_t)k->n, (size_t)4, &bytes) ||
            !si_range((uintptr_t)k->p[0], bytes) || !si_range((uintptr_t)k->p[1], bytes) ||
            !si_range((uintptr_t)k->p[2], bytes)) {
            si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
            break;
        }
        const unsigned char *a = (const unsigned char *)(uintptr_t)k->p[0];
        const unsigned char *b = (const unsigned char *)(uintptr_t)k->p[1];
        unsigned char *out = (unsigned char *)(uintptr_t)k->p[2];
        for (uint64_t i = 0; i < k->n; i++) {
            float x, y, z;
            memcpy(&x, a + 4 * i, 4);
            memcpy(&y, b + 4 * i, 4);
            z = x + y;
            memcpy(out + 4 * i, &z, 4);
        }
        break;
    }
    case SI_BI_COPY_PARAMS:
        if (!si_range((uintptr_t)k->p[0], k->blob_len)) {
            si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
            break;
        }
        memcpy((void *)(uintptr_t)k->p[0], k->blob, k->blob_len);
        break;
    case SI_BI_FAULT:
        si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
        break;
    case SI_BI_TEX_SAMPLE:
        if (!k->blob || !si_tex_sample_exec((const si_texview *)k->blob, k->p[0], k->p[1], k->n))
            si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
        break;
    case SI_BI_SURF_WRITE:
        if (!k->blob || !si_surf_write_exec((const si_texview *)k->blob, k->dims[0], k->dims[1],
                                            k->dims[2], k->dims[3]))
            si_set_sticky(CUDA_ERROR_ILLEGAL_ADDRESS);
        break;
    case SI_BI_TRAP_ASSERT:
        fprintf(stderr, "kernels.cu:1: void trap_assert(): block: [0,0,0], thread: [0,0,0] "
                        "Assertion `false` failed.\n");
        fflush(stderr);
        si_set_sticky(CUDA_ERROR_ASSERT);
        break;
    case SI_BI_BUMP_GLOBAL: {
        uint32_t v, t;
        memcpy(&v, (const void *)(uintptr_t)k->p[0], 4);
        memcpy(&t, (const void *)(uintptr_t)(k->p[1] + 4), 4);
        v += k->u32 + t;
        memcpy((void *)(uintptr_t)k->p[0], &v, 4);
        break;
    }
    case SI_BI_SAY_HELLO: {
        uint64_t n = k->n < SI_MAX_HELLO ? k->n : SI_MAX_HELLO;
        char line[48];
        for (uint64_t i = 0; i < n; i++) {
            int len = snprintf(line, sizeof(line), "hello from thread %llu\n",
                               (unsigned long long)i);
            si_strbuf_append(&c->printf_buf, line, (size_t)len);
        }
        break;
    }
    default:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* launches                                                            */

typedef struct si_launch_cfg {
    unsigned grid[3], block[3], shmem;
    bool cooperative;
    unsigned cluster[3];
    bool has_cluster;
} si_launch_cfg;

static CUresult si_build_params(const si_entry *e, void **kp, void **extra, unsigned char **out)
{
    if (kp && extra)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *buf = si_xcalloc(e->param_bytes ? e->param_bytes : 1, 1);
    if (extra) {
        const void *ptr = NULL;
        size_t size = 0;
        bool have_size = false;
        for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
                ptr = extra[i + 1];
            } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
                if (!extra[i + 1]) {
                    free(buf);
                    return CUDA_ERROR_INVALID_VALUE;
                }
                memcpy(&size, extra[i + 1], sizeof(size));
                have_size = true;
            } else {
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
        if (e->param_bytes) {
            if (!ptr || !have_size || size < e->param_bytes) {
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
            memcpy(buf, ptr, e->param_bytes);
        }
    } else if (kp) {
        for (size_t i = 0; i < e->n_params; i++) {
            if (!kp[i]) {
                free(buf);
                return CUDA_ERROR_INVALID_VALUE;
            }
            memcpy(buf + e->params[i].offset, kp[i], e->params[i].size);
        }
    } else if (e->n_params) {
        free(buf);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *out = buf;
    return CUDA_SUCCESS;
}

static CUresult si_check_cfg(const si_func *f, const si_launch_cfg *cfg)
{
    const unsigned *g = cfg->grid, *b = cfg->block;
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
        return CUDA_ERROR_INVALID_VALUE;
    if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64)
        return CUDA_ERROR_INVALID_VALUE;
    unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    if (threads > 1024 || threads > f->entry->max_threads)
        return CUDA_ERROR_INVALID_VALUE;
    if (cfg->shmem > (unsigned)f->attrs.max_dyn_shmem)
        return CUDA_ERROR_INVALID_VALUE;
    if (cfg->has_cluster) {
        const unsigned *c = cfg->cluster;
        unsigned long long n = (unsigned long long)c[0] * c[1] * c[2];
        unsigned max = f->attrs.non_portable_cluster ? 16 : 8;
        if (!c[0] || !c[1] || !c[2] || n > max || g[0] % c[0] || g[1] % c[1] || g[2] % c[2])
            return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
    if (cfg->cooperative) {
        unsigned long long per_sm = 2048 / threads;
        if (per_sm > 32)
            per_sm = 32;
        unsigned long long blocks = (unsigned long long)g[0] * g[1] * g[2];
        if (blocks > per_sm * SI_SM_COUNT)
            return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    }
    return CUDA_SUCCESS;
}

static CUresult si_launch(CUfunction hf, si_launch_cfg *cfg, CUstream h, void **kp, void **extra,
                          bool ptsz)
{
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (rc)
        return rc;
    if (!si_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    si_func *f = NULL;
    rc = si_resolve_func(hf, s->ctx, &f);
    if (rc)
        return rc;
    if (f->module->ctx != s->ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    rc = si_check_cfg(f, cfg);
    if (rc)
        return rc;
    si_kcall k;
    memset(&k, 0, sizeof(k));
    rc = si_build_params(f->entry, kp, extra, &k.params);
    if (rc)
        return rc;
    k.func = f;
    k.func_id = f->id;
    k.handle = hf;
    memcpy(k.grid, cfg->grid, sizeof(k.grid));
    memcpy(k.block, cfg->block, sizeof(k.block));
    k.shmem = cfg->shmem;
    if (s->capture) {
        si_capture_kernel(s, &k); /* a kernel node of the capture's graph */
        return CUDA_SUCCESS;
    }
    si_kcall_submit(s, &k);
    si_kcall_free(&k);
    return CUDA_SUCCESS;
}

CUresult si_kcall_make(si_ctx *c, CUfunction hf, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, void **kp, void **extra, si_kcall *out)
{
    memset(out, 0, sizeof(*out));
    si_func *f = NULL;
    CUresult rc = si_resolve_func(hf, c, &f);
    if (rc)
        return rc;
    if (f->module->ctx != c)
        return CUDA_ERROR_INVALID_HANDLE;
    si_launch_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    memcpy(cfg.grid, grid, sizeof(cfg.grid));
    memcpy(cfg.block, block, sizeof(cfg.block));
    cfg.shmem = shmem;
    if ((rc = si_check_cfg(f, &cfg)) != CUDA_SUCCESS)
        return rc;
    if ((rc = si_build_params(f->entry, kp, extra, &out->params)) != CUDA_SUCCESS)
        return rc;
    out->func = f;
    out->func_id = f->id;
    out->handle = hf;
    memcpy(out->grid, grid, sizeof(out->grid));
    memcpy(out->block, block, sizeof(out->block));
    out->shmem = shmem;
    return CUDA_SUCCESS;
}

void si_kcall_submit(si_stream *s, const si_kcall *k)
{
    si_func *f = k->func;
    if (!si_hset_has(&si_g.funcs, f) || f->id != k->func_id) {
        fputs("standin: a graph's kernel node outlived its module; it does nothing\n", stderr);
        return;
    }
    si_log_launch(f, k->grid, k->block, k->shmem, k->params, f->entry->param_bytes);
    si_kargs a;
    si_decode(f->entry, k->params, f->module, &a);
    si_op *op;
    if (a.builtin == SI_BI_LAUNCH_SHAPE) {
        /* launch_shape writes grid[3], block[3] and the shared size as u32 */
        uint32_t shape[7] = {k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->shmem};
        a.blob = si_xcalloc(sizeof shape, 1);
        memcpy(a.blob, shape, sizeof shape);
        a.blob_len = sizeof shape;
        a.builtin = SI_BI_COPY_PARAMS;
    }
    if (a.builtin == SI_BI_SLEEP_MS) {
        op = si_op_new(SI_OP_SLEEP);
        op->u.sleep.ms = a.u32;
        si_kargs_free(&a);
        if (a.u32 == 0) {
            si_op_free(op);
            return;
        }
    } else {
        op = si_op_new(SI_OP_KERNEL);
        op->u.kernel = a;
    }
    si_submit(s, op);
}

void si_kcall_free(si_kcall *k)
{
    free(k->params);
    k->params = NULL;
}

static CUresult si_launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, CUstream h, void **kp,
                                 void **extra, bool coop, bool ptsz)
{
    si_launch_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.grid[0] = gx;
    cfg.grid[1] = gy;
    cfg.grid[2] = gz;
    cfg.block[0] = bx;
    cfg.block[1] = by;
    cfg.block[2] = bz;
    cfg.shmem = shmem;
    cfg.cooperative = coop;
    si_enter();
    CUresult rc = si_launch(f, &cfg, h, kp, extra, ptsz);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                unsigned int gridDimZ, unsigned int blockDimX,
                                unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra)
{
    return si_launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, extra, false, false);
}

SI_API CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                            unsigned int gridDimY, unsigned int gridDimZ,
                                            unsigned int blockDimX, unsigned int blockDimY,
                                            unsigned int blockDimZ, unsigned int sharedMemBytes,
                                            CUstream hStream, void **kernelParams, void **extra)
{
    return si_launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, extra, false, true);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                           unsigned int gridDimY, unsigned int gridDimZ,
                                           unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes,
                                           CUstream hStream, void **kernelParams)
{
    return si_launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, NULL, true, false);
}

SI_API CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                       unsigned int gridDimY,
                                                       unsigned int gridDimZ,
                                                       unsigned int blockDimX,
                                                       unsigned int blockDimY,
                                                       unsigned int blockDimZ,
                                                       unsigned int sharedMemBytes,
                                                       CUstream hStream, void **kernelParams)
{
    return si_launch_kernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                            sharedMemBytes, hStream, kernelParams, NULL, true, true);
}

static CUresult si_launch_ex(const CUlaunchConfig *config, CUfunction f, void **kp, void **extra,
                             bool ptsz)
{
    if (!config)
        return si_check_init() ? si_check_init() : CUDA_ERROR_INVALID_VALUE;
    si_launch_cfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.grid[0] = config->gridDimX;
    cfg.grid[1] = config->gridDimY;
    cfg.grid[2] = config->gridDimZ;
    cfg.block[0] = config->blockDimX;
    cfg.block[1] = config->blockDimY;
    cfg.block[2] = config->blockDimZ;
    cfg.shmem = config->sharedMemBytes;
    if (config->numAttrs && !config->attrs)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *a = &config->attrs[i];
        switch ((int)a->id) {
        case CU_LAUNCH_ATTRIBUTE_IGNORE:
        case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
        case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
            break;
        case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
        case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
            /* accepted; the event is not recorded by the stand-in */
            break;
        case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            cfg.cooperative = a->value.cooperative != 0;
            break;
        case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            cfg.has_cluster = true;
            cfg.cluster[0] = a->value.clusterDim.x;
            cfg.cluster[1] = a->value.clusterDim.y;
            cfg.cluster[2] = a->value.clusterDim.z;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return si_launch(f, &cfg, config->hStream, kp, extra, ptsz);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                  void **extra)
{
    si_enter();
    CUresult rc = si_launch_ex(config, f, kernelParams, extra, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                              void **kernelParams, void **extra)
{
    si_enter();
    CUresult rc = si_launch_ex(config, f, kernelParams, extra, true);
    si_leave();
    return rc;
}
