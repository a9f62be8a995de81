/* alloc_ahead.c - spare allocations over a slow link (src/client/alloc_ahead.c),
 * forced on here with SCUDA_ALLOC_AHEAD=1 (loopback is not slow):
 *   - allocations of a size asked before come with spares, and the next
 *     ones of that size are answered without a round trip; every pointer
 *     is distinct and holds what is written to it;
 *   - cuMemGetInfo counts the spares as free;
 *   - an allocation that needs the spares' memory gets it: the spares go
 *     back and it succeeds;
 *   - a destroyed context's spares are never handed out again;
 *   - without the variable, on loopback, no allocation takes a spare.
 * SCUDA_STATS proves what waited. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MIB (1u << 20)
#define SEG (2 * MIB)

/* Each pointer holds its own value. */
static void check_distinct(CUdeviceptr *p, int n)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) CHECK(p[i] != p[j], "allocations %d and %d share an address", i, j);
        CU(cuMemsetD32_v2(p[i], 0x1000u + (unsigned)i, SEG / 4));
    }
    for (int i = 0; i < n; i++) {
        uint32_t first = 0, last = 0;
        CU(cuMemcpyDtoH_v2(&first, p[i], 4));
        CU(cuMemcpyDtoH_v2(&last, p[i] + SEG - 4, 4));
        CHECK(first == 0x1000u + (unsigned)i && last == first, "allocation %d holds %#x .. %#x", i, first, last);
    }
}

static int spares_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUcontext ctx;
    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CU(cuCtxCreate_v2(&ctx, 0, dev)); /* one of its own, to destroy below */
    size_t free0, free1, total;
    CU(cuMemGetInfo_v2(&free0, &total));
    /* 2 MiB: the first asks for 2 (one spare), the second takes it, the
     * third asks for 4 (three spares), the fourth and fifth take two. */
    CUdeviceptr p[5];
    for (int i = 0; i < 5; i++) CU(cuMemAlloc_v2(&p[i], SEG));
    check_distinct(p, 5);
    CU(cuMemGetInfo_v2(&free1, &total));
    CHECK(free1 == free0 - 5 * SEG, "free memory went from %zu to %zu with one spare held: want %zu less",
          free0, free1, (size_t)5 * SEG);

    /* All the free memory the program is told of: only with the spare. */
    size_t big = free1 / SEG * SEG;
    CUdeviceptr b = 0;
    CUresult r = cuMemAlloc_v2(&b, big);
    CHECK(r == CUDA_SUCCESS, "an allocation of the %zu bytes cuMemGetInfo called free returned %s", big,
          h_cu_name(r));
    if (r == CUDA_SUCCESS) CU(cuMemFree_v2(b));
    for (int i = 0; i < 5; i++) CU(cuMemFree_v2(p[i]));

    /* A spare, then its context destroyed: a new context's allocation
     * of that size asks the session. */
    CUdeviceptr q[2];
    CU(cuMemAlloc_v2(&q[0], SEG)); /* asked before: 4, three spares */
    CU(cuCtxDestroy_v2(ctx));
    CU(cuCtxCreate_v2(&ctx, 0, dev));
    CU(cuMemAlloc_v2(&q[0], SEG));
    CU(cuMemAlloc_v2(&q[1], SEG));
    check_distinct(q, 2);
    CU(cuCtxDestroy_v2(ctx));
    return 0;
}

static int plain_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++) CU(cuMemAlloc_v2(&p[i], SEG));
    check_distinct(p, 3);
    for (int i = 0; i < 3; i++) CU(cuMemFree_v2(p[i]));
    return 0;
}

int main(void)
{
    h_begin("alloc_ahead", 60);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);

    setenv("SCUDA_ALLOC_AHEAD", "1", 1);
    char *stats = h_client_stats(spares_client, NULL, 30, "spares");
    unsetenv("SCUDA_ALLOC_AHEAD");
    unsigned ahead = h_stats_count(stats, "sync", "scuda_mem_alloc_ahead");
    /* 2 for the first five; 2 for the big one (out of memory, the spare
     * back, asked again); 1 before the destroy; 1 after it (2 of the size,
     * the second then a spare). */
    CHECK(ahead == 6, "scuda_mem_alloc_ahead waited %u times (want 6)\n%s", ahead, stats);
    CHECK(h_stats_count(stats, "sync", "cuMemAlloc_v2") == 0, "a plain cuMemAlloc went out\n%s", stats);
    CHECK(strstr(stats, "allocations answered with a spare allocated ahead (slow link): 4"),
          "spares taken\n%s", stats);
    free(stats);
    printf("ok spares: later allocations of a size take spares, which count as free and go back when needed\n");

    /* A loaded machine's first heartbeat can pass 2 ms: the allocations
     * are then samples of the link, one pointer each (no spares), and the
     * samples settle that loopback is not slow. Either way: one round
     * trip per allocation, none answered ahead. */
    stats = h_client_stats(plain_client, NULL, 30, "plain");
    unsigned plain = h_stats_count(stats, "sync", "cuMemAlloc_v2");
    unsigned sampled = h_stats_count(stats, "sync", "scuda_mem_alloc_ahead");
    CHECK(plain + sampled == 3 && !strstr(stats, "answered with a spare"),
          "on loopback each cuMemAlloc is one call of its own, none a spare (%u plain, %u samples)\n%s", plain,
          sampled, stats);
    free(stats);
    printf("ok plain: on loopback no spares\n");
    h_server_stop(&srv);
    printf("PASS alloc_ahead\n");
    return 0;
}
