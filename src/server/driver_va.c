/* driver_va.c - the arena the driver's own mappings are placed in
 * (driver_va.h; docs/architecture.md, 9.17a). */
#define _GNU_SOURCE
#include "driver_va.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/log.h"

#define PAGE 4096u

void driver_va_arena_init(struct driver_va_arena *a, uintptr_t base, uint64_t size)
{
    a->base = base;
    a->end = size > UINTPTR_MAX - base ? UINTPTR_MAX : base + (uintptr_t)size;
    atomic_store(&a->next, base);
}

/* Only anonymous memory with no say about its address: that is what the
 * driver reserves its ranges with. A hint or MAP_FIXED* is the caller's
 * choice (cuMemAddressReserve at the window's address must land there);
 * a file or device mapping may need the alignment its driver's
 * get_unmapped_area picks; MAP_32BIT asks for the low 2 GiB; huge pages
 * need their own alignment. Those stay the kernel's to place. */
int driver_va_wants(const void *addr, size_t len, int flags)
{
    if (addr || len == 0 || !(flags & MAP_ANONYMOUS)) return 0;
    int theirs = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_32BIT | MAP_HUGETLB | MAP_GROWSDOWN;
    return (flags & theirs) == 0;
}

static uintptr_t align_for(size_t len) { return len >= DRIVER_VA_LARGE_ALIGN ? DRIVER_VA_LARGE_ALIGN : PAGE; }

/* Bump only: a freed range is never handed out again, so an address
 * depends on the sequence of reservations alone, not on which of them
 * the driver has released meanwhile (its frees may run on its own
 * threads, in an order no replay reproduces). Addresses are plentiful:
 * the arena only needs to outlast one session. */
uintptr_t driver_va_take(struct driver_va_arena *a, size_t len)
{
    if (len > SIZE_MAX - PAGE) return 0;
    uintptr_t need = ((uintptr_t)len + PAGE - 1) & ~(uintptr_t)(PAGE - 1), align = align_for(len);
    uintptr_t cur = atomic_load(&a->next), at;
    do {
        at = (cur + align - 1) & ~(align - 1);
        if (at < cur || at >= a->end || a->end - at < need) return 0;
    } while (!atomic_compare_exchange_weak(&a->next, &cur, at + need));
    return at;
}

void *driver_va_map(struct driver_va_arena *a, void *addr, size_t len, int prot, int flags, int fd, off_t off,
                    driver_va_mmap_fn real, enum driver_va_how *how)
{
    *how = DRIVER_VA_PASSED;
    if (!driver_va_wants(addr, len, flags)) return real(addr, len, prot, flags, fd, off);
    uintptr_t at = driver_va_take(a, len);
    if (!at) {
        *how = DRIVER_VA_FULL;
        return real(addr, len, prot, flags, fd, off);
    }
    /* NOREPLACE: never over something that is already there (a library,
     * a thread's stack); the kernel's own choice is the fallback, and the
     * migration check then refuses a move that this changed. */
    int saved = errno;
    void *p = real((void *)at, len, prot, flags | MAP_FIXED_NOREPLACE, fd, off);
    if (p == (void *)at) {
        *how = DRIVER_VA_PLACED;
        return p;
    }
    /* A kernel older than 4.17 takes NOREPLACE as a hint: keep what it gave. */
    *how = DRIVER_VA_TAKEN;
    if (p != MAP_FAILED) return p;
    errno = saved;
    return real(addr, len, prot, flags, fd, off);
}

/* ---- which code is the driver's ---- */

struct find_arg {
    uintptr_t l_addr;
    const char *name;
    struct driver_va_text *t;
};

static int note_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find_arg *f = data;
    if (info->dlpi_addr != f->l_addr || !info->dlpi_name || strcmp(info->dlpi_name, f->name) != 0) return 0;
    for (int i = 0; i < info->dlpi_phnum && f->t->n < DRIVER_VA_MAX_RANGES; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        f->t->lo[f->t->n] = info->dlpi_addr + ph->p_vaddr;
        f->t->hi[f->t->n] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        f->t->n++;
    }
    return 1;
}

int driver_va_find_text(void *dl_handle, struct driver_va_text *t)
{
    struct link_map *lm = NULL;
    memset(t, 0, sizeof *t);
    if (!dl_handle || dlinfo(dl_handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return -1;
    struct find_arg f = {.l_addr = lm->l_addr, .name = lm->l_name, .t = t};
    dl_iterate_phdr(note_segments, &f);
    return t->n > 0 ? 0 : -1;
}

int driver_va_text_holds(const struct driver_va_text *t, uintptr_t pc)
{
    for (int i = 0; i < t->n; i++)
        if (pc >= t->lo[i] && pc < t->hi[i]) return 1;
    return 0;
}

/* ---- the session's arena ---- */

static struct {
    _Atomic int on;               /* set once, before the driver runs */
    struct driver_va_text text;   /* the driver's code */
    struct driver_va_arena arena;
    int log_fd, log;
    _Atomic unsigned placed;      /* placements so far: the log's numbering */
} va;

void *driver_va_raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

static void prot_name(int prot, char out[4])
{
    out[0] = prot & PROT_READ ? 'r' : '-';
    out[1] = prot & PROT_WRITE ? 'w' : '-';
    out[2] = prot & PROT_EXEC ? 'x' : '-';
    out[3] = 0;
}

/* One line per driver mapping, written straight to the log: the session's
 * rate limit would drop most of cuInit's, and the lines exist to be
 * compared between two sessions (tests/gpu/failover/driver_va_probe.sh).
 * No allocation here: this runs inside the driver's mmap. */
static void log_mapping(enum driver_va_how how, size_t len, int prot, int flags, void *p)
{
    static const char *const what[] = {"kernel (not the arena's)", "placed", "kernel (arena address taken)",
                                        "kernel (arena full)"};
    char line[256], pr[4];
    prot_name(prot, pr);
    char num[16] = "";
    if (how == DRIVER_VA_PLACED) snprintf(num, sizeof num, " #%u", atomic_fetch_add(&va.placed, 1) + 1);
    int k = snprintf(line, sizeof line, "scuda[session %d] debug: driver mapping%s %s: %#zx bytes %s flags %#x at %p\n",
                     (int)getpid(), num, what[how], len, pr, (unsigned)flags, p);
    if (k > 0 && (size_t)k < sizeof line) {
        ssize_t w = write(va.log_fd, line, (size_t)k);
        (void)w; /* a log line that cannot be written changes nothing */
    }
}

static _Thread_local int own_depth;

void driver_va_own_begin(void) { own_depth++; }
void driver_va_own_end(void) { own_depth--; }

void *driver_va_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, uintptr_t caller)
{
    if (own_depth || !atomic_load_explicit(&va.on, memory_order_acquire) || !driver_va_text_holds(&va.text, caller))
        return driver_va_raw_mmap(addr, len, prot, flags, fd, off);
    enum driver_va_how how;
    void *p = driver_va_map(&va.arena, addr, len, prot, flags, fd, off, driver_va_raw_mmap, &how);
    if (va.log) log_mapping(how, len, prot, flags, p);
    if (how == DRIVER_VA_TAKEN || how == DRIVER_VA_FULL) {
        static _Atomic int warned;
        if (!atomic_exchange(&warned, 1))
            LOG_WARN("the driver's address arena at %#lx-%#lx is %s; the kernel placed the driver's memory, so "
                     "this session may not be able to move; pass another --driver-va-base (and --driver-va-size)",
                     (unsigned long)va.arena.base, (unsigned long)va.arena.end,
                     how == DRIVER_VA_FULL ? "used up" : "taken by another mapping");
    }
    return p;
}

int driver_va_start(void *driver_handle, const struct driver_va_config *cfg)
{
    if (!cfg->base) {
        LOG_INFO("the driver places its own memory (--driver-va-base off): this session's globals and managed "
                 "memory may not keep their addresses on another server");
        return -1;
    }
    if (!DRIVER_VA_HOOKED) {
        LOG_INFO("the driver's address arena is compiled out of this build (sanitizers own mmap): the driver "
                 "places its own memory");
        return -1;
    }
    if (driver_va_find_text(driver_handle, &va.text) != 0) {
        LOG_WARN("cannot find the loaded driver's code segments; the driver places its own memory, so this "
                 "session may not be able to move");
        return -1;
    }
    driver_va_arena_init(&va.arena, (uintptr_t)cfg->base, cfg->size);
    va.log_fd = cfg->log_fd;
    va.log = cfg->log;
    atomic_store_explicit(&va.on, 1, memory_order_release);
    LOG_DEBUG("the driver's own mappings go to %#llx-%#llx", (unsigned long long)cfg->base,
              (unsigned long long)(cfg->base + cfg->size));
    return 0;
}
