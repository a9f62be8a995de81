/* module_read_kernels.c - loads of images new to the session, one-way,
 * their kernels read by the client (src/common/image_kernels.c;
 * docs/architecture.md, 3.8.2). The images are fatbins of an sm_90 cubin,
 * which the client reads, and sm_90 PTX, which the CPU stand-in runs
 * (read_kernels_images.h).
 *
 *   good   through the shim, with SCUDA_STATS=1: a module and then a
 *          library of a new image load without a round trip (no load by
 *          digest, none with bytes, no layout asked for); the module lists
 *          its three kernels in the driver's order, the library in the
 *          reverse; a name it lacks is NOT_FOUND; each kernel launched
 *          (the stand-in's built-in kernels of those names) writes exactly
 *          what it should, a char and a long long at the offsets the
 *          cubin gives, and none of those first launches asks for the
 *          kernel's attributes (the limits read from the image allow
 *          them for certain); one asking for 1 MiB of dynamic shared
 *          memory asks, and is refused at the launch; a second load of
 *          the module is one of an image the session keeps; nothing
 *          failed at the end.
 *   bad    the cubin holds a kernel the PTX the session's driver loads
 *          lacks: the load returns at once, the next synchronizing call
 *          returns INVALID_IMAGE, and the server's log says what differs
 *          and names SCUDA_READ_KERNELS=0.
 *   layout the PTX the session's driver loads gives copy_params_pair an
 *          int where the cubin has a char: the same names, so the load
 *          and the binding go through, but every launch of that kernel
 *          is refused (INVALID_IMAGE at the next synchronize, nothing
 *          written, logged), and another kernel of the image still
 *          works; the same for the image re-loaded (one-way) and loaded
 *          as a library (its kernel's function, and the kernel).
 *   attrs  attribute sets the driver surely accepts go one-way
 *          (src/client/attr_set.c): a kernel's dynamic shared memory
 *          raised within the device's opt-in limit less its static size,
 *          and a carveout; a launch within the raised limit then asks
 *          nothing, and the session applied the set before it (the
 *          attribute reads back). A value past the opt-in limit, an
 *          attribute the client does not judge, and a kernel set for a
 *          device that does not exist wait, and their refusals come from
 *          the call.
 *   off    with SCUDA_READ_KERNELS=0 the same load asks by digest and
 *          then sends the bytes, as before.
 * Also: cuModuleGetLoadingMode answers the session's driver's mode, lazy
 * for the first server and eager for the second (CUDA_MODULE_LOADING). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "read_kernels_images.h"

static const char *const module_order[] = {"fill_u32", "vec_add", "copy_params_pair"};

static void check_names(CUfunction *fs, unsigned n, const char *const *want, const char *what)
{
    for (unsigned i = 0; i < n; i++) {
        const char *name = NULL;
        CU(cuFuncGetName(&name, fs[i]));
        CHECK(name && strcmp(name, want[i]) == 0, "%s %u: %s, want %s", what, i, name ? name : "none", want[i]);
    }
}

/* The stand-in's built-in kernels of these names: fill_u32 over 100
 * words, vec_add over 4 floats, and copy_params_pair, which copies its
 * parameter buffer out: its char and long long where the cubin places
 * them (8 and 16), which is where the PTX the stand-in read places them. */
static void run_kernels(CUfunction fill, CUfunction add, CUfunction copy)
{
    CUdeviceptr d, e;
    CU(cuMemAlloc_v2(&d, 400));
    CU(cuMemAlloc_v2(&e, 64));
    uint32_t value = 0x5eed1234u, out[100];
    unsigned long long n = 100;
    void *a1[] = {&d, &value, &n};
    CU(cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, a1, NULL));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    for (int i = 0; i < 100; i++) CHECK(out[i] == value, "fill_u32: word %d is %08x", i, out[i]);
    float x[8] = {1, 2, 3, 4, 10, 20, 30, 40}, sum[4];
    CU(cuMemcpyHtoD_v2(e, x, sizeof x));
    CUdeviceptr b = e + 16, c = e + 32;
    int four = 4;
    void *a2[] = {&e, &b, &c, &four};
    CU(cuLaunchKernel(add, 1, 1, 1, 4, 1, 1, 0, NULL, a2, NULL));
    CU(cuMemcpyDtoH_v2(sum, c, sizeof sum));
    CHECK(sum[0] == 11 && sum[3] == 44, "vec_add: %g %g", sum[0], sum[3]);
    long long v = 0x123456789abcLL, got_v = 0;
    char ch = 'q';
    unsigned char buf[24];
    CU(cuMemsetD8_v2(d, 0, sizeof buf));
    void *a3[] = {&d, &ch, &v};
    CU(cuLaunchKernel(copy, 1, 1, 1, 1, 1, 1, 0, NULL, a3, NULL));
    CU(cuMemcpyDtoH_v2(buf, d, sizeof buf));
    memcpy(&got_v, buf + 16, 8);
    CHECK(buf[8] == 'q' && got_v == v, "copy_params_pair: the char %02x and the long long %llx", buf[8],
          (unsigned long long)got_v);
    CU(cuMemFree_v2(d));
    CU(cuMemFree_v2(e));
}

/* The session's driver's loading mode, as the shim answers it. */
static void check_loading_mode(CUmoduleLoadingMode want)
{
    CUmoduleLoadingMode mode = 0;
    CU(cuModuleGetLoadingMode(&mode));
    CHECK(mode == want, "cuModuleGetLoadingMode: %d, the session's driver has %d", (int)mode, (int)want);
}

static int good_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    check_loading_mode(CU_MODULE_LAZY_LOADING);
    CUmodule m;
    CU(cuModuleLoadData(&m, rk_good));
    unsigned count = 0;
    CU(cuModuleGetFunctionCount(&count, m));
    CHECK(count == 3, "the module has %u functions", count);
    CUfunction fs[3];
    CU(cuModuleEnumerateFunctions(fs, 3, m));
    check_names(fs, 3, module_order, "module function");
    CUfunction fill, add, copy, none;
    CU(cuModuleGetFunction(&fill, m, "fill_u32"));
    CU(cuModuleGetFunction(&add, m, "vec_add"));
    CU(cuModuleGetFunction(&copy, m, "copy_params_pair"));
    CHECK(cuModuleGetFunction(&none, m, "noop") == CUDA_ERROR_NOT_FOUND, "a kernel the image lacks was found");
    run_kernels(fill, add, copy);

    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, rk_good, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernelCount(&count, lib));
    CHECK(count == 3, "the library has %u kernels", count);
    CUkernel ks[3];
    CU(cuLibraryEnumerateKernels(ks, 3, lib));
    for (unsigned i = 0; i < 3; i++) {
        const char *name = NULL;
        CU(cuKernelGetName(&name, ks[i]));
        CHECK(name && strcmp(name, module_order[2 - i]) == 0, "library kernel %u: %s", i, name ? name : "none");
    }
    CUkernel k1, k2, k3;
    CU(cuLibraryGetKernel(&k1, lib, "fill_u32"));
    CU(cuLibraryGetKernel(&k2, lib, "vec_add"));
    CU(cuLibraryGetKernel(&k3, lib, "copy_params_pair"));
    run_kernels((CUfunction)k1, (CUfunction)k2, (CUfunction)k3);
    CU(cuLibraryUnload(lib));

    CUmodule again;
    CU(cuModuleLoadData(&again, rk_good));
    CU(cuModuleGetFunction(&fill, again, "fill_u32"));
    CU(cuModuleGetFunction(&add, again, "vec_add"));
    CU(cuModuleGetFunction(&copy, again, "copy_params_pair"));
    run_kernels(fill, add, copy);
    /* Past what the image's limits allow for certain, the launch asks, and
     * a refusal comes from the launch itself. */
    CUdeviceptr d;
    uint32_t value = 1;
    unsigned long long n = 1;
    void *args[] = {&d, &value, &n};
    CU(cuMemAlloc_v2(&d, 64));
    CUresult r = cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 1u << 20, NULL, args, NULL);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a launch asking for 1 MiB of dynamic shared memory returned %s",
          h_cu_name(r));
    CU(cuMemFree_v2(d));
    CU(cuModuleUnload(again));
    CU(cuModuleUnload(m));
    CU(cuCtxSynchronize()); /* no one-way load failed */
    return 0;
}

static int bad_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m;
    CU(cuModuleLoadData(&m, rk_bad));
    CUresult r = cuCtxSynchronize();
    CHECK(r == CUDA_ERROR_INVALID_IMAGE, "the synchronize after a load the driver lists otherwise returned %s",
          h_cu_name(r));
    return 0;
}

/* Launches of f (copy_params_pair, whose layout the client read
 * otherwise) are refused: the next synchronize returns INVALID_IMAGE and
 * the kernel wrote nothing; twice, as every launch of it is refused. */
static void refused_launches(CUfunction f, const char *what)
{
    CUdeviceptr d;
    unsigned char buf[24];
    CU(cuMemAlloc_v2(&d, sizeof buf));
    for (int round = 0; round < 2; round++) {
        CU(cuMemsetD8_v2(d, 0, sizeof buf));
        long long v = 0x123456789abcLL;
        char ch = 'q';
        void *args[] = {&d, &ch, &v};
        CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        CUresult r = cuCtxSynchronize();
        CHECK(r == CUDA_ERROR_INVALID_IMAGE, "the synchronize after launch %d of %s returned %s", round + 1, what,
              h_cu_name(r));
        CU(cuMemcpyDtoH_v2(buf, d, sizeof buf));
        for (size_t i = 0; i < sizeof buf; i++)
            CHECK(buf[i] == 0, "launch %d of %s ran: byte %zu is %02x", round + 1, what, i, buf[i]);
    }
    CU(cuMemFree_v2(d));
}

static int layout_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m;
    CUfunction fill, copy;
    CU(cuModuleLoadData(&m, rk_layout));
    CU(cuModuleGetFunction(&copy, m, "copy_params_pair"));
    CU(cuModuleGetFunction(&fill, m, "fill_u32"));
    CU(cuCtxSynchronize()); /* the binding asks the driver nothing */
    refused_launches(copy, "a kernel of another layout");
    CUdeviceptr d;
    uint32_t value = 77, out[8];
    unsigned long long n = 8;
    CU(cuMemAlloc_v2(&d, sizeof out));
    void *args[] = {&d, &value, &n};
    CU(cuLaunchKernel(fill, 1, 1, 1, 8, 1, 1, 0, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(out[0] == 77 && out[7] == 77, "fill_u32 of the same image: %u %u", out[0], out[7]);
    /* A re-load of the image (one-way, the session keeps it): its kernels
     * are checked against the same claims. */
    CU(cuModuleUnload(m));
    CU(cuModuleLoadData(&m, rk_layout));
    CU(cuModuleGetFunction(&copy, m, "copy_params_pair"));
    refused_launches(copy, "a re-loaded kernel of another layout");
    /* The same as a library: its kernel's function in the context (asked
     * for before any launch), and the kernel launched as a function. */
    CUlibrary lib;
    CUkernel k;
    CUfunction kf;
    CU(cuLibraryLoadData(&lib, rk_layout, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernel(&k, lib, "copy_params_pair"));
    CU(cuKernelGetFunction(&kf, k));
    refused_launches(kf, "a library kernel's function of another layout");
    refused_launches((CUfunction)k, "a library kernel of another layout");
    return 0;
}

static int attr_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUmodule m;
    CUfunction fill;
    CU(cuModuleLoadData(&m, rk_good));
    CU(cuModuleGetFunction(&fill, m, "fill_u32"));
    int optin = 0;
    CU(cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
    CU(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000)); /* one-way */
    CU(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));  /* one-way */
    CU(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60000)); /* one-way again */
    /* A launch within the limit the set gave: no question asked. */
    CUdeviceptr d;
    uint32_t value = 5, out[4] = {0};
    unsigned long long n = 4;
    void *args[] = {&d, &value, &n};
    CU(cuMemAlloc_v2(&d, sizeof out));
    CU(cuLaunchKernel(fill, 1, 1, 1, 4, 1, 1, 60000, NULL, args, NULL));
    CU(cuMemcpyDtoH_v2(out, d, sizeof out));
    CHECK(out[0] == 5 && out[3] == 5, "the launch with 60000 bytes of dynamic shared memory wrote %u %u", out[0],
          out[3]);
    int got = 0;
    CU(cuFuncGetAttribute(&got, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fill));
    CHECK(got == 60000, "the one-way set reads back as %d", got);
    /* These wait, and the driver's refusal is the call's. */
    CUresult r = cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin + 1);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a limit past the opt-in one returned %s", h_cu_name(r));
    r = cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 99);
    CHECK(r == CUDA_ERROR_INVALID_VALUE, "a cluster width of 99 returned %s", h_cu_name(r));
    CUlibrary lib;
    CUkernel k;
    CU(cuLibraryLoadData(&lib, rk_good, NULL, NULL, 0, NULL, NULL, 0));
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    CU(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 70000, k, 0)); /* one-way */
    r = cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 70000, k, 99);
    CHECK(r == CUDA_ERROR_INVALID_DEVICE, "a set for device 99 returned %s", h_cu_name(r));
    CU(cuKernelGetAttribute(&got, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k, 0));
    CHECK(got == 70000, "the kernel's one-way set reads back as %d", got);
    CU(cuMemFree_v2(d));
    CU(cuLibraryUnload(lib));
    CU(cuModuleUnload(m));
    CU(cuCtxSynchronize()); /* no one-way set failed */
    return 0;
}

static int off_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    check_loading_mode(CU_MODULE_EAGER_LOADING); /* that server's driver was told CUDA_MODULE_LOADING=EAGER */
    CUmodule m;
    CU(cuModuleLoadData(&m, rk_good));
    CUfunction fill, add, copy;
    CU(cuModuleGetFunction(&fill, m, "fill_u32"));
    CU(cuModuleGetFunction(&add, m, "vec_add"));
    CU(cuModuleGetFunction(&copy, m, "copy_params_pair"));
    run_kernels(fill, add, copy);
    CU(cuCtxSynchronize());
    return 0;
}

/* The client's stats, fn run to its end. */
static char *run_client(const char *tag, int (*fn)(void *)) { return h_client_stats(fn, NULL, 60, tag); }

static void good(const struct h_server *srv)
{
    (void)srv;
    char *stats = run_client("read_kernels-good", good_client);
    CHECK(h_stats_count(stats, "async", "scuda_module_load_new") == 2, "new images loaded one-way: %u\n%s",
          h_stats_count(stats, "async", "scuda_module_load_new"), stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_load") == 0 && h_stats_count(stats, "sync", "scuda_module_load_by_hash") == 0,
          "a load waited\n%s", stats);
    CHECK(h_stats_count(stats, "sync", "scuda_param_info") == 0, "a layout was asked for\n%s", stats);
    CHECK(h_stats_count(stats, "sync", "scuda_func_attributes") == 1,
          "only the launch past the image's limits should ask for attributes\n%s", stats);
    CHECK(h_stats_count(stats, "async", "scuda_module_load_known") == 1, "the second load was not of a kept image\n%s",
          stats);
    CHECK(strstr(stats, "module loads of new images sent one-way with their bytes (their kernels read here): 2"), "stats line\n%s",
          stats);
    free(stats);
    printf("ok good: a module and a library of a new image loaded one-way, the driver's order, exact launches\n");
}

/* A second process of the same user: the server's module cache holds the
 * image, and says so once (scuda_module_held), so both first loads go
 * one-way by digest, without the bytes; the kernels run as before. */
static void held(void)
{
    char *stats = run_client("read_kernels-held", good_client);
    unsigned by_digest = h_stats_count(stats, "async", "scuda_module_load_held");
    CHECK(by_digest == 2, "loads by digest of held images: %u (want 2: the module, the library)\n%s", by_digest,
          stats);
    CHECK(h_stats_count(stats, "async", "scuda_module_load_new") == 0, "an image the server held was sent\n%s",
          stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_held") == 1, "the server's images were not asked once\n%s",
          stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_load") == 0 &&
              h_stats_count(stats, "sync", "scuda_module_load_by_hash") == 0,
          "a load waited\n%s", stats);
    CHECK(strstr(stats, "module loads of new images sent one-way by digest (the server's module cache held them): 2"),
          "stats line\n%s", stats);
    free(stats);
    printf("ok held: a new process loads the images the server's cache holds one-way, by digest\n");
}

static void bad(const struct h_server *srv)
{
    int warned = h_server_log_count(srv, "SCUDA_READ_KERNELS=0");
    char *stats = run_client("read_kernels-bad", bad_client);
    free(stats);
    CHECK(h_wait_log(srv, "SCUDA_READ_KERNELS=0", warned + 1, 5000) > warned,
          "the server did not say the client's reading differs");
    CHECK(h_server_log_count(srv, "the client read 3 kernels from a module image and this driver lists 2") >= 1,
          "the server's log does not say what differs");
    printf("ok bad: a reading the driver contradicts is INVALID_IMAGE at the next synchronize, and logged\n");
}

static void layout(const struct h_server *srv)
{
    char *stats = run_client("read_kernels-layout", layout_client);
    free(stats);
    CHECK(h_wait_log(srv, "kernel copy_params_pair: the client read 3 parameters (24 bytes) from its image, this "
                          "driver's layout has 3 (24 bytes): its launches are refused", 8, 5000) >= 8,
          "the server did not refuse a kernel (of a module, a re-loaded module, a library) whose layout differs");
    printf("ok layout: a kernel whose layout the driver contradicts is refused at every launch, and logged\n");
}

static void attrs(void)
{
    char *stats = run_client("read_kernels-attrs", attr_client);
    unsigned one_way = h_stats_count(stats, "async", "cuFuncSetAttribute"),
             waited = h_stats_count(stats, "sync", "cuFuncSetAttribute");
    CHECK(one_way == 2 && waited == 2, "cuFuncSetAttribute: %u one-way (want 2: the limit, the carveout; the "
          "repeat is answered here), %u waited (want 2)\n%s", one_way, waited, stats);
    one_way = h_stats_count(stats, "async", "cuKernelSetAttribute");
    waited = h_stats_count(stats, "sync", "cuKernelSetAttribute");
    CHECK(one_way == 1 && waited == 1, "cuKernelSetAttribute: %u one-way, %u waited (want 1, 1)\n%s", one_way,
          waited, stats);
    CHECK(h_stats_count(stats, "sync", "scuda_func_attributes") == 2,
          "only the two read-backs (the function's, the kernel's) should ask for attributes, not the launch\n%s",
          stats);
    free(stats);
    printf("ok attrs: sets the driver surely accepts go one-way, the launch within them asks nothing\n");
}

static void off(void)
{
    setenv("SCUDA_READ_KERNELS", "0", 1);
    char *stats = run_client("read_kernels-off", off_client);
    unsetenv("SCUDA_READ_KERNELS");
    CHECK(h_stats_count(stats, "async", "scuda_module_load_new") == 0, "SCUDA_READ_KERNELS=0 still read\n%s", stats);
    CHECK(h_stats_count(stats, "sync", "scuda_module_load_by_hash") == 1 && h_stats_count(stats, "sync", "scuda_module_load") == 1,
          "the load did not take its round trips\n%s", stats);
    free(stats);
    printf("ok off: SCUDA_READ_KERNELS=0 loads with round trips\n");
}

int main(void)
{
    h_begin("module_read_kernels", 120);
    struct h_server srv;
    h_server_start(&srv, "read-kernels", NULL);
    good(&srv);
    held();
    bad(&srv);
    layout(&srv);
    attrs();
    h_server_stop(&srv);
    /* A fresh server: its cache lacks the image, so the load sends it.
     * Its driver loads eagerly, and the client is told so. */
    struct h_server fresh;
    setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    h_server_start(&fresh, "read-kernels-off", NULL);
    unsetenv("CUDA_MODULE_LOADING");
    off();
    h_server_stop(&fresh);
    printf("PASS module_read_kernels\n");
    return 0;
}
