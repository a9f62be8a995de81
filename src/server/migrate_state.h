/* migrate_state.h - what a session must remember so that another server
 * can rebuild it, and the list of objects a migration replays
 * (docs/architecture.md, 9.17 Live migration).
 *
 * Some of a session's state can be asked of the driver when it moves (a
 * context's device and flags) or of the device window (every
 * allocation). What the driver cannot tell, or not in its order, is noted
 * as it happens: uses that cannot move (here), the driver-placing events
 * in order (migrate_seq.c: images, bindings, globals, managed memory,
 * streams and events) and the application's VMM (migrate_vmm.c). Both
 * sides use this file: the exporting session
 * builds its items and blockers from it, the importing one notes what it
 * replays, so that it can move again, and both compute the same digest of
 * what they hold, which is how the exporter knows the copy is faithful. */
#ifndef SCUDA_SERVER_MIGRATE_STATE_H
#define SCUDA_SERVER_MIGRATE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/driver_table.gen.h"
#include "../common/messages.gen.h"

/* migrate_item.kind, in the order the exporter sends them: an item only
 * names objects sent before it. */
enum migrate_kind {
    MIG_CONTEXT = 1, /* id; a = device, b = flags, c = 1 for the device's primary context */
    MIG_MODULE,      /* id, parent = its context; data = the image, or (a = 1) its SHA-256, c = its length */
    MIG_FUNCTION,    /* id, parent = its module; name */
    MIG_GLOBAL,      /* parent = its module; name; a = address, b = size */
    /* Streams and events are in the sequence below, in creation order:
     * the driver allocates memory for each, which moves what it places
     * after them. id 0: made by the session itself, or destroyed since;
     * c = a serial that a later destroy names. */
    MIG_STREAM,      /* id, parent = its context; a = flags, b = priority (as i32), c = serial */
    MIG_EVENT,       /* id, parent = its context; a = flags, c = serial */
    MIG_ALLOC,       /* parent = its context; id = device; a = address, b = size, c = pitch (0: cuMemAlloc) */
    MIG_DEFERRED,    /* a = the first error of a one-way call, not yet reported */
    MIG_BYTES,       /* a = device address; data = the bytes there; id = the chunk's index (from 1) among all the
                      * ranges' chunks (migrate_landing.h) */
    MIG_END,         /* b = device bytes sent: the importer checks and answers */
    /* After a good verdict, the switch (migrate_switch.c): */
    MIG_KEPT,        /* a = frame number; data = a frame sent to the client and not acknowledged */
    MIG_SWITCH,      /* a = client frames received, b = frames sent; data = the resume secret */
    /* Driver-placing events and bindings, sent in the order they happened
     * (among MIG_MODULE, MIG_FUNCTION and MIG_GLOBAL): with lazy loading
     * the driver places a library's globals in a context when it is first
     * asked there, so the order decides the addresses (migrate_seq.c). */
    MIG_LIBRARY,         /* id, parent = the context current at the load; data = the image (or as MIG_MODULE) */
    MIG_KERNEL,          /* id, parent = its library; name */
    MIG_KERNEL_FUNCTION, /* id = the function's (0: the session asked itself), parent = its kernel, c = context */
    MIG_LIBRARY_MODULE,  /* id, parent = its library, c = context */
    MIG_LIBRARY_GLOBAL,  /* parent = its library, c = context; name; a = address, b = size */
    MIG_MANAGED,         /* parent = context; a = address, b = size, c = attach flags */
    MIG_MANAGED_FREE,    /* a = address of a MIG_MANAGED freed since */
    MIG_FUNC_ATTR,       /* id = function or kernel; a = call << 32 | attribute, b = value (as i64), c = device */
    /* The application's virtual memory management (migrate_vmm.c), after
     * the allocations: */
    MIG_RESERVE,         /* parent = a context of its device; a = address, b = size */
    MIG_VMM_CREATE,      /* id (0: released by the client, still mapped), c = the exporter's handle value (the key
                          * of later items); a = size, b = flags; data = the CUmemAllocationProp */
    MIG_VMM_MAP,         /* a = address, b = size, c = the allocation's key; parent = offset */
    MIG_VMM_ACCESS,      /* a = address, b = size; data = the CUmemAccessDesc array */
    MIG_VMM_RELEASE,     /* c = the key of a MIG_VMM_CREATE with no id: released once mapped */
    MIG_LIBRARY_MANAGED, /* a __managed__ variable looked up (cuLibraryGetManaged): as MIG_LIBRARY_GLOBAL */
    /* Before every other item (migrate_images.h): */
    MIG_IMAGES_QUERY,    /* a = count; data = per image its SHA-256 and length (u64) */
    MIG_IMAGES_HAVE,     /* importer to exporter: data = one byte per image, 1: its cache has it */
    /* Arrays and graphs (migrate_arrays.c, migrate_graphs.c), after the
     * allocations and the application's VMM: */
    MIG_ARRAY,           /* id, parent = its context; data = the CUDA_ARRAY3D_DESCRIPTOR, b = its bytes */
    MIG_ARRAY_BYTES,     /* id = the array; a = offset into its bytes (as cuMemcpy3D packs them); data */
    MIG_GRAPH,           /* id; data = its nodes (migrate_graphs.c) */
    MIG_GRAPH_EXEC,      /* id, parent = the graph to instantiate (0: data = its own), a = flags, c = context */
    /* A move that loads ahead (migrate_preload.h): the contexts and the
     * placing sequence as it stood go while the session still runs, then
     * MIG_PRELOADED; the importer replays them and sends it back. At the
     * hold, MIG_HOLD, then only what came after. */
    MIG_PRELOADED,       /* a = the items sent before it (echoed by the importer once replayed) */
    MIG_HOLD,            /* the exporter holds the session now: the importer's replay clock starts */
    /* In the sequence, after the creation they name: */
    MIG_STREAM_DESTROY,  /* c = the serial of a MIG_STREAM destroyed since, parent = its context */
    MIG_EVENT_DESTROY,   /* c = the serial of a MIG_EVENT destroyed since, parent = its context */
    /* After a good verdict, instead of the switch: a snapshot (snapshot.c).
     * As MIG_SWITCH, but the importer parks the copy until its client
     * resumes there (failover) or the exporter says "discard". */
    MIG_PARK,            /* a = client frames received, b = frames sent; data = the resume secret */
    /* Instead of MIG_BYTES for a range that did not change since the copy
     * parked on the importer's machine (snapshot_keep.h): */
    MIG_BYTES_KEPT,      /* a = address, b = size; c = that copy's pid there; data = the resume secret;
                          * id = the index (from 1) of the range's first chunk, as MIG_BYTES's */
    /* The memory's extra connections (migrate_links.h), before the memory: */
    MIG_LINKS_QUERY,     /* a = links wanted */
    MIG_LINKS,           /* importer to exporter: a = links granted; data = per link its slot (u32) and secret;
                          * name = the importer's certificate fingerprint ("" over plain TCP) */
    MIG_LINKS_USED,      /* a = the granted slots the exporter joined, as a bit mask */
};

/* Uses that no migration can reproduce, besides window_blockers(). */
enum migrate_blocker {
    MIGRATE_BLOCK_HOST_MIRROR = 1 << 0, /* zero-copy host memory mapped into the session */
    MIGRATE_BLOCK_LOST_NOTE = 1 << 2,   /* out of memory while noting: the notes are incomplete */
};

/* ---- notes, as the session runs ------------------------------------------ */

/* Wrap t's driver-placing calls (migrate_seq.c) and the application's
 * VMM (migrate_vmm.c). Once, at session start. */
void migrate_state_install(struct driver_table *t);
/* A module `id` was loaded from `len` bytes of image (copied here). */
void migrate_note_module(uint64_t id, const void *image, size_t len);
/* Module or library `id` was unloaded: its image and everything bound
 * through it (functions, kernels, globals, a library's modules) go. */
void migrate_forget_module(uint64_t id);
/* Library `id` was loaded from `len` bytes of image (copied here). */
void migrate_note_library(uint64_t id, const void *image, size_t len);
/* Kernel `id` was bound by `name` in library `library_id`. */
void migrate_note_kernel(uint64_t id, uint64_t library_id, const char *name);
/* Function `id` is kernel `kernel_id`'s in the current context. */
void migrate_note_kernel_function(uint64_t id, uint64_t kernel_id);
/* Module `id` is library `library_id`'s in the current context. */
void migrate_note_library_module(uint64_t id, uint64_t library_id);
/* The client looked up global `name` of library `library_id` in the
 * current context. */
void migrate_note_library_global(uint64_t library_id, const char *name, uint64_t addr, uint64_t size);
/* The client looked up __managed__ variable `name` of library
 * `library_id` (cuLibraryGetManaged) in the current context. */
void migrate_note_library_managed(uint64_t library_id, const char *name, uint64_t addr, uint64_t size);
/* Function `id` was bound by `name` in module `module_id`. */
void migrate_note_function(uint64_t id, uint64_t module_id, const char *name);
/* The client looked up global `name` of module `module_id`. */
void migrate_note_global(uint64_t module_id, const char *name, uint64_t addr, uint64_t size);
/* A use that cannot move (enum migrate_blocker). */
void migrate_block(unsigned why);

/* ---- leaving ------------------------------------------------------------ */

struct session;

/* Why this session cannot move now: "" when it can, else the reasons, by
 * name, with what the application used (window_blockers() included). */
void migrate_blockers_explain(char *why, size_t whylen);

/* At the hold: every variable of every module, and of every library in
 * every context, whose code may have run, looked up and noted, so that
 * its bytes move even if the client never asked (migrate_globals.c).
 * Returns 0, or -1 with why (the migration is refused). */
int migrate_note_all_globals(struct session *s, char *why, size_t whylen);

/* The objects to replay, in order (MIG_CONTEXT .. MIG_DEFERRED), into a
 * malloc'd array whose names and data point into this file's notes (valid
 * until the next call that changes them). Contexts are made current on the
 * calling thread to ask about them. Returns the count, or -1 with why. */
long migrate_items(struct msg_migrate_item **out, uint64_t deferred, char *why, size_t whylen);
/* Only the contexts and the placing sequence (the items a move can
 * replay ahead of the hold, migrate_preload.c), as migrate_items gives
 * them. Safe on a thread other than the dispatch thread. */
long migrate_items_placing(struct msg_migrate_item **out, char *why, size_t whylen);

/* ---- the digest, on both sides ---------------------------------------- */

/* The digest of the session's objects, then of the device bytes in the
 * order the exporter sends them (every window allocation by address, then
 * every global in item order), as the SHA-256 of each chunk of
 * MIGRATE_CHUNK fed with migrate_digest_chunk (migrate_memread.c: the
 * chunks are hashed on several threads). */
struct migrate_digest;
struct migrate_digest *migrate_digest_begin(void);
void migrate_digest_chunk(struct migrate_digest *d, const uint8_t sum[32]);
void migrate_digest_end(struct migrate_digest *d, uint8_t out[32]);

/* The device memory a migration copies, in digest order: a malloc'd
 * array of ranges, every window allocation by address, then the globals
 * and live managed allocations in note order, then the application's
 * mappings. Returns the count, or -1 (out of memory). */
struct migrate_range {
    uint64_t addr, size;
};
long migrate_memory(struct migrate_range **out);

/* From srv_module.c, for the replay: bind as the client's calls do, under
 * the client's ids (unloading the parent drops them). `name` of module
 * `module_id` as function `id` (scuda_module_get_function); kernel `name`
 * of a library (scuda_library_get_kernel); a kernel's function in the
 * current context (scuda_kernel_get_function); a library's module in the
 * current context (scuda_library_get_module). */
struct session;
CUresult module_bind_function(struct session *s, uint64_t id, uint64_t module_id, const char *name);
CUresult module_bind_kernel(struct session *s, uint64_t id, uint64_t library_id, const char *name);
CUresult module_bind_kernel_function(struct session *s, uint64_t id, uint64_t kernel_id);
CUresult module_bind_library_module(struct session *s, uint64_t id, uint64_t library_id);

#endif
