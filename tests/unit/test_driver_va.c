/* Unit tests of the driver's address arena (src/server/driver_va.c): what
 * it places and what it passes on, alignment by size, bump-only order, a
 * full arena, a taken address, and finding a library's code. A fake mmap
 * records the calls; one test maps for real, in a range the kernel just
 * gave, so it runs in every build (the sanitizers' included). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "server/driver_va.h"

#define MiB (1ull << 20)
#define BASE 0x100000000000ull

/* ---- a fake mmap: records the last call, refuses one address ---- */

static struct {
    void *addr;
    size_t len;
    int flags, calls;
} last;
static uintptr_t taken; /* NOREPLACE at this address fails with EEXIST */

static void *fake_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    (void)prot, (void)fd, (void)off;
    last.addr = addr, last.len = len, last.flags = flags, last.calls++;
    if ((flags & MAP_FIXED_NOREPLACE) && (uintptr_t)addr == taken) {
        errno = EEXIST;
        return MAP_FAILED;
    }
    return addr ? addr : (void *)0x7f0000000000ull; /* "the kernel's choice" */
}

static void *map(struct driver_va_arena *a, void *addr, size_t len, int flags, enum driver_va_how *how)
{
    return driver_va_map(a, addr, len, PROT_READ | PROT_WRITE, flags, -1, 0, fake_mmap, how);
}

#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static void test_wants(void)
{
    CHECK(driver_va_wants(NULL, 4096, ANON));
    CHECK(driver_va_wants(NULL, 4096, ANON | MAP_NORESERVE));
    CHECK(!driver_va_wants((void *)0x1000000, 4096, ANON)); /* a hint is the caller's */
    CHECK(!driver_va_wants(NULL, 4096, ANON | MAP_FIXED));
    CHECK(!driver_va_wants(NULL, 4096, ANON | MAP_FIXED_NOREPLACE));
    CHECK(!driver_va_wants(NULL, 4096, MAP_SHARED)); /* a file or a device */
    CHECK(!driver_va_wants(NULL, 4096, ANON | MAP_32BIT));
    CHECK(!driver_va_wants(NULL, 2 * MiB, ANON | MAP_HUGETLB));
    CHECK(!driver_va_wants(NULL, 0, ANON));
}

/* Small mappings on pages, large ones on 2 MiB, one after the other;
 * freeing changes nothing (there is no free). */
static void test_bump_and_align(void)
{
    struct driver_va_arena a;
    driver_va_arena_init(&a, BASE, 1ull << 40);
    CHECK(driver_va_take(&a, 100) == BASE);
    CHECK(driver_va_take(&a, 4096) == BASE + 4096);
    CHECK(driver_va_take(&a, 2 * MiB) == BASE + 2 * MiB); /* the next 2 MiB boundary */
    CHECK(driver_va_take(&a, 5000) == BASE + 4 * MiB);
    CHECK(driver_va_take(&a, 3 * MiB + 1) == BASE + 6 * MiB);
    CHECK(driver_va_take(&a, 1) == BASE + 6 * MiB + 3 * MiB + 4096);
    /* The same sequence in another arena gives the same addresses. */
    struct driver_va_arena b;
    driver_va_arena_init(&b, BASE, 1ull << 40);
    size_t seq[] = {100, 4096, 2 * MiB, 5000};
    uintptr_t want[] = {BASE, BASE + 4096, BASE + 2 * MiB, BASE + 4 * MiB};
    for (int i = 0; i < 4; i++) CHECK(driver_va_take(&b, seq[i]) == want[i]);
}

static void test_full(void)
{
    struct driver_va_arena a;
    driver_va_arena_init(&a, BASE, 4 * MiB);
    CHECK(driver_va_take(&a, 3 * MiB) == BASE);
    CHECK(driver_va_take(&a, 2 * MiB) == 0); /* 2 MiB-aligned at BASE + 4 MiB: the end */
    CHECK(driver_va_take(&a, 4096) == BASE + 3 * MiB); /* a refusal moved nothing */
    CHECK(driver_va_take(&a, SIZE_MAX) == 0);
    enum driver_va_how how;
    last.calls = 0;
    void *p = map(&a, NULL, 2 * MiB, ANON, &how);
    CHECK(how == DRIVER_VA_FULL && p == (void *)0x7f0000000000ull && last.addr == NULL && last.calls == 1);
}

static void test_map(void)
{
    struct driver_va_arena a;
    driver_va_arena_init(&a, BASE, 1ull << 40);
    enum driver_va_how how;
    void *p = map(&a, NULL, 8192, ANON, &how);
    CHECK(how == DRIVER_VA_PLACED && p == (void *)BASE);
    CHECK(last.flags == (ANON | MAP_FIXED_NOREPLACE) && last.len == 8192);
    /* Hinted and fixed: untouched, and the arena did not move. */
    p = map(&a, (void *)0x200000000000ull, 4 * MiB, ANON | MAP_FIXED_NOREPLACE, &how);
    CHECK(how == DRIVER_VA_PASSED && p == (void *)0x200000000000ull && last.flags == (ANON | MAP_FIXED_NOREPLACE));
    p = map(&a, NULL, 4096, MAP_SHARED, &how);
    CHECK(how == DRIVER_VA_PASSED && last.addr == NULL && last.flags == MAP_SHARED);
    /* Taken: the kernel's choice, with the caller's own arguments, and
     * the arena moves past the taken address all the same. */
    taken = BASE + 2 * MiB;
    last.calls = 0;
    p = map(&a, NULL, 2 * MiB, ANON, &how);
    CHECK(how == DRIVER_VA_TAKEN && p == (void *)0x7f0000000000ull && last.calls == 2 && last.addr == NULL &&
          last.flags == ANON);
    taken = 0;
    p = map(&a, NULL, 4096, ANON, &how);
    CHECK(how == DRIVER_VA_PLACED && p == (void *)(BASE + 4 * MiB));
}

/* For real: an arena in a range the kernel just handed out and took back. */
static void test_real_mmap(void)
{
    size_t span = 64 * MiB;
    void *r = mmap(NULL, span, PROT_NONE, ANON | MAP_NORESERVE, -1, 0);
    CHECK(r != MAP_FAILED);
    if (r == MAP_FAILED) return;
    uintptr_t base = ((uintptr_t)r + 2 * MiB - 1) & ~(uintptr_t)(2 * MiB - 1);
    munmap(r, span);
    struct driver_va_arena a;
    driver_va_arena_init(&a, base, 32 * MiB);
    enum driver_va_how how;
    char *p = driver_va_map(&a, NULL, 3 * MiB, PROT_READ | PROT_WRITE, ANON, -1, 0, mmap, &how);
    CHECK(how == DRIVER_VA_PLACED && (uintptr_t)p == base);
    if (how == DRIVER_VA_PLACED) {
        p[0] = 1, p[3 * MiB - 1] = 2; /* mapped, and writable */
        munmap(p, 3 * MiB);
    }
    /* Something else sits at the next address: never over it. */
    uintptr_t next = base + 4 * MiB;
    char *other = mmap((void *)next, 4096, PROT_READ | PROT_WRITE, ANON | MAP_FIXED_NOREPLACE, -1, 0);
    if (other == (char *)next) {
        other[0] = 42;
        char *q = driver_va_map(&a, NULL, 2 * MiB, PROT_READ | PROT_WRITE, ANON, -1, 0, mmap, &how);
        CHECK(how == DRIVER_VA_TAKEN && q != MAP_FAILED && q != other && other[0] == 42);
        if (q != MAP_FAILED) munmap(q, 2 * MiB);
        munmap(other, 4096);
    }
}

/* The code of a dlopen'ed library is found; other code is not in it. */
static void test_find_text(void)
{
    void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h) return;
    struct driver_va_text t;
    CHECK(driver_va_find_text(h, &t) == 0 && t.n >= 1);
    void *fn = dlsym(h, "cbrt");
    CHECK(fn && driver_va_text_holds(&t, (uintptr_t)fn));
    CHECK(!driver_va_text_holds(&t, (uintptr_t)&test_find_text));
    CHECK(driver_va_find_text(NULL, &t) != 0 && t.n == 0);
}

int main(void)
{
    test_wants();
    test_bump_and_align();
    test_full();
    test_map();
    test_real_mmap();
    test_find_text();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
