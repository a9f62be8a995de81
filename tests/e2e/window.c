/* window.c - device memory lands in the session's window
 * (src/server/device_window.c).
 *
 * The property live migration needs: the same allocation sequence gives
 * the same addresses, inside the chosen window, in two sessions. Then
 * what must answer per allocation although the memory is sub-allocated
 * from mapped chunks (cuMemGetAddressRange, pointer attributes), pitch
 * allocations, bytes that go in and come out, an application's own
 * reservation and mapping in the window (PyTorch's expandable segments),
 * the quota counting what the application asked for, and
 * --driver-placed-memory turning it all off. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "server/device_window.h"

/* The build's default base, which every build can map (ThreadSanitizer
 * leaves the program only a few ranges: device_window.h), given
 * explicitly with a size of the test's own, as a second server would. */
#define BASE WINDOW_BASE_DEFAULT
#define SIZE (64ull << 30)
#define MiB (1ull << 20)

static int in_window(CUdeviceptr p) { return p >= BASE && p < BASE + SIZE; }

/* The sequence both sessions run; prints every address it gets. */
static int sequence(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p[8];
    size_t pitch = 0;
    CU(cuMemAlloc_v2(&p[0], 100));
    CU(cuMemAlloc_v2(&p[1], 3 * MiB));
    CU(cuMemAlloc_v2(&p[2], 5000));
    CU(cuMemAllocPitch_v2(&p[3], &pitch, 100, 10, 4));
    CU(cuMemFree_v2(p[1]));
    CU(cuMemAlloc_v2(&p[4], 64));
    CU(cuMemAlloc_v2(&p[5], 3 * MiB)); /* the freed chunk again */
    CU(cuMemAddressReserve(&p[6], 8 * MiB, 0, 0, 0));
    CU(cuMemAlloc_v2(&p[7], 1));
    for (int i = 0; i < 8; i++) {
        if (i == 1) continue;
        CHECK(in_window(p[i]), "allocation %d at %#llx, outside the window", i, (unsigned long long)p[i]);
        printf("%#llx\n", (unsigned long long)p[i]);
    }
    CHECK(p[5] == p[1], "a freed chunk is reused");
    return 0;
}

static char *run_sequence(const char *tag)
{
    char path[512];
    int fd = h_temp_file(tag, path, sizeof path);
    h_wait_ok(h_spawn(sequence, NULL, 20, fd, -1), 25000, tag);
    close(fd);
    size_t len;
    return h_read_file(path, &len);
}

static uint64_t attr64(CUpointer_attribute a, CUdeviceptr p)
{
    uint64_t v = 0;
    CU(cuPointerGetAttribute(&v, a, p));
    return v;
}

/* Per-allocation answers, bytes through sub-allocations, pitch. */
static int queries(void *arg)
{
    (void)arg;
    CUcontext ctx = h_cuda_setup();
    CUdeviceptr a, b, c;
    CU(cuMemAlloc_v2(&a, 100));
    CU(cuMemAlloc_v2(&b, 4096));
    CU(cuMemAlloc_v2(&c, 3 * MiB));
    CUdeviceptr base = 0;
    size_t size = 0;
    CU(cuMemGetAddressRange_v2(&base, &size, b + 100));
    CHECK(base == b && size == 4096, "range %#llx+%zu", (unsigned long long)base, size);
    CU(cuMemGetAddressRange_v2(&base, &size, c + MiB));
    CHECK(base == c && size == 3 * MiB);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 50) == a);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_RANGE_SIZE, a) == 100);
    CHECK(attr64(CU_POINTER_ATTRIBUTE_BUFFER_ID, a) != attr64(CU_POINTER_ATTRIBUTE_BUFFER_ID, b));
    CUcontext owner = NULL;
    CU(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b));
    CHECK(owner == ctx, "the allocating context");
    unsigned type = 0;
    CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    int ordinal = -1;
    CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, b));
    CHECK(ordinal == 0);
    CUpointer_attribute several[2] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start = 0;
    size_t len = 0;
    void *out[2] = {&start, &len};
    CU(cuPointerGetAttributes(2, several, out, b + 1));
    CHECK(start == b && len == 4096);

    /* bytes: each allocation keeps its own, side by side in one chunk */
    uint8_t in[4096], back[4096];
    h_pattern(in, sizeof in, 7);
    CU(cuMemsetD8_v2(a, 0xab, 100));
    CU(cuMemcpyHtoD_v2(b, in, sizeof in));
    CU(cuMemcpyDtoH_v2(back, b, sizeof back));
    CHECK(h_diff(in, back, sizeof in) < 0);
    CU(cuMemcpyDtoH_v2(back, a, 100));
    for (int i = 0; i < 100; i++) CHECK(back[i] == 0xab);

    /* freed: the memory is no allocation any more */
    CU(cuMemFree_v2(b));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(b));
    CU_EXPECT(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange_v2(&base, &size, b));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree_v2(a + 8));

    /* pitch: rows the driver's way, the whole block one allocation */
    CUdeviceptr p;
    size_t pitch = 0;
    CU(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4));
    CHECK(in_window(p) && pitch >= 100 && pitch % 32 == 0, "pitch %zu", pitch);
    CU(cuMemGetAddressRange_v2(&base, &size, p + pitch * 9));
    CHECK(base == p && size == pitch * 10);
    CUDA_MEMCPY2D up = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = in, .srcPitch = 100,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = p, .dstPitch = pitch,
                        .WidthInBytes = 100, .Height = 10};
    CU(cuMemcpy2D_v2(&up));
    CUDA_MEMCPY2D down = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = p, .srcPitch = pitch,
                          .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 100,
                          .WidthInBytes = 100, .Height = 10};
    memset(back, 0, sizeof back);
    CU(cuMemcpy2D_v2(&down));
    CHECK(h_diff(in, back, 1000) < 0);
    CU(cuMemFree_v2(p));
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(c));
    return 0;
}

/* PyTorch's expandable segments: reserve with no address, map, use. */
static int expandable(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    size_t gran = 0;
    CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va = 0, fixed = 0;
    CU(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0));
    CHECK(in_window(va) && va % gran == 0, "reservation at %#llx", (unsigned long long)va);
    /* a free address in the window is honoured */
    CUdeviceptr want = BASE + SIZE / 2;
    CU(cuMemAddressReserve(&fixed, 2 * gran, 0, want, 0));
    CHECK(fixed == want, "fixed reservation at %#llx", (unsigned long long)fixed);
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, 2 * gran, &prop, 0));
    CU(cuMemMap(va + gran, 2 * gran, 0, h, 0));
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU(cuMemSetAccess(va + gran, 2 * gran, &acc, 1));
    uint32_t in[1024], back[1024];
    h_pattern(in, sizeof in, 3);
    CU(cuMemcpyHtoD_v2(va + 2 * gran - 2048, in, sizeof in)); /* across the middle */
    CU(cuMemcpyDtoH_v2(back, va + 2 * gran - 2048, sizeof back));
    CHECK(h_diff(in, back, sizeof in) < 0);
    CUdeviceptr start = 0;
    size_t len = 0;
    CU(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + gran));
    CU(cuPointerGetAttribute(&len, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + gran));
    CHECK(start == va && len == 8 * gran, "the reservation, not the window: %#llx+%zu", (unsigned long long)start, len);
    CU(cuMemUnmap(va + gran, 2 * gran));
    CU(cuMemRelease(h));
    CU(cuMemAddressFree(va, 8 * gran));
    CU(cuMemAddressFree(fixed, 2 * gran));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, 8 * gran));
    return 0;
}

/* --mem-quota 4M counts what the application asked for. */
static int quota(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p[8];
    for (int i = 0; i < 6; i++) CU(cuMemAlloc_v2(&p[i], 600 * 1024));
    CU_EXPECT(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc_v2(&p[6], MiB));
    CU(cuMemFree_v2(p[0]));
    CU(cuMemFree_v2(p[1]));
    CU(cuMemAlloc_v2(&p[6], MiB));
    CHECK(in_window(p[6]));
    return 0;
}

static int driver_placed(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUdeviceptr p;
    CU(cuMemAlloc_v2(&p, 100));
    CHECK(!in_window(p), "--driver-placed-memory: %#llx", (unsigned long long)p);
    CU(cuMemFree_v2(p));
    return 0;
}

int main(void)
{
    h_begin("window", 100);
    char base[32];
    snprintf(base, sizeof base, "%#llx", BASE);
    struct h_server srv;
    struct h_server_opts opt = {.extra_args = {"--window-base", base, "--window-size", "64G"}};
    h_server_start(&srv, "main", &opt);
    char *first = run_sequence("first"), *second = run_sequence("second");
    CHECK(strlen(first) > 0 && strcmp(first, second) == 0, "two sessions, two sequences:\n%s---\n%s", first, second);
    free(first);
    free(second);
    h_wait_ok(h_spawn(queries, NULL, 20, -1, -1), 25000, "queries");
    h_wait_ok(h_spawn(expandable, NULL, 20, -1, -1), 25000, "expandable");
    char line[96];
    snprintf(line, sizeof line, "device 0: memory window %#llx-%#llx", BASE, BASE + SIZE);
    CHECK(h_server_log_count(&srv, line) == 4, "each session says where its window is");
    h_server_stop(&srv);

    struct h_server_opts q = {.extra_args = {"--window-base", base, "--window-size", "64G", "--mem-quota", "4M"}};
    h_server_start(&srv, "quota", &q);
    h_wait_ok(h_spawn(quota, NULL, 20, -1, -1), 25000, "quota");
    h_server_stop(&srv);

    struct h_server_opts off = {.extra_args = {"--driver-placed-memory", "--window-base", base}};
    h_server_start(&srv, "off", &off);
    h_wait_ok(h_spawn(driver_placed, NULL, 20, -1, -1), 25000, "driver-placed");
    h_server_stop(&srv);
    printf("PASS window\n");
    return 0;
}
