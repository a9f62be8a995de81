/* migrate_in.c - a session moving here from another server: the importing
 * side (docs/architecture.md, 9.17 Live migration; protocol.h, "Migration").
 *
 * The parent forks this session for a HELLO_MIGRATE_IN client, another
 * server that proved a token. After the usual welcome it reads the items
 * of migrate_state.h and replays each under the client's own ids: the
 * same contexts, then modules, functions, streams and events in the order
 * they were made (and destroyed) there, every allocation
 * at the address it had there (the device window), then the device bytes.
 * Every item comes from the network: each is decoded with bounds, and an
 * id, an address or a name it gives is the driver's or the window's to
 * refuse. The first failure ends the replay; the verdict says why, and
 * the process exits, which frees whatever was rebuilt. */
#define _GNU_SOURCE
#include "migrate_in.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device_window.h"
#include "dispatch.h"
#include "../common/image_check.h"
#include "migrate_arrays.h"
#include "migrate_graphs.h"
#include "migrate_images.h"
#include "migrate_landing.h"
#include "migrate_links.h"
#include "migrate_seq.h"
#include "migrate_state.h"
#include "migrate_switch.h"
#include "session.h"
#include "snapshot_keep.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* A stalled exporter must not hold a session place for long. */
#define ITEM_TIMEOUT_MS 30000
/* After loading ahead, the exporter's dispatch thread holds its session
 * between two of its client's calls: a long one delays it. */
#define HOLD_TIMEOUT_MS 120000

/* Loading ahead (migrate_preload.h): how many items were replayed, image
 * loads among them, how long the part before the hold took. */
static struct {
    long items;
    unsigned loads, loads_ahead;
    uint64_t ahead_ns;
    int held; /* MIG_HOLD came */
    uint64_t kept; /* device bytes taken from the parked copy here (MIG_BYTES_KEPT) */
    uint64_t held_ns[256]; /* after the hold, by item kind: where the pause goes */
    unsigned held_n[256];
} progress;

static int expected;

void migrate_in_expect(void) { expected = 1; }
int migrate_in_expected(void) { return expected; }

/* One item frame: its payload (malloc'd) decoded into *it. Returns 0, or
 * -1 when the connection failed or the frame is malformed (why). */
int migrate_read_item(int fd, int timeout_ms, void **payload, struct msg_arena *a, struct msg_migrate_item *it, char *why, size_t wl)
{
    return migrate_read_item_into(fd, timeout_ms, NULL, 0, payload, a, it, why, wl);
}

int migrate_read_item_into(int fd, int timeout_ms, uint8_t *buf, size_t cap, void **payload, struct msg_arena *a,
                           struct msg_migrate_item *it, char *why, size_t wl)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    struct frame_header h;
    *payload = NULL;
    if (io_read_full_timeout(fd, hdr, sizeof hdr, timeout_ms) != 0) {
        snprintf(why, wl, "the exporting server went away or sent nothing for %d s", timeout_ms / 1000);
        return -1;
    }
    frame_header_decode(hdr, &h);
    uint8_t *into = buf && h.length <= cap ? buf : NULL;
    if (h.op != OP_scuda_migrate || h.length > SCUDA_MAX_FRAME ||
        (!into && !(into = *payload = malloc(h.length ? h.length : 1))) ||
        io_read_full_timeout(fd, into, h.length, timeout_ms) != 0) {
        snprintf(why, wl, "a malformed or cut migration frame (op %u, %u bytes)", h.op, h.length);
        return -1;
    }
    wire_reader r;
    wr_init(&r, into, h.length);
    if (h.flags & FRAME_REPLY) { /* the importer gave up early: its verdict, where an answer was due */
        struct msg_migrate_verdict v;
        msg_get_migrate_verdict(&r, a, &v);
        snprintf(why, wl, "the other server could not rebuild the session: %s",
                 wr_ok_end(&r) && v.why ? v.why : "(no reason)");
        return -1;
    }
    msg_get_migrate_item(&r, a, it);
    if (!wr_ok_end(&r)) {
        snprintf(why, wl, "a malformed migration item");
        return -1;
    }
    return 0;
}

/* ---- replaying one item ----------------------------------------------------- */

static CUresult replay_context(struct session *s, const struct msg_migrate_item *it)
{
    CUcontext ctx = NULL;
    CUresult r;
    if (it->c) {
        unsigned flags = 0;
        int active = 0;
        if (REAL(cuDevicePrimaryCtxGetState, (CUdevice)it->a, &flags, &active) == CUDA_SUCCESS && flags != it->b)
            REAL(cuDevicePrimaryCtxSetFlags_v2, (CUdevice)it->a, (unsigned)it->b);
        r = REAL(cuDevicePrimaryCtxRetain, &ctx, (CUdevice)it->a);
    } else if ((r = REAL(cuCtxCreate_v4, &ctx, NULL, (unsigned)it->b, (CUdevice)it->a)) == CUDA_SUCCESS) {
        REAL(cuCtxPopCurrent_v2, NULL);
    }
    return r != CUDA_SUCCESS ? r : handle_put(s, it->id, HK_CONTEXT, ctx);
}

/* A module's or a library's image (its bytes, or the cached image its
 * digest names), loaded in the context that was current. */
static CUresult replay_image(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    void *image = NULL;
    size_t len = 0;
    CUresult r = migrate_images_take(it, &image, &len, why, wl);
    if (r != CUDA_SUCCESS) return r;
    if (image_check(image, len, why, wl) != 0) {
        free(image);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    void *h = NULL;
    int lib = it->kind == MIG_LIBRARY;
    r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS)
        r = lib ? REAL(cuLibraryLoadData, (CUlibrary *)&h, image, NULL, NULL, 0, NULL, NULL, 0)
                : REAL(cuModuleLoadDataEx, (CUmodule *)&h, image, 0, NULL, NULL);
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, lib ? HK_LIBRARY : HK_MODULE, h)) != CUDA_SUCCESS)
        lib ? REAL(cuLibraryUnload, (CUlibrary)h) : REAL(cuModuleUnload, (CUmodule)h);
    if (r == CUDA_SUCCESS && lib) migrate_note_library(it->id, image, len);
    else if (r == CUDA_SUCCESS) migrate_note_module(it->id, image, len);
    if (r == CUDA_SUCCESS) migrate_images_loaded(it, image, len);
    free(image);
    return r;
}

static CUresult moved_elsewhere(const char *what, const char *name, uint64_t got, uint64_t got_size,
                                const struct msg_migrate_item *it, char *why, size_t wl)
{
    snprintf(why, wl, "%s %s is at %#llx (%llu bytes) on this server, at %#llx (%llu bytes) on the session's: "
                      "this driver placed it elsewhere (another driver, or other placements before it)",
             what, name, (unsigned long long)got, (unsigned long long)got_size, (unsigned long long)it->a,
             (unsigned long long)it->b);
    return CUDA_ERROR_INVALID_ADDRESS_SPACE;
}

/* A global must be where the client's kernels and pointers expect it. */
static CUresult replay_global(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    void *h;
    CUdeviceptr p = 0;
    size_t size = 0;
    int managed = it->kind == MIG_LIBRARY_MANAGED, lib = managed || it->kind == MIG_LIBRARY_GLOBAL;
    CUresult r = it->name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && lib) r = session_bind_ctx(s, (uint32_t)it->c);
    if (r == CUDA_SUCCESS) r = handle_get(s, it->parent, lib ? HK_LIBRARY : HK_MODULE, &h);
    if (r == CUDA_SUCCESS)
        r = managed ? REAL(cuLibraryGetManaged, &p, &size, (CUlibrary)h, it->name)
            : lib   ? REAL(cuLibraryGetGlobal, &p, &size, (CUlibrary)h, it->name)
                    : REAL(cuModuleGetGlobal_v2, &p, &size, (CUmodule)h, it->name);
    if (r == CUDA_SUCCESS && (p != it->a || size != it->b))
        return moved_elsewhere(managed ? "managed variable" : lib ? "library global" : "global", it->name, p, size,
                               it, why, wl);
    if (r == CUDA_SUCCESS && managed) migrate_note_library_managed(it->parent, it->name, p, size);
    else if (r == CUDA_SUCCESS && lib) migrate_note_library_global(it->parent, it->name, p, size);
    else if (r == CUDA_SUCCESS) migrate_note_global(it->parent, it->name, p, size);
    return r;
}

/* A kernel's function in a context: bound under the client's id, or only
 * asked for (the session asked, for a parameter layout), which is where
 * the driver may load the library in that context. */
static CUresult replay_kernel_function(struct session *s, const struct msg_migrate_item *it)
{
    CUresult r = session_bind_ctx(s, (uint32_t)it->c);
    if (r != CUDA_SUCCESS || it->id) return r != CUDA_SUCCESS ? r : module_bind_kernel_function(s, it->id, it->parent);
    void *k;
    CUfunction f;
    if ((r = handle_get(s, it->parent, HK_KERNEL, &k)) == CUDA_SUCCESS) r = REAL(cuKernelGetFunction, &f, (CUkernel)k);
    return r;
}

static CUresult replay_library_module(struct session *s, const struct msg_migrate_item *it)
{
    CUresult r = session_bind_ctx(s, (uint32_t)it->c);
    return r == CUDA_SUCCESS ? module_bind_library_module(s, it->id, it->parent) : r;
}

/* Managed memory, asked for in its turn: the driver must give the address
 * the client holds (and mirrors). */
static CUresult replay_managed(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUdeviceptr p = 0;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS && it->b == 0) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = REAL(cuMemAllocManaged, &p, (size_t)it->b, (unsigned)it->c);
    if (r == CUDA_SUCCESS && p != it->a) return moved_elsewhere("managed memory", "", p, it->b, it, why, wl);
    return r;
}

static CUresult replay_func_attr(struct session *s, const struct msg_migrate_item *it)
{
    uint32_t call = (uint32_t)(it->a >> 32), attrib = (uint32_t)it->a;
    int value = (int)(int64_t)it->b;
    CUdevice dev = (CUdevice)(int64_t)it->c;
    int kernel_call = call == ATTR_KERNEL || call == ATTR_KERNEL_CACHE;
    void *h;
    CUresult r = handle_get(s, it->id, kernel_call ? HK_KERNEL : HK_FUNCTION, &h);
    if (r != CUDA_SUCCESS) return r;
    switch (call) {
    case ATTR_FUNC: return REAL(cuFuncSetAttribute, (CUfunction)h, (CUfunction_attribute)attrib, value);
    case ATTR_KERNEL: return REAL(cuKernelSetAttribute, (CUfunction_attribute)attrib, value, (CUkernel)h, dev);
    case ATTR_FUNC_CACHE: return REAL(cuFuncSetCacheConfig, (CUfunction)h, (CUfunc_cache)value);
    case ATTR_KERNEL_CACHE: return REAL(cuKernelSetCacheConfig, (CUkernel)h, (CUfunc_cache)value, dev);
    case ATTR_FUNC_SHMEM: return REAL(cuFuncSetSharedMemConfig, (CUfunction)h, (CUsharedconfig)value);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* Streams and events without a client id (the exporting session's own,
 * or destroyed there since), by the exporter's serial: a later item may
 * destroy them. Made in their turn only so that this driver allocates
 * what that one did. */
#define ANON_MAX (1u << 20)
static struct anon {
    uint64_t serial;
    uint8_t kind;
    void *h;
} *anons;
static size_t nanons, capanons;

/* Serials rise (the exporter numbers in creation order), so the kept
 * ones are sorted: a destroy finds its creation by bisection. */
static struct anon *anon_find(uint64_t serial, uint8_t kind)
{
    size_t lo = 0, hi = nanons;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (anons[mid].serial < serial) lo = mid + 1;
        else hi = mid;
    }
    struct anon *a = lo < nanons ? &anons[lo] : NULL;
    return a && a->serial == serial && a->kind == kind && a->h ? a : NULL;
}

static CUresult anon_keep(const struct msg_migrate_item *it)
{
    if (it->c == 0 || (nanons && it->c <= anons[nanons - 1].serial)) return CUDA_ERROR_INVALID_VALUE;
    if (nanons == capanons) {
        size_t cap = capanons ? capanons * 2 : 64;
        struct anon *v = nanons < ANON_MAX ? realloc(anons, cap * sizeof *v) : NULL;
        if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
        anons = v, capanons = cap;
    }
    anons[nanons++] = (struct anon){.serial = it->c, .kind = it->kind};
    return CUDA_SUCCESS;
}

static CUresult replay_stream(struct session *s, const struct msg_migrate_item *it)
{
    CUstream st = NULL;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS && !it->id) r = anon_keep(it);
    if (r == CUDA_SUCCESS) r = REAL(cuStreamCreateWithPriority, &st, (unsigned)it->a, (int)(int64_t)it->b);
    if (r == CUDA_SUCCESS && !it->id) return anons[nanons - 1].h = st, CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_STREAM, st)) != CUDA_SUCCESS) REAL(cuStreamDestroy_v2, st);
    return r;
}

static CUresult replay_event(struct session *s, const struct msg_migrate_item *it)
{
    CUevent e = NULL;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS && !it->id) r = anon_keep(it);
    if (r == CUDA_SUCCESS) r = REAL(cuEventCreate, &e, (unsigned)it->a);
    if (r == CUDA_SUCCESS && !it->id) return anons[nanons - 1].h = e, CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && (r = handle_put(s, it->id, HK_EVENT, e)) != CUDA_SUCCESS) REAL(cuEventDestroy_v2, e);
    return r;
}

/* Only what this import made without an id: the client's own go with
 * their ids, through the session's calls. */
static CUresult replay_destroy(const struct msg_migrate_item *it)
{
    uint8_t kind = it->kind == MIG_STREAM_DESTROY ? MIG_STREAM : MIG_EVENT;
    struct anon *a = anon_find(it->c, kind);
    if (!a) return CUDA_ERROR_INVALID_HANDLE;
    void *h = a->h;
    a->h = NULL;
    return kind == MIG_STREAM ? REAL(cuStreamDestroy_v2, (CUstream)h) : REAL(cuEventDestroy_v2, (CUevent)h);
}

/* The allocation at the very address it had: the window places it there
 * or says why not. */
static CUresult replay_alloc(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS && (it->b == 0 || (it->c && (it->c > it->b || it->b % it->c)))) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        window_place_next_at(it->a);
        r = it->c ? REAL(cuMemAllocPitch_v2, &p, &pitch, (size_t)it->c, (size_t)(it->b / it->c), 4)
                  : REAL(cuMemAlloc_v2, &p, (size_t)it->b);
        window_place_next_at(0);
    }
    uint64_t base = 0, size = 0;
    if (r == CUDA_SUCCESS && p == it->a && pitch == it->c) return CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) {
        snprintf(why, wl, "memory at %#llx came back at %#llx (pitch %zu for %llu)", (unsigned long long)it->a,
                 (unsigned long long)p, pitch, (unsigned long long)it->c);
        return CUDA_ERROR_INVALID_ADDRESS_SPACE;
    }
    if (!window_range((int)it->id, &base, &size))
        snprintf(why, wl, "device %d has no memory window here (--driver-placed-memory, or a taken range): memory "
                          "at %#llx cannot be placed", (int)it->id, (unsigned long long)it->a);
    else if (r == CUDA_ERROR_INVALID_ADDRESS_SPACE)
        snprintf(why, wl, "memory at %#llx is outside device %d's window here (%#llx-%#llx); start this server "
                          "with the session's server's --window-base and --window-size",
                 (unsigned long long)it->a, (int)it->id, (unsigned long long)base, (unsigned long long)(base + size));
    return r;
}

/* ---- the application's VMM ------------------------------------------------------ */

/* The exporter's allocation handles (keys) and this server's. */
#define VMM_KEYS_MAX 65536
static struct vmm_key {
    uint64_t key;
    CUmemGenericAllocationHandle h;
} *vmm_keys;
static size_t nvmm_keys;

static CUresult vmm_handle(uint64_t key, CUmemGenericAllocationHandle *h)
{
    for (size_t i = 0; i < nvmm_keys; i++)
        if (vmm_keys[i].key == key) return *h = vmm_keys[i].h, CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_HANDLE;
}

static CUresult replay_reserve(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    CUdeviceptr p = 0;
    CUresult r = session_bind_ctx(s, (uint32_t)it->parent);
    if (r == CUDA_SUCCESS && it->a == 0) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = REAL(cuMemAddressReserve, &p, (size_t)it->b, 0, (CUdeviceptr)it->a, 0);
    if (r == CUDA_SUCCESS && p != it->a) return moved_elsewhere("the reservation", "", p, it->b, it, why, wl);
    return r;
}

static CUresult replay_vmm_create(struct session *s, const struct msg_migrate_item *it)
{
    CUmemAllocationProp prop;
    CUmemGenericAllocationHandle h = 0;
    if (!it->data || it->data_len != sizeof prop || nvmm_keys == VMM_KEYS_MAX || vmm_handle(it->c, &h) == CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct vmm_key *v = realloc(vmm_keys, (nvmm_keys + 1) * sizeof *v);
    if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
    vmm_keys = v;
    memcpy(&prop, it->data, sizeof prop);
    prop.win32HandleMetaData = NULL;
    CUresult r = REAL(cuMemCreate, &h, (size_t)it->a, &prop, it->b);
    if (r == CUDA_SUCCESS && it->id && (r = handle_put(s, it->id, HK_MEM_ALLOC, (void *)(uintptr_t)h)) != CUDA_SUCCESS)
        REAL(cuMemRelease, h);
    if (r == CUDA_SUCCESS) vmm_keys[nvmm_keys++] = (struct vmm_key){it->c, h};
    return r;
}

static CUresult replay_vmm_map(const struct msg_migrate_item *it)
{
    CUmemGenericAllocationHandle h;
    CUresult r = vmm_handle(it->c, &h);
    return r == CUDA_SUCCESS ? REAL(cuMemMap, (CUdeviceptr)it->a, (size_t)it->b, (size_t)it->parent, h, 0) : r;
}

static CUresult replay_vmm_access(const struct msg_migrate_item *it)
{
    CUmemAccessDesc d[16];
    size_t n = it->data ? (size_t)it->data_len / sizeof *d : 0;
    if (n == 0 || n > 16 || it->data_len % sizeof *d) return CUDA_ERROR_INVALID_VALUE;
    memcpy(d, it->data, n * sizeof *d);
    return REAL(cuMemSetAccess, (CUdeviceptr)it->a, (size_t)it->b, d, n);
}

static CUresult replay_vmm_release(const struct msg_migrate_item *it)
{
    CUmemGenericAllocationHandle h;
    CUresult r = vmm_handle(it->c, &h);
    return r == CUDA_SUCCESS ? REAL(cuMemRelease, h) : r;
}

/* Where device bytes land (opened when the memory begins), and the slot
 * the main connection's current frame was read into (-1: none). */
static struct migrate_landing *landing;
static int main_slot = -1;

static CUresult replay_bytes(const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (!it->data || it->data_len == 0) return CUDA_ERROR_INVALID_VALUE;
    /* The memory's first frame came before the landing was open: a slot
     * now, and the bytes are copied into it. */
    int slot = main_slot >= 0 ? main_slot : migrate_landing_take(landing);
    main_slot = -1; /* posted or given up */
    return migrate_landing_bytes(landing, slot, it->id, it->a, it->data, it->data_len, why, wl);
}

/* The parked copy's bytes for a range the session did not write since:
 * fetched into place (only into a whole range the import rebuilt, where
 * the exporter says its chunks begin), then checked as bytes that came. */
static CUresult replay_kept(const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (migrate_landing_kept_fits(landing, it->id, it->a, it->b, why, wl) != 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = snapshot_keep_fetch((uint32_t)it->c, it->data, it->data_len, it->a, it->b, &progress.kept, why, wl);
    return r == CUDA_SUCCESS ? migrate_landing_kept(landing, it->id, why, wl) : r;
}

/* Everything sent ahead is replayed: say so, and wait for the hold. */
static CUresult loaded_ahead(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    if (progress.held || it->a != (uint64_t)progress.items) {
        snprintf(why, wl, "the exporter sent %llu items ahead, %ld came%s", (unsigned long long)it->a,
                 progress.items, progress.held ? " (after the hold)" : "");
        return CUDA_ERROR_INVALID_VALUE;
    }
    progress.loads_ahead = progress.loads;
    struct msg_migrate_item echo = {.kind = MIG_PRELOADED, .a = it->a};
    if (migrate_send_item(s->fd, &echo, 0) == 0) return CUDA_SUCCESS;
    snprintf(why, wl, "the exporting server went away");
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult replay(struct session *s, const struct msg_migrate_item *it, char *why, size_t wl)
{
    switch (it->kind) {
    case MIG_CONTEXT: return replay_context(s, it);
    case MIG_MODULE:
    case MIG_LIBRARY: return replay_image(s, it, why, wl);
    case MIG_FUNCTION: return it->name ? module_bind_function(s, it->id, it->parent, it->name) : CUDA_ERROR_INVALID_VALUE;
    case MIG_GLOBAL:
    case MIG_LIBRARY_GLOBAL:
    case MIG_LIBRARY_MANAGED: return replay_global(s, it, why, wl);
    case MIG_KERNEL: return it->name ? module_bind_kernel(s, it->id, it->parent, it->name) : CUDA_ERROR_INVALID_VALUE;
    case MIG_KERNEL_FUNCTION: return replay_kernel_function(s, it);
    case MIG_LIBRARY_MODULE: return replay_library_module(s, it);
    case MIG_MANAGED: return replay_managed(s, it, why, wl);
    case MIG_MANAGED_FREE: return REAL(cuMemFree_v2, (CUdeviceptr)it->a);
    case MIG_FUNC_ATTR: return replay_func_attr(s, it);
    case MIG_RESERVE: return replay_reserve(s, it, why, wl);
    case MIG_VMM_CREATE: return replay_vmm_create(s, it);
    case MIG_VMM_MAP: return replay_vmm_map(it);
    case MIG_VMM_ACCESS: return replay_vmm_access(it);
    case MIG_VMM_RELEASE: return replay_vmm_release(it);
    case MIG_STREAM: return replay_stream(s, it);
    case MIG_EVENT: return replay_event(s, it);
    case MIG_STREAM_DESTROY:
    case MIG_EVENT_DESTROY: return replay_destroy(it);
    case MIG_ALLOC: return replay_alloc(s, it, why, wl);
    case MIG_DEFERRED: session_defer_error(s, (CUresult)it->a, OP_scuda_migrate); return CUDA_SUCCESS;
    case MIG_BYTES: return replay_bytes(it, why, wl);
    case MIG_BYTES_KEPT: return replay_kept(it, why, wl);
    case MIG_LINKS_QUERY: return migrate_links_grant(s, it, why, wl);
    case MIG_LINKS_USED: return migrate_links_read(it, landing, s->fd, why, wl);
    case MIG_IMAGES_QUERY: return migrate_images_answer(s, it, why, wl);
    case MIG_ARRAY:
    case MIG_ARRAY_BYTES: return migrate_arrays_replay(s, it, why, wl);
    case MIG_GRAPH:
    case MIG_GRAPH_EXEC: return migrate_graphs_replay(s, it, why, wl);
    case MIG_PRELOADED: return loaded_ahead(s, it, why, wl);
    case MIG_HOLD: return CUDA_SUCCESS; /* import() restarts its clock */
    default: snprintf(why, wl, "an item of unknown kind %u", it->kind); return CUDA_ERROR_INVALID_VALUE;
    }
}

static const char *kind_word(unsigned k)
{
    static const char *const w[] = {"?", "context", "module", "function", "global", "stream", "event",
                                    "allocation", "deferred error", "memory", "end", "kept frame", "switch",
                                    "library", "kernel", "kernel's function", "library's module", "library global",
                                    "managed memory", "managed free", "function attribute", "reservation",
                                    "VMM allocation", "VMM mapping", "VMM access", "VMM release",
                                    "library managed variable", "query for images", "images held", "array", "array bytes",
                                    "graph", "executable graph", "end of what loads ahead", "hold",
                                    "stream destroy", "event destroy", "parked state", "kept memory",
                                    "query for links", "links granted", "links joined"};
    return k < sizeof w / sizeof *w ? w[k] : "?";
}

/* ---- the check and the verdict --------------------------------------------- */

/* The end of the memory: every chunk landed and checked, their digests
 * after the objects' (as the exporter took them). */
static CUresult land_all(uint8_t out[32], char *why, size_t wl)
{
    struct migrate_digest *d = migrate_digest_begin();
    CUresult r = migrate_landing_close(landing, d, why, wl);
    landing = NULL;
    if (!d && r == CUDA_SUCCESS) {
        snprintf(why, wl, "out of host memory for the digest");
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (d) migrate_digest_end(d, out);
    return r;
}

void migrate_send_verdict(int fd, const struct msg_migrate_verdict *v)
{
    wire_buf b;
    wb_init(&b);
    msg_put_migrate_verdict(&b, v);
    struct frame_header h = {.length = (uint32_t)b.len, .op = OP_scuda_migrate, .flags = FRAME_REPLY};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {b.data, b.len}};
    io_writev_full(fd, iov, 2);
    wb_free(&b);
}

/* Read items until the end (or the first failure) and replay them.
 * Returns the result; the reason in why. */
/* One item replayed: counted, and the hold restarts the replay clock
 * (*t0), so that the replay the log gives is the part inside the hold. */
static void count_replayed(const struct msg_migrate_item *it, uint64_t *t0, uint64_t took_ns)
{
    if (progress.held) progress.held_ns[it->kind] += took_ns, progress.held_n[it->kind]++;
    if (it->kind == MIG_HOLD) {
        progress.ahead_ns = now_ns() - *t0;
        progress.held = 1;
        *t0 = now_ns();
    } else if (it->kind != MIG_IMAGES_QUERY && it->kind != MIG_PRELOADED) {
        progress.items++;
    }
    progress.loads += it->kind == MIG_MODULE || it->kind == MIG_LIBRARY;
}

/* The memory's first item (its links, bytes, or the end) opens the
 * landing (after every object: it takes the session's ranges as they
 * are then). */
static CUresult open_landing(const struct msg_migrate_item *it, uint64_t *t_copy, char *why, size_t wl)
{
    if (landing || (it->kind != MIG_LINKS_QUERY && it->kind != MIG_LINKS_USED && it->kind != MIG_BYTES &&
                    it->kind != MIG_BYTES_KEPT && it->kind != MIG_END))
        return CUDA_SUCCESS;
    if (!*t_copy) *t_copy = now_ns();
    if (it->kind == MIG_LINKS_QUERY) return CUDA_SUCCESS; /* after the answer: the exporter dials meanwhile */
    return (landing = migrate_landing_open(why, wl)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The end of the memory: the links' readers are done, and the bytes
 * announced are the bytes that came on all connections. */
static CUresult memory_end(const struct msg_migrate_item *it, uint64_t *bytes, char *why, size_t wl)
{
    migrate_links_join(0, bytes);
    if (migrate_landing_error(landing, why, wl) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    if (it->b == *bytes) return CUDA_SUCCESS;
    snprintf(why, wl, "%llu bytes of memory announced, %llu received", (unsigned long long)it->b,
             (unsigned long long)*bytes);
    return CUDA_ERROR_INVALID_VALUE;
}

/* A failed import: the links' readers stopped, the landing closed. A
 * reader's failure (it shut the main connection's reading) is the why. */
static void import_failed(char *why, size_t wl)
{
    if (!landing) return;
    migrate_links_join(1, NULL);
    if (main_slot >= 0) migrate_landing_give(landing, main_slot);
    main_slot = -1;
    char reader_why[MIGRATE_WHY_MAX];
    if (migrate_landing_error(landing, reader_why, sizeof reader_why) != CUDA_SUCCESS)
        snprintf(why, wl, "%s", reader_why);
    migrate_landing_close(landing, NULL, reader_why, sizeof reader_why);
    landing = NULL;
}

static CUresult import(struct session *s, struct msg_migrate_verdict *v, uint64_t *bytes, char *why, size_t wl)
{
    uint64_t t0 = now_ns(), t_copy = 0;
    for (int waits_for_hold = 0;;) {
        void *payload = NULL;
        struct msg_arena a;
        msg_arena_init(&a);
        struct msg_migrate_item it;
        int timeout_ms = waits_for_hold ? HOLD_TIMEOUT_MS : ITEM_TIMEOUT_MS;
        size_t cap = 0;
        main_slot = landing ? migrate_landing_take(landing) : -1; /* device bytes come now */
        uint8_t *buf = main_slot >= 0 ? migrate_landing_slot_buf(landing, main_slot, &cap) : NULL;
        CUresult r = migrate_read_item_into(s->fd, timeout_ms, buf, cap, &payload, &a, &it, why, wl) != 0
                         ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
        int end = r == CUDA_SUCCESS && it.kind == MIG_END;
        if (r == CUDA_SUCCESS) r = open_landing(&it, &t_copy, why, wl);
        uint64_t t_item = now_ns();
        if (r == CUDA_SUCCESS && !end && (r = replay(s, &it, why, wl)) != CUDA_SUCCESS && !why[0])
            snprintf(why, wl, "replaying %s %#llx failed with CUresult %d", kind_word(it.kind),
                     (unsigned long long)(it.id ? it.id : it.a), (int)r);
        if (r == CUDA_SUCCESS && it.kind == MIG_LINKS_QUERY && !landing && !(landing = migrate_landing_open(why, wl)))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        if (r == CUDA_SUCCESS && !end) count_replayed(&it, &t0, now_ns() - t_item);
        waits_for_hold = r == CUDA_SUCCESS && it.kind == MIG_PRELOADED;
        if (r == CUDA_SUCCESS && it.kind == MIG_BYTES) *bytes += it.data_len;
        if (main_slot >= 0) migrate_landing_give(landing, main_slot); /* the frame was no bytes */
        main_slot = -1;
        if (r == CUDA_SUCCESS && end) r = memory_end(&it, bytes, why, wl);
        free(payload);
        msg_arena_free(&a);
        if (r != CUDA_SUCCESS) {
            import_failed(why, wl);
            return r;
        }
        if (end) break;
    }
    snapshot_keep_fetch_end();
    CUresult r = land_all(v->digest, why, wl);
    if (r != CUDA_SUCCESS && !why[0]) snprintf(why, wl, "checking the copied memory failed with CUresult %d", (int)r);
    v->replay_ns = t_copy - t0;
    v->copy_ns = now_ns() - t_copy;
    return r;
}

/* Where the replay inside the hold went: the three item kinds that took
 * longest (the rest is waiting for the exporter). */
static void log_hold_parts(void)
{
    char line[256] = "";
    size_t len = 0;
    unsigned char shown[256] = {0};
    for (int n = 0; n < 3; n++) {
        int top = -1;
        for (int k = 0; k < 256; k++)
            if (!shown[k] && k != MIG_BYTES && progress.held_n[k] &&
                (top < 0 || progress.held_ns[k] > progress.held_ns[top]))
                top = k;
        if (top < 0) break;
        shown[top] = 1;
        len += (size_t)snprintf(line + len, sizeof line - len, "%s%u %s %.1f ms", n ? ", " : "", progress.held_n[top],
                                kind_word((unsigned)top), progress.held_ns[top] / 1e6);
        if (len >= sizeof line) break;
    }
    if (line[0]) LOG_INFO("session %d: replayed inside the hold: %s", (int)getpid(), line);
}

/* After a refusal the exporter may still be sending: read until it closes
 * (bounded), so that closing here cannot destroy the verdict in flight. */
static void drain(int fd)
{
    uint8_t buf[65536];
    uint64_t deadline = now_ns() + (uint64_t)ITEM_TIMEOUT_MS * 1000000u;
    while (now_ns() < deadline && io_read_some(fd, buf, sizeof buf, 1000) > 0) {
    }
}

void migrate_in_run(struct session *s)
{
    char why[MIGRATE_WHY_MAX] = "";
    struct msg_migrate_verdict v = {0};
    uint64_t bytes = 0;
    v.result = (uint32_t)import(s, &v, &bytes, why, sizeof why);
    v.why = why;
    /* Logged before the verdict goes out: once the exporter has it, its
     * client may act on it, and this log must already say what happened. */
    if (v.result != CUDA_SUCCESS) {
        LOG_WARN("session %d: the incoming session was not rebuilt: %s; discarded", (int)getpid(), why);
        migrate_send_verdict(s->fd, &v);
        drain(s->fd);
        _exit(1);
    }
    unsigned by_hash, images;
    migrate_images_counts(&by_hash, &images);
    LOG_INFO("session %d: imported a session: replay %.1f ms, %.1f MiB memory in %.1f ms (%.1f MiB of it kept from "
             "the parked copy here); its state matches; %u "
             "of %u images from the module cache; %u image loads ahead of the hold (%.1f ms, the session running "
             "there), %u during the hold", (int)getpid(), v.replay_ns / 1e6, (bytes + progress.kept) / 1048576.0,
             v.copy_ns / 1e6, progress.kept / 1048576.0,
             by_hash, images, progress.loads_ahead, progress.ahead_ns / 1e6, progress.loads - progress.loads_ahead);
    log_hold_parts();
    migrate_send_verdict(s->fd, &v);
    /* The switch: the exporter hands over the connection's state, and
     * this session waits for the client (migrate_switch.c). */
    if (migrate_switch_in(s, why, sizeof why) != 0) {
        LOG_WARN("session %d: the client's connection state did not come: %s; the copy is discarded",
                 (int)getpid(), why);
        drain(s->fd);
        _exit(1);
    }
}
