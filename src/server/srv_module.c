/* srv_module.c - modules, libraries, kernels and functions.
 *
 * A load replies with every function's name, and scuda_param_info with a
 * function's parameter layout at its first launch, so the client answers
 * cuModuleGetFunction and packs launch parameters without further round
 * trips (docs/architecture.md, 3.8 Modules). */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "image_check.h"
#include "module_cache.h"
#include "param_layout.h"
#include "session.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/jit_options.h"

/* Which module or library each function and kernel id came from, so that
 * unloading drops them too: a stale id must never reach the driver. */
static struct idmap owners = IDMAP_INIT;

static CUresult put_owned(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle,
                          uint64_t owner_id)
{
    CUresult r = handle_put(s, id, kind, real_handle);
    if (r == CUDA_SUCCESS && idmap_put(&owners, id, 0, (void *)(uintptr_t)owner_id) != 0) {
        handle_drop(s, id);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    return r;
}

static void drop_owned(struct session *s, uint64_t owner_id)
{
    uint64_t ids[256];
    size_t n;
    do {
        n = idmap_take_by_value(&owners, (void *)(uintptr_t)owner_id, ids, 256);
        for (size_t i = 0; i < n; i++) {
            drop_owned(s, ids[i]); /* functions of a kernel of a library */
            handle_drop(s, ids[i]);
        }
    } while (n == 256);
}
/* Parameter count for "layout not known yet": the client asks again with
 * scuda_param_info when a context is current. */
#define PARAMS_UNKNOWN 0xffffffffu

/* A load describes each function by name only. Its parameter layout is
 * asked for at its first launch (scuda_param_info): finding it here would
 * make the driver load every kernel of every library at once (a CUkernel's
 * layout needs its function, and getting that defeats lazy loading), which
 * made PyTorch's start load thousands of kernels it never runs. */
static CUresult describe_module(wire_buf *out, CUmodule mod)
{
    unsigned count = 0;
    CUresult r = REAL(cuModuleGetFunctionCount, &count, mod);
    if (r != CUDA_SUCCESS) return r;
    CUfunction *fs = calloc(count ? count : 1, sizeof *fs);
    if (!fs) return CUDA_ERROR_OUT_OF_MEMORY;
    r = REAL(cuModuleEnumerateFunctions, fs, count, mod);
    wb_put_u32(out, r == CUDA_SUCCESS ? count : 0);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
        const char *name = "";
        REAL(cuFuncGetName, &name, fs[i]);
        wb_put_str(out, name);
        wb_put_u32(out, PARAMS_UNKNOWN);
    }
    free(fs);
    return r;
}

static CUresult describe_library(wire_buf *out, CUlibrary lib)
{
    unsigned count = 0;
    CUresult r = REAL(cuLibraryGetKernelCount, &count, lib);
    if (r != CUDA_SUCCESS) return r;
    CUkernel *ks = calloc(count ? count : 1, sizeof *ks);
    if (!ks) return CUDA_ERROR_OUT_OF_MEMORY;
    r = REAL(cuLibraryEnumerateKernels, ks, count, lib);
    wb_put_u32(out, r == CUDA_SUCCESS ? count : 0);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
        const char *name = "";
        REAL(cuKernelGetName, &name, ks[i]);
        wb_put_str(out, name);
        wb_put_u32(out, PARAMS_UNKNOWN);
    }
    free(ks);
    return r;
}

#define MAX_JIT_OPTIONS 32
#define MAX_JIT_LOG (1u << 20)

/* JIT options as they travel: scalar values, and the sizes of the log
 * buffers the client wants filled. The session supplies its own buffers. */
struct jit_options {
    unsigned n;
    CUjit_option opt[MAX_JIT_OPTIONS + 2]; /* + the size options of two logs */
    void *val[MAX_JIT_OPTIONS + 2];
    char *info_log, *error_log;
};

static int read_jit_options(wire_reader *in, struct jit_options *j)
{
    memset(j, 0, sizeof *j);
    uint32_t n = wr_u32(in);
    if (n > MAX_JIT_OPTIONS) return -1;
    for (uint32_t i = 0; i < n; i++) {
        CUjit_option o = (CUjit_option)wr_u32(in);
        uint64_t v = wr_u64(in);
        char **log = o == CU_JIT_INFO_LOG_BUFFER ? &j->info_log : o == CU_JIT_ERROR_LOG_BUFFER ? &j->error_log : NULL;
        if (log) {
            /* v is the size the client asked for; the size option follows. */
            if (v > MAX_JIT_LOG || *log) return -1;
            if (!(*log = calloc(1, v + 1))) return -1;
            j->val[j->n] = *log;
            j->opt[j->n] = o;
            j->n++;
            /* The driver learns a log buffer's size from its size option. */
            o = o == CU_JIT_INFO_LOG_BUFFER ? CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES : CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
            j->val[j->n] = (void *)(uintptr_t)v;
        } else if (jit_option_is_scalar(o)) {
            j->val[j->n] = (void *)(uintptr_t)v;
        } else {
            return -1; /* a pointer-valued option: never dereference client values */
        }
        j->opt[j->n++] = o;
    }
    return in->bad ? -1 : 0;
}

static void free_jit_logs(struct jit_options *j)
{
    free(j->info_log);
    free(j->error_log);
    j->info_log = j->error_log = NULL;
}

static void put_jit_logs(wire_buf *out, struct jit_options *j)
{
    wb_put_str(out, j->info_log ? j->info_log : "");
    wb_put_str(out, j->error_log ? j->error_log : "");
    free_jit_logs(j);
}

/* Load an image of len bytes (8-byte aligned) as a module or a library
 * under the client's id. Appends the JIT logs, then on success the
 * functions; the logs go back even on failure. The driver takes no length
 * and finds the image's extent in its headers, so an image whose headers
 * reach past its bytes never gets to the driver (image_check.h). */
static CUresult load_image(srv_call *c, uint64_t id, int is_library, struct jit_options *j, const void *image,
                           size_t len)
{
    CUresult r;
    char why[200];
    c->out_on_error = 1;
    if (image_check(image, len, why, sizeof why) != 0) {
        LOG_WARN("module image of %zu bytes refused: %s", len, why);
        put_jit_logs(&c->out, j);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (is_library) {
        CUlibrary lib = NULL;
        r = REAL(cuLibraryLoadData, &lib, image, j->n ? j->opt : NULL, j->n ? j->val : NULL, j->n, NULL, NULL, 0);
        put_jit_logs(&c->out, j);
        if (r == CUDA_SUCCESS && (r = describe_library(&c->out, lib)) == CUDA_SUCCESS)
            r = handle_put(c->s, id, HK_LIBRARY, lib);
        if (r != CUDA_SUCCESS && lib) REAL(cuLibraryUnload, lib);
    } else {
        CUmodule mod = NULL;
        r = REAL(cuModuleLoadDataEx, &mod, image, j->n, j->n ? j->opt : NULL, j->n ? j->val : NULL);
        put_jit_logs(&c->out, j);
        if (r == CUDA_SUCCESS && (r = describe_module(&c->out, mod)) == CUDA_SUCCESS)
            r = handle_put(c->s, id, HK_MODULE, mod);
        if (r != CUDA_SUCCESS && mod) REAL(cuModuleUnload, mod);
    }
    return r;
}

/* Request: u64 id, u8 is_library, JIT options, blob image. Reply (also on
 * failure): str info log, str error log; then, on success, the functions.
 * The image is copied to an aligned buffer: an ELF inside a frame need not
 * be 8-byte aligned. An image the driver accepts is kept in the module
 * cache, under the digest computed here. */
/* The head both loads share: u64 id, u8 is_library, JIT options. */
static int read_load_head(srv_call *c, uint64_t *id, uint8_t *is_library, struct jit_options *j)
{
    *id = wr_u64(&c->in);
    *is_library = wr_u8(&c->in);
    if (read_jit_options(&c->in, j) == 0) return 0;
    free_jit_logs(j);
    return -1;
}

CUresult srv_scuda_module_load(srv_call *c)
{
    uint64_t id;
    uint8_t is_library;
    struct jit_options j;
    if (read_load_head(c, &id, &is_library, &j) != 0) return CUDA_ERROR_INVALID_VALUE;
    size_t len;
    const void *image = wr_blob(&c->in, &len);
    char *copy = NULL;
    if (!wr_ok_end(&c->in) || !image || !(copy = malloc(len ? len : 1))) {
        c->out_on_error = 1;
        put_jit_logs(&c->out, &j);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(copy, image, len);
    module_cache_received(len);
    CUresult r = load_image(c, id, is_library, &j, copy, len);
    if (r == CUDA_SUCCESS) module_cache_put(copy, len);
    free(copy);
    return r;
}

/* Request: u64 id, u8 is_library, JIT options, the image's SHA-256 (32
 * bytes), u64 image length. Reply: u8 found; when 1, what scuda_module_load
 * replies (the load ran on the cached image); when 0, nothing more: the
 * session lacks the image and the client sends it with scuda_module_load.
 * The digest only finds bytes the server hashed itself. */
CUresult srv_scuda_module_load_by_hash(srv_call *c)
{
    uint64_t id;
    uint8_t is_library;
    struct jit_options j;
    if (read_load_head(c, &id, &is_library, &j) != 0) return CUDA_ERROR_INVALID_VALUE;
    const uint8_t *key = wr_view(&c->in, MODULE_KEY_LEN);
    uint64_t len = wr_u64(&c->in);
    if (!wr_ok_end(&c->in) || !key || len == 0 || len > MODULE_IMAGE_MAX) {
        free_jit_logs(&j);
        return CUDA_ERROR_INVALID_VALUE;
    }
    void *image = module_cache_get(key, len);
    /* The answer goes back even when the load fails: an empty
     * NOT_SUPPORTED reply means a server without this op. */
    c->out_on_error = 1;
    wb_put_u8(&c->out, image != NULL);
    if (!image) {
        free_jit_logs(&j);
        return CUDA_SUCCESS;
    }
    CUresult r = load_image(c, id, is_library, &j, image, (size_t)len);
    free(image);
    return r;
}

/* Request: u64 module id, u64 new function id, str name. */
CUresult srv_scuda_module_get_function(srv_call *c)
{
    uint64_t mod_id = wr_u64(&c->in), fid = wr_u64(&c->in);
    const char *name = wr_str(&c->in);
    if (!wr_ok_end(&c->in) || !name) return CUDA_ERROR_INVALID_VALUE;
    void *mod;
    CUresult r = handle_get(c->s, mod_id, HK_MODULE, &mod);
    if (r != CUDA_SUCCESS) return r;
    CUfunction f;
    if ((r = REAL(cuModuleGetFunction, &f, (CUmodule)mod, name)) != CUDA_SUCCESS) return r;
    return put_owned(c->s, fid, HK_FUNCTION, f, mod_id);
}

/* Request: u64 library id, u64 new kernel id, str name. */
CUresult srv_scuda_library_get_kernel(srv_call *c)
{
    uint64_t lib_id = wr_u64(&c->in), kid = wr_u64(&c->in);
    const char *name = wr_str(&c->in);
    if (!wr_ok_end(&c->in) || !name) return CUDA_ERROR_INVALID_VALUE;
    void *lib;
    CUresult r = handle_get(c->s, lib_id, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUkernel k;
    if ((r = REAL(cuLibraryGetKernel, &k, (CUlibrary)lib, name)) != CUDA_SUCCESS) return r;
    return put_owned(c->s, kid, HK_KERNEL, k, lib_id);
}

/* Request: u64 kernel id, u64 new function id. */
CUresult srv_scuda_kernel_get_function(srv_call *c)
{
    uint64_t kid = wr_u64(&c->in), fid = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *k;
    CUresult r = handle_get(c->s, kid, HK_KERNEL, &k);
    if (r != CUDA_SUCCESS) return r;
    CUfunction f;
    if ((r = REAL(cuKernelGetFunction, &f, (CUkernel)k)) != CUDA_SUCCESS) return r;
    return put_owned(c->s, fid, HK_FUNCTION, f, kid);
}

/* Request: u64 module-or-library id, u8 is_library, str name.
 * Reply: u64 device pointer, u64 size. */
CUresult srv_scuda_module_get_global(srv_call *c)
{
    uint64_t id = wr_u64(&c->in);
    uint8_t is_library = wr_u8(&c->in);
    const char *name = wr_str(&c->in);
    if (!wr_ok_end(&c->in) || !name) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, id, is_library ? HK_LIBRARY : HK_MODULE, &h);
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr p = 0;
    size_t size = 0;
    r = is_library ? REAL(cuLibraryGetGlobal, &p, &size, (CUlibrary)h, name)
                   : REAL(cuModuleGetGlobal_v2, &p, &size, (CUmodule)h, name);
    if (r != CUDA_SUCCESS) return r;
    wb_put_u64(&c->out, p);
    wb_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}

/* Request: u64 id, u8 is_library. */
CUresult srv_scuda_module_unload(srv_call *c)
{
    uint64_t id = wr_u64(&c->in);
    uint8_t is_library = wr_u8(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, id, is_library ? HK_LIBRARY : HK_MODULE, &h);
    if (r != CUDA_SUCCESS) return r;
    r = is_library ? REAL(cuLibraryUnload, (CUlibrary)h) : REAL(cuModuleUnload, (CUmodule)h);
    if (r == CUDA_SUCCESS) {
        drop_owned(c->s, id);
        handle_drop(c->s, id);
    }
    return r;
}

/* Request: u64 library id, u64 new module id. */
CUresult srv_scuda_library_get_module(srv_call *c)
{
    uint64_t lib_id = wr_u64(&c->in), mod_id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *lib;
    CUresult r = handle_get(c->s, lib_id, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUmodule mod;
    if ((r = REAL(cuLibraryGetModule, &mod, (CUlibrary)lib)) != CUDA_SUCCESS) return r;
    return put_owned(c->s, mod_id, HK_MODULE, mod, lib_id);
}

/* Request: u64 function-or-kernel id. Reply: the parameter layout, as in
 * a load's description (PARAMS_UNKNOWN when the driver cannot tell it, as
 * for a library kernel before any context is current). It is the layout
 * launches are checked against (param_layout.h). */
CUresult srv_scuda_param_info(srv_call *c)
{
    uint64_t id = wr_u64(&c->in);
    if (!wr_ok_end(&c->in)) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    int is_kernel;
    CUresult r = handle_get_function(c->s, id, &h, &is_kernel);
    if (r != CUDA_SUCCESS) return r;
    struct param_layout *l = h ? param_layout_dup(h, is_kernel) : NULL;
    wb_put_u32(&c->out, l ? l->n : PARAMS_UNKNOWN);
    for (uint32_t i = 0; l && i < l->n; i++) {
        wb_put_u32(&c->out, l->p[i].offset);
        wb_put_u32(&c->out, l->p[i].size);
    }
    free(l);
    return CUDA_SUCCESS;
}
