/* ordering.c - one-way calls keep their order.
 *
 * On one stream, 1000 launches of fill_u32 with increasing values are
 * interleaved with copies: after launch i, a device-to-device copy takes a
 * snapshot of X[0] (it must read i), and a host-to-device copy from a
 * pageable variable that is overwritten right after the call returns
 * records i (CUDA only promises the source may be reused on return). Every
 * tenth step also a device-to-host copy on the same stream reads X[0]
 * back. Any reordering, lost or duplicated call shows in the final
 * contents. The same runs on the legacy stream with synchronous copies. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define STEPS 1000
#define N 4096 /* words filled by each launch */

static void run(CUstream st, int legacy)
{
    CUfunction fill = h_func("fill_u32");
    CUdeviceptr x, snap, rec;
    CU(cuMemAlloc_v2(&x, N * 4));
    CU(cuMemAlloc_v2(&snap, STEPS * 4));
    CU(cuMemAlloc_v2(&rec, STEPS * 4));
    CU(cuMemsetD32_v2(snap, 0xffffffff, STEPS));
    CU(cuMemsetD32_v2(rec, 0xffffffff, STEPS));
    static uint32_t readback[STEPS / 10];
    memset(readback, 0xee, sizeof readback);
    uint64_t n = N;
    for (uint32_t i = 0; i < STEPS; i++) {
        uint32_t v = i;
        void *args[] = {&x, &v, &n};
        CU(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, st, args, NULL));
        /* snapshot of a word the launch just wrote (a different one each time) */
        CUdeviceptr word = x + 4 * ((i * 37) % N);
        if (legacy) CU(cuMemcpyDtoD_v2(snap + 4 * i, word, 4));
        else CU(cuMemcpyDtoDAsync_v2(snap + 4 * i, word, 4, st));
        uint32_t h = i;
        if (legacy) CU(cuMemcpyHtoD_v2(rec + 4 * i, &h, 4));
        else CU(cuMemcpyHtoDAsync_v2(rec + 4 * i, &h, 4, st));
        h = 0xbadbad;
        if (i % 10 == 9) {
            if (legacy) CU(cuMemcpyDtoH_v2(&readback[i / 10], x, 4));
            else CU(cuMemcpyDtoHAsync_v2(&readback[i / 10], x, 4, st));
        }
        __asm__ volatile("" ::: "memory");
    }
    CU(legacy ? cuCtxSynchronize() : cuStreamSynchronize(st));
    static uint32_t hx[N], hsnap[STEPS], hrec[STEPS];
    CU(cuMemcpyDtoH_v2(hx, x, sizeof hx));
    CU(cuMemcpyDtoH_v2(hsnap, snap, sizeof hsnap));
    CU(cuMemcpyDtoH_v2(hrec, rec, sizeof hrec));
    for (int i = 0; i < N; i++) CHECK(hx[i] == STEPS - 1, "X[%d] = %u after the last fill", i, hx[i]);
    for (uint32_t i = 0; i < STEPS; i++) {
        CHECK(hsnap[i] == i, "snapshot after launch %u read %u", i, hsnap[i]);
        CHECK(hrec[i] == i, "host-to-device record %u holds %u", i, hrec[i]);
    }
    for (uint32_t k = 0; k < STEPS / 10; k++)
        CHECK(readback[k] == 10 * k + 9, "device-to-host read %u got %u", k, readback[k]);
    CU(cuMemFree_v2(x));
    CU(cuMemFree_v2(snap));
    CU(cuMemFree_v2(rec));
}

int main(void)
{
    h_begin("ordering", 55);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    uint64_t t0 = h_now_ms();
    run(st, 0);
    printf("ok %d launches interleaved with %d copies on a stream (%llu ms)\n", STEPS, STEPS * 2 + STEPS / 10,
           (unsigned long long)(h_now_ms() - t0));
    t0 = h_now_ms();
    run(NULL, 1);
    printf("ok the same on the legacy stream with synchronous copies (%llu ms)\n",
           (unsigned long long)(h_now_ms() - t0));
    CU(cuStreamDestroy_v2(st));
    h_server_stop(&srv);
    printf("PASS ordering\n");
    return 0;
}
