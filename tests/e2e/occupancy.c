/* occupancy.c - cuOccupancyMaxActiveClusters over a row of cluster widths
 * (src/client/occupancy.c), as cuBLAS asks it at its start: for every
 * width 1..32 of a function that may use non-portable clusters, the
 * stand-in's answer (132 / width); a function's first miss goes alone,
 * its second brings the whole row in one scuda_memo_batch, and every
 * later width is answered from the memo, whichever way the widths run;
 * a new row of a function that missed before comes in one batch.
 * An error comes back from a batched answer as from the call itself; an
 * attribute set makes the function's answers asked again; a configuration
 * of clusters in two dimensions is never batched. SCUDA_STATS proves
 * what waited. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static CUresult clusters(int *n, CUfunction f, unsigned grid_x, unsigned width, unsigned height)
{
    CUlaunchAttribute a[2];
    memset(a, 0, sizeof a);
    a[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY; /* another attribute beside the cluster's travels too */
    a[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a[1].value.clusterDim.x = width;
    a[1].value.clusterDim.y = height;
    a[1].value.clusterDim.z = 1;
    CUlaunchConfig c = {.gridDimX = grid_x, .gridDimY = height, .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1,
                        .blockDimZ = 1, .sharedMemBytes = 0, .hStream = NULL, .attrs = a, .numAttrs = 2};
    *n = -1;
    return cuOccupancyMaxActiveClusters(n, f, &c);
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m;
    CUfunction f, g;
    CU(cuModuleLoad(&m, h_ptx_path()));
    CU(cuModuleGetFunction(&f, m, "fill_u32"));
    CU(cuModuleGetFunction(&g, m, "vec_add"));
    CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
    int n;
    for (unsigned w = 3; w <= 32; w++) { /* upward from 3, as cuBLAS's first kernel asks */
        CU(clusters(&n, f, w, w, 1));
        CHECK(n == (int)(132 / w), "width %u: %d clusters", w, n);
    }
    for (unsigned w = 32; w >= 1; w--) { /* and down, two clusters' grid: a new row */
        CU(clusters(&n, f, 2 * w, w, 1));
        CHECK(n == (int)(132 / w), "width %u, two clusters: %d", w, n);
    }
    /* Without non-portable clusters, more than 8 blocks is refused: alone,
     * and then from the batch; a width the batch brought is answered. */
    CU_EXPECT(CUDA_ERROR_INVALID_CLUSTER_SIZE, clusters(&n, g, 12, 12, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_CLUSTER_SIZE, clusters(&n, g, 10, 10, 1));
    CU(clusters(&n, g, 4, 4, 1));
    CHECK(n == 33, "width 4 of vec_add: %d", n);
    /* A set clears what the memo knew of the function: asked again. */
    CU(cuFuncSetAttribute(g, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
    CU(clusters(&n, g, 12, 12, 1));
    CHECK(n == 11, "width 12 after the set: %d", n);
    /* Clusters of two dimensions: each asked alone. */
    CU(clusters(&n, g, 2, 2, 2));
    CHECK(n == 33, "2x2 clusters: %d", n);
    CU(clusters(&n, g, 4, 2, 2));
    CHECK(n == 33, "2x2 clusters, two of them: %d", n);
    CU(cuModuleUnload(m));
    return 0;
}

int main(void)
{
    h_begin("occupancy", 60);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    char *stats = h_client_stats(client, NULL, 30, "occupancy");
    unsigned alone = h_stats_count(stats, "sync", "cuOccupancyMaxActiveClusters");
    unsigned batches = h_stats_count(stats, "sync", "scuda_memo_batch");
    /* f: its first miss alone, then a batch for each row; g: one alone and
     * one batch, a batch again after the set (g missed before), and the
     * two 2x2 configurations alone. */
    CHECK(batches == 4, "batches: %u\n%s", batches, stats);
    CHECK(alone == 4, "calls asked alone: %u\n%s", alone, stats);
    free(stats);
    h_server_stop(&srv);
    printf("PASS occupancy\n");
    return 0;
}
