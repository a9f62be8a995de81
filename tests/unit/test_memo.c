/* test_memo.c - the client's memo of query results (src/client/memo.c):
 * values come back for the same op, context and key; memo_invalidate_all
 * drops them all; an attribute set drops only what it can change
 * (memo_invalidate_about); a query in flight across either does not
 * insert. */
#define _GNU_SOURCE
#include "client/memo.h"

#include <string.h>

#include "../unit/check.h"
#include "common/ops.gen.h"

enum { KERNEL_A = 0x100, KERNEL_B = 0x200, FUNC_C = 0x300 };

/* A key as the one-attribute calls encode theirs: attribute, handle
 * (bytes: no padding to differ between two keys). */
struct key {
    uint8_t b[12];
};

static struct key key_of(uint32_t attr, uint64_t handle)
{
    struct key k;
    memcpy(k.b, &attr, 4);
    memcpy(k.b + 4, &handle, 8);
    return k;
}

static void put(uint16_t op, uint64_t handle, int32_t value, uint64_t subject)
{
    struct key k = key_of(8, handle);
    memo_insert_about(op, 1, &k, sizeof k, &value, sizeof value, memo_generation(), subject);
}

/* 1 and the value when (op, handle) is in the memo. */
static int has(uint16_t op, uint64_t handle, int32_t *value)
{
    struct key k = key_of(8, handle);
    size_t len = 0;
    uint64_t gen;
    return memo_lookup(op, 1, &k, sizeof k, value, &len, &gen) && len == sizeof *value;
}

static void fill(void)
{
    put(OP_cuKernelGetAttribute, KERNEL_A, 1, KERNEL_A);
    put(OP_cuKernelGetAttribute, KERNEL_B, 2, KERNEL_B);
    put(OP_cuFuncGetAttribute, FUNC_C, 3, FUNC_C);
    put(OP_cuOccupancyMaxActiveClusters, KERNEL_B, 4, 0); /* about no known handle */
}

int main(void)
{
    int32_t v = 0;
    fill();
    CHECK(has(OP_cuKernelGetAttribute, KERNEL_A, &v) && v == 1);
    CHECK(has(OP_cuKernelGetAttribute, KERNEL_B, &v) && v == 2);
    CHECK(has(OP_cuFuncGetAttribute, FUNC_C, &v) && v == 3);
    CHECK(has(OP_cuOccupancyMaxActiveClusters, KERNEL_B, &v) && v == 4);

    /* A kernel's set: its own values, values about no handle, and every
     * function's (a kernel's function shares its attributes) go. */
    memo_invalidate_about(OP_cuKernelSetAttribute, KERNEL_A);
    CHECK(!has(OP_cuKernelGetAttribute, KERNEL_A, &v));
    CHECK(has(OP_cuKernelGetAttribute, KERNEL_B, &v) && v == 2);
    CHECK(!has(OP_cuFuncGetAttribute, FUNC_C, &v));
    CHECK(!has(OP_cuOccupancyMaxActiveClusters, KERNEL_B, &v));

    /* A function's set: its own, and every kernel's. */
    fill();
    memo_invalidate_about(OP_cuFuncSetAttribute, FUNC_C);
    CHECK(!has(OP_cuFuncGetAttribute, FUNC_C, &v));
    CHECK(!has(OP_cuKernelGetAttribute, KERNEL_A, &v));
    CHECK(!has(OP_cuKernelGetAttribute, KERNEL_B, &v));
    CHECK(!has(OP_cuOccupancyMaxActiveClusters, KERNEL_B, &v));
    put(OP_cuFuncGetAttribute, 0x400, 5, 0x400);
    memo_invalidate_about(OP_cuFuncSetAttribute, FUNC_C);
    CHECK(has(OP_cuFuncGetAttribute, 0x400, &v) && v == 5); /* another function's stays */

    /* A query in flight across a set does not insert what it fetched. */
    uint64_t gen = memo_generation();
    memo_invalidate_about(OP_cuKernelSetAttribute, KERNEL_B);
    struct key k = key_of(8, KERNEL_A);
    int32_t stale = 7;
    memo_insert_about(OP_cuKernelGetAttribute, 1, &k, sizeof k, &stale, sizeof stale, gen, KERNEL_A);
    CHECK(!has(OP_cuKernelGetAttribute, KERNEL_A, &v));

    /* Everything goes with memo_invalidate_all. */
    fill();
    memo_invalidate_all();
    CHECK(!has(OP_cuKernelGetAttribute, KERNEL_A, &v) && !has(OP_cuKernelGetAttribute, KERNEL_B, &v));

    /* Settings outlive both (they are dropped with their module or context). */
    int32_t set = 48 << 10;
    struct key sk = key_of(8, KERNEL_A);
    memo_setting_put(OP_cuKernelSetAttribute, 1, &sk, sizeof sk, &set, sizeof set);
    memo_invalidate_about(OP_cuKernelSetAttribute, KERNEL_A);
    memo_invalidate_all();
    CHECK(memo_setting_is(OP_cuKernelSetAttribute, 1, &sk, sizeof sk, &set, sizeof set));

    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
