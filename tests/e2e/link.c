/* link.c - run-time linking through the shim: two PTX inputs, one as data
 * and one as a file of the client's machine, linked by the session into
 * one image that the client owns until cuLinkDestroy and loads with
 * cuModuleLoadData; both inputs' kernels run from it. The JIT logs of
 * cuLinkCreate fill the application's buffers after each step, also when
 * a step fails, and the errors are the driver's (a bad input, a size of
 * 0, a second completion, an add after it, a missing file, a destroyed
 * link). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char ptx_fill[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry fill_u32(.param .u64 fill_u32_param_0, .param .u32 fill_u32_param_1,"
    " .param .u64 fill_u32_param_2)\n{\n"
    "\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<10>;\n"
    "\tld.param.u64 %rd1, [fill_u32_param_0];\n\tld.param.u32 %r1, [fill_u32_param_1];\n"
    "\tld.param.u64 %rd2, [fill_u32_param_2];\n\tcvta.to.global.u64 %rd3, %rd1;\n"
    "\tmov.u32 %r2, %ctaid.x;\n\tmov.u32 %r3, %ntid.x;\n\tmov.u32 %r4, %tid.x;\n"
    "\tmul.wide.u32 %rd4, %r2, %r3;\n\tcvt.u64.u32 %rd5, %r4;\n\tadd.s64 %rd4, %rd4, %rd5;\n"
    "\tmov.u32 %r5, %nctaid.x;\n\tmul.wide.u32 %rd6, %r5, %r3;\n"
    "LOOP:\n\tsetp.ge.u64 %p1, %rd4, %rd2;\n\t@%p1 bra DONE;\n\tshl.b64 %rd7, %rd4, 2;\n"
    "\tadd.s64 %rd8, %rd3, %rd7;\n\tst.global.u32 [%rd8], %r1;\n\tadd.s64 %rd4, %rd4, %rd6;\n"
    "\tbra.uni LOOP;\nDONE:\n\tret;\n}\n";

static const char ptx_shape[] =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry launch_shape(.param .u64 launch_shape_param_0)\n{\n"
    "\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<3>;\n"
    "\tld.param.u64 %rd1, [launch_shape_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n"
    "\tmov.u32 %r1, %nctaid.x;\n\tmov.u32 %r2, %nctaid.y;\n\tmov.u32 %r3, %nctaid.z;\n"
    "\tmov.u32 %r4, %ntid.x;\n\tmov.u32 %r5, %ntid.y;\n\tmov.u32 %r6, %ntid.z;\n"
    "\tmov.u32 %r7, %dynamic_smem_size;\n"
    "\tst.global.u32 [%rd2], %r1;\n\tst.global.u32 [%rd2+4], %r2;\n\tst.global.u32 [%rd2+8], %r3;\n"
    "\tst.global.u32 [%rd2+12], %r4;\n\tst.global.u32 [%rd2+16], %r5;\n\tst.global.u32 [%rd2+20], %r6;\n"
    "\tst.global.u32 [%rd2+24], %r7;\n\tret;\n}\n";

static int standin(void) { return getenv("E2E_DRIVER") == NULL; }

/* The second input, as a file on this (the client's) machine. */
static void write_input_file(char *path, size_t len)
{
    int fd = h_temp_file("link_input", path, len);
    CHECK(write(fd, ptx_shape, sizeof ptx_shape - 1) == (ssize_t)(sizeof ptx_shape - 1), "writing %s", path);
    close(fd);
}

static void run_linked(const void *image)
{
    CUmodule m;
    CU(cuModuleLoadData(&m, image));
    CUfunction fill, shape;
    CU(cuModuleGetFunction(&fill, m, "fill_u32"));
    CU(cuModuleGetFunction(&shape, m, "launch_shape"));
    CUdeviceptr out;
    CU(cuMemAlloc_v2(&out, 256));
    uint32_t value = 0xfeedbeef;
    uint64_t n = 16;
    void *fill_args[] = {&out, &value, &n};
    CU(cuLaunchKernel(fill, 2, 1, 1, 4, 1, 1, 0, NULL, fill_args, NULL));
    uint32_t got[16];
    CU(cuMemcpyDtoH_v2(got, out, sizeof got));
    for (int i = 0; i < 16; i++) CHECK(got[i] == 0xfeedbeef, "fill_u32 [%d] = %#x", i, got[i]);
    void *shape_args[] = {&out};
    CU(cuLaunchKernel(shape, 3, 2, 1, 5, 1, 1, 0, NULL, shape_args, NULL));
    CU(cuMemcpyDtoH_v2(got, out, 7 * 4));
    CHECK(got[0] == 3 && got[1] == 2 && got[3] == 5, "launch_shape: grid %u %u block %u", got[0], got[1], got[3]);
    CU(cuMemFree_v2(out));
    CU(cuModuleUnload(m));
}

static void link_two_inputs(void)
{
    char info[1024], error[1024];
    memset(info, 'x', sizeof info);
    memset(error, 'x', sizeof error);
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                           CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_OPTIMIZATION_LEVEL};
    void *vals[] = {info, (void *)(uintptr_t)sizeof info, error, (void *)(uintptr_t)sizeof error, (void *)(uintptr_t)3};
    CUlinkState st;
    CU(cuLinkCreate_v2(5, opts, vals, &st));
    CU(cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, (void *)ptx_fill, sizeof ptx_fill, "fill.ptx", 0, NULL, NULL));
    char path[512];
    write_input_file(path, sizeof path);
    CU(cuLinkAddFile_v2(st, CU_JIT_INPUT_PTX, path, 0, NULL, NULL));
    if (standin()) {
        CHECK(strstr(info, "linked fill.ptx") && strstr(info, "link-input"), "info log: %.200s", info);
        CHECK(error[0] == '\0', "error log: %.200s", error);
        CHECK((size_t)(uintptr_t)vals[1] == strlen(info) + 1, "info log size %zu for %zu bytes",
              (size_t)(uintptr_t)vals[1], strlen(info));
    }
    void *image = NULL;
    size_t size = 0;
    CU(cuLinkComplete(st, &image, &size));
    CHECK(image && size > 0, "image %p size %zu", image, size);
    run_linked(image);
    run_linked(image); /* the image stays the client's until cuLinkDestroy: loaded again, from the cache */
    void *again;
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLinkComplete(st, &again, &size));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLinkAddData_v2(st, CU_JIT_INPUT_PTX, (void *)ptx_fill, sizeof ptx_fill, "late.ptx", 0, NULL, NULL));
    CU(cuLinkDestroy(st));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLinkComplete(st, &again, &size));
    unlink(path);
}

static void bad_inputs(void)
{
    char error[512] = "";
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {error, (void *)(uintptr_t)sizeof error};
    CUlinkState st;
    CU(cuLinkCreate(2, opts, vals, &st)); /* the first export: the same call */
    CU_EXPECT(CUDA_ERROR_INVALID_IMAGE,
              cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)"not a kernel", 13, "junk.ptx", 0, NULL, NULL));
    CHECK(error[0] != '\0', "no error log for a bad input");
    if (standin()) CHECK(strstr(error, "junk.ptx") != NULL, "error log: %s", error);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuLinkAddData(st, CU_JIT_INPUT_PTX, (void *)ptx_fill, 0, "empty.ptx", 0, NULL, NULL));
    CU_EXPECT(CUDA_ERROR_FILE_NOT_FOUND,
              cuLinkAddFile(st, CU_JIT_INPUT_PTX, "/nonexistent/scuda/input.ptx", 0, NULL, NULL));
    CU(cuLinkDestroy(st));
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuLinkDestroy(st));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuLinkCreate_v2(0, NULL, NULL, NULL));
}

static void client(void)
{
    h_cuda_setup();
    link_two_inputs();
    bad_inputs();
}

int main(void)
{
    h_run_client_test("link", 30, NULL, client);
    return 0;
}
