/* pinned_uva.c - cuMemHostAlloc memory used as a device address without
 * cuMemHostGetDevicePointer, as unified addressing allows: a memset on the
 * host pointer, and a kernel handed the host pointer as a parameter. XLA's
 * redzone checker does both with its result word; without a mirror the
 * session's driver sees an address it does not know (CUDA_ERROR_INVALID_VALUE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* fill_u32(p, value, n): p[i] = value for i < n (the stand-in's kernel). */
static void fill(CUdeviceptr p, uint32_t value, uint64_t n, CUstream st)
{
    void *args[] = {&p, &value, &n};
    CU(cuLaunchKernel(h_func("fill_u32"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL));
}

static int client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));

    /* A memset of the result word, then the host reads it. */
    uint32_t *word;
    CU(cuMemHostAlloc((void **)&word, 8, CU_MEMHOSTALLOC_PORTABLE));
    word[0] = word[1] = 1;
    CU(cuMemsetD32Async((CUdeviceptr)(uintptr_t)word, 0xdeadbeef, 2, st));
    CU(cuStreamSynchronize(st));
    CHECK(word[0] == 0xdeadbeef && word[1] == 0xdeadbeef, "memset of pinned memory: %#x %#x", word[0], word[1]);

    /* A kernel writes a buffer it only knows by its host address. */
    const uint64_t n = 4096;
    uint32_t *buf;
    CU(cuMemHostAlloc((void **)&buf, n * 4, 0));
    memset(buf, 0, n * 4);
    fill((CUdeviceptr)(uintptr_t)buf, 7, n, st);
    CU(cuStreamSynchronize(st));
    for (uint64_t i = 0; i < n; i++) CHECK(buf[i] == 7, "kernel write to pinned memory: buf[%llu] = %u",
                                           (unsigned long long)i, buf[i]);

    /* The host writes again; the next kernel's writes still come back. */
    buf[0] = 99;
    fill((CUdeviceptr)(uintptr_t)buf + 4, 8, n - 1, st);
    CU(cuStreamSynchronize(st));
    CHECK(buf[0] == 99 && buf[1] == 8 && buf[n - 1] == 8, "second round: %u %u %u", buf[0], buf[1], buf[n - 1]);

    /* The device pointer it reports is the host address (same-address mirror). */
    CUdeviceptr d = 0;
    CU(cuPointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, (CUdeviceptr)(uintptr_t)buf));
    CHECK(d == (CUdeviceptr)(uintptr_t)buf, "device pointer %#llx of %p", (unsigned long long)d, (void *)buf);

    CU(cuMemFreeHost(word));
    CU(cuMemFreeHost(buf));

    /* Registered memory has no copy in the session: a kernel handed its
     * address would fault on the GPU (a sticky CUDA_ERROR_ILLEGAL_ADDRESS
     * that ends the context). The launch is refused instead, at an offset
     * too, and the context stays usable. */
    uint32_t *reg = aligned_alloc(4096, 2 * 4096);
    CU(cuMemHostRegister_v2(reg, 2 * 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)(reg + 100);
    uint32_t seven = 7;
    uint64_t count = 8;
    void *args[] = {&at, &seven, &count};
    CUresult lr = cuLaunchKernel(h_func("fill_u32"), 1, 1, 1, 1, 1, 1, 0, st, args, NULL);
    CHECK(lr == CUDA_ERROR_NOT_SUPPORTED, "kernel on registered memory: %d, want CUDA_ERROR_NOT_SUPPORTED", lr);
    CUresult sr = cuStreamSynchronize(st);
    CHECK(sr == CUDA_SUCCESS, "the stream after the refused launch: %d", sr);
    CU(cuMemHostUnregister(reg));
    free(reg);
    CU(cuStreamDestroy_v2(st));
    return 0;
}

int main(void)
{
    h_begin("pinned_uva", 50);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_wait_ok(h_spawn(client, NULL, 40, -1, -1), 45000, "client");
    h_server_stop(&srv);
    printf("PASS pinned_uva\n");
    return 0;
}
