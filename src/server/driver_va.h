/* driver_va.h - the driver's own mappings, placed alike in every session
 * (docs/architecture.md, 9.17a The driver's own address ranges).
 *
 * The driver places module and library globals, managed memory and its
 * internal heaps inside address ranges it takes with plain mmap(NULL, ...)
 * calls, so where they land depends on the process's randomized mmap base
 * and on every mapping made before: two sessions on two servers get the
 * same layout shifted, and a migration's address check refuses the move.
 * A session therefore puts every such mapping *made by the driver library*
 * in an arena at a fixed base, one after the other (a bump pointer): the
 * same reservations in the same order give the same addresses.
 *
 * The interposer itself (driver_va_hook.c) exports mmap/mmap64 from the
 * scuda executable; it is compiled out under the sanitizers, which own
 * mmap. The placement (driver_va_map) takes the real mmap as an argument,
 * so that unit tests run it in every build. */
#ifndef SCUDA_SERVER_DRIVER_VA_H
#define SCUDA_SERVER_DRIVER_VA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Below the device window (device_window.h: 0x2000_0000_0000 + 4 TiB per
 * device), above where the kernel puts a program, its heap and its
 * libraries (0x55.., 0x7f..), and clear of the stand-in's fixed ranges
 * (0x3000_0000_0000, 0x5a00_0000_0000): a client maps a managed mirror at
 * the same address in its own process, where this range is free too. */
#define DRIVER_VA_BASE_DEFAULT 0x100000000000ull
#define DRIVER_VA_SIZE_DEFAULT (4ull << 40)
/* Mappings of at least this size start on such a boundary, as the kernel
 * aligns large anonymous mappings for transparent huge pages. */
#define DRIVER_VA_LARGE_ALIGN (2ull << 20)

/* The sanitizers intercept mmap themselves (and keep their shadow where
 * the arena would go): their builds have no interposer. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DRIVER_VA_HOOKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DRIVER_VA_HOOKED 0
#endif
#endif
#ifndef DRIVER_VA_HOOKED
#if defined(__linux__) && UINTPTR_MAX == UINT64_MAX
#define DRIVER_VA_HOOKED 1
#else
#define DRIVER_VA_HOOKED 0
#endif
#endif

struct driver_va_arena {
    uintptr_t base, end;      /* [base, end): the arena's addresses */
    _Atomic uintptr_t next;   /* the next free address: only ever grows */
};

/* How one mmap call was served. */
enum driver_va_how {
    DRIVER_VA_PASSED,  /* not the arena's: a hint, MAP_FIXED*, a file, MAP_32BIT, huge pages */
    DRIVER_VA_PLACED,  /* at the arena's next address */
    DRIVER_VA_TAKEN,   /* that address was taken: the kernel placed it */
    DRIVER_VA_FULL,    /* the arena is used up: the kernel placed it */
};

typedef void *(*driver_va_mmap_fn)(void *addr, size_t len, int prot, int flags, int fd, off_t off);

void driver_va_arena_init(struct driver_va_arena *a, uintptr_t base, uint64_t size);
/* 1 when the arena places a mapping asked for with these arguments. */
int driver_va_wants(const void *addr, size_t len, int flags);
/* The next address for len bytes, aligned for its size, and the arena
 * moved past it; 0 when it does not fit (the arena is unchanged). */
uintptr_t driver_va_take(struct driver_va_arena *a, size_t len);
/* The mmap call, placed in the arena when it wants it (else passed to
 * `real` unchanged), with the kernel's choice as the fallback. */
void *driver_va_map(struct driver_va_arena *a, void *addr, size_t len, int prot, int flags, int fd, off_t off,
                    driver_va_mmap_fn real, enum driver_va_how *how);

/* The executable segments of a dlopen'ed library: a caller whose return
 * address lies there is that library. */
#define DRIVER_VA_MAX_RANGES 16
struct driver_va_text {
    int n;
    uintptr_t lo[DRIVER_VA_MAX_RANGES], hi[DRIVER_VA_MAX_RANGES];
};
int driver_va_find_text(void *dl_handle, struct driver_va_text *t); /* 0 when found */
int driver_va_text_holds(const struct driver_va_text *t, uintptr_t pc);

/* ---- the session's interposer (driver_va_hook.c) ---- */

struct driver_va_config {
    uint64_t base, size;  /* the arena; base 0 = off (the kernel places everything) */
    int log_fd;           /* where placements are logged */
    int log;              /* log each driver mapping (SCUDA_DRIVER_VA_LOG=1, or debug) */
};
/* In a session process, after dlopen of the driver and before cuInit:
 * from now on the driver's hint-less mmaps land in the arena. Logs what
 * it did (one line; or why it is off). Returns 0 when the arena is on. */
int driver_va_start(void *driver_handle, const struct driver_va_config *cfg);
/* What the interposer calls for every mmap of the process. */
void *driver_va_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, uintptr_t caller);
/* Between these, on the calling thread, the driver's mappings are the
 * kernel's to place: the session's own pinned staging buffers, whose
 * number and timing differ between a session that serves a client and
 * one that imports it, must not shift the arena's sequence. */
void driver_va_own_begin(void);
void driver_va_own_end(void);
/* The kernel's mmap, bypassing every interposer (the syscall). */
void *driver_va_raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);

#endif
