/* device_window.h - device memory at addresses the session chooses.
 *
 * Every cuMemAlloc and cuMemAllocPitch of a session lands inside a window
 * of virtual addresses reserved for its device at a fixed place
 * (base + device ordinal * size), mapped with the driver's virtual memory
 * calls (cuMemCreate, cuMemMap, cuMemSetAccess). A second server can
 * reserve the same window and map new memory at the same addresses, so
 * the device pointers an application holds (in kernel arguments, in
 * device memory) stay valid when its session moves: the base of live
 * migration and of pools of several servers (docs/architecture.md, 9.8
 * Memory, "The device window").
 *
 * Like the quota (quota.h), the window wraps entries of the session's
 * driver table once, when the session starts; every handler goes through
 * them. Small allocations are carved out of mapped 2 MiB chunks, large
 * ones get chunks of their own, and freed chunks stay mapped in a bounded
 * cache, so an allocation costs about what cuMemAlloc costs. Queries that
 * must answer per allocation (cuMemGetAddressRange, pointer attributes)
 * are answered from the allocation table. */
#ifndef SCUDA_SERVER_DEVICE_WINDOW_H
#define SCUDA_SERVER_DEVICE_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/driver_table.gen.h"

/* Defaults: far from where the driver places memory on x86-64 (cuMemAlloc
 * near the top of the mmap area, 0x7f..., its own VMM heap from
 * 0x2_0000_0000) and below the 47-bit limit. ThreadSanitizer keeps that
 * part of the address space for itself, so its builds use a window in the
 * range it leaves to the program. */
#if defined(__SANITIZE_THREAD__)
#define WINDOW_BASE_DEFAULT 0x7e8000000000ull
#define WINDOW_SIZE_DEFAULT (128ull << 30)
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WINDOW_BASE_DEFAULT 0x7e8000000000ull
#define WINDOW_SIZE_DEFAULT (128ull << 30)
#endif
#endif
#ifndef WINDOW_BASE_DEFAULT
#define WINDOW_BASE_DEFAULT 0x200000000000ull /* 32 TiB */
#define WINDOW_SIZE_DEFAULT (4ull << 40)      /* 4 TiB per device */
#endif
/* Mapped chunks that hold no allocation are kept for reuse up to this. */
#define WINDOW_CACHE_DEFAULT (1ull << 30)

struct window_config {
    uint64_t base;        /* device 0's window; device d's is base + d * size */
    uint64_t size;        /* bytes of addresses per device */
    uint64_t cache_bytes; /* idle mapped chunks kept for reuse */
};

/* Wrap t's allocation, free and query entries so that device memory lands
 * in the windows of `cfg`. Install it before the quota (quota_install),
 * so that the quota counts what the application asked for, not chunks.
 * Returns 0, or -1 (and logs why) when the configuration is unusable. */
int window_install(struct driver_table *t, const struct window_config *cfg);

/* ---- the allocation table, for a later migration to walk -------------- */

enum window_kind {
    WINDOW_ALLOC = 1, /* cuMemAlloc */
    WINDOW_PITCH,     /* cuMemAllocPitch: `pitch` says the row pitch */
    WINDOW_RESERVE,   /* cuMemAddressReserve of the application, placed in the window */
};

struct window_entry {
    uint64_t addr;
    uint64_t size;  /* what the application asked for (pitch * height for WINDOW_PITCH) */
    uint64_t pitch; /* WINDOW_PITCH only */
    enum window_kind kind;
    int device;     /* the server driver's ordinal */
    void *ctx;      /* the CUcontext that was current when it was made (NULL for reservations) */
};

/* The entry at the lowest address >= `from`: true and *e filled, or false
 * at the end. Walk with from = e.addr + 1: the walk stays correct if the
 * table changes between calls (it sees what is there when it passes). */
bool window_entry_from(uint64_t from, struct window_entry *e);

/* A migration's replay (migrate_in.c): the next cuMemAlloc or
 * cuMemAllocPitch of this session must land at `addr`, or fail
 * (CUDA_ERROR_ALREADY_MAPPED when it is taken, INVALID_ADDRESS_SPACE when
 * it lies outside this server's window, NOT_SUPPORTED with no window),
 * instead of at the lowest free address. */
void window_place_next_at(uint64_t addr);

/* Why this session's memory cannot all be reproduced at the same
 * addresses elsewhere: a mask of these, 0 when it can. */
enum window_blocker {
    WINDOW_BLOCK_STREAM_ORDERED = 1 << 0, /* cuMemAllocAsync, pools: placed by the driver */
    WINDOW_BLOCK_MANAGED = 1 << 1,        /* cuMemAllocManaged: placed by the driver */
    WINDOW_BLOCK_DRIVER_RESERVE = 1 << 2, /* an address reservation the driver placed */
    WINDOW_BLOCK_NO_WINDOW = 1 << 3,      /* a window was taken: memory fell back to the driver */
    WINDOW_BLOCK_NO_ROOM = 1 << 4,        /* an allocation the window had no room for: the driver placed it */
    WINDOW_BLOCK_FIRST = 1 << 5,          /* windows from index > 0 (a client of several servers): not carried yet */
};
unsigned window_blockers(void);

/* The chunk holding allocation address p (IPC exports the chunk: VMM
 * memory has no legacy IPC handle). false when p is no window allocation. */
struct window_chunk {
    CUmemGenericAllocationHandle handle;
    uint64_t addr, size;
    int device;
    bool shareable; /* created exportable as a POSIX file descriptor */
};
bool window_chunk_of(uint64_t p, struct window_chunk *out);

/* A client of several servers numbers their devices in one list: this
 * session's device d then takes window index + d, so that no two of the
 * client's devices share addresses (docs/architecture.md, 9.13). Before
 * any window is reserved. 0; -1 the windows are off; -2 the index is out
 * of range (its window would pass 2^47); -3 memory is placed already. */
int window_set_first(unsigned index);

/* The window of server device `dev`: false when the window is off. */
bool window_range(int dev, uint64_t *base, uint64_t *size);

/* ---- scratch memory, outside the session's state ------------------------
 *
 * Device memory the server uses for itself (a snapshot stages the
 * session's memory in it, migrate_stage.h), on the current context's
 * device: mapped at the top of its window, which keeps those addresses
 * until it is freed, so that neither the session's allocations nor what
 * the driver places itself (globals, managed memory) land elsewhere than
 * a replay of the session puts them. In no record (no migration copies
 * it), not charged to the quota. CUDA_ERROR_NOT_SUPPORTED while the
 * window is off (the driver places the session's memory). Any thread. */
CUresult window_scratch_alloc(CUdeviceptr *p, size_t bytes);
void window_scratch_free(CUdeviceptr p);
/* The device's free and total bytes as the driver counts them (no quota). */
CUresult window_scratch_room(size_t *free_bytes, size_t *total);

#endif
