/* module.c - modules, libraries, kernels and functions in the client.
 *
 * Loading names the image by its SHA-256, and sends the image itself (its
 * size found from its own headers: fatbin, ELF cubin or PTX text) only
 * when the server does not have it yet; the reply carries every
 * function's name, and a function's parameter layout is asked for at its
 * first launch (func_layout). A cubin new to the session loads one-way
 * instead: the client reads its kernels and their layouts itself
 * (load_new, common/image_kernels.h), and the session checks them.
 * Function and kernel handles are ids the client picks; binding them on
 * the server is a one-way message.
 * The messages are in codegen/driver_spec.py (MESSAGES, group modules). */
#define _GNU_SOURCE
#include "module.h"

#include <elf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_digest.h"
#include "jit_request.h"
#include "module_known.h"
#include "module_held.h"
#include "request_pack.h"
#include "memo.h"
#include "conn.h"
#include "context.h"
#include "stats.h"
#include "rpc.h"
#include "send_queue.h"
#include "servers.h"
#include "shim.h"
#include "../common/auth.h"
#include "../common/idmap.h"
#include "../common/image_kernels.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

enum { TAG_MODULE = 1, TAG_LIBRARY = 2, TAG_FUNCTION = 3, TAG_KERNEL = 4 };

struct loaded {
    uint64_t id;
    int is_library;
    /* The image, for module_known_learn: its digest (when it was loaded
     * by digest), length, and the server it is on. */
    int has_digest;
    int server;
    uint64_t image_len;
    uint8_t digest[AUTH_SHA256_LEN];
    /* What makes its compiled functions what they are, on a given GPU and
     * driver: the digest and the JIT options (func_identity). */
    uint8_t identity[AUTH_SHA256_LEN];
    uint32_t nfuncs;
    struct func_desc *funcs;
    /* A library's module in a context (cuLibraryGetModule) shares the
     * library's funcs: `library` owns them, and lists its modules in
     * `modules`, linked by `next_module`, to forget them when it goes. */
    struct loaded *library;
    struct loaded *modules;
    struct loaded *next_module;
};

/* The lists of libraries' modules. */
static pthread_mutex_t library_modules_lock = PTHREAD_MUTEX_INITIALIZER;

/* A function or kernel handle: which loaded image, which function. */
struct func_ref {
    struct loaded *owner;
    struct func_desc *desc;
};

static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;

static struct idmap objects = IDMAP_INIT;

/* Functions adopted from the session's replies (func_adopt): id -> desc. */
static struct idmap adopted = IDMAP_INIT;

struct func_desc *func_lookup_kind(const void *h, int *is_kernel)
{
    uint32_t tag;
    void *v;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)h, &tag, &v)) {
        if (!idmap_get(&adopted, (uint64_t)(uintptr_t)h, &tag, &v)) return NULL;
        if (is_kernel) *is_kernel = tag == TAG_KERNEL;
        return v;
    }
    if (tag != TAG_FUNCTION && tag != TAG_KERNEL) return NULL;
    if (is_kernel) *is_kernel = tag == TAG_KERNEL;
    return ((struct func_ref *)v)->desc;
}

void hook_attribute_set(const void *h)
{
    struct func_desc *d = func_lookup(h);
    if (d) __atomic_store_n(&d->attribute_set, 1, __ATOMIC_RELEASE);
}

void func_adopt(uint64_t id, const char *name, uint32_t n, const struct msg_param_slot *layout, size_t total)
{
    if (!id || func_lookup((const void *)(uintptr_t)id)) return;
    struct func_desc *d = calloc(1, sizeof *d);
    if (!d || !(d->offset = calloc(n ? n : 1, 4)) || !(d->size = calloc(n ? n : 1, 4)) ||
        !(d->name = strdup(name ? name : ""))) {
        if (d) free(d->offset), free(d->size);
        free(d);
        return;
    }
    for (uint32_t i = 0; layout && i < n; i++) {
        d->offset[i] = layout[i].offset;
        d->size[i] = layout[i].size;
    }
    d->nparams = n;
    d->param_bytes = (uint32_t)total;
    d->layout_known = layout != NULL;
    if (idmap_put(&adopted, id, TAG_FUNCTION, d) != 0) {
        free(d->name);
        free(d->offset);
        free(d->size);
        free(d);
    }
}

static struct loaded *loaded_lookup(const void *h, int is_library)
{
    uint32_t tag;
    void *v;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)h, &tag, &v)) return NULL;
    return tag == (is_library ? TAG_LIBRARY : TAG_MODULE) ? v : NULL;
}

int library_known(CUlibrary library) { return loaded_lookup(library, 1) != NULL; }

/* ---- image size --------------------------------------------------------- */

#define FATBIN_WRAPPER_MAGIC 0x466243b1u
#define FATBIN_MAGIC 0xBA55ED50u

/* cudart hands the driver either a fatbin wrapper { magic, version,
 * const void *data, ... } or the fatbin itself; cubins are ELF; anything
 * else is NUL-terminated PTX. */
static const void *image_unwrap(const void *image)
{
    uint32_t magic;
    memcpy(&magic, image, 4);
    if (magic == FATBIN_WRAPPER_MAGIC) {
        const void *data;
        memcpy(&data, (const char *)image + 8, sizeof data);
        return data;
    }
    return image;
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The end of the last thing the ELF headers declare: the server checks
 * every one of them against the bytes it receives (image_check.h). */
static size_t elf_size(const unsigned char *p)
{
    Elf64_Ehdr eh;
    memcpy(&eh, p, sizeof eh);
    size_t end = max_size(sizeof eh, eh.e_ehsize);
    end = max_size(end, eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize);
    end = max_size(end, eh.e_phoff + (size_t)eh.e_phnum * eh.e_phentsize);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh.e_shoff + (size_t)i * eh.e_shentsize, sizeof sh);
        if (sh.sh_type != SHT_NOBITS) end = max_size(end, sh.sh_offset + sh.sh_size);
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, p + eh.e_phoff + (size_t)i * eh.e_phentsize, sizeof ph);
        end = max_size(end, ph.p_offset + ph.p_filesz);
    }
    return end;
}

static size_t image_size(const void *image)
{
    const unsigned char *p = image;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == FATBIN_MAGIC) {
        uint16_t header_size;
        uint64_t fat_size;
        memcpy(&header_size, p + 6, 2);
        memcpy(&fat_size, p + 8, 8);
        return header_size + fat_size;
    }
    if (memcmp(p, ELFMAG, SELFMAG) == 0 && p[EI_CLASS] == ELFCLASS64) return elf_size(p);
    return strlen(image) + 1;
}

/* ---- load and describe ------------------------------------------------- */

static void free_loaded(struct loaded *l)
{
    if (l && l->library) { /* the descriptions are the library's */
        free(l);
        return;
    }
    for (uint32_t i = 0; l && i < l->nfuncs; i++) {
        free(l->funcs[i].name);
        free(l->funcs[i].offset);
        free(l->funcs[i].size);
    }
    if (l) free(l->funcs);
    free(l);
}

/* Take the layout the session sent, when it knew it. */
static int set_layout(struct func_desc *d, const struct msg_layout_info *l)
{
    if (!l->known) return 0;
    uint32_t n = l->slots_count;
    uint32_t *offset = calloc(n + 1, sizeof *offset), *size = calloc(n + 1, sizeof *size);
    if (!offset || !size) {
        free(offset);
        free(size);
        return -1;
    }
    uint32_t bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        offset[i] = l->slots[i].offset;
        size[i] = l->slots[i].size;
        if (offset[i] + size[i] > bytes) bytes = offset[i] + size[i];
    }
    free(d->offset);
    free(d->size);
    d->offset = offset;
    d->size = size;
    d->nparams = n;
    d->param_bytes = bytes;
    d->layout_known = 1;
    return 0;
}

/* A layout just learnt, for later loads of the same image (module_known.h). */
static void learn_layout(const void *h, const struct func_desc *d)
{
    uint32_t tag;
    void *v;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)h, &tag, &v) || (tag != TAG_FUNCTION && tag != TAG_KERNEL)) return;
    const struct loaded *l = ((struct func_ref *)v)->owner;
    if (l->library) l = l->library; /* a library's module shares the library's descriptions */
    if (!l->has_digest || d < l->funcs || d >= l->funcs + l->nfuncs) return;
    module_known_learn(l->server, l->digest, l->image_len, l->is_library, (uint32_t)(d - l->funcs), d);
}

CUresult func_layout(const void *h, struct func_desc *d)
{
    pthread_mutex_lock(&layout_lock);
    CUresult r = CUDA_SUCCESS;
    if (!d->layout_known) {
        struct msg_scuda_param_info_req m = {.func = handle_wire_id(h)};
        struct msg_scuda_param_info_rep rep;
        rpc_call c;
        rpc_begin_on(&c, OP_scuda_param_info, server_of_handle(h));
        msg_scuda_param_info_req_put(&c.req, &m);
        r = rpc_sync(&c);
        /* Still unknown: no context is current (a library's kernel). */
        if (r == CUDA_SUCCESS && (msg_scuda_param_info_rep_get(&c.out, &c.arena, &rep) != 0 ||
                                  set_layout(d, &rep.layout) != 0 || !d->layout_known))
            r = CUDA_ERROR_INVALID_CONTEXT;
        rpc_end(&c);
        if (r == CUDA_SUCCESS) learn_layout(h, d);
    }
    pthread_mutex_unlock(&layout_lock);
    return r;
}

static struct loaded *new_loaded(const struct msg_load_result *res, uint64_t id, int is_library)
{
    struct loaded *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->id = id;
    l->is_library = is_library;
    uint32_t n = res->funcs_count;
    if (!(l->funcs = calloc(n ? n : 1, sizeof *l->funcs))) {
        free(l);
        return NULL;
    }
    for (l->nfuncs = 0; l->nfuncs < n; l->nfuncs++) {
        const struct msg_func_desc *f = &res->funcs[l->nfuncs];
        struct func_desc *d = &l->funcs[l->nfuncs];
        if (!f->name || !(d->name = strdup(f->name)) || set_layout(d, &f->layout) != 0) {
            l->nfuncs++;
            free_loaded(l);
            return NULL;
        }
    }
    return l;
}

/* The options that travel, into opts (room for JIT_MAX_OPTIONS) and a
 * load's head: -1 when there are more (which the session would refuse). */
static int put_jit(struct msg_load_head *h, struct msg_jit_option *opts, const struct jit_request *j)
{
    h->jit = opts;
    return jit_request_put(j, opts, &h->jit_count, 0);
}

static void take_jit_log(const struct jit_request *j, CUjit_option buf_opt, CUjit_option size_opt, const char *log)
{
    jit_request_take_log(j, buf_opt, size_opt, jit_request_log_size(j, size_opt), log);
}

/* Begin a load request: with the bytes, which go from the caller's buffer,
 * or by digest when image is NULL. */
static void send_load(rpc_call *c, struct server *srv, const struct msg_load_head *head, const void *image,
                      size_t len, const uint8_t key[AUTH_SHA256_LEN])
{
    if (image) {
        struct msg_scuda_module_load_req m = {.head = *head, .image = image, .image_len = len};
        rpc_begin_on(c, OP_scuda_module_load, srv);
        msg_scuda_module_load_req_put(&c->req, &m);
        c->bulk = image;
        c->bulk_len = len;
        request_pack(c);
    } else {
        struct msg_scuda_module_load_by_hash_req m = {.head = *head, .image_len = len};
        memcpy(m.digest, key, sizeof m.digest);
        rpc_begin_on(c, OP_scuda_module_load_by_hash, srv);
        msg_scuda_module_load_by_hash_req_put(&c->req, &m);
    }
}

/* One load request: by digest when image is NULL, else with the bytes.
 * Sets *want_bytes when the session asks for the bytes instead. */
static CUresult request_load(struct server *srv, const struct msg_load_head *head, const struct jit_request *jit,
                             const void *image, size_t len, const uint8_t key[AUTH_SHA256_LEN], struct loaded **out,
                             int *want_bytes)
{
    rpc_call c;
    send_load(&c, srv, head, image, len, key);
    CUresult r = rpc_sync(&c);
    struct msg_scuda_module_load_rep sent;
    struct msg_scuda_module_load_by_hash_rep by_hash;
    int bad = image ? msg_scuda_module_load_rep_get(&c.out, &c.arena, &sent) != 0
                    : msg_scuda_module_load_by_hash_rep_get(&c.out, &c.arena, &by_hash) != 0;
    const struct msg_load_result *res = image ? &sent.result : &by_hash.result;
    if (bad) {
        if (!image && r == CUDA_ERROR_NOT_SUPPORTED) { /* the session did not look the image up */
            c.srv->lacks_by_hash = 1;
            *want_bytes = 1;
            r = CUDA_SUCCESS;
        } else if (r == CUDA_SUCCESS) {
            r = CUDA_ERROR_INVALID_IMAGE;
        }
    } else if (image || by_hash.found) {
        take_jit_log(jit, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, res->info_log);
        take_jit_log(jit, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, res->error_log);
        if (r == CUDA_SUCCESS && !(*out = new_loaded(res, head->id, head->is_library)))
            r = CUDA_ERROR_INVALID_IMAGE;
    } else if (r == CUDA_SUCCESS) {
        *want_bytes = 1;
    }
    rpc_end(&c);
    return r;
}

/* Whether a load asks for a JIT log, which only a reply brings back. */
static int jit_wants_logs(const struct jit_request *j)
{
    for (unsigned i = 0; j && i < j->n; i++)
        if (j->opt[i] == CU_JIT_INFO_LOG_BUFFER || j->opt[i] == CU_JIT_ERROR_LOG_BUFFER ||
            j->opt[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES || j->opt[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            return 1;
    return 0;
}

/* A load of an image the session keeps for us (module_known.h): one-way,
 * its functions' names from the first load. Returns CUDA_ERROR_NOT_FOUND
 * when it is not such an image, and the caller asks with a round trip. */
static CUresult load_known(struct server *srv, const struct msg_load_head *head, const uint8_t key[AUTH_SHA256_LEN],
                           size_t len, struct loaded **out)
{
    struct func_desc *funcs;
    uint32_t n;
    if (!module_known_get(srv->index, key, len, head->is_library, &funcs, &n)) return CUDA_ERROR_NOT_FOUND;
    struct loaded *l = calloc(1, sizeof *l);
    if (!l) {
        for (uint32_t i = 0; i < n; i++) free(funcs[i].name);
        free(funcs);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *l = (struct loaded){.id = head->id, .is_library = head->is_library, .nfuncs = n, .funcs = funcs};
    struct msg_scuda_module_load_known_req m = {.head = *head, .image_len = len};
    memcpy(m.digest, key, sizeof m.digest);
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_module_load_known, srv);
    msg_scuda_module_load_known_req_put(&c.req, &m);
    CUresult r = rpc_async(&c);
    if (r != CUDA_SUCCESS) {
        free_loaded(l);
        return r;
    }
    stats_add(STATS_LOADS_ONE_WAY);
    *out = l;
    return CUDA_SUCCESS;
}

/* ---- loads of images new to the session, described here ------------------------- */

/* An image larger than this keeps the round trip: its bytes would hold
 * the connection longer than a reply takes. */
#define LOAD_NEW_MAX (4u << 20)

/* SCUDA_READ_KERNELS=0 turns the reading off (docs/cli.md). */
static int read_kernels_enabled(void)
{
    static _Atomic int enabled = -1;
    int e = atomic_load(&enabled);
    if (e < 0) {
        const char *v = getenv("SCUDA_READ_KERNELS");
        e = !(v && strcmp(v, "0") == 0);
        atomic_store(&enabled, e);
    }
    return e;
}

/* The compute capability (major * 10 + minor) of every device of srv, or
 * 0 when they differ (the driver may pick a different cubin for each) or
 * there is none. */
static unsigned server_arch(const struct server *srv)
{
    const unsigned MAJOR = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR;
    const unsigned MINOR = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR;
    unsigned arch = 0;
    for (int i = 0; i < gdevs.count; i++) {
        if (gdevs.dev[i].s != srv) continue;
        const struct device_info *d = gdevs.dev[i].info; /* from the session's start: no call */
        if (d->attr_count <= MAJOR || d->attr_count <= MINOR || d->attr_result[MAJOR] != CUDA_SUCCESS ||
            d->attr_result[MINOR] != CUDA_SUCCESS)
            return 0;
        unsigned a = (unsigned)(d->attr_value[MAJOR] * 10 + d->attr_value[MINOR]);
        if (arch && a != arch) return 0;
        arch = a;
    }
    return arch;
}

/* The record of a load whose kernels were read here: each one's name and
 * layout move from k into it. */
static struct loaded *loaded_from_kernels(struct image_kernels *k, const struct msg_load_head *head)
{
    struct loaded *l = calloc(1, sizeof *l);
    struct func_desc *funcs = calloc(k->n ? k->n : 1, sizeof *funcs);
    if (!l || !funcs) {
        free(l);
        free(funcs);
        return NULL;
    }
    for (uint32_t i = 0; i < k->n; i++) {
        struct image_kernel *ik = &k->k[i];
        funcs[i] = (struct func_desc){.name = ik->name, .nparams = ik->nparams, .offset = ik->offset,
                                      .size = ik->size, .param_bytes = ik->param_bytes, .layout_known = 1,
                                      .limits = ik->limits};
        if (!funcs[i].offset) funcs[i].offset = calloc(1, 4); /* a kernel without parameters */
        if (!funcs[i].size) funcs[i].size = calloc(1, 4);
        *ik = (struct image_kernel){0};
    }
    *l = (struct loaded){.id = head->id, .is_library = head->is_library, .nfuncs = k->n, .funcs = funcs};
    return l;
}

/* What the session checks a read image against: the digest of its
 * kernels' names in order and each one's layout, from k. */
struct read_claims {
    uint8_t names_digest[AUTH_SHA256_LEN];
    struct msg_layout_info *layouts;
    struct msg_param_slot *slots;
};

static void claims_free(struct read_claims *cl)
{
    free(cl->layouts);
    free(cl->slots);
}

static int claims_of(const struct image_kernels *k, struct read_claims *cl)
{
    const char **names = malloc((k->n ? k->n : 1) * sizeof *names);
    uint32_t nslots = 0;
    for (uint32_t i = 0; i < k->n; i++) nslots += k->k[i].nparams;
    cl->layouts = calloc(k->n ? k->n : 1, sizeof *cl->layouts);
    cl->slots = calloc(nslots ? nslots : 1, sizeof *cl->slots);
    struct msg_param_slot *at = cl->slots;
    int rc = names && cl->layouts && cl->slots ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < k->n; i++) {
        const struct image_kernel *ik = &k->k[i];
        names[i] = ik->name;
        cl->layouts[i] = (struct msg_layout_info){.known = 1, .slots = at, .slots_count = ik->nparams};
        for (uint32_t p = 0; p < ik->nparams; p++) *at++ = (struct msg_param_slot){ik->offset[p], ik->size[p]};
    }
    if (rc == 0) image_kernels_digest(names, k->n, cl->names_digest);
    else claims_free(cl);
    free(names);
    return rc;
}

/* The one-way request: with the image's bytes, or, when the session holds
 * the image (held_key), by its digest (scuda_module_load_held). */
static void put_load_new(rpc_call *c, struct server *srv, const struct msg_load_head *head, const void *img,
                         size_t len, const uint8_t *held_key, uint32_t n, const struct read_claims *cl)
{
    if (held_key) {
        struct msg_scuda_module_load_held_req m = {.head = *head, .image_len = len, .funcs_count = n,
                                                   .layouts = cl->layouts, .layouts_count = n};
        memcpy(m.digest, held_key, sizeof m.digest);
        memcpy(m.names_digest, cl->names_digest, sizeof m.names_digest);
        rpc_begin_on(c, OP_scuda_module_load_held, srv);
        msg_scuda_module_load_held_req_put(&c->req, &m);
        return;
    }
    struct msg_scuda_module_load_new_req m = {.head = *head, .funcs_count = n, .layouts = cl->layouts,
                                              .layouts_count = n, .image = img, .image_len = len};
    memcpy(m.names_digest, cl->names_digest, sizeof m.names_digest);
    rpc_begin_on(c, OP_scuda_module_load_new, srv);
    msg_scuda_module_load_new_req_put(&c->req, &m);
    c->bulk = img;
    c->bulk_len = len;
    request_pack(c);
}

/* A load of an image new to the session whose kernels this process reads
 * itself (image_kernels.h): one-way, and the session checks the names
 * against its driver's (scuda_module_load_new). The bytes go with it,
 * unless the session holds the image (module_held.h), which then goes by
 * its digest (key), whatever its size. Returns CUDA_ERROR_NOT_FOUND when
 * this is not such an image, and the caller asks with a round trip. */
static CUresult load_new(struct server *srv, const struct msg_load_head *head, const void *img, size_t len,
                         const uint8_t key[AUTH_SHA256_LEN], struct loaded **out)
{
    unsigned arch = read_kernels_enabled() ? server_arch(srv) : 0;
    const uint8_t *held_key = arch && module_held_has(srv, key, len) ? key : NULL;
    struct image_kernels k;
    struct read_claims cl;
    char why[256];
    if (!arch || (!held_key && len > LOAD_NEW_MAX)) return CUDA_ERROR_NOT_FOUND;
    if (image_kernels(img, len, arch, head->is_library, &k, why, sizeof why) != 0) {
        LOG_DEBUG("a module load waits for its reply: %s", why);
        return CUDA_ERROR_NOT_FOUND;
    }
    uint32_t n = k.n;
    struct loaded *l = NULL;
    rpc_call c;
    if (claims_of(&k, &cl) == 0) {
        put_load_new(&c, srv, head, img, len, held_key, n, &cl);
        claims_free(&cl);
        if (!(l = loaded_from_kernels(&k, head))) rpc_end(&c);
    }
    image_kernels_free(&k);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = rpc_async(&c);
    if (r != CUDA_SUCCESS) {
        free_loaded(l);
        return r;
    }
    stats_add(held_key ? STATS_LOADS_HELD_ONE_WAY : STATS_LOADS_NEW_ONE_WAY);
    *out = l;
    return CUDA_SUCCESS;
}

/* SCUDA_STATS counts the images the session keeps for one-way loads and
 * those past its budget; the first one past it is said once (info): a
 * framework that loads large images once at its start spends the budget
 * on them, and its later loads of new images all wait for a reply. */
static void count_kept(int kept)
{
    static _Atomic int said;
    if (kept != 0) stats_add(kept > 0 ? STATS_IMAGES_KEPT : STATS_IMAGES_NOT_KEPT);
    if (kept < 0 && !atomic_exchange(&said, 1))
        LOG_INFO("the session keeps no more module images for one-way loads (%u MiB of distinct images, "
                 "MODULE_PIN_MAX): loads of images new to it wait for a reply from now on", MODULE_PIN_MAX >> 20);
}

/* The image's SHA-256, hashed once per image for the process
 * (image_digest.h). */
static void digest_of(const void *img, size_t len, uint8_t key[AUTH_SHA256_LEN])
{
    uint64_t t0 = stats_enabled() ? stats_now_ns() : 0;
    if (image_digest(img, len, key)) stats_add(STATS_HASHES_SKIPPED);
    else if (t0) stats_time(STATS_IMAGE_HASH, stats_now_ns() - t0, len);
}

/* Runtime-built kernels (cuDNN's, NVRTC's) are new to the server every
 * time, and a lookup by digest that misses costs a round trip before the
 * bytes go anyway. After DIGEST_MISS_STREAK misses in a row, an image up
 * to DIGEST_SKIP_MAX goes with its bytes at once, except every
 * DIGEST_PROBE_EVERY-th, which still asks: a hit ends the streak. */
#define DIGEST_MISS_STREAK 8u
#define DIGEST_SKIP_MAX (1u << 20)
#define DIGEST_PROBE_EVERY 16u

static int ask_by_digest(struct server *srv, size_t len)
{
    if (len > DIGEST_SKIP_MAX || atomic_load(&srv->digest_misses) < DIGEST_MISS_STREAK) return 1;
    return atomic_fetch_add(&srv->digest_skipped, 1) % DIGEST_PROBE_EVERY == DIGEST_PROBE_EVERY - 1;
}

static void digest_answered(struct server *srv, int missed)
{
    if (missed) atomic_fetch_add(&srv->digest_misses, 1);
    else atomic_store(&srv->digest_misses, 0);
}

/* A load's identity: the image's digest and length, and every JIT option
 * as it travels (a register limit or an optimization level changes what
 * the driver compiles; log buffers only make keys differ). */
static void load_identity(const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, const struct msg_load_head *head,
                          uint8_t out[AUTH_SHA256_LEN])
{
    static const char domain[] = "scuda load identity 1";
    auth_sha256 c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, domain, sizeof domain);
    auth_sha256_update(&c, digest, AUTH_SHA256_LEN);
    auth_sha256_update(&c, &len, sizeof len);
    auth_sha256_update(&c, &head->jit_count, sizeof head->jit_count);
    for (uint32_t i = 0; i < head->jit_count; i++) {
        auth_sha256_update(&c, &head->jit[i].option, sizeof head->jit[i].option);
        auth_sha256_update(&c, &head->jit[i].value, sizeof head->jit[i].value);
    }
    auth_sha256_final(&c, out);
}

/* The load of one image on one server, under head->id. The server keeps
 * the images it has loaded (docs/architecture.md, 3.8 Modules), so the
 * first request names the image by its SHA-256 only; the bytes follow,
 * in a second request, only when the server lacks them. The digest
 * covers exactly the bytes that would be sent, and nothing else: JIT
 * options travel with each request and do not change which image it is.
 * An image this process loaded on the session before loads one-way
 * (load_known, 3.8.1), and so does a cubin new to it (load_new, 3.8.2);
 * after a run of misses, small images skip the lookup (ask_by_digest).
 * While a failover journal is kept, the bytes go with every load: the
 * journal must rebuild the module on a standby, whose module cache need
 * not hold the image the server found by its digest. *l gets the record,
 * its digest noted when it has one. */
static CUresult load_on(struct server *srv, const struct msg_load_head *head, const struct jit_request *jit,
                        const void *img, size_t len, struct loaded **l)
{
    int want_bytes = 1, by_hash = !srv->lacks_by_hash && !sendq_journaling(&srv->q);
    uint8_t key[AUTH_SHA256_LEN];
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (by_hash) {
        digest_of(img, len, key);
        if (!jit_wants_logs(jit)) r = load_known(srv, head, key, len, l);
        /* New to the session: one-way too when its kernels can be read
         * here, by digest when the session holds it. */
        if (r == CUDA_ERROR_NOT_FOUND && !jit_wants_logs(jit) &&
            (r = load_new(srv, head, img, len, key, l)) == CUDA_SUCCESS)
            count_kept(module_known_note(srv->index, key, len, head->is_library, (*l)->funcs, (*l)->nfuncs));
    }
    if (r == CUDA_ERROR_NOT_FOUND) {
        r = CUDA_SUCCESS;
        if (by_hash && ask_by_digest(srv, len)) {
            uint64_t t0 = stats_enabled() ? stats_now_ns() : 0;
            want_bytes = 0;
            r = request_load(srv, head, jit, NULL, len, key, l, &want_bytes);
            if (t0) stats_time(STATS_IMAGE_LOAD, stats_now_ns() - t0, want_bytes ? 0 : len);
            if (r == CUDA_SUCCESS) digest_answered(srv, want_bytes);
        }
        if (r == CUDA_SUCCESS && want_bytes) r = request_load(srv, head, jit, img, len, NULL, l, &want_bytes);
        if (r == CUDA_SUCCESS && by_hash)
            count_kept(module_known_note(srv->index, key, len, head->is_library, (*l)->funcs, (*l)->nfuncs));
    }
    if (r == CUDA_SUCCESS && by_hash) {
        (*l)->has_digest = 1;
        (*l)->server = srv->index;
        (*l)->image_len = len;
        memcpy((*l)->digest, key, sizeof (*l)->digest);
        load_identity(key, len, head, (*l)->identity);
    }
    return r;
}

static void send_unload(struct server *srv, uint64_t wire_id, int is_library);

int func_identity(const void *h, auth_sha256 *c)
{
    uint32_t tag;
    void *v;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)h, &tag, &v) || (tag != TAG_FUNCTION && tag != TAG_KERNEL)) return 0;
    const struct func_ref *ref = v;
    const struct loaded *l = ref->owner->library ? ref->owner->library : ref->owner;
    if (!l->has_digest) return 0;
    uint32_t n = (uint32_t)strlen(ref->desc->name);
    auth_sha256_update(c, l->identity, sizeof l->identity);
    auth_sha256_update(c, &n, sizeof n);
    auth_sha256_update(c, ref->desc->name, n);
    return 1;
}

/* A library is context-independent: its kernels launch in a context of
 * any device, so with several servers it is loaded on each, under one id
 * (tagged HANDLE_TAG_ALL), and a launch goes where the context is. The
 * first server's record stands; the others only have to succeed. */
static CUresult load_on_the_others(const struct server *first, const struct msg_load_head *head,
                                   const struct jit_request *jit, const void *img, size_t len)
{
    for (int i = 0; i < servers_used; i++) {
        if (&servers[i] == first) continue;
        struct loaded *other = NULL;
        CUresult r = load_on(&servers[i], head, jit, img, len, &other);
        if (r != CUDA_SUCCESS) {
            for (int j = 0; j < i; j++)
                if (&servers[j] != first) send_unload(&servers[j], head->id, 1);
            return r;
        }
        free_loaded(other);
    }
    return CUDA_SUCCESS;
}

static CUresult load_image(void **out, const void *image, int is_library, const struct jit_request *jit)
{
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    struct msg_load_head head = {.is_library = (uint8_t)is_library};
    struct msg_jit_option opts[JIT_MAX_OPTIONS];
    if (put_jit(&head, opts, jit) != 0) return CUDA_ERROR_INVALID_VALUE;
    const void *img = image_unwrap(image);
    size_t len = image_size(img);
    uint64_t id = handle_new_id(); /* tagged with the server it is loaded on: the thread's */
    head.id = handle_untag(id);
    struct server *srv = server_current();
    struct loaded *l = NULL;
    CUresult r = load_on(srv, &head, jit, img, len, &l);
    if (r != CUDA_SUCCESS) return r;
    if (is_library && servers_used > 1) {
        if ((r = load_on_the_others(srv, &head, jit, img, len)) != CUDA_SUCCESS) {
            send_unload(srv, head.id, 1);
            free_loaded(l);
            return r;
        }
        id = handle_tag(id, HANDLE_TAG_ALL);
    }
    l->id = id; /* the handle, tagged with its server: what later requests name (untagged on the wire) */
    if (idmap_put(&objects, id, is_library ? TAG_LIBRARY : TAG_MODULE, l) != 0) {
        free_loaded(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = handle_from_id(id);
    return CUDA_SUCCESS;
}

static CUresult load_file(void **out, const char *fname, int is_library, const struct jit_request *jit)
{
    if (!out || !fname) return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(fname, "rb");
    if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = (cap + 65536) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return CUDA_ERROR_OUT_OF_MEMORY;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, 65536, f);
        len += n;
        if (n == 0) break;
    }
    fclose(f);
    buf[len] = '\0'; /* a PTX file has no NUL of its own */
    CUresult r = load_image(out, buf, is_library, jit);
    free(buf);
    return r;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    SHIM_ENTER(cuModuleLoadData, (module, image));
    return load_image((void **)module, image, 0, NULL);
}

/* JIT options only tune compilation or ask for logs in host buffers; the
 * image loads without them. */
EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    SHIM_ENTER(cuModuleLoadDataEx, (module, image, numOptions, options, optionValues));
    struct jit_request j = {numOptions, options, optionValues};
    if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
    return load_image((void **)module, image, 0, &j);
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    SHIM_ENTER(cuModuleLoadFatBinary, (module, fatCubin));
    return load_image((void **)module, fatCubin, 0, NULL);
}

EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    SHIM_ENTER(cuModuleLoad, (module, fname));
    return load_file((void **)module, fname, 0, NULL);
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    SHIM_ENTER(cuLibraryLoadData, (library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                                   libraryOptionValues, numLibraryOptions));
    struct jit_request j = {numJitOptions, jitOptions, jitOptionsValues};
    if (numJitOptions && (!jitOptions || !jitOptionsValues)) return CUDA_ERROR_INVALID_VALUE;
    return load_image((void **)library, code, 1, &j);
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                      void **jitOptionsValues, unsigned int numJitOptions,
                                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                      unsigned int numLibraryOptions)
{
    SHIM_ENTER(cuLibraryLoadFromFile, (library, fileName, jitOptions, jitOptionsValues, numJitOptions,
                                       libraryOptions, libraryOptionValues, numLibraryOptions));
    struct jit_request j = {numJitOptions, jitOptions, jitOptionsValues};
    if (numJitOptions && (!jitOptions || !jitOptionsValues)) return CUDA_ERROR_INVALID_VALUE;
    return load_file((void **)library, fileName, 1, &j);
}

static void forget_loaded(struct loaded *l);

/* The unload is one-way: the session's error, if any (an id it never
 * loaded), comes at the next observing call, and the handle is invalid
 * here at once. The record is taken out of the map once the unload is
 * sent, and by one thread: of two unloading the same handle at once, the
 * other finds nothing to free. Until then nothing here reads the record,
 * which such a thread may be freeing. */
static void send_unload(struct server *srv, uint64_t wire_id, int is_library)
{
    struct msg_scuda_module_unload_req m = {.id = wire_id, .is_library = (uint8_t)is_library};
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_module_unload, srv);
    msg_scuda_module_unload_req_put(&c.req, &m);
    (void)rpc_async(&c);
}

static CUresult unload(void *h, int is_library)
{
    if (!loaded_lookup(h, is_library)) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t id = (uint64_t)(uintptr_t)h;
    /* A library on every server goes from each; its record, once. */
    int everywhere = handle_tag_of(id) == HANDLE_TAG_ALL;
    for (int i = everywhere ? 1 : 0; everywhere && i < servers_used; i++) send_unload(&servers[i], handle_untag(id), is_library);
    struct msg_scuda_module_unload_req m = {.id = handle_untag(id), .is_library = (uint8_t)is_library};
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_module_unload, everywhere ? &servers[0] : server_of_handle(h));
    msg_scuda_module_unload_req_put(&c.req, &m);
    CUresult r = rpc_async(&c);
    if (r == CUDA_SUCCESS) {
        struct loaded *l = idmap_del(&objects, id);
        if (l) forget_loaded(l);
        if (is_library) library_managed_forget(id); /* its __managed__ variables went with it */
        memo_forget_settings(); /* cached function attributes may name freed functions */
    }
    return r;
}

EXPORT CUresult cuModuleUnload(CUmodule hmod) { SHIM_ENTER(cuModuleUnload, (hmod)); return unload(hmod, 0); }
EXPORT CUresult cuLibraryUnload(CUlibrary library) { SHIM_ENTER(cuLibraryUnload, (library)); return unload(library, 1); }

/* ---- functions and kernels --------------------------------------------- */

static struct func_desc *find_desc(const struct loaded *l, const char *name)
{
    for (uint32_t i = 0; i < l->nfuncs; i++)
        if (strcmp(l->funcs[i].name, name) == 0) return &l->funcs[i];
    return NULL;
}

/* The driver gives the same handle each time a function or kernel is
 * asked for (in the same context, for cuKernelGetFunction), and programs
 * rely on it: cudart asks again before reading attributes, and the memo
 * (memo.h) keys its answers by handle. So each binding is made once. */
struct binding {
    uint64_t parent;
    const struct func_desc *desc;
    uint16_t op;
    uint32_t ctx;
    uint64_t id;
    struct binding *next;
};

#define BINDING_BUCKETS 4096
static struct binding *bindings[BINDING_BUCKETS];
static pthread_mutex_t bindings_lock = PTHREAD_MUTEX_INITIALIZER;

static struct binding **bucket_of(uint64_t parent, const struct func_desc *desc, uint16_t op, uint32_t ctx)
{
    uint64_t h = parent * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)desc ^ ((uint64_t)op << 40) ^ ctx;
    h ^= h >> 29;
    return &bindings[h & (BINDING_BUCKETS - 1)];
}

/* A binding's request: module_get_function and library_get_kernel name
 * the function; kernel_get_function has only the kernel. */
static void put_bind(wire_buf *b, uint16_t op, uint64_t parent, uint64_t id, const char *name)
{
    struct msg_bind_by_name by_name = {.parent = parent, .id = id, .name = name};
    if (op == OP_scuda_module_get_function) {
        struct msg_scuda_module_get_function_req m = {by_name};
        msg_scuda_module_get_function_req_put(b, &m);
    } else if (op == OP_scuda_library_get_kernel) {
        struct msg_scuda_library_get_kernel_req m = {by_name};
        msg_scuda_library_get_kernel_req_put(b, &m);
    } else {
        struct msg_scuda_kernel_get_function_req m = {.kernel = parent, .func = id};
        msg_scuda_kernel_get_function_req_put(b, &m);
    }
}

/* One binding request, one-way, to srv. */
static CUresult send_bind(struct server *srv, uint16_t op, uint64_t parent_id, uint64_t id, const char *name)
{
    rpc_call c;
    rpc_begin_on(&c, op, srv);
    put_bind(&c.req, op, handle_untag(parent_id), handle_untag(id), name);
    return rpc_async(&c);
}

/* The handle of kind tag for `desc`, bound on the server by `op` the first
 * time it is asked for. */
static CUresult bind_handle(void **out, struct loaded *l, struct func_desc *desc, uint32_t tag,
                            uint16_t op, uint64_t parent_id)
{
    uint32_t ctx = op == OP_scuda_kernel_get_function ? shim_current_ctx_id() : 0;
    pthread_mutex_lock(&bindings_lock);
    struct binding **head = bucket_of(parent_id, desc, op, ctx), *b = *head;
    while (b && !(b->parent == parent_id && b->desc == desc && b->op == op && b->ctx == ctx)) b = b->next;
    uint64_t id = b ? b->id : 0;
    pthread_mutex_unlock(&bindings_lock);
    if (id) {
        *out = handle_from_id(id);
        return CUDA_SUCCESS;
    }
    struct func_ref *ref = malloc(sizeof *ref);
    b = malloc(sizeof *b);
    if (!ref || !b) {
        free(ref);
        free(b);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ref->owner = l;
    ref->desc = desc;
    struct server *srv = server_of_handle(handle_from_id(parent_id)); /* the handle is made where its parent is */
    /* A kernel of a library on every server is bound on every server too,
     * under one id (load_on_the_others); a function is its context's. */
    int everywhere = op == OP_scuda_library_get_kernel && handle_tag_of(parent_id) == HANDLE_TAG_ALL;
    id = handle_tag(handle_new_id(), everywhere ? HANDLE_TAG_ALL : (unsigned)srv->index);
    if (idmap_put(&objects, id, tag, ref) != 0) {
        free(ref);
        free(b);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; everywhere && i < servers_used && r == CUDA_SUCCESS; i++)
        if (&servers[i] != srv) r = send_bind(&servers[i], op, parent_id, id, desc->name);
    if (r == CUDA_SUCCESS) r = send_bind(srv, op, parent_id, id, desc->name);
    if (r != CUDA_SUCCESS) { /* never handed out */
        idmap_del(&objects, id);
        free(ref);
        free(b);
        return r;
    }
    /* Two threads asking at once may both bind: the first one kept wins
     * for later callers, and both handles stay valid. */
    *b = (struct binding){.parent = parent_id, .desc = desc, .op = op, .ctx = ctx, .id = id};
    pthread_mutex_lock(&bindings_lock);
    b->next = *head;
    *head = b;
    pthread_mutex_unlock(&bindings_lock);
    *out = handle_from_id(id);
    return CUDA_SUCCESS;
}

/* Whether binding b is one of l's function or kernel handles: for a
 * library's module, those bound through it; else those of its functions. */
static int binding_of(const struct binding *b, const struct loaded *l)
{
    if (l->library) return b->parent == l->id;
    uintptr_t d = (uintptr_t)b->desc, first = (uintptr_t)l->funcs;
    return d >= first && d < first + (uintptr_t)l->nfuncs * sizeof *l->funcs;
}

/* Forget l's function and kernel handles, as the session dropped them
 * with the image (srv_module.c): from now on they are invalid handles,
 * and nothing points into l. */
static void forget_bindings(const struct loaded *l)
{
    pthread_mutex_lock(&bindings_lock);
    for (size_t i = 0; i < BINDING_BUCKETS; i++) {
        for (struct binding **p = &bindings[i]; *p;) {
            struct binding *b = *p;
            if (!binding_of(b, l)) {
                p = &b->next;
                continue;
            }
            *p = b->next;
            free(idmap_del(&objects, b->id)); /* its func_ref */
            free(b);
        }
    }
    pthread_mutex_unlock(&bindings_lock);
}

/* A library's module leaves its library's list. */
static void unlink_module(struct loaded *mod)
{
    pthread_mutex_lock(&library_modules_lock);
    struct loaded **p = &mod->library->modules;
    while (*p && *p != mod) p = &(*p)->next_module;
    if (*p) *p = mod->next_module;
    pthread_mutex_unlock(&library_modules_lock);
}

/* An unloaded module or library, already out of the map: its handles,
 * a library's modules, and the record itself. The driver calls all of
 * them invalid from now on; using one while another thread unloads its
 * image is the program's race, as with the driver. */
static void forget_loaded(struct loaded *l)
{
    forget_bindings(l);
    if (l->library) {
        unlink_module(l);
    } else {
        pthread_mutex_lock(&library_modules_lock);
        struct loaded *mod = l->modules;
        l->modules = NULL;
        pthread_mutex_unlock(&library_modules_lock);
        while (mod) {
            struct loaded *next = mod->next_module;
            idmap_del(&objects, mod->id);
            free(mod);
            mod = next;
        }
    }
    free_loaded(l);
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    SHIM_ENTER(cuModuleGetFunction, (hfunc, hmod, name));
    if (!hfunc || !name) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *l = loaded_lookup(hmod, 0);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    struct func_desc *d = find_desc(l, name);
    if (!d) return CUDA_ERROR_NOT_FOUND;
    return bind_handle((void **)hfunc, l, d, TAG_FUNCTION, OP_scuda_module_get_function, l->id);
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    SHIM_ENTER(cuLibraryGetKernel, (pKernel, library, name));
    if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *l = loaded_lookup(library, 1);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    struct func_desc *d = find_desc(l, name);
    if (!d) return CUDA_ERROR_NOT_FOUND;
    return bind_handle((void **)pKernel, l, d, TAG_KERNEL, OP_scuda_library_get_kernel, l->id);
}

EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    SHIM_ENTER(cuKernelGetFunction, (pFunc, kernel));
    if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
    uint32_t tag;
    void *v;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)kernel, &tag, &v) || tag != TAG_KERNEL)
        return CUDA_ERROR_INVALID_HANDLE;
    struct func_ref *ref = v;
    return bind_handle((void **)pFunc, ref->owner, ref->desc, TAG_FUNCTION, OP_scuda_kernel_get_function,
                       (uint64_t)(uintptr_t)kernel);
}

static CUresult count_funcs(unsigned *count, void *h, int is_library)
{
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *l = loaded_lookup(h, is_library);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    *count = l->nfuncs;
    return CUDA_SUCCESS;
}

static CUresult enumerate(void **out, unsigned n, void *h, int is_library)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *l = loaded_lookup(h, is_library);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < n && i < l->nfuncs; i++) {
        CUresult r = bind_handle(&out[i], l, &l->funcs[i], is_library ? TAG_KERNEL : TAG_FUNCTION,
                                 is_library ? OP_scuda_library_get_kernel : OP_scuda_module_get_function, l->id);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod) { SHIM_ENTER(cuModuleGetFunctionCount, (count, mod)); return count_funcs(count, mod, 0); }
EXPORT CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib) { SHIM_ENTER(cuLibraryGetKernelCount, (count, lib)); return count_funcs(count, lib, 1); }
EXPORT CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
    SHIM_ENTER(cuModuleEnumerateFunctions, (functions, numFunctions, mod));
    return enumerate((void **)functions, numFunctions, mod, 0);
}
EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    SHIM_ENTER(cuLibraryEnumerateKernels, (kernels, numKernels, lib));
    return enumerate((void **)kernels, numKernels, lib, 1);
}

static CUresult param_info(const void *h, size_t index, size_t *offset, size_t *size)
{
    struct func_desc *d = func_lookup(h);
    if (!d) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = func_layout(h, d);
    if (r != CUDA_SUCCESS) return r;
    if (index >= d->nparams) return CUDA_ERROR_INVALID_VALUE;
    if (offset) *offset = d->offset[index];
    if (size) *size = d->size[index];
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    SHIM_ENTER(cuFuncGetParamInfo, (func, paramIndex, paramOffset, paramSize));
    return param_info(func, paramIndex, paramOffset, paramSize);
}

EXPORT CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    SHIM_ENTER(cuKernelGetParamInfo, (kernel, paramIndex, paramOffset, paramSize));
    return param_info(kernel, paramIndex, paramOffset, paramSize);
}

EXPORT CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    SHIM_ENTER(cuFuncGetName, (name, hfunc));
    const struct func_desc *d = func_lookup(hfunc);
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_HANDLE;
    *name = d->name;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    SHIM_ENTER(cuKernelGetName, (name, hfunc));
    const struct func_desc *d = func_lookup(hfunc);
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_HANDLE;
    *name = d->name;
    return CUDA_SUCCESS;
}

static CUresult get_global(CUdeviceptr *dptr, size_t *bytes, void *h, int is_library, const char *name)
{
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *l = loaded_lookup(h, is_library);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    struct msg_scuda_module_get_global_req m = {
        .id = handle_untag(l->id), .is_library = (uint8_t)is_library, .name = name};
    struct msg_scuda_module_get_global_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_module_get_global, server_of_handle(handle_from_id(l->id)));
    msg_scuda_module_get_global_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_module_get_global_rep_get(&c.out, &c.arena, &rep) != 0)
        r = CUDA_ERROR_UNKNOWN; /* not what any server sends */
    if (r == CUDA_SUCCESS) {
        if (dptr) *dptr = rep.ptr;
        if (bytes) *bytes = rep.size;
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    SHIM_ENTER(cuModuleGetGlobal_v2, (dptr, bytes, hmod, name));
    CUresult lr = context_v2_allowed(); /* refused in a legacy context, as by the driver */
    return lr != CUDA_SUCCESS ? lr : get_global(dptr, bytes, hmod, 0, name);
}

EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name)
{
    SHIM_ENTER(cuLibraryGetGlobal, (dptr, bytes, library, name));
    return get_global(dptr, bytes, library, 1, name);
}

/* The library's module in the current context: a module record of our own
 * that shares the library's function descriptions. */
EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    SHIM_ENTER(cuLibraryGetModule, (pMod, library));
    if (!pMod) return CUDA_ERROR_INVALID_VALUE;
    struct loaded *lib = loaded_lookup(library, 1);
    if (!lib) return CUDA_ERROR_INVALID_HANDLE;
    struct loaded *mod = malloc(sizeof *mod);
    if (!mod) return CUDA_ERROR_OUT_OF_MEMORY;
    struct server *srv = server_of_handle(handle_from_id(lib->id));
    *mod = (struct loaded){.id = handle_tag(handle_new_id(), (unsigned)srv->index), .nfuncs = lib->nfuncs,
                           .funcs = lib->funcs, .library = lib};
    struct msg_scuda_library_get_module_req m = {.library = handle_untag(lib->id), .module = handle_untag(mod->id)};
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_library_get_module, srv);
    msg_scuda_library_get_module_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    if (r == CUDA_SUCCESS && idmap_put(&objects, mod->id, TAG_MODULE, mod) != 0) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r != CUDA_SUCCESS) {
        free(mod);
        return r;
    }
    pthread_mutex_lock(&library_modules_lock);
    mod->next_module = lib->modules;
    lib->modules = mod;
    pthread_mutex_unlock(&library_modules_lock);
    *pMod = handle_from_id(mod->id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    SHIM_ENTER(cuModuleGetLoadingMode, (mode));
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    /* The session's driver's: libraries choose how they load their kernels
     * by it. Told eager, cuDNN loads each kernel as a library of its own
     * (measured natively with CUDA_MODULE_LOADING=EAGER: 3,498 library
     * loads in a short GPT-2 generation, 48 when lazy). A server that does
     * not say is taken as eager, as this shim answered before. */
    int32_t m = conn_info(server_current())->loading_mode;
    *mode = m == CU_MODULE_LAZY_LOADING ? CU_MODULE_LAZY_LOADING : CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    SHIM_ENTER(cuKernelGetLibrary, (pLib, kernel));
    uint32_t tag;
    void *v;
    if (!pLib) return CUDA_ERROR_INVALID_VALUE;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)kernel, &tag, &v) || tag != TAG_KERNEL)
        return CUDA_ERROR_INVALID_HANDLE;
    *pLib = handle_from_id(((struct func_ref *)v)->owner->id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    SHIM_ENTER(cuFuncGetModule, (hmod, hfunc));
    uint32_t tag;
    void *v;
    if (!hmod) return CUDA_ERROR_INVALID_VALUE;
    if (!idmap_get(&objects, (uint64_t)(uintptr_t)hfunc, &tag, &v) || tag != TAG_FUNCTION)
        return CUDA_ERROR_INVALID_HANDLE;
    struct loaded *owner = ((struct func_ref *)v)->owner;
    if (owner->is_library) return CUDA_ERROR_NOT_SUPPORTED;
    *hmod = handle_from_id(owner->id);
    return CUDA_SUCCESS;
}
