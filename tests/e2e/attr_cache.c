/* attr_cache.c - function attributes kept across processes
 * (src/client/attr_store.h; docs/architecture.md, 3.8.6). Each step is a
 * client process of its own, with SCUDA_STATS; they share the test's
 * attribute cache (SCUDA_ATTR_CACHE, set by the harness):
 *
 *   first     the stand-in's fill_u32: all 16 attributes in one batch,
 *             the stand-in's values, and two occupancy questions
 *             (cuOccupancyMaxActiveBlocksPerMultiprocessor, WithFlags);
 *   again     a new process asks nothing and gets the same values;
 *   set       a process that sets the kernel's dynamic shared memory
 *             before asking gets the set value from the session, and
 *             keeps nothing: the next process still reads the default;
 *   config    after cuFuncSetCacheConfig nothing is used or kept;
 *   jit       the image loaded with a JIT option is another load: asked;
 *   kernel    a library's kernel of a device: asked once, then kept;
 *   damaged   every entry overwritten with garbage: each is a miss, the
 *             values come from the session, and the log says so;
 *   off       SCUDA_ATTR_CACHE=off: asked every time, nothing written. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define RECALLED "scuda stats: functions whose attributes came from the client's attribute cache: "
#define KEPT "scuda stats: occupancy answers that came from the client's attribute cache: "
#define DEFAULT_DYN 49152

enum step { PLAIN, SET_FIRST, CONFIG_FIRST, JIT, KERNEL };

static CUmodule load(enum step s, const char *ptx)
{
    CUmodule m;
    if (s != JIT) {
        CU(cuModuleLoadData(&m, ptx));
        return m;
    }
    CUjit_option opt[] = {CU_JIT_MAX_REGISTERS};
    void *val[] = {(void *)(uintptr_t)32};
    CU(cuModuleLoadDataEx(&m, ptx, 1, opt, val));
    return m;
}

/* Every attribute of fill_u32 (0..15), checked against the stand-in's. */
static int attrs_client(void *arg)
{
    enum step s = *(enum step *)arg;
    h_cuda_setup();
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    int v[16];
    if (s == KERNEL) {
        CUlibrary lib;
        CUkernel k;
        CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
        CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
        for (int a = 0; a < 16; a++) CU(cuKernelGetAttribute(&v[a], (CUfunction_attribute)a, k, 0));
    } else {
        CUmodule m = load(s, ptx);
        CUfunction f;
        CU(cuModuleGetFunction(&f, m, "fill_u32"));
        if (s == SET_FIRST) CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
        if (s == CONFIG_FIRST) CU(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED));
        for (int a = 0; a < 16; a++) CU(cuFuncGetAttribute(&v[a], (CUfunction_attribute)a, f));
        int blocks = -1, shared_bound = -1;
        CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 128, 0));
        CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&shared_bound, f, 256, 40000, 0));
        CHECK(blocks == 16 && shared_bound == 5, "occupancy: %d blocks of 128, %d of 256 with 40000 bytes", blocks,
              shared_bound);
    }
    CHECK(v[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] == 1024 && v[CU_FUNC_ATTRIBUTE_PTX_VERSION] == 75 &&
              v[CU_FUNC_ATTRIBUTE_BINARY_VERSION] == 90,
          "fixed attributes: max threads %d, ptx %d, binary %d", v[0], v[5], v[6]);
    int dyn = v[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
    CHECK(dyn == (s == SET_FIRST ? 65536 : DEFAULT_DYN), "max dynamic shared %d", dyn);
    free(ptx);
    return 0;
}

static unsigned figure(const char *stats, const char *line)
{
    const char *p = strstr(stats, line);
    return p ? (unsigned)strtoul(p + strlen(line), NULL, 10) : 0;
}

/* Occupancy questions that waited: the two ops'. */
static unsigned occupancy_asked(const char *stats)
{
    return h_stats_count(stats, "sync", "cuOccupancyMaxActiveBlocksPerMultiprocessor") +
           h_stats_count(stats, "sync", "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
}

/* One process of step s: how many batches it asked for, how many functions
 * the cache answered; its stats in *out (freed by the caller). */
static void run(enum step s, const char *tag, unsigned *asked, unsigned *hits, char **out)
{
    char *stats = h_client_stats(attrs_client, &s, 30, tag);
    *asked = h_stats_count(stats, "sync", "scuda_func_attributes");
    *hits = figure(stats, RECALLED);
    *out = stats;
}

/* A process of step s asks want_asked batches and finds want_hits
 * functions in the cache; a function's two occupancy questions follow
 * its attributes (a kernel has none). */
static void expect(enum step s, const char *tag, unsigned want_asked, unsigned want_hits)
{
    unsigned asked, hits, per = s == KERNEL ? 0 : 2;
    char *stats;
    run(s, tag, &asked, &hits, &stats);
    CHECK(asked == want_asked && hits == want_hits, "%s: %u batches asked (want %u), %u from the cache (want %u)\n%s",
          tag, asked, want_asked, hits, want_hits, stats);
    CHECK(occupancy_asked(stats) == per * want_asked && figure(stats, KEPT) == per * want_hits,
          "%s: %u occupancy questions asked (want %u), %u from the cache (want %u)\n%s", tag, occupancy_asked(stats),
          per * want_asked, figure(stats, KEPT), per * want_hits, stats);
    free(stats);
    printf("ok %s\n", tag);
}

/* Every regular file in dir overwritten with garbage. Returns how many. */
static int damage_all(const char *dir)
{
    DIR *d = opendir(dir);
    CHECK(d != NULL, "the attribute cache %s was not made", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_WRONLY | O_TRUNC);
        if (fd < 0) continue;
        CHECK(write(fd, "garbage, not an entry", 21) == 21);
        close(fd);
        n++;
    }
    closedir(d);
    return n;
}

int main(void)
{
    h_begin("attr_cache", 120);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    const char *dir = getenv("SCUDA_ATTR_CACHE");
    CHECK(dir && *dir, "the harness names the test's attribute cache");

    expect(PLAIN, "first", 1, 0);
    expect(PLAIN, "again", 0, 1);
    /* the set one is asked (a batch, its dynamic size then alone) and not
     * kept: the default stays */
    unsigned asked, hits;
    char *stats;
    run(SET_FIRST, "set", &asked, &hits, &stats);
    CHECK(asked == 1 && hits == 0, "set: %u batches, %u from the cache\n%s", asked, hits, stats);
    free(stats);
    expect(PLAIN, "after-set", 0, 1);
    expect(CONFIG_FIRST, "config", 1, 0);
    expect(PLAIN, "after-config", 0, 1);
    expect(JIT, "jit", 1, 0);
    expect(JIT, "jit-again", 0, 1);
    expect(KERNEL, "kernel", 1, 0);
    expect(KERNEL, "kernel-again", 0, 1);

    int damaged = damage_all(dir);
    CHECK(damaged >= 3, "%d entries in %s", damaged, dir);
    run(PLAIN, "damaged", &asked, &hits, &stats);
    CHECK(asked == 1 && hits == 0 && strstr(stats, "an entry was damaged"),
          "damaged: %u batches, %u from the cache, and a warning\n%s", asked, hits, stats);
    free(stats);
    expect(PLAIN, "mended", 0, 1);

    h_remove_tree(dir);
    setenv("SCUDA_ATTR_CACHE", "off", 1);
    expect(PLAIN, "off", 1, 0);
    expect(PLAIN, "off-again", 1, 0);
    CHECK(access(dir, F_OK) != 0, "with the cache off, %s was made", dir);

    h_server_stop(&srv);
    printf("PASS attr_cache\n");
    return 0;
}
