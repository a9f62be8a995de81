/* trace.c - SCUDA_TRACE=1 (docs/troubleshoot.md): one line per driver call
 * on stderr, with the monotonic time in milliseconds and the thread, and
 * bench/trace_gaps.py, which reads those lines.
 *
 * A client allocates, waits 80 ms without a driver call, frees, and makes
 * a call from a second thread. Its trace must name each call once, in
 * order, with times that rise and the two threads' ids; the tool must put
 * a gap of at least 80 ms after the allocation, before the free. The
 * allocation asks for spares (SCUDA_ALLOC_AHEAD=1), whose bookkeeping
 * must not show in the trace as calls the program never made; nor must
 * the calls cuGraphAddNode makes through the API (cuGraphAddEmptyNode):
 * only the outermost entry is the program's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static void *other_thread(void *arg)
{
    (void)arg;
    int n = 0;
    CU(cuDeviceGetCount(&n));
    return NULL;
}

static int traced_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr d;
    CU(cuMemAlloc_v2(&d, 4096));
    h_sleep_ms(80);
    CU(cuMemFree_v2(d));
    CUgraph g;
    CUgraphNode node;
    CUgraphNodeParams empty = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    CU(cuGraphCreate(&g, 0));
    CU(cuGraphAddNode_v2(&node, g, NULL, NULL, 0, &empty));
    CU(cuGraphDestroy(g));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    pthread_join(t, NULL);
    return 0;
}

/* The trace lines of `name`: how many, and the first's time and thread. */
static int lines_of(const char *trace, const char *name, double *ms, long *tid)
{
    int n = 0;
    for (const char *p = trace; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int pid;
        double t;
        long th;
        char call[80];
        if (sscanf(p, "scuda[trace %d] %lf %ld %79s", &pid, &t, &th, call) != 4 || strcmp(call, name) != 0) continue;
        if (n++ == 0) *ms = t, *tid = th;
    }
    return n;
}

int main(void)
{
    h_begin("trace", 60);
    struct h_server srv;
    h_server_start(&srv, "trace", NULL);
    char path[512];
    int fd = h_temp_file("trace-client", path, sizeof path);
    setenv("SCUDA_TRACE", "1", 1);
    setenv("SCUDA_ALLOC_AHEAD", "1", 1);
    pid_t pid = h_spawn(traced_client, NULL, 30, -1, fd);
    unsetenv("SCUDA_TRACE");
    unsetenv("SCUDA_ALLOC_AHEAD");
    close(fd);
    h_wait_ok_err(pid, 35000, "trace-client", path);
    char *trace = h_read_file(path, NULL);

    double t_alloc = 0, t_free = 0, t_count = 0;
    long th_alloc = 0, th_free = 0, th_count = 0;
    CHECK(lines_of(trace, "cuMemAlloc_v2", &t_alloc, &th_alloc) == 1, "one cuMemAlloc_v2 line\n%s", trace);
    CHECK(lines_of(trace, "cuMemFree_v2", &t_free, &th_free) == 1, "one cuMemFree_v2 line\n%s", trace);
    CHECK(lines_of(trace, "cuDeviceGetCount", &t_count, &th_count) >= 1, "a cuDeviceGetCount line\n%s", trace);
    double t_none;
    long th_none;
    CHECK(lines_of(trace, "cuCtxGetCurrent", &t_none, &th_none) == 0 &&
              lines_of(trace, "cuCtxGetDevice", &t_none, &th_none) == 0,
          "the library's own context lookups appear as the program's calls\n%s", trace);
    CHECK(lines_of(trace, "cuGraphAddNode_v2", &t_none, &th_none) == 1 &&
              lines_of(trace, "cuGraphAddEmptyNode", &t_none, &th_none) == 0,
          "cuGraphAddNode_v2 once, and not the cuGraphAddEmptyNode it makes\n%s", trace);
    CHECK(t_free - t_alloc >= 80 && t_free - t_alloc < 5000, "the free came %.3f ms after the allocation",
          t_free - t_alloc);
    CHECK(th_alloc == th_free && th_alloc == (long)pid, "the main thread's calls carry its id %ld (%ld, %ld)",
          (long)pid, th_alloc, th_free);
    CHECK(th_count != th_alloc, "the other thread's call carries its own id (%ld)", th_count);

    char cmd[1200], out[8192];
    snprintf(cmd, sizeof cmd, "python3 %s/bench/trace_gaps.py %s --gap 50 2>&1", SCUDA_SOURCE_DIR, path);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen %s", cmd);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    CHECK(pclose(p) == 0, "trace_gaps.py failed:\n%s", out);
    CHECK(strstr(out, "1 gaps over 50.0 ms") != NULL, "trace_gaps.py did not find the one long gap:\n%s", out);
    CHECK(strstr(out, "after cuMemAlloc_v2, before cuMemFree_v2") != NULL,
          "trace_gaps.py did not charge the gap to the allocation:\n%s", out);
    free(trace);
    h_server_stop(&srv);
    printf("PASS trace\n");
    return 0;
}
