/* migrate_order.c - a session whose streams and events were made among
 * its module loads moves (src/server/migrate_seq.c; docs/architecture.md
 * 9.17, "One sequence for what the driver places").
 *
 * The driver allocates memory of its own for every stream and event, from
 * the allocator that later places module globals (the stand-in models it:
 * one page of the device range each). A static-cudart program makes its
 * streams and events before its first launch, so before cudart loads its
 * code: the globals land after them. The importing server must make them
 * in that same order, destroy again what was destroyed in between (a
 * hole the next module's globals fill), and make the exporting session's
 * own (a staging event of a striped copy) too; else every global is
 * elsewhere and the move is refused. The session then moves once more,
 * from B to C: what B replayed is noted as what A did.
 *
 * Also: libraries loaded one-way, their kernels read by the client
 * (docs/architecture.md, 3.8.2). The session checks a kernel's layout
 * against the client's at its first launch, not at its binding: asking a
 * library's kernel for its layout loads the library into the context (on
 * driver 580, and so on the stand-in), which at the binding would place
 * its globals at a point no note marks, ahead of another library's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "read_kernels_images.h"

int scuda_migrate(const char *to, char *why, size_t whylen); /* the shim's (src/client/migrate.c) */

#define MiB (1ull << 20)

static const char *hops[2]; /* B's and C's addresses; NULL: the run stays */
static char why[512];

static void move_to(const char *to)
{
    if (!to) return;
    int moved = scuda_migrate(to, why, sizeof why);
    CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", to, moved, why);
}

/* Stream and event handles, their flags, globals: everything after the
 * move must be what it was, and each line printed compares a moved run
 * with one that stayed. */
static int early_streams(void *arg)
{
    (void)arg;
    h_cuda_setup();
    /* As cudart's static runtime does: streams and events first. */
    CUstream s1, s2, gone;
    CUevent e1, e2, temp;
    CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CU(cuStreamCreateWithPriority(&s2, 0, -1));
    CU(cuStreamCreate(&gone, 0));
    CU(cuEventCreate(&temp, 0));
    CU(cuEventDestroy_v2(temp)); /* made and destroyed with nothing between: the driver is back where it was */
    CU(cuEventCreate(&e2, 0));

    /* The first module: its globals come after those five objects. */
    CUmodule m1 = h_module();
    CUfunction bump = h_func("bump_global");
    CUdeviceptr g1;
    size_t g1_size;
    CU(cuModuleGetGlobal_v2(&g1, &g1_size, m1, "g_counter"));
    /* A destroyed stream leaves a hole: the second module's first global
     * fills it, here and on B only if B destroyed it at the same point. */
    CU(cuStreamDestroy_v2(gone));
    CUmodule m2 = h_load_module();
    CUdeviceptr g2, pi2;
    size_t g2_size, pi2_size;
    CU(cuModuleGetGlobal_v2(&g2, &g2_size, m2, "g_counter"));
    CU(cuModuleGetGlobal_v2(&pi2, &pi2_size, m2, "g_pi"));

    /* A striped copy: the session's staging events are its own, made
     * after everything above. */
    size_t len = 16 * MiB;
    uint8_t *bytes = malloc(len), *back = malloc(len);
    CHECK(bytes && back);
    h_pattern(bytes, len, 7);
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, len));
    CU(cuMemcpyHtoD_v2(d, bytes, len));

    unsigned by = 5;
    void *args[] = {&by};
    CU(cuLaunchKernel(bump, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL)); /* 42 + 5 + c_table[1] = 49 */
    CU(cuEventRecord(e1, s1));
    CU(cuStreamWaitEvent(s2, e1, 0));
    CU(cuCtxSynchronize());

    move_to(hops[0]);
    move_to(hops[1]);

    /* Everything works where the session is now. */
    CU(cuLaunchKernel(bump, 1, 1, 1, 1, 1, 1, 0, s2, args, NULL));
    CU(cuEventRecord(e2, s2));
    CU(cuEventSynchronize(e2));
    CU(cuEventQuery(e1));
    CU(cuStreamQuery(s1));
    unsigned flags = 0;
    int prio = 0;
    CU(cuStreamGetFlags(s1, &flags));
    CU(cuStreamGetPriority(s2, &prio));
    uint32_t v1 = 0, v2 = 0;
    double pi = 0;
    CU(cuMemcpyDtoH_v2(&v1, g1, sizeof v1));
    CU(cuMemcpyDtoH_v2(&v2, g2, sizeof v2));
    CU(cuMemcpyDtoH_v2(&pi, pi2, sizeof pi));
    CU(cuMemcpyDtoH_v2(back, d, len));
    CHECK(v1 == 56, "the first module's counter, bumped twice, is %u", v1);
    CHECK(v2 == 42, "the second module's counter is %u", v2);
    CHECK(h_diff(bytes, back, len) < 0, "the copied bytes came back");
    printf("s1 flags %u s2 priority %d g1 %u g2 %u pi %.5f\n", flags, prio, v1, v2, pi);
    printf("g1 %#llx g2 %#llx pi2 %#llx\n", (unsigned long long)g1, (unsigned long long)g2,
           (unsigned long long)pi2);
    CU(cuStreamDestroy_v2(s1));
    CU(cuStreamDestroy_v2(s2));
    CU(cuEventDestroy_v2(e1));
    CU(cuEventDestroy_v2(e2));
    CU(cuMemFree_v2(d));
    free(bytes);
    free(back);
    return 0;
}

/* Two libraries of one image, loaded one-way; the first's kernel bound
 * before the second's global is asked for, and launched only after. */
static int one_way_libraries(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUlibrary l1, l2;
    CUkernel k1;
    CU(cuLibraryLoadData(&l1, rk_global, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryLoadData(&l2, rk_global, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernel(&k1, l1, "fill_u32"));
    CUdeviceptr g1, g2;
    size_t n1, n2;
    CU(cuLibraryGetGlobal(&g2, &n2, l2, "rk_g"));
    CU(cuLibraryGetGlobal(&g1, &n1, l1, "rk_g"));
    CHECK(n1 == 16 && n2 == 16, "rk_g has %zu and %zu bytes", n1, n2);
    uint32_t value = 7;
    unsigned long long words = 2;
    void *args[] = {&g1, &value, &words};
    CU(cuLaunchKernel((CUfunction)k1, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    CU(cuCtxSynchronize());

    move_to(hops[0]);

    void *args2[] = {&g2, &value, &words};
    value = 9;
    CU(cuLaunchKernel((CUfunction)k1, 1, 1, 1, 32, 1, 1, 0, NULL, args2, NULL));
    uint32_t v1[4], v2[4];
    CU(cuMemcpyDtoH_v2(v1, g1, sizeof v1));
    CU(cuMemcpyDtoH_v2(v2, g2, sizeof v2));
    CHECK(v1[0] == 7 && v1[1] == 7 && v1[2] == 3 && v1[3] == 4, "the first library's rk_g: %u %u %u %u", v1[0],
          v1[1], v1[2], v1[3]);
    CHECK(v2[0] == 9 && v2[1] == 9 && v2[2] == 3 && v2[3] == 4, "the second library's rk_g: %u %u %u %u", v2[0],
          v2[1], v2[2], v2[3]);
    printf("g1 %#llx g2 %#llx\n", (unsigned long long)g1, (unsigned long long)g2);
    CU(cuLibraryUnload(l1));
    CU(cuLibraryUnload(l2));
    return 0;
}

/* fn's output, run in a child that moves to b and then c (NULL: stays);
 * with stats, its SCUDA_STATS report in *stats. */
static char *run_stats(const char *tag, int (*fn)(void *), const char *b, const char *c, char **stats)
{
    char path[512], err_path[512], err_tag[128];
    int fd = h_temp_file(tag, path, sizeof path), err_fd = -1;
    if (stats) {
        snprintf(err_tag, sizeof err_tag, "%s-stats", tag);
        err_fd = h_temp_file(err_tag, err_path, sizeof err_path);
        setenv("SCUDA_STATS", "1", 1);
    }
    hops[0] = b, hops[1] = c;
    pid_t pid = h_spawn(fn, NULL, 60, fd, err_fd);
    unsetenv("SCUDA_STATS");
    h_wait_ok(pid, 65000, tag);
    close(fd);
    if (stats) {
        close(err_fd);
        *stats = h_read_file(err_path, NULL);
    }
    size_t len;
    return h_read_file(path, &len);
}

static char *run(const char *tag, int (*fn)(void *), const char *b, const char *c)
{
    return run_stats(tag, fn, b, c, NULL);
}

static void test_early_streams_move(void)
{
    struct h_server A, B, C;
    h_server_start(&C, "migrate-order-c", NULL);
    h_server_start(&B, "migrate-order-b", NULL);
    h_server_start(&A, "migrate-order-a", NULL); /* last: SCUDA_SERVER is A's */
    char *plain = run("migrate-order-plain", early_streams, NULL, NULL);
    char *moved = run("migrate-order-moved", early_streams, B.addr, C.addr);
    CHECK(strcmp(plain, moved) == 0, "a moved run printed\n%s\na run that stayed\n%s", moved, plain);
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    CHECK(h_server_log_count(&C, "its state matches") == 1, "C rebuilt it from B and checked it");
    CHECK(h_server_log_count(&B, "not rebuilt") == 0 && h_server_log_count(&C, "not rebuilt") == 0,
          "no global came back elsewhere");
    free(plain);
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
    h_server_stop(&C);
}

static void test_one_way_libraries_move(void)
{
    struct h_server A, B;
    h_server_start(&B, "migrate-oneway-b", NULL);
    h_server_start(&A, "migrate-oneway-a", NULL); /* last: SCUDA_SERVER is A's */
    char *plain = run("migrate-oneway-plain", one_way_libraries, NULL, NULL);
    char *stats = NULL;
    char *moved = run_stats("migrate-oneway-moved", one_way_libraries, B.addr, NULL, &stats);
    CHECK(strcmp(plain, moved) == 0, "a moved run printed\n%s\na run that stayed\n%s", moved, plain);
    /* A's module cache holds the image since the first run: the first
     * library goes by digest, the second is a re-load. */
    CHECK(h_stats_count(stats, "async", "scuda_module_load_held") == 1 &&
              h_stats_count(stats, "async", "scuda_module_load_known") == 1 &&
              h_stats_count(stats, "sync", "scuda_param_info") == 0,
          "the libraries were not loaded one-way (by digest, then again) with their kernels read by the client\n%s",
          stats);
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session of one-way libraries and checked it");
    CHECK(h_server_log_count(&B, "not rebuilt") == 0, "no global came back elsewhere");
    free(stats);
    free(plain);
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
}

int main(void)
{
    h_begin("migrate_order", 110);
    test_early_streams_move();
    test_one_way_libraries_move();
    printf("PASS migrate_order\n");
    return 0;
}
