/* migrate_graphs.c - a session holding graphs, executable graphs and an
 * array moves to another server (src/server/migrate_graphs.c,
 * migrate_arrays.c; docs/architecture.md 9.17).
 *
 * The client builds a graph node by node (a memset, a kernel, a device
 * copy), captures another (two kernels),
 * instantiates both and launches them, fills an array, then moves. After
 * the move it clears the outputs, copies the array out again and launches the same executable graphs
 * again, instantiates the hand-built graph again, asks a node of it for
 * its parameters, and reads the array: every result must equal what the
 * kernels compute, byte for byte, and the moved run must print what a run
 * that stayed prints. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

int scuda_migrate(const char *to, char *why, size_t whylen); /* the shim's (src/client/migrate.c) */

#define N 1024
#define AW 64 /* the array: AW x AH floats */
#define AH 16

static const char *target;
static char why[512];

struct run {
    CUcontext ctx;
    CUdeviceptr a, b, c, d, e, f, g, h;
    CUgraph built, captured;
    CUgraphNode kernel_node;
    CUgraphExec built_exec, captured_exec;
    CUarray array;
    CUstream s;
};

static CUgraphNode add_kernel(struct run *r, CUgraph g, CUgraphNode *deps, size_t nd, CUfunction f, void **args)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f, p.ctx = r->ctx, p.gridDimX = N / 256, p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1, p.kernelParams = args;
    CUgraphNode n;
    CU(cuGraphAddKernelNode_v2(&n, g, deps, nd, &p));
    return n;
}

/* memset d; c = a + b; e = c */
static void build_graph(struct run *r)
{
    CU(cuGraphCreate(&r->built, 0));
    CUDA_MEMSET_NODE_PARAMS ms = {.dst = r->d, .value = 0x11223344u, .elementSize = 4, .width = N, .height = 1};
    CUgraphNode set, cp;
    CU(cuGraphAddMemsetNode(&set, r->built, NULL, 0, &ms, r->ctx));
    static unsigned n = N;
    static void *args[4];
    args[0] = &r->a, args[1] = &r->b, args[2] = &r->c, args[3] = &n;
    r->kernel_node = add_kernel(r, r->built, &set, 1, h_func("vec_add"), args);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = r->c, c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = r->e, c.WidthInBytes = N * sizeof(float), c.Height = c.Depth = 1;
    CU(cuGraphAddMemcpyNode(&cp, r->built, &r->kernel_node, 1, &c, r->ctx));
}

/* f = 0xabc0 + 7 words; g = c + c */
static void capture_graph(struct run *r)
{
    static uint32_t v = 0xabc7u;
    static uint64_t words = N;
    static unsigned n = N;
    static void *fill_args[3], *add_args[4];
    fill_args[0] = &r->f, fill_args[1] = &v, fill_args[2] = &words;
    add_args[0] = &r->c, add_args[1] = &r->c, add_args[2] = &r->g, add_args[3] = &n;
    CU(cuStreamBeginCapture_v2(r->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CU(cuLaunchKernel(h_func("fill_u32"), 4, 1, 1, 256, 1, 1, 0, r->s, fill_args, NULL));
    CU(cuLaunchKernel(h_func("vec_add"), N / 256, 1, 1, 256, 1, 1, 0, r->s, add_args, NULL));
    CU(cuStreamEndCapture(r->s, &r->captured));
}

static void setup(struct run *r)
{
    r->ctx = h_cuda_setup();
    CUdeviceptr *bufs[] = {&r->a, &r->b, &r->c, &r->d, &r->e, &r->f, &r->g, &r->h};
    for (int i = 0; i < 8; i++) CU(cuMemAlloc_v2(bufs[i], N * sizeof(float)));
    float ha[N], hb[N];
    for (int i = 0; i < N; i++) ha[i] = (float)i, hb[i] = 0.25f * (float)i + 1.0f;
    CU(cuMemcpyHtoD_v2(r->a, ha, sizeof ha));
    CU(cuMemcpyHtoD_v2(r->b, hb, sizeof hb));
    CU(cuStreamCreate(&r->s, CU_STREAM_NON_BLOCKING));
    /* The module's globals are placed before the array, as the move
     * replays them (arrays are not in the placing sequence yet). */
    CUdeviceptr gp;
    size_t gs;
    CU(cuModuleGetGlobal_v2(&gp, &gs, h_module(), "g_counter"));
    CUDA_ARRAY3D_DESCRIPTOR ad = {.Width = AW, .Height = AH, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CU(cuArray3DCreate_v2(&r->array, &ad));
    float img[AW * AH];
    for (int i = 0; i < AW * AH; i++) img[i] = (float)(i * 3) - 0.5f;
    CU(cuMemcpyHtoA_v2(r->array, 0, img, sizeof img));
    build_graph(r);
    capture_graph(r);
    CU(cuGraphInstantiateWithFlags(&r->built_exec, r->built, 0));
    CU(cuGraphInstantiateWithFlags(&r->captured_exec, r->captured, 0));
}

static void launch_both(struct run *r)
{
    CU(cuMemcpyAtoD_v2(r->h, r->array, 0, AW * AH * sizeof(float)));
    CU(cuGraphLaunch(r->built_exec, r->s));
    CU(cuStreamSynchronize(r->s)); /* the captured graph reads c */
    CU(cuGraphLaunch(r->captured_exec, r->s));
    CU(cuStreamSynchronize(r->s));
}

static void clear_outputs(struct run *r)
{
    CUdeviceptr outs[] = {r->c, r->d, r->e, r->f, r->g, r->h};
    for (int i = 0; i < 6; i++) CU(cuMemsetD32_v2(outs[i], 0, N));
    CU(cuCtxSynchronize());
}

/* Every output against what the nodes compute; printed for the
 * comparison with a run that stayed. */
static void check_outputs(struct run *r, const char *when)
{
    float c[N], e[N], g[N], h[AW * AH];
    uint32_t d[N], f[N];
    CU(cuMemcpyDtoH_v2(c, r->c, sizeof c));
    CU(cuMemcpyDtoH_v2(d, r->d, sizeof d));
    CU(cuMemcpyDtoH_v2(e, r->e, sizeof e));
    CU(cuMemcpyDtoH_v2(f, r->f, sizeof f));
    CU(cuMemcpyDtoH_v2(g, r->g, sizeof g));
    CU(cuMemcpyDtoH_v2(h, r->h, sizeof h));
    unsigned long long sum = 0;
    for (int i = 0; i < N; i++) {
        float want = (float)i + (0.25f * (float)i + 1.0f);
        CHECK(c[i] == want && e[i] == want && g[i] == want + want, "%s: element %d: c %g e %g g %g, want %g", when,
              i, c[i], e[i], g[i], want);
        CHECK(d[i] == 0x11223344u && f[i] == 0xabc7u, "%s: element %d: d %#x f %#x", when, i, d[i], f[i]);
        sum += (unsigned long long)(c[i] * 4) + d[i] + f[i];
    }
    for (int i = 0; i < AW * AH; i++)
        CHECK(h[i] == (float)(i * 3) - 0.5f, "%s: array element %d is %g", when, i, h[i]);
    printf("%s: outputs right, sum %llu\n", when, sum);
}

static int workload(void *arg)
{
    (void)arg;
    struct run r;
    setup(&r);
    launch_both(&r);
    check_outputs(&r, "before");
    if (target) {
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    clear_outputs(&r);
    launch_both(&r);
    check_outputs(&r, "after, the same executable graphs");
    /* the graph and its nodes are the client's handles still */
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    CU(cuGraphKernelNodeGetParams_v2(r.kernel_node, &p));
    CHECK(p.gridDimX == N / 256 && p.blockDimX == 256, "the kernel node's parameters after the move");
    size_t nodes = 0;
    CU(cuGraphGetNodes(r.built, NULL, &nodes));
    CHECK(nodes == 3, "the built graph has %zu nodes, not 3", nodes);
    CUgraphExec again;
    CU(cuGraphInstantiateWithFlags(&again, r.built, 0));
    clear_outputs(&r);
    CU(cuMemcpyAtoD_v2(r.h, r.array, 0, AW * AH * sizeof(float)));
    CU(cuGraphLaunch(again, r.s));
    CU(cuGraphLaunch(r.captured_exec, r.s));
    CU(cuStreamSynchronize(r.s));
    check_outputs(&r, "after, instantiated again");
    float img[AW * AH];
    CU(cuMemcpyAtoH_v2(img, r.array, 0, sizeof img));
    for (int i = 0; i < AW * AH; i++) CHECK(img[i] == (float)(i * 3) - 0.5f, "array element %d is %g", i, img[i]);
    CU(cuGraphExecDestroy(again));
    CU(cuGraphExecDestroy(r.built_exec));
    CU(cuGraphExecDestroy(r.captured_exec));
    CU(cuGraphDestroy(r.built));
    CU(cuGraphDestroy(r.captured));
    CU(cuArrayDestroy(r.array));
    printf("done\n");
    return 0;
}

static char *run_workload(const char *tag, const char *to)
{
    char path[512], errpath[512], errtag[128];
    int fd = h_temp_file(tag, path, sizeof path);
    snprintf(errtag, sizeof errtag, "%s-stderr", tag);
    int efd = h_temp_file(errtag, errpath, sizeof errpath);
    target = to;
    h_wait_ok(h_spawn(workload, NULL, 60, fd, efd), 65000, tag);
    close(fd);
    close(efd);
    size_t len;
    return h_read_file(path, &len);
}

/* An executable graph changed after its instantiation cannot move: the
 * refusal names it and the session goes on. */
static int changed_exec_workload(void *arg)
{
    (void)arg;
    struct run r;
    setup(&r);
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    CU(cuGraphKernelNodeGetParams_v2(r.kernel_node, &p));
    CU(cuGraphExecKernelNodeSetParams_v2(r.built_exec, r.kernel_node, &p));
    int moved = scuda_migrate(target, why, sizeof why);
    CHECK(moved == 0 && strstr(why, "changed after its instantiation (cuGraphExecKernelNodeSetParams_v2)"),
          "a changed executable graph: moved %d: %s", moved, why);
    launch_both(&r);
    check_outputs(&r, "refused, still on A");
    return 0;
}

int main(void)
{
    h_begin("migrate_graphs", 110);
    struct h_server A, B;
    h_server_start(&B, "migrate-graphs-b", NULL);
    h_server_start(&A, "migrate-graphs-a", NULL); /* last: SCUDA_SERVER is A's */
    char *plain = run_workload("migrate-graphs-plain", NULL);
    char *moved = run_workload("migrate-graphs-moved", B.addr);
    CHECK(strcmp(plain, moved) == 0, "a moved run printed\n%s\na run that stayed\n%s", moved, plain);
    CHECK(strstr(moved, "after, instantiated again: outputs right"), "the moved run finished: %s", moved);
    CHECK(h_server_log_count(&B, "its state matches") == 1, "B rebuilt the session and checked it");
    target = B.addr;
    h_wait_ok(h_spawn(changed_exec_workload, NULL, 60, -1, -1), 65000, "changed executable graph");
    free(plain);
    free(moved);
    h_server_stop(&A);
    h_server_stop(&B);
    printf("PASS migrate_graphs\n");
    return 0;
}
