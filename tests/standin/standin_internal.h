/*
 * SCUDA CPU stand-in driver: internal declarations.
 *
 * The stand-in is a test-only libcuda that keeps "device" memory in host RAM.
 * See tests/standin/README.md for the model (memory, streams, kernels).
 *
 * Everything declared between the visibility pragmas is internal (hidden);
 * the CUDA entry points get default visibility from cuda.h's prototypes or
 * from the SI_API marker.
 */
#ifndef SCUDA_STANDIN_INTERNAL_H
#define SCUDA_STANDIN_INTERNAL_H

/* The CUDA entry points are exported even under -fvisibility=hidden: the
 * prototypes in cuda.h give the definitions their visibility. */
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "standin_api.h"

/* Marks an exported entry point that has no prototype in cuda.h
 * (old versions, _ptds/_ptsz variants). */
#define SI_API __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------ */
/* limits and constants                                                */

#define SI_MAX_DEVICES 16
#define SI_MAX_CTX_STACK 64
#define SI_PAGE 4096u
#define SI_MAX_PARAM_BYTES 32764u
#define SI_DEFAULT_MAX_DYN_SHMEM 49152
#define SI_MAX_DYN_SHMEM_OPTIN 232448
#define SI_SM_COUNT 132
#define SI_DRIVER_VERSION 13000

/* ------------------------------------------------------------------ */
/* small utilities (standin_util.c)                                    */

/* Open-addressing set of pointers: handle validation without touching
 * the memory a (possibly stale) handle points to. */
typedef struct si_hset {
    void **slots;
    size_t cap;   /* power of two, or 0 */
    size_t count; /* live entries */
    size_t used;  /* live + tombstones */
} si_hset;

bool si_hset_add(si_hset *s, const void *p);
bool si_hset_has(const si_hset *s, const void *p);
void si_hset_del(si_hset *s, const void *p);

uint64_t si_now_ns(void);                      /* CLOCK_MONOTONIC */
void si_abs_timespec(uint64_t ns, struct timespec *ts);
uint64_t si_next_id(void);                     /* unique, never 0 */
void *si_xcalloc(size_t n, size_t sz);         /* aborts on OOM */
char *si_xstrdup(const char *s);

typedef struct si_strbuf {
    char *data;
    size_t len, cap;
} si_strbuf;
void si_strbuf_append(si_strbuf *b, const char *s, size_t n);
void si_strbuf_free(si_strbuf *b);

/* the one global lock; condition variables use CLOCK_MONOTONIC */
extern pthread_mutex_t si_lock;
extern pthread_cond_t si_done_cv; /* broadcast when work completes */
extern pthread_cond_t si_exec_cv; /* wakes the executor */
void si_enter(void);
void si_leave(void);
/* a driver log entry (standin_logs.c), printf-style, without the newline;
 * the lock must be held */
void si_log_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* waits on si_done_cv (the lock must be held) */
void si_wait_done(void);
/* true inside a stream callback / host function (CUDA calls forbidden) */
extern __thread int si_in_callback;

/* ------------------------------------------------------------------ */
/* objects                                                             */

typedef struct si_ctx si_ctx;
typedef struct si_stream si_stream;
typedef struct si_event si_event;
typedef struct si_module si_module;
typedef struct si_func si_func;
typedef struct si_library si_library;
typedef struct si_kernel si_kernel;
typedef struct si_alloc si_alloc;
typedef struct si_image si_image;
typedef struct si_op si_op;
typedef struct si_pool si_pool;
typedef struct si_capture si_capture;

/* A page of a device's range that the driver keeps for one of its own
 * objects (a stream, an event): see si_book_take. */
typedef struct si_bookkeeping {
    bool held;
    int dev;
    size_t off;
} si_bookkeeping;

/* free extent in a device's address range (offsets from va_base) */
typedef struct si_extent {
    size_t off, len;
} si_extent;

typedef struct si_device {
    int ordinal;
    int physical;  /* the machine's GPU it models: its UUID and PCI bus (CUDA_VISIBLE_DEVICES) */
    char *va_base; /* PROT_NONE reservation; pages made RW on allocation */
    size_t va_size;
    size_t total;  /* bytes reported by cuDeviceTotalMem */
    size_t used;   /* bytes allocated (requested sizes) */
    si_extent *free_ext;
    size_t n_free, cap_free;
    si_ctx *primary; /* always present after cuInit */
} si_device;

enum si_alloc_kind {
    SI_AK_DEVICE = 1,   /* cuMemAlloc / cuMemAllocPitch */
    SI_AK_GLOBAL,       /* module global variable */
    SI_AK_HOST,         /* cuMemAllocHost / cuMemHostAlloc */
    SI_AK_HOST_REG,     /* cuMemHostRegister */
    SI_AK_VMM,          /* a range of VMM mappings made accessible (standin_vmm.c) */
    SI_AK_MANAGED,      /* cuMemAllocManaged (standin_managed.c) */
    SI_AK_ARRAY,        /* a CUDA array's elements (standin_array.c) */
};

struct si_alloc {
    uintptr_t base;
    size_t size;     /* requested size (>= 1) */
    size_t map_size; /* page-rounded size in the device range */
    int kind;
    int dev;
    si_ctx *ctx;
    unsigned flags;
    uint64_t id;     /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    bool sync_memops;
    si_module *owner;
    si_pool *pool;   /* cuMemAllocAsync / cuMemAllocFromPoolAsync */
    /* managed memory's hints, for cuMemRangeGetAttribute (whole allocation) */
    bool read_mostly;
    int preferred;     /* a device, CU_DEVICE_CPU, or CU_DEVICE_INVALID (none) */
    int last_prefetch; /* the same */
};

#define SI_N_LIMITS 10

struct si_ctx {
    uint64_t id;           /* changes on every (re)activation */
    int dev;
    unsigned flags;
    bool primary;
    bool active;
    bool pre32;            /* made by cuCtxCreate's pre-3.2 export (standin_legacy.c) */
    int refcount;          /* primary: retain count */
    unsigned primary_flags;
    size_t limits[SI_N_LIMITS];
    CUfunc_cache cache_config;
    CUsharedconfig shmem_config;
    si_stream *legacy;
    si_stream *ptds_list;
    si_strbuf printf_buf;
    uint64_t peers[SI_MAX_DEVICES]; /* ctx ids with peer access enabled */
    int n_peers;
};

enum si_stream_kind { SI_SK_USER = 0, SI_SK_LEGACY, SI_SK_PTDS };

struct si_stream {
    uint64_t id;
    si_ctx *ctx;
    unsigned flags;
    int priority;
    int kind;
    pthread_t owner;  /* SI_SK_PTDS: owning thread */
    bool zombie;      /* destroyed by the user, work still pending */
    si_capture *capture; /* stream capture in progress (standin_graph.c) */
    bool running;     /* head op is executing outside the lock */
    si_op *head, *tail;
    uint64_t enq_seq, done_seq;
    si_stream *next_all;
    si_stream *next_ptds;
    /* cuStreamSetAttribute values, by attribute (standin_stream.c) */
    CUaccessPolicyWindow apw;
    CUsynchronizationPolicy sync_policy;
    CUlaunchMemSyncDomainMap domain_map;
    CUlaunchMemSyncDomain domain;
    si_bookkeeping book; /* SI_SK_USER: the driver's memory for it (si_book_take) */
};

struct si_event {
    uint64_t id;
    si_ctx *ctx;
    unsigned flags;
    bool recorded;
    si_stream *stream;  /* where last recorded (validated by id) */
    uint64_t stream_id;
    uint64_t seq;       /* complete when stream->done_seq >= seq */
    bool has_time;
    uint64_t time_ns;
    si_event *next_all;
    si_bookkeeping book; /* the driver's memory for it (si_book_take) */
};

/* ------------------------------------------------------------------ */
/* PTX images, modules, functions, libraries                           */

typedef struct si_param {
    size_t offset, size, align;
} si_param;

typedef struct si_entry {
    char *name;
    si_param *params;
    size_t n_params;
    size_t param_bytes;     /* offset + size of the last parameter */
    unsigned max_threads;   /* from .maxntid/.reqntid, else 1024 */
    bool warned;            /* built-in name with an unexpected signature */
} si_entry;

typedef struct si_gvar {
    char *name;
    size_t size, align;
    unsigned char *init;    /* initializer bytes (init_len <= size) */
    size_t init_len;
    int ref_kind;           /* 1: .texref, 2: .surfref, else 0 */
    bool managed;           /* .attribute(.managed): a __managed__ variable */
} si_gvar;

struct si_image {
    int refs;
    int ptx_version;        /* major*10 + minor */
    int target_sm;
    si_entry *entries;
    size_t n_entries;
    si_gvar *globals;
    size_t n_globals;
};

typedef struct si_func_attrs {
    int max_dyn_shmem;
    int carveout;
    int cluster_w, cluster_h, cluster_d;
    int non_portable_cluster;
    int cluster_sched;
    CUfunc_cache cache_config;
} si_func_attrs;

struct si_func {
    uint64_t id;
    si_module *module;
    si_entry *entry;
    si_func_attrs attrs;
};

struct si_module {
    uint64_t id;
    si_ctx *ctx;
    si_image *image;
    si_func *funcs;        /* one per entry */
    si_alloc **globals;    /* one per global variable */
    si_library *library;   /* set when created for a library */
    void **refs;           /* texture/surface references, per global (standin_texture.c) */
    si_module *next_all;
};

struct si_kernel {
    uint64_t id;
    si_library *library;
    size_t index;          /* entry index */
    si_func_attrs attrs;
    bool attrs_set;
};

struct si_library {
    uint64_t id;
    si_image *image;
    si_kernel *kernels;    /* one per entry */
    si_library *next_all;
};

/* ------------------------------------------------------------------ */
/* stream operations                                                   */

/* a strided copy: rows of `width` bytes; row (y,z) at base + (z*h + y)*pitch */
typedef struct si_copy {
    uintptr_t src, dst;
    size_t spitch, sheight, dpitch, dheight;
    size_t width, height, depth;
} si_copy;

enum si_builtin {
    SI_BI_NONE = 0,
    SI_BI_FILL_U32,
    SI_BI_VEC_ADD,
    SI_BI_COPY_PARAMS,
    SI_BI_LAUNCH_SHAPE,  /* writes its grid, block and shared size */
    SI_BI_SLEEP_MS,
    SI_BI_FAULT,
    SI_BI_TRAP_ASSERT,
    SI_BI_SAY_HELLO,
    SI_BI_TEX_SAMPLE,     /* tex_sample, texref_sample: blob is the si_texview */
    SI_BI_SURF_WRITE,     /* surf_write: blob is the si_texview */
    SI_BI_BUMP_GLOBAL,    /* bump_global: p[0] = its module's g_counter, p[1] = c_table */
};

typedef struct si_kargs {
    int builtin;
    uint64_t p[3];
    uint64_t n;
    uint32_t u32;
    uint32_t dims[4];     /* surf_write: w, h, d, base */
    unsigned char *blob;  /* copy_params: the whole parameter buffer */
    size_t blob_len;
} si_kargs;

enum si_op_kind {
    SI_OP_COPY = 1,
    SI_OP_MEMSET,
    SI_OP_KERNEL,
    SI_OP_SLEEP,
    SI_OP_EVENT,
    SI_OP_WAIT,
    SI_OP_HOSTFN,
    SI_OP_CALLBACK,
    SI_OP_FREE,      /* cuMemFreeAsync: the allocation goes back to its pool */
};

struct si_op {
    si_op *next;
    int kind;
    uint64_t seq;
    union {
        struct {
            si_copy c;
            void *staging;
        } copy;
        struct {
            uintptr_t dst;
            size_t pitch, width, height; /* width in elements */
            unsigned elem;
            uint32_t value;
        } memset;
        si_kargs kernel;
        struct {
            uint64_t ms;
            uint64_t deadline;
            bool started;
        } sleep;
        struct {
            si_event *ev;
            uint64_t ev_id;
        } event;
        struct {
            si_stream *s;
            uint64_t s_id;
            uint64_t seq;
        } wait;
        struct {
            CUhostFn fn;
            void *user;
        } hostfn;
        struct {
            CUstreamCallback fn;
            CUstream handle;
            void *user;
        } callback;
        struct {
            uintptr_t base;
            uint64_t alloc_id;
        } free;
    } u;
};

/* ------------------------------------------------------------------ */
/* global state                                                        */

typedef struct si_global {
    bool initialized;
    CUresult init_error;  /* result of a failed cuInit */
    /* sticky error (a kernel fault): as on driver 580 it poisons the whole
     * process, every context; only destroy/reset/release still succeed */
    CUresult sticky;
    int ndev;
    size_t mem_bytes;
    si_device dev[SI_MAX_DEVICES];

    si_hset ctxs;         /* live contexts (primary: while active) */
    si_hset streams;      /* live user streams */
    si_hset all_streams;  /* every stream object, zombies included */
    si_hset events;
    si_hset modules;
    si_hset funcs;
    si_hset libraries;
    si_hset kernels;
    si_hset pools;        /* memory pools (standin_graph.c) */
    si_hset graphs;
    si_hset graph_nodes;
    si_hset graph_execs;

    si_stream *stream_list;
    si_event *event_list;
    si_module *module_list;
    si_library *library_list;

    si_alloc **allocs;    /* sorted by base */
    size_t n_allocs, cap_allocs;
} si_global;

extern si_global si_g;

/* ------------------------------------------------------------------ */
/* contexts (standin_ctx.c)                                            */

/* checks cuInit, returns CUDA_ERROR_NOT_INITIALIZED otherwise */
CUresult si_check_init(void);
/* current context of the calling thread; NULL if none/stale */
si_ctx *si_current(void);
/* Driver 580 refuses the _v2 forms of the 32-bit entry points in a pre-3.2
 * context; the 32-bit forms (standin_legacy.c) call them with
 * si_v1_entry set. */
extern __thread bool si_v1_entry;
CUresult si_v2_guard(void);
#define SI_V2_GUARD()                      \
    do {                                   \
        CUresult g_ = si_v2_guard();       \
        if (g_)                            \
            return g_;                     \
    } while (0)
/* init + current context + sticky error */
CUresult si_get_ctx(si_ctx **out);
/* validates a context handle (live) */
bool si_ctx_valid(const si_ctx *c);
/* waits until every stream of ctx is idle (lock held) */
void si_ctx_wait_idle(si_ctx *c);
/* waits until every stream of every context on dev is idle (lock held) */
void si_dev_wait_idle(int dev);
void si_flush_printf(si_ctx *c);
void si_set_sticky(CUresult err);
CUresult si_device_check(CUdevice dev);

/* ------------------------------------------------------------------ */
/* memory (standin_memory.c)                                           */

/* allocation containing address p (any kind), or NULL */
si_alloc *si_alloc_find(uintptr_t p);
/* true if p lies inside some device's reserved address range */
bool si_in_device_range(uintptr_t p);
/* allocation wholly containing [p, p+n) (n may be 0), or NULL */
si_alloc *si_range(uintptr_t p, size_t n);
/* device-range allocation (device or global) creation for modules */
CUresult si_dev_alloc(si_ctx *c, size_t size, int kind, si_module *owner, si_alloc **out);
void si_alloc_release(si_alloc *a);     /* frees a (lock held) */
void si_free_ctx_allocs(si_ctx *c);     /* all allocations of c */
CUresult si_va_init(si_device *d);
bool si_plain_mmap(void); /* STANDIN_PLAIN_MMAP=1: the driver's ranges at the kernel's choice */
/* address ranges of a device, for VMM reservations */
bool si_va_take(si_device *d, size_t len, size_t *off);
bool si_va_take_at(si_device *d, size_t off, size_t len);
/* p lies in an address reservation made at a fixed address outside every
 * device range (standin_vmm.c) */
bool si_vmm_fixed_holds(uintptr_t p);
void si_va_give(si_device *d, size_t off, size_t len);
/* The real driver allocates device memory of its own for every stream and
 * event it creates, from the same allocator that later places module
 * globals: a process that created two streams before loading a module
 * finds the module's globals elsewhere than one that created them after.
 * Modelled as one page of the device's range, taken first fit (as globals
 * are) at creation and given back at destruction. */
void si_book_take(si_ctx *c, si_bookkeeping *b);
void si_book_give(si_bookkeeping *b);
/* an allocation-table entry for memory mapped elsewhere (VMM); no pages touched */
si_alloc *si_alloc_add_range(uintptr_t base, size_t size, int kind, int dev, si_ctx *c);

/* ------------------------------------------------------------------ */
/* copies (standin_copy.c)                                             */

/* validates one side of a copy; on device/pinned memory checks bounds */
CUresult si_copy_validate(const si_copy *c);
void si_copy_exec(const si_copy *c);

/* ------------------------------------------------------------------ */
/* streams and events (standin_stream.c)                               */

/* resolves a stream handle: NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD
 * or a user stream. ptsz selects the per-thread stream for NULL.
 * Checks init, context and sticky error. */
CUresult si_resolve_stream(CUstream h, bool ptsz, si_stream **out);
si_stream *si_stream_new(si_ctx *c, int kind, unsigned flags, int prio);
void si_stream_free(si_stream *s);      /* unlinks and frees (idle only) */
si_op *si_op_new(int kind);
void si_op_free(si_op *op);
/* submits op to s: executes inline when s is idle, else queues it.
 * Returns the op's sequence number (complete when s->done_seq >= seq). */
uint64_t si_submit(si_stream *s, si_op *op);
/* waits until s->done_seq >= seq (lock held) */
void si_wait_seq(si_stream *s, uint64_t seq);
void si_stream_wait_idle(si_stream *s);
bool si_stream_idle(const si_stream *s);
/* true if an op submitted to s now would run at once (no queue, no barrier) */
bool si_would_inline(const si_stream *s);
bool si_stream_live(const si_stream *s, uint64_t id);
void si_destroy_ctx_streams_events(si_ctx *c);
void si_exec_kick(void);
/* What an event record or wait node does at a launch, as cuEventRecord
 * and cuStreamWaitEvent on s; nothing once the event (id) is destroyed. */
void si_event_record_on(si_stream *s, si_event *e, uint64_t id);
void si_event_wait_on(si_stream *s, si_event *e, uint64_t id);

/* ------------------------------------------------------------------ */
/* modules (standin_module.c)                                          */

CUresult si_resolve_func(CUfunction h, si_ctx *c, si_func **out);
void si_destroy_ctx_modules(si_ctx *c);
CUresult si_image_parse(const void *image, si_image **out, char *err, size_t errlen);
void si_image_unref(si_image *img);
CUresult si_module_create(si_ctx *c, si_image *img, si_library *lib, si_module **out);
void si_module_destroy(si_module *m);
void si_func_default_attrs(si_func_attrs *a);
CUresult si_func_get_attr(const si_entry *e, const si_image *img,
                          const si_func_attrs *a, CUfunction_attribute attr, int *out);
CUresult si_func_set_attr(si_func_attrs *a, CUfunction_attribute attr, int value);

/* ------------------------------------------------------------------ */
/* arrays (standin_array.c), textures and surfaces (standin_texture.c)  */

#define SI_MAX_LEVELS 16

typedef struct si_array si_array;
struct si_array {
    CUDA_ARRAY3D_DESCRIPTOR desc;
    si_ctx *ctx;
    void *owner;          /* the mipmapped array or planar array it belongs to */
    size_t elem;          /* bytes per element */
    size_t pitch;         /* Width * elem: rows are dense */
    size_t rows, slices;  /* Height and Depth, at least 1 */
    si_alloc *mem;        /* NULL for a planar (NV12) array */
    uint64_t mem_id;
    si_array *planes[2];  /* NV12: luma, chroma */
};

typedef struct si_mipmap {
    CUDA_ARRAY3D_DESCRIPTOR desc;
    unsigned n_levels;
    si_array *levels[SI_MAX_LEVELS];
} si_mipmap;

size_t si_format_size(CUarray_format f); /* bytes per channel, 0 if unknown */
si_array *si_array_get(CUarray h);        /* live, memory still there; else NULL */
si_mipmap *si_mipmap_get(CUmipmappedArray h);
CUresult si_array_side(CUarray h, size_t x, size_t y, size_t z, size_t wbytes, size_t height,
                       size_t depth, uintptr_t *addr, size_t *pitch, size_t *rows);

/* What a kernel samples: a texture object's or reference's resource and
 * sampling state, copied at launch (standin_texture.c). */
typedef struct si_level {
    uintptr_t base;
    size_t w, h, d;       /* elements; h, d at least 1 */
    size_t pitch;         /* bytes per row */
} si_level;

typedef struct si_texview {
    CUresourcetype res;
    unsigned arr_flags;   /* CUDA_ARRAY3D_LAYERED, _CUBEMAP */
    int dims;             /* 1, 2 or 3 (layers excluded) */
    size_t layers;        /* 1 unless layered (cubemaps: faces x layers) */
    CUarray_format fmt;
    unsigned ch, elem;
    unsigned n_levels;
    si_level lv[SI_MAX_LEVELS];
    CUDA_TEXTURE_DESC td;
} si_texview;

/* A texture object (or, surface 1, a surface object) as a view; false if unknown. Lock held. */
bool si_texobj_view(uint64_t obj, bool surface, si_texview *v);
/* The module's texture reference `name` as a view; false if unbound or unknown. Lock held. */
bool si_texref_view(si_module *m, const char *name, si_texview *v);
/* h is a texture reference (a module's or cuTexRefCreate's); the lock held */
bool si_texref_live(CUtexref h);
/* standin_notify.c: a device's allocations grew: notify when over budget (lock held) */
void si_budget_check(int dev);
CUresult si_module_global(si_module *m, const char *name, CUdeviceptr *dptr, size_t *bytes);
/* out[i] = the 4 words tex(coords[i]) returns, i < n; false: out of bounds */
bool si_tex_sample_exec(const si_texview *v, uint64_t out, uint64_t coords, uint64_t n);
/* every element (x,y,z) < (w,h,d) gets the u32 base + x + 100 y + 10000 z */
bool si_surf_write_exec(const si_texview *v, uint32_t w, uint32_t h, uint32_t d, uint32_t base);
void si_module_refs_free(si_module *m);

/* ------------------------------------------------------------------ */
/* launches (standin_launch.c)                                         */

void si_kernel_exec(si_ctx *c, const si_kargs *k);
void si_kargs_free(si_kargs *k);

/* A checked kernel launch, ready to run: what a graph's kernel node holds. */
typedef struct si_kcall {
    si_func *func;
    uint64_t func_id;          /* func is live while si_g.funcs has it with this id */
    CUfunction handle;         /* as the caller named it (a function or a kernel) */
    unsigned grid[3], block[3], shmem;
    unsigned char *params;     /* func->entry->param_bytes bytes */
} si_kcall;
/* Resolve, check the configuration and copy the arguments (lock held). */
CUresult si_kcall_make(si_ctx *c, CUfunction hf, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, void **kp, void **extra, si_kcall *out);
/* Log it and submit it to s as the launch would (lock held). */
void si_kcall_submit(si_stream *s, const si_kcall *k);
void si_kcall_free(si_kcall *k);

/* ------------------------------------------------------------------ */
/* memory pools, stream capture, graphs (standin_graph.c)              */

/* the capture status of s, for cuStreamIsCapturing */
CUstreamCaptureStatus si_capture_status(const si_stream *s);
/* s is capturing: op becomes a node of the capture's graph (or, if it
 * cannot be captured, invalidates the capture); takes ownership of op */
void si_capture_op(si_stream *s, si_op *op);
/* s is capturing: the launch becomes a kernel node; takes ownership of k */
void si_capture_kernel(si_stream *s, si_kcall *k);
/* cuMemFreeAsync reached its place in the stream */
void si_pool_free_exec(uintptr_t base, uint64_t alloc_id);
/* a context goes: its pools' bookkeeping forgets its allocations */
void si_pool_forget_alloc(si_alloc *a);

#pragma GCC visibility pop

#endif /* SCUDA_STANDIN_INTERNAL_H */
