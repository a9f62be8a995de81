/* migrate_seq.h - the parts of a migration's state that migrate_state.c
 * assembles: the ordered notes of driver-placing events (migrate_seq.c)
 * and the application's virtual memory management (migrate_vmm.c).
 * Internal to the migrate_*.c files (docs/architecture.md, 9.17). */
#ifndef SCUDA_SERVER_MIGRATE_SEQ_H
#define SCUDA_SERVER_MIGRATE_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "migrate_state.h"

/* A growing array of items (migrate_state.c). */
struct migrate_items {
    struct msg_migrate_item *v;
    size_t n, cap;
};
int migrate_items_push(struct migrate_items *l, struct msg_migrate_item it);

/* A growing array of device ranges (migrate_state.c). */
struct migrate_ranges {
    struct migrate_range *v;
    size_t n, cap;
};
int migrate_ranges_push(struct migrate_ranges *r, uint64_t addr, uint64_t size);

void migrate_digest_u64(struct migrate_digest *d, uint64_t v);

/* The id of the calling thread's current context, 0 when none. */
uint64_t migrate_current_ctx_id(void);

/* ---- the sequence (migrate_seq.c) ----------------------------------------- */

/* Which setter a MIG_FUNC_ATTR replays (the high half of its `a`). */
enum migrate_attr_call {
    ATTR_FUNC = 1,     /* cuFuncSetAttribute */
    ATTR_KERNEL,       /* cuKernelSetAttribute (per device) */
    ATTR_FUNC_CACHE,   /* cuFuncSetCacheConfig */
    ATTR_KERNEL_CACHE, /* cuKernelSetCacheConfig (per device) */
    ATTR_FUNC_SHMEM,   /* cuFuncSetSharedMemConfig */
};

/* Wrap t's cuKernelGetFunction, cuMemAllocManaged, cuMemFree and the
 * function attribute setters, to note what the session's handlers and
 * its own lookups make the driver do. */
void migrate_seq_install(struct driver_table *t);
/* Every live note in the order it happened, then the function
 * attributes. Returns 0, or -1 (out of memory). */
int migrate_seq_items(struct migrate_items *l);
/* The same, for the digest: ids, places and sizes, never handles. */
void migrate_seq_digest(struct migrate_digest *d);
/* Globals looked up and live managed allocations, in note order. */
int migrate_seq_ranges(struct migrate_ranges *r);
/* A module, or a library in one context, whose code may have run there:
 * a function of the module bound, a kernel's function asked for in the
 * context (every launch of a kernel asks, for its parameter layout), the
 * library's module taken there. Only such code can have changed its
 * variables; the rest still hold what the image gives them, which the
 * other server's driver gives them too. */
struct migrate_unit {
    uint8_t kind;       /* MIG_MODULE or MIG_LIBRARY */
    uint64_t id, ctx;   /* the client's ids */
    const void *image;  /* the kept image (valid while the session is held) */
    size_t len;
};
/* Every such unit, in load order, into a malloc'd array. Returns 0, or -1
 * (out of memory). */
int migrate_seq_units(struct migrate_unit **out, size_t *n);

/* 1: images of unloaded modules stay allocated (a thread sends them
 * unlocked); 0: free those. */
void migrate_seq_pin_images(int pin);

/* 1 when the session holds a module's or library's image. */
int migrate_seq_has_images(void);

/* Notes lost for want of memory: the sequence is incomplete. */
int migrate_seq_lost(void);

/* ---- the application's VMM (migrate_vmm.c) ---------------------------------- */

/* Wrap t's cuMemAddressReserve, cuMemAddressFree, cuMemCreate,
 * cuMemRelease, cuMemMap, cuMemUnmap and cuMemSetAccess. */
void migrate_vmm_install(struct driver_table *t);
/* Reservations, allocations, mappings, access, releases. Returns 0, -1
 * (out of memory, why says so) or 1 when something cannot be described
 * (why says what). */
int migrate_vmm_items(struct migrate_items *l, char *why, size_t whylen);
void migrate_vmm_digest(struct migrate_digest *d);
/* Mapped ranges the device may read, in address order. */
int migrate_vmm_ranges(struct migrate_ranges *r);
/* Why the application's VMM use cannot move, appended to why; "" adds nothing. */
void migrate_vmm_explain(char *why, size_t whylen);

#endif
