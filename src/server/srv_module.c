/* srv_module.c - modules, libraries, kernels and functions.
 *
 * A load replies with every function's name, and scuda_param_info with a
 * function's parameter layout at its first launch, so the client answers
 * cuModuleGetFunction and packs launch parameters without further round
 * trips (docs/architecture.md, 3.8 Modules). The messages are in
 * codegen/driver_spec.py (MESSAGES, group modules). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "host_quota.h"
#include "layout_claims.h"
#include "../common/image_check.h"
#include "../common/image_kernels.h"
#include "migrate_state.h"
#include "module_cache.h"
#include "module_held.h"
#include "module_pins.h"
#include "param_layout.h"
#include "session.h"
#include "staging.h"
#include "../common/clock.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "jit_args.h"

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

/* A load describes each function by name only (its layout unknown). Its
 * parameter layout is asked for at its first launch (scuda_param_info):
 * finding it here would make the driver load every kernel of every library
 * at once (a CUkernel's layout needs its function, and getting that
 * defeats lazy loading), which made PyTorch's start load thousands of
 * kernels it never runs. The names are the driver's: valid while the
 * image stays loaded. */
static CUresult describe_module(struct msg_arena *a, CUmodule mod, struct msg_load_result *out)
{
    unsigned count = 0;
    CUresult r = REAL(cuModuleGetFunctionCount, &count, mod);
    if (r != CUDA_SUCCESS) return r;
    CUfunction *fs = calloc(count ? count : 1, sizeof *fs);
    struct msg_func_desc *d = msg_alloc(a, (size_t)count * sizeof *d + 1);
    if (!fs || !d) {
        free(fs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = REAL(cuModuleEnumerateFunctions, fs, count, mod);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
        const char *name = "";
        REAL(cuFuncGetName, &name, fs[i]);
        d[i] = (struct msg_func_desc){.name = name};
    }
    if (r == CUDA_SUCCESS) {
        out->funcs = d;
        out->funcs_count = count;
    }
    free(fs);
    return r;
}

static CUresult describe_library(struct msg_arena *a, CUlibrary lib, struct msg_load_result *out)
{
    unsigned count = 0;
    CUresult r = REAL(cuLibraryGetKernelCount, &count, lib);
    if (r != CUDA_SUCCESS) return r;
    CUkernel *ks = calloc(count ? count : 1, sizeof *ks);
    struct msg_func_desc *d = msg_alloc(a, (size_t)count * sizeof *d + 1);
    if (!ks || !d) {
        free(ks);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = REAL(cuLibraryEnumerateKernels, ks, count, lib);
    for (unsigned i = 0; r == CUDA_SUCCESS && i < count; i++) {
        const char *name = "";
        REAL(cuKernelGetName, &name, ks[i]);
        d[i] = (struct msg_func_desc){.name = name};
    }
    if (r == CUDA_SUCCESS) {
        out->funcs = d;
        out->funcs_count = count;
    }
    free(ks);
    return r;
}

_Static_assert(IMAGE_DIGEST_LEN == MODULE_KEY_LEN, "the module cache is keyed by the load's digest");

/* Where a load's time goes on the server, per step, for the session's
 * summary at its end (module_load_log_summary): a framework that loads
 * thousands of images shows which step its loads wait for. */
enum load_step { STEP_CHECK, STEP_DRIVER, STEP_DESCRIBE, STEP_NOTE, STEP_CACHE, STEP_PIN, STEP_COUNT };
static const char *const step_names[STEP_COUNT] = {"checking", "the driver's load", "listing functions",
                                                   "noting for moves", "the module cache", "keeping for one-way loads"};
static _Atomic uint64_t step_ns[STEP_COUNT];
static _Atomic uint64_t loads_timed;

/* Step k ended now: its time since *t added, *t moved on. */
static void step_done(enum load_step k, uint64_t *t)
{
    uint64_t n = now_ns();
    step_ns[k] += n - *t;
    *t = n;
}

/* Every LOADS_SUMMARY_EVERY loads the summary so far, too: a session
 * whose client vanished may never log its end. */
#define LOADS_SUMMARY_EVERY 1024

void module_load_log_summary(void)
{
    if (!loads_timed) return;
    char line[400];
    size_t len = 0;
    for (int k = 0; k < STEP_COUNT && len < sizeof line; k++)
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %.1f ms", k ? ", " : "", step_names[k],
                                step_ns[k] / 1e6);
    LOG_INFO("module loads: %llu on this server's driver: %s", (unsigned long long)loads_timed, line);
}

/* Load an image of len bytes (8-byte aligned) as a module or a library
 * under the client's id, describing its functions in *res on success. The
 * driver takes no length and finds the image's extent in its headers, so
 * an image whose headers reach past its bytes never gets to the driver
 * (image_check.h). */
static CUresult load_image(srv_call *c, const struct msg_load_head *h, struct jit_options *j, const void *image,
                           size_t len, struct msg_load_result *res)
{
    CUresult r;
    char why[200];
    uint64_t t = now_ns();
    if (++loads_timed % LOADS_SUMMARY_EVERY == 0) module_load_log_summary();
    if (image_check(image, len, why, sizeof why) != 0) {
        LOG_WARN("module image of %zu bytes refused: %s", len, why);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    step_done(STEP_CHECK, &t);
    if (h->is_library) {
        CUlibrary lib = NULL;
        r = REAL(cuLibraryLoadData, &lib, image, j->n ? j->opt : NULL, j->n ? j->val : NULL, j->n, NULL, NULL, 0);
        step_done(STEP_DRIVER, &t);
        if (r == CUDA_SUCCESS && (r = describe_library(&c->arena, lib, res)) == CUDA_SUCCESS)
            r = handle_put(c->s, h->id, HK_LIBRARY, lib);
        step_done(STEP_DESCRIBE, &t);
        if (r == CUDA_SUCCESS) migrate_note_library(h->id, image, len);
        step_done(STEP_NOTE, &t);
        if (r != CUDA_SUCCESS && lib) {
            res->funcs_count = 0; /* the names go with the library */
            REAL(cuLibraryUnload, lib);
        }
    } else {
        CUmodule mod = NULL;
        r = REAL(cuModuleLoadDataEx, &mod, image, j->n, j->n ? j->opt : NULL, j->n ? j->val : NULL);
        step_done(STEP_DRIVER, &t);
        if (r == CUDA_SUCCESS && (r = describe_module(&c->arena, mod, res)) == CUDA_SUCCESS)
            r = handle_put(c->s, h->id, HK_MODULE, mod);
        step_done(STEP_DESCRIBE, &t);
        if (r == CUDA_SUCCESS) migrate_note_module(h->id, image, len);
        step_done(STEP_NOTE, &t);
        if (r != CUDA_SUCCESS && mod) {
            res->funcs_count = 0;
            REAL(cuModuleUnload, mod);
        }
    }
    return r;
}

/* The logs go back even when the load fails (c->out_on_error). */
static void take_logs(srv_call *c, const struct jit_options *j, struct msg_load_result *res)
{
    c->out_on_error = 1;
    res->info_log = j->info_log;
    res->error_log = j->error_log;
}

/* The image is in the request, or, when large, in staging memory (the
 * session received it there). One in the request is copied to an aligned
 * buffer: an ELF inside a frame need not be 8-byte aligned; staging memory
 * is. An image the driver accepts is kept in the module cache, under the
 * digest computed here, and for this client's later one-way loads. */
static CUresult load_received(srv_call *c, const struct msg_load_head *head, const void *sent, uint64_t sent_len,
                              struct jit_options *j, struct msg_load_result *res, uint8_t key[MODULE_KEY_LEN],
                              int *kept)
{
    const void *image = c->staging ? staging_data(c->staging) : sent;
    size_t len = (size_t)sent_len;
    char *copy = NULL;
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (image && !c->staging && !(copy = host_quota_alloc(len ? len : 1, "a module image's copy")))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (image) {
        if (copy) image = memcpy(copy, image, len);
        module_cache_received(len);
        r = load_image(c, head, j, image, len, res);
        if (r == CUDA_SUCCESS) {
            uint64_t t = now_ns();
            module_cache_put_key(image, len, key);
            step_done(STEP_CACHE, &t);
            module_pin(key, image, len);
            *kept = module_pinned(key, len) != NULL;
            step_done(STEP_PIN, &t);
        }
    }
    host_quota_free(copy);
    return r;
}

/* A received image's staging memory is its handler's to give back,
 * whatever happened. */
static CUresult give_back_staging(srv_call *c, CUresult r)
{
    if (c->staging) {
        staging_release(c->staging);
        c->staging = NULL;
    }
    return r;
}

CUresult srv_scuda_module_load(srv_call *c)
{
    struct msg_scuda_module_load_req m;
    struct msg_scuda_module_load_rep rep = {{0}};
    struct jit_options j;
    if (msg_scuda_module_load_req_get(&c->in, &c->arena, &m) != 0 || jit_options_from(m.head.jit, m.head.jit_count, &j) != 0)
        return give_back_staging(c, CUDA_ERROR_INVALID_VALUE);
    uint8_t key[MODULE_KEY_LEN];
    int kept = 0;
    CUresult r = give_back_staging(c, load_received(c, &m.head, m.image, m.image_len, &j, &rep.result, key, &kept));
    take_logs(c, &j, &rep.result);
    msg_scuda_module_load_rep_put(&c->out, &rep);
    free_jit_logs(&j);
    return r;
}

/* Whether the driver lists the kernels the client read, in its order. */
static int same_kernels(const struct msg_load_result *res, uint32_t count, const uint8_t digest[IMAGE_DIGEST_LEN])
{
    if (res->funcs_count != count) return 0;
    const char **names = malloc((count ? count : 1) * sizeof *names);
    if (!names) return 0;
    for (uint32_t i = 0; i < count; i++) names[i] = res->funcs[i].name;
    uint8_t ours[IMAGE_DIGEST_LEN];
    image_kernels_digest(names, count, ours);
    free(names);
    return memcmp(ours, digest, sizeof ours) == 0;
}

/* A one-way load failed: the client hears r at its next observing call. */
static CUresult one_way_load_failed(CUresult r)
{
    const char *name = NULL;
    REAL(cuGetErrorName, r, &name);
    LOG_WARN("a module load sent one-way failed (%s); the client hears it at its next synchronizing call",
             name ? name : "an unknown error");
    return r;
}

/* What a one-way load of an image whose kernels the client read itself
 * claims (image_kernels.h): the kernels' count, the digest of their names
 * in order, and each one's layout. */
struct read_claims {
    uint32_t funcs_count;
    const uint8_t *names_digest;
    uint32_t layouts_count;
    const struct msg_layout_info *layouts;
};

/* After such a load: its driver's list must be the client's, or the
 * client's handles and enumerations would not be the driver's: that is an
 * error it hears at its next observing call, and the log says how to turn
 * the reading off. The client's layouts are checked as each kernel is
 * bound (layout_claims.h). */
static CUresult check_claims(uint64_t id, const uint8_t key[MODULE_KEY_LEN], int kept,
                             const struct msg_load_result *res, const struct read_claims *cl)
{
    if (same_kernels(res, cl->funcs_count, cl->names_digest)) {
        if (cl->layouts_count != cl->funcs_count) {
            LOG_WARN("a one-way module load named %u kernels and %u layouts", cl->funcs_count, cl->layouts_count);
            return CUDA_ERROR_INVALID_VALUE;
        }
        if (layout_claims_keep(id, key, kept, res->funcs_count, res->funcs, cl->layouts) != 0)
            LOG_WARN("out of memory: the layouts the client read from a module image go unchecked");
        return CUDA_SUCCESS;
    }
    LOG_WARN("the client read %u kernels from a module image and this driver lists %u%s: its own reading is wrong "
             "for this driver; the client hears CUDA_ERROR_INVALID_IMAGE; set SCUDA_READ_KERNELS=0 on the client",
             cl->funcs_count, res->funcs_count,
             res->funcs_count == cl->funcs_count ? " (other names, or in another order)" : "");
    return CUDA_ERROR_INVALID_IMAGE;
}

/* One-way: an image new to the session, whose kernels the client read
 * itself (image_kernels.h). Loaded and kept as scuda_module_load does,
 * then checked against the client's reading (check_claims). */
CUresult srv_scuda_module_load_new(srv_call *c)
{
    struct msg_scuda_module_load_new_req m;
    struct msg_load_result res = {0};
    struct jit_options j;
    if (msg_scuda_module_load_new_req_get(&c->in, &c->arena, &m) != 0 || jit_options_from(m.head.jit, m.head.jit_count, &j) != 0)
        return give_back_staging(c, CUDA_ERROR_INVALID_VALUE);
    uint8_t key[MODULE_KEY_LEN];
    int kept = 0;
    CUresult r = give_back_staging(c, load_received(c, &m.head, m.image, m.image_len, &j, &res, key, &kept));
    free_jit_logs(&j);
    if (r != CUDA_SUCCESS) return one_way_load_failed(r);
    struct read_claims cl = {m.funcs_count, m.names_digest, m.layouts_count, m.layouts};
    return check_claims(m.head.id, key, kept, &res, &cl);
}

/* The images the module cache holds for this client's user, promised for
 * the session's life (module_held.h). */
CUresult srv_scuda_module_held(srv_call *c)
{
    struct msg_scuda_module_held_req m;
    if (msg_scuda_module_held_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    uint32_t max = m.max < MODULE_HELD_MAX ? m.max : MODULE_HELD_MAX;
    struct msg_held_image *images = msg_alloc(&c->arena, (size_t)max * sizeof *images + 1);
    if (!images) return CUDA_ERROR_OUT_OF_MEMORY;
    struct msg_scuda_module_held_rep rep = {.images = images, .images_count = module_held_list(max, images)};
    msg_scuda_module_held_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* One-way: scuda_module_load_new of an image the session promised
 * (scuda_module_held), or one it keeps, named by its digest. Kept for
 * later one-way loads as a received image is: the client counts it. */
CUresult srv_scuda_module_load_held(srv_call *c)
{
    struct msg_scuda_module_load_held_req m;
    struct jit_options j;
    if (msg_scuda_module_load_held_req_get(&c->in, &c->arena, &m) != 0 || m.image_len == 0 ||
        m.image_len > MODULE_IMAGE_MAX || jit_options_from(m.head.jit, m.head.jit_count, &j) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const void *image = module_pinned(m.digest, m.image_len);
    if (!image) image = module_held_image(m.digest, m.image_len);
    struct msg_load_result res = {0};
    CUresult r = CUDA_ERROR_INVALID_IMAGE;
    if (image) r = load_image(c, &m.head, &j, image, (size_t)m.image_len, &res);
    else LOG_WARN("a one-way module load named an image this session did not promise its client");
    free_jit_logs(&j);
    if (r != CUDA_SUCCESS) return one_way_load_failed(r);
    module_cache_hit_kept(m.digest, m.image_len);
    module_pin(m.digest, image, (size_t)m.image_len);
    int kept = module_pinned(m.digest, m.image_len) != NULL;
    struct read_claims cl = {m.funcs_count, m.names_digest, m.layouts_count, m.layouts};
    return check_claims(m.head.id, m.digest, kept, &res, &cl);
}

/* A load of an image the session may have (module_cache.h): found = 0
 * when it lacks the image, and the client sends it with scuda_module_load.
 * The digest only finds bytes the server hashed itself. */
CUresult srv_scuda_module_load_by_hash(srv_call *c)
{
    struct msg_scuda_module_load_by_hash_req m;
    struct jit_options j;
    if (msg_scuda_module_load_by_hash_req_get(&c->in, &c->arena, &m) != 0 || m.image_len == 0 ||
        m.image_len > MODULE_IMAGE_MAX || jit_options_from(m.head.jit, m.head.jit_count, &j) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_module_load_by_hash_rep rep = {0};
    void *image = module_cache_get(m.digest, m.image_len);
    CUresult r = CUDA_SUCCESS;
    rep.found = image != NULL;
    if (image) {
        r = load_image(c, &m.head, &j, image, (size_t)m.image_len, &rep.result);
        take_logs(c, &j, &rep.result);
        if (r == CUDA_SUCCESS) module_pin(m.digest, image, (size_t)m.image_len);
    }
    /* The answer goes back even when the load fails: a NOT_SUPPORTED
     * reply that does not decode means a server without this op. */
    c->out_on_error = 1;
    msg_scuda_module_load_by_hash_rep_put(&c->out, &rep);
    free_jit_logs(&j);
    free(image);
    return r;
}

/* One-way: a load of an image this client loaded here before, kept for it
 * (module_pins.h), or else found in the module cache for this user (a
 * session that came here by migration keeps nothing yet). Anything else
 * is an error the client hears at its next observing call: the digest
 * names no image this client may load. */
CUresult srv_scuda_module_load_known(srv_call *c)
{
    struct msg_scuda_module_load_known_req m;
    struct jit_options j;
    if (msg_scuda_module_load_known_req_get(&c->in, &c->arena, &m) != 0 || m.image_len == 0 ||
        m.image_len > MODULE_IMAGE_MAX || jit_options_from(m.head.jit, m.head.jit_count, &j) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const void *image = module_pinned(m.digest, m.image_len);
    if (image) module_cache_hit_kept(m.digest, m.image_len);
    void *found = image ? NULL : module_cache_get(m.digest, m.image_len);
    struct msg_load_result res = {0};
    CUresult r = CUDA_ERROR_INVALID_IMAGE;
    if (image || (image = found)) r = load_image(c, &m.head, &j, image, (size_t)m.image_len, &res);
    else LOG_WARN("a one-way module load named an image this session does not hold for its client");
    if (r == CUDA_SUCCESS) layout_claims_share(m.head.id, m.digest); /* the image's, if it came with claims */
    free_jit_logs(&j);
    free(found);
    return r;
}

CUresult module_bind_function(struct session *s, uint64_t id, uint64_t module_id, const char *name)
{
    void *mod;
    CUresult r = handle_get(s, module_id, HK_MODULE, &mod);
    if (r != CUDA_SUCCESS) return r;
    CUfunction f;
    if ((r = REAL(cuModuleGetFunction, &f, (CUmodule)mod, name)) != CUDA_SUCCESS) return r;
    if ((r = layout_claims_bind(module_id, name, f)) != CUDA_SUCCESS) return r;
    if ((r = put_owned(s, id, HK_FUNCTION, f, module_id)) == CUDA_SUCCESS) migrate_note_function(id, module_id, name);
    return r;
}

CUresult srv_scuda_module_get_function(srv_call *c)
{
    struct msg_scuda_module_get_function_req m;
    if (msg_scuda_module_get_function_req_get(&c->in, &c->arena, &m) != 0 || !m.bind.name)
        return CUDA_ERROR_INVALID_VALUE;
    return module_bind_function(c->s, m.bind.id, m.bind.parent, m.bind.name);
}

CUresult module_bind_kernel(struct session *s, uint64_t id, uint64_t library_id, const char *name)
{
    void *lib;
    CUresult r = handle_get(s, library_id, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUkernel k;
    if ((r = REAL(cuLibraryGetKernel, &k, (CUlibrary)lib, name)) != CUDA_SUCCESS) return r;
    if ((r = layout_claims_bind(library_id, name, k)) != CUDA_SUCCESS) return r;
    if ((r = put_owned(s, id, HK_KERNEL, k, library_id)) == CUDA_SUCCESS) migrate_note_kernel(id, library_id, name);
    return r;
}

CUresult srv_scuda_library_get_kernel(srv_call *c)
{
    struct msg_scuda_library_get_kernel_req m;
    if (msg_scuda_library_get_kernel_req_get(&c->in, &c->arena, &m) != 0 || !m.bind.name)
        return CUDA_ERROR_INVALID_VALUE;
    return module_bind_kernel(c->s, m.bind.id, m.bind.parent, m.bind.name);
}

CUresult module_bind_kernel_function(struct session *s, uint64_t id, uint64_t kernel_id)
{
    void *k;
    CUresult r = handle_get(s, kernel_id, HK_KERNEL, &k);
    if (r != CUDA_SUCCESS) return r;
    CUfunction f;
    if ((r = REAL(cuKernelGetFunction, &f, (CUkernel)k)) != CUDA_SUCCESS) return r;
    layout_claims_alias(f, k);
    if ((r = put_owned(s, id, HK_FUNCTION, f, kernel_id)) == CUDA_SUCCESS) migrate_note_kernel_function(id, kernel_id);
    return r;
}

CUresult srv_scuda_kernel_get_function(srv_call *c)
{
    struct msg_scuda_kernel_get_function_req m;
    if (msg_scuda_kernel_get_function_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    return module_bind_kernel_function(c->s, m.func, m.kernel);
}

CUresult srv_scuda_module_get_global(srv_call *c)
{
    struct msg_scuda_module_get_global_req m;
    if (msg_scuda_module_get_global_req_get(&c->in, &c->arena, &m) != 0 || !m.name) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, m.id, m.is_library ? HK_LIBRARY : HK_MODULE, &h);
    if (r != CUDA_SUCCESS) return r;
    CUdeviceptr p = 0;
    size_t size = 0;
    r = m.is_library ? REAL(cuLibraryGetGlobal, &p, &size, (CUlibrary)h, m.name)
                     : REAL(cuModuleGetGlobal_v2, &p, &size, (CUmodule)h, m.name);
    if (r != CUDA_SUCCESS) return r;
    if (m.is_library) migrate_note_library_global(m.id, m.name, p, size);
    else migrate_note_global(m.id, m.name, p, size);
    struct msg_scuda_module_get_global_rep rep = {.ptr = p, .size = size};
    msg_scuda_module_get_global_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

CUresult srv_scuda_module_unload(srv_call *c)
{
    struct msg_scuda_module_unload_req m;
    if (msg_scuda_module_unload_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, m.id, m.is_library ? HK_LIBRARY : HK_MODULE, &h);
    if (r != CUDA_SUCCESS) return r;
    r = m.is_library ? REAL(cuLibraryUnload, (CUlibrary)h) : REAL(cuModuleUnload, (CUmodule)h);
    if (r == CUDA_SUCCESS) {
        drop_owned(c->s, m.id);
        handle_drop(c->s, m.id);
        migrate_forget_module(m.id);
        layout_claims_drop(m.id);
    }
    return r;
}

CUresult module_bind_library_module(struct session *s, uint64_t id, uint64_t library_id)
{
    void *lib;
    CUresult r = handle_get(s, library_id, HK_LIBRARY, &lib);
    if (r != CUDA_SUCCESS) return r;
    CUmodule mod;
    if ((r = REAL(cuLibraryGetModule, &mod, (CUlibrary)lib)) != CUDA_SUCCESS) return r;
    if ((r = put_owned(s, id, HK_MODULE, mod, library_id)) == CUDA_SUCCESS) migrate_note_library_module(id, library_id);
    return r;
}

CUresult srv_scuda_library_get_module(srv_call *c)
{
    struct msg_scuda_library_get_module_req m;
    if (msg_scuda_library_get_module_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    return module_bind_library_module(c->s, m.module, m.library);
}

/* A function's or kernel's parameter layout: unknown when the driver
 * cannot tell it, as for a library kernel before any context is current.
 * It is the layout launches are checked against (param_layout.h). */
CUresult srv_scuda_param_info(srv_call *c)
{
    struct msg_scuda_param_info_req m;
    if (msg_scuda_param_info_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    int is_kernel;
    CUresult r = handle_get_function(c->s, m.func, &h, &is_kernel);
    if (r != CUDA_SUCCESS) return r;
    struct param_layout *l = h ? param_layout_dup(h, is_kernel, &r) : NULL;
    if (r != CUDA_SUCCESS) return r; /* its layout claims were false: every launch is refused too */
    struct msg_scuda_param_info_rep rep = {{0}};
    struct msg_param_slot *slots = l ? msg_alloc(&c->arena, l->n * sizeof *slots + 1) : NULL;
    if (l && !slots) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (slots) {
        for (uint32_t i = 0; i < l->n; i++) slots[i] = (struct msg_param_slot){l->p[i].offset, l->p[i].size};
        rep.layout = (struct msg_layout_info){.known = 1, .slots = slots, .slots_count = l->n};
    }
    free(l);
    if (r == CUDA_SUCCESS) msg_scuda_param_info_rep_put(&c->out, &rep);
    return r;
}

/* Every attribute of a function, all at once (the client keeps the fixed
 * ones and memoizes the others: src/client/func_attrs.c). One the driver
 * refuses stays out of `known`, and the client asks for it alone. */
CUresult srv_scuda_func_attributes(srv_call *c)
{
    struct msg_scuda_func_attributes_req m;
    if (msg_scuda_func_attributes_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, m.func, m.is_kernel ? HK_KERNEL : HK_FUNCTION, &h);
    if (r != CUDA_SUCCESS) return r;
    int32_t values[FUNC_ATTR_COUNT] = {0};
    uint32_t known = 0;
    for (unsigned a = 0; a < FUNC_ATTR_COUNT; a++) {
        int v = 0;
        CUresult ar = m.is_kernel ? REAL(cuKernelGetAttribute, &v, (CUfunction_attribute)a, (CUkernel)h, m.dev)
                                  : REAL(cuFuncGetAttribute, &v, (CUfunction_attribute)a, (CUfunction)h);
        if (ar != CUDA_SUCCESS) continue;
        values[a] = v;
        known |= 1u << a;
    }
    struct msg_scuda_func_attributes_rep rep = {.values = values, .values_count = FUNC_ATTR_COUNT, .known = known};
    msg_scuda_func_attributes_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* One attribute, for those that may change: what the generated handler
 * did before the fixed ones were batched. */
CUresult srv_cuFuncGetAttribute(srv_call *c)
{
    struct msg_cuFuncGetAttribute_req m;
    if (msg_cuFuncGetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, m.func, HK_FUNCTION, &h);
    if (r != CUDA_SUCCESS) return r;
    int v = 0;
    r = REAL(cuFuncGetAttribute, m.has_value ? &v : NULL, (CUfunction_attribute)m.attrib, (CUfunction)h);
    if (r == CUDA_SUCCESS && m.has_value) msg_cuFuncGetAttribute_rep_put(&c->out, &(struct msg_cuFuncGetAttribute_rep){v});
    return r;
}

CUresult srv_cuKernelGetAttribute(srv_call *c)
{
    struct msg_cuKernelGetAttribute_req m;
    if (msg_cuKernelGetAttribute_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *h;
    CUresult r = handle_get(c->s, m.kernel, HK_KERNEL, &h);
    if (r != CUDA_SUCCESS) return r;
    int v = 0;
    r = REAL(cuKernelGetAttribute, m.has_value ? &v : NULL, (CUfunction_attribute)m.attrib, (CUkernel)h, m.dev);
    if (r == CUDA_SUCCESS && m.has_value)
        msg_cuKernelGetAttribute_rep_put(&c->out, &(struct msg_cuKernelGetAttribute_rep){v});
    return r;
}
