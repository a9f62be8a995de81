/* migrate_graphs.c - a session holding graphs, executable graphs and an
 * array moves to another server (src/server/migrate_graphs.c,
 * migrate_arrays.c; docs/architecture.md 9.17, 9.17b).
 *
 * The client builds a graph node by node (a memset, a kernel, a device
 * copy), captures another (two kernels), builds a third of an event wait,
 * a child graph and an event record, instantiates them and launches them,
 * changes a second executable graph of the first (an update from another
 * graph, then a kernel's and a memset's parameters, a node disabled),
 * fills an array, then moves. After the move it clears the outputs,
 * copies the array out again and launches the same executable graphs
 * again, instantiates the hand-built graph again, asks nodes of the graphs
 * for their parameters, event and child graph, and reads the array: every
 * result must equal what the kernels compute, byte for byte, and the
 * moved run must print what a run that stayed prints. */
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
    CUdeviceptr a, b, c, d, e, f, g, h, i;
    CUgraph built, captured, alt, nested, child;
    CUgraphNode set_node, kernel_node, copy_node, child_node, record_node;
    CUgraphExec built_exec, captured_exec, updated_exec, nested_exec;
    CUarray array;
    CUevent ev;
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

static CUDA_MEMSET_NODE_PARAMS memset_d(struct run *r, uint32_t value)
{
    return (CUDA_MEMSET_NODE_PARAMS){.dst = r->d, .value = value, .elementSize = 4, .width = N, .height = 1};
}

/* memset d to `value`; c = x + x' (args); e = c */
static CUgraph build_three(struct run *r, uint32_t value, void **args, CUgraphNode nodes[3])
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS ms = memset_d(r, value);
    CU(cuGraphAddMemsetNode(&nodes[0], g, NULL, 0, &ms, r->ctx));
    nodes[1] = add_kernel(r, g, &nodes[0], 1, h_func("vec_add"), args);
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = r->c, c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = r->e, c.WidthInBytes = N * sizeof(float), c.Height = c.Depth = 1;
    CU(cuGraphAddMemcpyNode(&nodes[2], g, &nodes[1], 1, &c, r->ctx));
    return g;
}

static unsigned n_elems = N;

/* memset d; c = a + b; e = c */
static void build_graph(struct run *r)
{
    static void *args[4];
    args[0] = &r->a, args[1] = &r->b, args[2] = &r->c, args[3] = &n_elems;
    CUgraphNode nodes[3];
    r->built = build_three(r, 0x11223344u, args, nodes);
    r->set_node = nodes[0], r->kernel_node = nodes[1], r->copy_node = nodes[2];
}

/* An executable graph of the built graph, changed: updated from a graph
 * like it (d = 0x0badf00d, c = b + b), then c = a + a, d = 0x55667788
 * and the copy into e disabled. */
static void change_exec(struct run *r)
{
    static void *alt_args[4], *args[4];
    alt_args[0] = &r->b, alt_args[1] = &r->b, alt_args[2] = &r->c, alt_args[3] = &n_elems;
    args[0] = &r->a, args[1] = &r->a, args[2] = &r->c, args[3] = &n_elems;
    CUgraphNode alt_nodes[3];
    r->alt = build_three(r, 0x0badf00du, alt_args, alt_nodes);
    CU(cuGraphInstantiateWithFlags(&r->updated_exec, r->built, 0));
    CUgraphExecUpdateResultInfo info;
    CU(cuGraphExecUpdate_v2(r->updated_exec, r->alt, &info));
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = h_func("vec_add"), p.ctx = r->ctx, p.gridDimX = N / 256, p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = 256, p.blockDimY = p.blockDimZ = 1, p.kernelParams = args;
    CU(cuGraphExecKernelNodeSetParams_v2(r->updated_exec, r->kernel_node, &p));
    CUDA_MEMSET_NODE_PARAMS ms = memset_d(r, 0x55667788u);
    CU(cuGraphExecMemsetNodeSetParams(r->updated_exec, r->set_node, &ms, r->ctx));
    CU(cuGraphNodeSetEnabled(r->updated_exec, r->copy_node, 0));
}

/* wait for ev; a child graph (memset i = 0x01020304, then 0x0a0b0c0d
 * on its first half); record ev */
static void build_nested(struct run *r)
{
    CU(cuGraphCreate(&r->child, 0));
    CUDA_MEMSET_NODE_PARAMS whole = {.dst = r->i, .value = 0x01020304u, .elementSize = 4, .width = N, .height = 1};
    CUDA_MEMSET_NODE_PARAMS half = {.dst = r->i, .value = 0x0a0b0c0du, .elementSize = 4, .width = N / 2, .height = 1};
    CUgraphNode first, second, wait;
    CU(cuGraphAddMemsetNode(&first, r->child, NULL, 0, &whole, r->ctx));
    CU(cuGraphAddMemsetNode(&second, r->child, &first, 1, &half, r->ctx));
    CU(cuGraphCreate(&r->nested, 0));
    CU(cuGraphAddEventWaitNode(&wait, r->nested, NULL, 0, r->ev));
    CU(cuGraphAddChildGraphNode(&r->child_node, r->nested, &wait, 1, r->child));
    CU(cuGraphAddEventRecordNode(&r->record_node, r->nested, &r->child_node, 1, r->ev));
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
    CUdeviceptr *bufs[] = {&r->a, &r->b, &r->c, &r->d, &r->e, &r->f, &r->g, &r->h, &r->i};
    for (int i = 0; i < 9; i++) CU(cuMemAlloc_v2(bufs[i], N * sizeof(float)));
    float ha[N], hb[N];
    for (int i = 0; i < N; i++) ha[i] = (float)i, hb[i] = 0.25f * (float)i + 1.0f;
    CU(cuMemcpyHtoD_v2(r->a, ha, sizeof ha));
    CU(cuMemcpyHtoD_v2(r->b, hb, sizeof hb));
    CU(cuStreamCreate(&r->s, CU_STREAM_NON_BLOCKING));
    CU(cuEventCreate(&r->ev, CU_EVENT_DEFAULT));
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
    build_nested(r);
    CU(cuGraphInstantiateWithFlags(&r->built_exec, r->built, 0));
    CU(cuGraphInstantiateWithFlags(&r->captured_exec, r->captured, 0));
    CU(cuGraphInstantiateWithFlags(&r->nested_exec, r->nested, 0));
    change_exec(r);
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
    CUdeviceptr outs[] = {r->c, r->d, r->e, r->f, r->g, r->h, r->i};
    for (int i = 0; i < 7; i++) CU(cuMemsetD32_v2(outs[i], 0, N));
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

/* The changed executable graph: d = 0x55667788, c = a + a, e untouched;
 * the nested one: i as the child's memsets leave it, ev recorded. */
static void check_changed_and_nested(struct run *r, const char *when)
{
    clear_outputs(r);
    CU(cuGraphLaunch(r->updated_exec, r->s));
    CU(cuGraphLaunch(r->nested_exec, r->s));
    CU(cuStreamSynchronize(r->s));
    CU(cuEventSynchronize(r->ev));
    float c[N], e[N];
    uint32_t d[N], i_[N];
    CU(cuMemcpyDtoH_v2(c, r->c, sizeof c));
    CU(cuMemcpyDtoH_v2(d, r->d, sizeof d));
    CU(cuMemcpyDtoH_v2(e, r->e, sizeof e));
    CU(cuMemcpyDtoH_v2(i_, r->i, sizeof i_));
    for (int i = 0; i < N; i++) {
        CHECK(c[i] == 2.0f * (float)i && e[i] == 0.0f && d[i] == 0x55667788u,
              "%s: the changed executable graph, element %d: c %g e %g d %#x", when, i, c[i], e[i], d[i]);
        CHECK(i_[i] == (i < N / 2 ? 0x0a0b0c0du : 0x01020304u), "%s: the child graph, element %d: %#x", when, i, i_[i]);
    }
    CUevent ev = NULL;
    CU(cuGraphEventRecordNodeGetEvent(r->record_node, &ev));
    CHECK(ev == r->ev, "%s: the event record node's event is %p, not %p", when, (void *)ev, (void *)r->ev);
    CUgraph child = NULL;
    size_t n = 0;
    CU(cuGraphChildGraphNodeGetGraph(r->child_node, &child));
    CU(cuGraphGetNodes(child, NULL, &n));
    CHECK(n == 2, "%s: the child graph has %zu nodes, not 2", when, n);
    printf("%s: changed and nested executable graphs right\n", when);
}

static int workload(void *arg)
{
    (void)arg;
    struct run r;
    setup(&r);
    launch_both(&r);
    check_outputs(&r, "before");
    check_changed_and_nested(&r, "before");
    CUgraph child_before = NULL, child_after = NULL;
    CU(cuGraphChildGraphNodeGetGraph(r.child_node, &child_before));
    if (target) {
        int moved = scuda_migrate(target, why, sizeof why);
        CHECK(moved == 1, "scuda_migrate(%s) = %d: %s", target, moved, why);
    }
    clear_outputs(&r);
    launch_both(&r);
    check_outputs(&r, "after, the same executable graphs");
    check_changed_and_nested(&r, "after");
    CU(cuGraphChildGraphNodeGetGraph(r.child_node, &child_after));
    CHECK(child_after == child_before, "the child graph's handle changed: %p, was %p", (void *)child_after,
          (void *)child_before);
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
    CU(cuGraphExecDestroy(r.updated_exec));
    CU(cuGraphExecDestroy(r.nested_exec));
    CU(cuGraphDestroy(r.built));
    CU(cuGraphDestroy(r.captured));
    CU(cuGraphDestroy(r.alt));
    CU(cuGraphDestroy(r.nested));
    CU(cuGraphDestroy(r.child));
    CU(cuEventDestroy(r.ev));
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

/* An executable graph changed by a call a move does not carry (a child
 * graph node's graph set) cannot move: the refusal names the call and the
 * session goes on. */
static int changed_exec_workload(void *arg)
{
    (void)arg;
    struct run r;
    setup(&r);
    CU(cuGraphExecChildGraphNodeSetParams(r.nested_exec, r.child_node, r.child));
    int moved = scuda_migrate(target, why, sizeof why);
    CHECK(moved == 0 && strstr(why, "changed after its instantiation (cuGraphExecChildGraphNodeSetParams)"),
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
