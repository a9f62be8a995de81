/* launch_params.c - kernel parameters arrive byte-exact.
 *
 * The copy_params_* kernels write their whole parameter buffer into the
 * memory their first parameter points to. For each of them the test takes
 * the layout from cuFuncGetParamInfo (and checks it against the ABI layout
 * of the PTX declaration), packs random argument values, launches, and
 * compares the buffer the kernel received with the one built from the
 * layout: through kernelParams (padding must be zero), through `extra`
 * (the caller's buffer verbatim, padding included), through
 * cuLaunchKernelEx, and through a library kernel (cuKernelGetParamInfo).
 * The bytes after the buffer must stay untouched. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define GUARD 64

struct layout {
    const char *name;
    int n;
    size_t off[8], size[8];
    size_t total;
};

/* What the PTX declares (ABI offsets: each parameter aligned to its own
 * alignment: .u8 1, .u16 2, .u32 4, .align 1 .b8[3] 1, .f64 8). */
static const struct layout expected[] = {
    {"copy_params_struct", 2, {0, 8}, {8, 24}, 32},
    {"copy_params_odd", 6, {0, 8, 10, 12, 16, 24}, {8, 1, 2, 4, 3, 8}, 32},
    {"copy_params_4k", 2, {0, 8}, {8, 4096}, 4104},
};

enum how { VIA_PARAMS, VIA_EXTRA, VIA_EX, VIA_LIBRARY };
static const char *how_name[] = {"kernelParams", "extra", "cuLaunchKernelEx", "library kernel"};

static CUlibrary lib;

static void query_layout(CUfunction f, int is_kernel, struct layout *l)
{
    l->n = 0;
    l->total = 0;
    for (;;) {
        size_t off = 0, size = 0;
        CUresult r = is_kernel ? cuKernelGetParamInfo((CUkernel)f, (size_t)l->n, &off, &size)
                               : cuFuncGetParamInfo(f, (size_t)l->n, &off, &size);
        if (r == CUDA_ERROR_INVALID_VALUE) break;
        CU(r);
        CHECK(l->n < 8);
        l->off[l->n] = off;
        l->size[l->n] = size;
        if (off + size > l->total) l->total = off + size;
        l->n++;
    }
}

static void one(const struct layout *want, enum how how, uint32_t seed)
{
    CUfunction f;
    if (how == VIA_LIBRARY) {
        CUkernel k;
        CU(cuLibraryGetKernel(&k, lib, want->name));
        f = (CUfunction)k;
    } else {
        f = h_func(want->name);
    }
    struct layout got;
    query_layout(f, how == VIA_LIBRARY, &got);
    CHECK(got.n == want->n, "%s: %d parameters, expected %d", want->name, got.n, want->n);
    for (int i = 0; i < got.n; i++)
        CHECK(got.off[i] == want->off[i] && got.size[i] == want->size[i],
              "%s parameter %d: offset %zu size %zu, expected offset %zu size %zu", want->name, i, got.off[i],
              got.size[i], want->off[i], want->size[i]);

    CUdeviceptr out;
    CU(cuMemAlloc_v2(&out, got.total + GUARD));
    CU(cuMemsetD8_v2(out, 0x5c, got.total + GUARD));

    /* argument values, and the buffer the kernel must receive */
    uint8_t *values = malloc(got.total), *expect = malloc(got.total + GUARD);
    CHECK(values && expect);
    h_pattern(values, got.total, seed);
    memcpy(values, &out, 8); /* parameter 0 is the output pointer */
    memset(expect, how == VIA_EXTRA ? 0xab : 0x00, got.total); /* padding */
    for (int i = 0; i < got.n; i++) memcpy(expect + got.off[i], values + got.off[i], got.size[i]);
    memset(expect + got.total, 0x5c, GUARD);
    void *args[8];
    for (int i = 0; i < got.n; i++) args[i] = values + got.off[i];

    switch (how) {
    case VIA_PARAMS:
    case VIA_LIBRARY:
        CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        break;
    case VIA_EXTRA: {
        size_t size = got.total;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, expect, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
        break;
    }
    case VIA_EX: {
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = 2;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 64;
        cfg.blockDimY = cfg.blockDimZ = 1;
        CU(cuLaunchKernelEx(&cfg, f, args, NULL));
        break;
    }
    }
    uint8_t *back = malloc(got.total + GUARD);
    CHECK(back != NULL);
    CU(cuMemcpyDtoH_v2(back, out, got.total + GUARD));
    long at = h_diff(back, expect, got.total + GUARD);
    CHECK(at < 0, "%s via %s: byte %ld of %zu is 0x%02x, expected 0x%02x", want->name, how_name[how], at,
          got.total, back[at], expect[at]);
    CU(cuMemFree_v2(out));
    free(values);
    free(expect);
    free(back);
    printf("ok %s via %s: %zu bytes exact\n", want->name, how_name[how], got.total);
}

int main(void)
{
    h_begin("launch_params", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    for (unsigned k = 0; k < sizeof expected / sizeof expected[0]; k++)
        for (int how = VIA_PARAMS; how <= VIA_LIBRARY; how++) one(&expected[k], (enum how)how, 17 * k + (uint32_t)how);
    CU(cuLibraryUnload(lib));
    CU(cuCtxSynchronize());
    h_server_stop(&srv);
    printf("PASS launch_params\n");
    return 0;
}
