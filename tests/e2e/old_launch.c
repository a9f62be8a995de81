/* old_launch.c - the pre-CUDA-4 launch API (cuFuncSetBlockShape,
 * cuFuncSetSharedSize, cuParamSet*, cuLaunch, cuLaunchGrid,
 * cuLaunchGridAsync), emulated by the shim on cuLaunchKernel: parameters
 * arrive at the offsets the program set them, the grid, block shape and
 * shared size arrive as set, the state is per function, and the errors are
 * driver 580's (INVALID_VALUE for a bad shape or grid, LAUNCH_OUT_OF_RESOURCES
 * for more parameter bytes than the kernel takes, INVALID_HANDLE for no
 * function), plus INVALID_VALUE where the driver would write past its
 * parameter buffer. */
#include <string.h>

#include "harness.h"

static void read_back(CUdeviceptr dev, void *out, size_t n)
{
    CU(cuCtxSynchronize());
    CU(cuMemcpyDtoH_v2(out, dev, n));
    CU(cuMemsetD8_v2(dev, 0, n));
}

/* copy_params_odd(out u64 @0, a u8 @8, b u16 @10, c u32 @12, d[3] @16, e f64 @24) */
static void parameters(CUdeviceptr out)
{
    CUfunction f = h_func("copy_params_odd");
    unsigned char d3[3] = {0xd1, 0xd2, 0xd3};
    double e = 2.5;
    uint16_t b = 0xb0b1;
    unsigned char a = 0xa5;
    CU(cuParamSetSize(f, 32));
    CU(cuParamSetv(f, 0, &out, sizeof out));
    CU(cuParamSetv(f, 8, &a, 1));
    CU(cuParamSetv(f, 10, &b, 2));
    CU(cuParamSeti(f, 12, 0xc0c1c2c3u));
    CU(cuParamSetv(f, 16, d3, 3));
    CU(cuParamSetv(f, 24, &e, 8));
    CU(cuLaunch(f));
    unsigned char got[32];
    read_back(out, got, sizeof got);
    uint64_t o;
    memcpy(&o, got, 8);
    CHECK(o == out, "out pointer %#llx", (unsigned long long)o);
    CHECK(got[8] == 0xa5, "a %#x", got[8]);
    uint16_t gb;
    memcpy(&gb, got + 10, 2);
    CHECK(gb == 0xb0b1, "b %#x", gb);
    uint32_t gc;
    memcpy(&gc, got + 12, 4);
    CHECK(gc == 0xc0c1c2c3u, "c %#x", gc);
    CHECK(memcmp(got + 16, d3, 3) == 0, "d");
    double ge;
    memcpy(&ge, got + 24, 8);
    CHECK(ge == 2.5, "e %g", ge);

    /* cuParamSetf is a float at its offset (the low half of e) */
    CU(cuParamSetf(f, 24, 1.5f));
    CU(cuLaunchGrid(f, 1, 1));
    read_back(out, got, sizeof got);
    float gf;
    memcpy(&gf, got + 24, 4);
    CHECK(gf == 1.5f, "f %g", gf);

    /* a size below the kernel's: it reads zeros past it, as from the driver */
    CU(cuParamSetSize(f, 12));
    CU(cuLaunch(f));
    read_back(out, got, sizeof got);
    memcpy(&gb, got + 10, 2);
    memcpy(&gc, got + 12, 4);
    CHECK(gb == 0xb0b1 && gc == 0 && got[16] == 0, "bytes past the size: b %#x c %#x d0 %#x", gb, gc, got[16]);

    /* more bytes than the kernel takes: the driver's error */
    CU(cuParamSetSize(f, 40));
    CU_EXPECT(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, cuLaunch(f));
    CU(cuParamSetSize(f, 32));

    /* where the driver would write past its buffer */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuParamSeti(f, -1, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuParamSetv(f, 32764, &e, 8));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuParamSetv(f, 0, NULL, 8));
}

/* launch_shape(out): grid xyz, block xyz, shared bytes */
static void shapes(CUdeviceptr out)
{
    CUfunction f = h_func("launch_shape");
    uint32_t got[7];
    CU(cuParamSetv(f, 0, &out, sizeof out));
    CU(cuParamSetSize(f, 8));
    CU(cuLaunch(f)); /* the block shape starts at 1x1x1 */
    read_back(out, got, sizeof got);
    CHECK(got[0] == 1 && got[1] == 1 && got[2] == 1 && got[3] == 1 && got[4] == 1 && got[5] == 1 && got[6] == 0,
          "defaults: grid %u %u %u block %u %u %u shared %u", got[0], got[1], got[2], got[3], got[4], got[5], got[6]);
    CU(cuFuncSetBlockShape(f, 8, 4, 2));
    CU(cuFuncSetSharedSize(f, 256));
    CU(cuLaunchGrid(f, 3, 5));
    read_back(out, got, sizeof got);
    CHECK(got[0] == 3 && got[1] == 5 && got[2] == 1 && got[3] == 8 && got[4] == 4 && got[5] == 2 && got[6] == 256,
          "grid %u %u %u block %u %u %u shared %u", got[0], got[1], got[2], got[3], got[4], got[5], got[6]);
    CUstream st;
    CU(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CU(cuLaunchGridAsync(f, 7, 2, st));
    CU(cuStreamSynchronize(st));
    read_back(out, got, sizeof got);
    CHECK(got[0] == 7 && got[1] == 2 && got[3] == 8, "async grid %u %u block %u", got[0], got[1], got[3]);
    CU(cuStreamDestroy_v2(st));

    /* another function's state is its own */
    CUfunction g = h_func("copy_params_struct");
    CU(cuFuncSetBlockShape(g, 2, 1, 1));
    CU(cuLaunch(f));
    read_back(out, got, sizeof got);
    CHECK(got[3] == 8 && got[0] == 1, "f's state after g's: grid %u block %u", got[0], got[3]);

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(f, 0, 1, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(f, -1, 1, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(f, 2048, 1, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuFuncSetSharedSize(f, 1u << 30));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLaunchGrid(f, 0, 1));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLaunch(NULL));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuParamSetSize(NULL, 8));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuFuncSetBlockShape(NULL, 1, 1, 1));
    CU(cuCtxSynchronize()); /* nothing refused became a deferred error */
}

static void client(void)
{
    h_cuda_setup();
    CUdeviceptr out;
    CU(cuMemAlloc_v2(&out, 64));
    CU(cuMemsetD8_v2(out, 0, 64));
    parameters(out);
    shapes(out);
    CU(cuMemFree_v2(out));
}

int main(void)
{
    h_run_client_test("old_launch", 30, NULL, client);
    return 0;
}
