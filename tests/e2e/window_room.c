/* window_room.c - a request the session's memory window has no room for
 * goes to the driver (src/server/device_window.c, driver_alloc_done):
 *   - one larger than the GPU fails with the driver's own error, and the
 *     driver's log holds its entry (what tests/gpu/programs/driver_logs.cu
 *     reads), instead of an error the window made up without a log;
 *   - one larger than the window but not the GPU succeeds, placed by the
 *     driver: bytes go in and come out, it frees, and the server log says
 *     the session cannot move and how to fix it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "server/device_window.h"

#define BASE WINDOW_BASE_DEFAULT
#define SIZE (64ull << 20) /* the smallest window; the stand-in has 1 GiB */
#define MiB (1ull << 20)

static int in_window(CUdeviceptr p) { return p >= BASE && p < BASE + SIZE; }

static int larger_than_the_gpu(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUlogIterator start = 0;
    CU(cuLogsCurrent(&start, 0));
    CUdeviceptr p;
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&p, (size_t)1 << 52));
    char buf[1024];
    size_t n = sizeof buf;
    CUlogIterator it = start;
    CU(cuLogsDumpToMemory(&it, buf, &n, 0));
    CHECK(n > 0 && it == start + 1 && strstr(buf, "cuMemAlloc: out of memory") != NULL,
          "the driver's log after the failure (%zu bytes): %.*s", n, (int)n, buf);
    /* the window still places what fits */
    CU(cuMemAlloc_v2(&p, MiB));
    CHECK(in_window(p), "1 MiB at %#llx", (unsigned long long)p);
    CU(cuMemFree_v2(p));
    return 0;
}

static int larger_than_the_window(void *arg)
{
    (void)arg;
    h_cuda_setup();
    size_t bytes = 2 * SIZE;
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, bytes));
    CHECK(!in_window(p), "the driver's placement %#llx", (unsigned long long)p);
    CU(cuMemsetD8_v2(p + bytes - 1, 0x5a, 1));
    unsigned char last = 0;
    CU(cuMemcpyDtoH_v2(&last, p + bytes - 1, 1));
    CHECK(last == 0x5a, "last byte %#x", last);
    CUdeviceptr q;
    size_t pitch = 0;
    CU(cuMemAllocPitch_v2(&q, &pitch, 1 << 20, 128, 4));
    CHECK(!in_window(q) && pitch >= (1 << 20), "pitched: %#llx, pitch %zu", (unsigned long long)q, pitch);
    CU(cuMemFree_v2(q));
    CU(cuMemFree_v2(p));
    return 0;
}

int main(void)
{
    h_begin("window_room", 60);
    char base[32], size[32];
    snprintf(base, sizeof base, "%#llx", BASE);
    snprintf(size, sizeof size, "%lluM", SIZE / MiB);
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--window-base", base, "--window-size", size}};
    h_server_start(&srv, "main", &opt);
    h_wait_ok(h_spawn(larger_than_the_gpu, NULL, 20, -1, -1), 25000, "larger than the GPU");
    CHECK(h_server_log_count(&srv, "the driver refused them too") == 1, "the refusal is logged");
    h_wait_ok(h_spawn(larger_than_the_window, NULL, 20, -1, -1), 25000, "larger than the window");
    CHECK(h_server_log_count(&srv, "cannot move to another server; raise --window-size") == 2,
          "each driver placement says the fix");
    h_server_stop(&srv);
    printf("PASS window_room\n");
    return 0;
}
