/* test_migrate_preload.c - what B loaded ahead of the hold is dropped from
 * the items sent at the hold only while the session still begins with it
 * (server/migrate_preload_fit.c): contexts created since and the
 * sequence's new tail are sent; an unloaded head item, a destroyed or
 * changed context makes the early connection useless. */
#include "server/migrate_preload.h"
#include "server/migrate_state.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static struct msg_migrate_item ctx(uint64_t id, uint64_t flags)
{
    return (struct msg_migrate_item){.kind = MIG_CONTEXT, .id = id, .b = flags, .c = 1};
}

static struct msg_migrate_item lib(uint64_t id, uint64_t ctx_id)
{
    return (struct msg_migrate_item){.kind = MIG_LIBRARY, .id = id, .parent = ctx_id};
}

static struct msg_migrate_item kernel(uint64_t id, uint64_t lib_id)
{
    return (struct msg_migrate_item){.kind = MIG_KERNEL, .id = id, .parent = lib_id};
}

/* B holds: context 1, library 10, its kernel 11. */
static struct msg_migrate_item sent[] = {
    {.kind = MIG_CONTEXT, .id = 1, .c = 1},
    {.kind = MIG_LIBRARY, .id = 10, .parent = 1},
    {.kind = MIG_KERNEL, .id = 11, .parent = 10},
};
static const struct migrate_preloaded pre = {.fd = 3, .sent = sent, .nsent = 3};

static void test_unchanged(void)
{
    struct msg_migrate_item v[] = {ctx(1, 0), lib(10, 1), kernel(11, 10),
                                   {.kind = MIG_STREAM, .id = 20, .parent = 1}};
    long n = migrate_preload_filter(&pre, v, 4);
    check("an unchanged head: only what follows it is sent", n == 1 && v[0].kind == MIG_STREAM && v[0].id == 20);
}

static void test_grown(void)
{
    struct msg_migrate_item v[] = {ctx(1, 0), ctx(2, 0), lib(10, 1), kernel(11, 10), lib(12, 2), kernel(13, 12)};
    long n = migrate_preload_filter(&pre, v, 6);
    check("a new context and the sequence's new tail are sent, in order",
          n == 3 && v[0].kind == MIG_CONTEXT && v[0].id == 2 && v[1].id == 12 && v[2].id == 13);
}

static void test_unloaded(void)
{
    struct msg_migrate_item v[] = {ctx(1, 0), lib(12, 1)}; /* library 10 unloaded, another loaded */
    check("an unloaded head item: B's copy does not fit", migrate_preload_filter(&pre, v, 2) == -1);
    struct msg_migrate_item w[] = {ctx(1, 0), lib(10, 1)}; /* its kernel's note gone */
    check("a head cut short: does not fit", migrate_preload_filter(&pre, w, 2) == -1);
}

static void test_contexts_changed(void)
{
    struct msg_migrate_item v[] = {ctx(2, 0), lib(10, 1), kernel(11, 10)};
    check("a context destroyed since: does not fit", migrate_preload_filter(&pre, v, 3) == -1);
    struct msg_migrate_item w[] = {ctx(1, 4), lib(10, 1), kernel(11, 10)};
    check("a context's flags changed since: does not fit", migrate_preload_filter(&pre, w, 3) == -1);
}

int main(void)
{
    test_unchanged();
    test_grown();
    test_unloaded();
    test_contexts_changed();
    if (failures) printf("%d FAILED\n", failures);
    return failures ? 1 : 0;
}
