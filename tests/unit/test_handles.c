/* test_handles.c - the session's handle map (src/server/handles.c): client
 * ids, server ids from handle_export (a range of their own), the reverse
 * lookup, reference counted VMM handles, contexts only from the client,
 * the --max-handles limit. */
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "server/dispatch.h"
#include "server/handles.h"

#define R(x) ((void *)(uintptr_t)(x))

/* handles.c destroys a handle refused at the limit through the driver
 * table; here there is no driver, and the destroyed ones are counted. */
struct driver_table real;
static int lacked;
CUresult driver_lacks(const char *name)
{
    (void)name;
    lacked++;
    return CUDA_ERROR_NOT_SUPPORTED;
}

int main(void)
{
    void *h;
    /* client ids: put, get, find, drop */
    CHECK(handle_put(NULL, 0x10000, HK_STREAM, R(0xa000)) == CUDA_SUCCESS);
    CHECK(handle_get(NULL, 0x10000, HK_STREAM, &h) == CUDA_SUCCESS && h == R(0xa000));
    CHECK(handle_get(NULL, 0x10000, HK_EVENT, &h) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(handle_find_id(NULL, HK_STREAM, R(0xa000)) == 0x10000);
    CHECK(handle_find_id(NULL, HK_EVENT, R(0xa000)) == 0);
    CHECK(handle_put(NULL, 0x10000, HK_STREAM, R(0xa010)) == CUDA_ERROR_INVALID_VALUE); /* in use */
    CHECK(handle_put(NULL, 1, HK_STREAM, R(0xa010)) == CUDA_ERROR_INVALID_VALUE);       /* special stream */

    /* export: a handle the client knows keeps its id */
    CHECK(handle_export(NULL, HK_STREAM, R(0xa000)) == 0x10000);
    CHECK(handle_export(NULL, HK_STREAM, NULL) == 0);
    CHECK(handle_export(NULL, HK_STREAM, (void *)CU_STREAM_LEGACY) == (uint64_t)(uintptr_t)CU_STREAM_LEGACY);

    /* export: a new handle gets a server id, the same one every time */
    uint64_t pool = handle_export(NULL, HK_MEMPOOL, R(0xb000));
    CHECK(pool != 0 && handle_is_server_id(pool) && pool % 16 == 0);
    CHECK(handle_export(NULL, HK_MEMPOOL, R(0xb000)) == pool);
    CHECK(handle_get(NULL, pool, HK_MEMPOOL, &h) == CUDA_SUCCESS && h == R(0xb000));
    CHECK(handle_find_id(NULL, HK_MEMPOOL, R(0xb000)) == pool);
    uint64_t other = handle_export(NULL, HK_GRAPH_NODE, R(0xb000)); /* same value, another kind */
    CHECK(other != 0 && other != pool && handle_is_server_id(other));
    /* the client can never take a server id */
    CHECK(handle_put(NULL, pool + 16, HK_STREAM, R(0xa020)) == CUDA_ERROR_INVALID_VALUE);
    CHECK(handle_put(NULL, HANDLE_SERVER_ID_BASE | 0x10000, HK_STREAM, R(0xa020)) == CUDA_ERROR_INVALID_VALUE);
    /* ... and the client's ids are far below: 2^62 / 16 handles away */
    CHECK(!handle_is_server_id(0x10000) && !handle_is_server_id((1ull << 62) - 16));

    /* dropping an exported handle forgets it; exporting again is a new id */
    handle_drop(NULL, pool);
    CHECK(handle_get(NULL, pool, HK_MEMPOOL, &h) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(handle_find_id(NULL, HK_MEMPOOL, R(0xb000)) == 0);
    uint64_t pool2 = handle_export(NULL, HK_MEMPOOL, R(0xb000));
    CHECK(pool2 != 0 && pool2 != pool);

    /* a real handle reused by the driver after its id was dropped */
    handle_drop(NULL, 0x10000);
    CHECK(handle_find_id(NULL, HK_STREAM, R(0xa000)) == 0);
    CHECK(handle_put(NULL, 0x10010, HK_STREAM, R(0xa000)) == CUDA_SUCCESS);
    CHECK(handle_export(NULL, HK_STREAM, R(0xa000)) == 0x10010);

    /* two ids for one real handle: the latest answers, the other still works */
    CHECK(handle_put(NULL, 0x10020, HK_FUNCTION, R(0xc000)) == CUDA_SUCCESS);
    CHECK(handle_put(NULL, 0x10030, HK_FUNCTION, R(0xc000)) == CUDA_SUCCESS);
    CHECK(handle_find_id(NULL, HK_FUNCTION, R(0xc000)) == 0x10030);
    handle_drop(NULL, 0x10030);
    CHECK(handle_find_id(NULL, HK_FUNCTION, R(0xc000)) == 0x10020); /* found by the scan */
    CHECK(handle_get(NULL, 0x10020, HK_FUNCTION, &h) == CUDA_SUCCESS && h == R(0xc000));

    /* contexts come only from the client */
    CHECK(handle_export(NULL, HK_CONTEXT, R(0xd000)) == 0);
    CHECK(handle_put(NULL, 0x10040, HK_CONTEXT, R(0xd000)) == CUDA_SUCCESS);
    CHECK(handle_export(NULL, HK_CONTEXT, R(0xd000)) == 0x10040);

    /* VMM handles: integers, reference counted like the driver's */
    CHECK(handle_put(NULL, 0x10050, HK_MEM_ALLOC, R(0x7)) == CUDA_SUCCESS);     /* cuMemCreate */
    CHECK(handle_export(NULL, HK_MEM_ALLOC, R(0x7)) == 0x10050);                /* cuMemRetainAllocationHandle */
    handle_drop(NULL, 0x10050);                                                 /* cuMemRelease: one left */
    CHECK(handle_get(NULL, 0x10050, HK_MEM_ALLOC, &h) == CUDA_SUCCESS && h == R(0x7));
    handle_drop(NULL, 0x10050);                                                 /* the last */
    CHECK(handle_get(NULL, 0x10050, HK_MEM_ALLOC, &h) == CUDA_ERROR_INVALID_HANDLE);
    uint64_t imported = handle_export(NULL, HK_MEM_ALLOC, R(0x9));              /* never created here */
    CHECK(handle_is_server_id(imported));
    handle_drop(NULL, imported);
    CHECK(handle_get(NULL, imported, HK_MEM_ALLOC, &h) == CUDA_ERROR_INVALID_HANDLE);

    /* many exports (the nodes of a big captured graph): distinct, all found */
    int ok = 1;
    uint64_t first = handle_export(NULL, HK_GRAPH_NODE, R(0x100000));
    for (uintptr_t i = 1; i < 4000 && ok; i++) {
        uint64_t id = handle_export(NULL, HK_GRAPH_NODE, R(0x100000 + 16 * i));
        ok = id == first + 16 * i && handle_export(NULL, HK_GRAPH_NODE, R(0x100000 + 16 * i)) == id;
    }
    CHECK(ok);
    for (uintptr_t i = 0; i < 4000; i += 2) handle_drop(NULL, first + 16 * i);
    for (uintptr_t i = 0; i < 4000 && ok; i++)
        ok = handle_find_id(NULL, HK_GRAPH_NODE, R(0x100000 + 16 * i)) == (i % 2 ? first + 16 * i : 0);
    CHECK(ok);

    /* the limit: far above what is live, nothing changes; below it, every
     * new id is refused (and its real handle destroyed); exports meet it
     * too; no limit again, new ids go in */
    handles_set_limit(1u << 20);
    CHECK(handle_put(NULL, 0x300000, HK_EVENT, R(0xe000)) == CUDA_SUCCESS);
    handle_drop(NULL, 0x300000);
    uint64_t base = 0x400000;
    int put = 0;
    handles_set_limit(1);
    CHECK(handle_put(NULL, base, HK_EVENT, R(0xe010)) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(lacked == 1); /* cuEventDestroy_v2 was asked for */
    CHECK(handle_get(NULL, base, HK_EVENT, &h) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(handle_export(NULL, HK_MEMPOOL, R(0xe020)) == 0);
    handles_set_limit(0); /* no limit */
    for (int i = 0; i < 8; i++) put += handle_put(NULL, base + 16 * (uint64_t)i, HK_EVENT, R(0xe100 + 16 * i)) == CUDA_SUCCESS;
    CHECK(put == 8);

    printf("test_handles: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
