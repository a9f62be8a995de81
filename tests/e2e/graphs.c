/* graphs.c - stream capture and CUDA graphs through SCUDA (the shape of
 * tests/gpu/programs/cuda_graph.cu and PyTorch's torch.cuda.graph).
 *
 * - Capture: a memset, kernels and a device-to-device copy on a capturing
 *   stream become a graph on the server; cuStreamGetCaptureInfo_v3 hands
 *   back the capture's graph and dependencies (ids the session picked),
 *   and those ids name the graph's nodes in cuGraphGetNodes too.
 * - Host work: device-to-host copies into client memory and host
 *   functions are captured (a copy into a staging buffer and a host node
 *   on the server); at each replay the client gets the bytes and runs the
 *   function before its synchronizing call returns, the function seeing
 *   the copies captured before it. A captured graph has the nodes it would
 *   have natively. Clones carry the host work along.
 * - Copies from client memory capture too: tests/e2e/graph_host.c.
 * - The graph replays: every launch recomputes the data.
 * - A hand-built graph: a kernel node (its parameters packed like a
 *   launch's, read back by cuGraphKernelNodeGetParams), a memcpy node
 *   between device buffers, instantiation with parameters, and updates of
 *   a kernel node's parameters in the graph and in the executable graph.
 * - A kernel node naming a library kernel (CUkernel, no function). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 4096u

static float as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_all(CUdeviceptr d, uint32_t want, const char *what)
{
    uint32_t *h = malloc(N * 4);
    CHECK(h != NULL);
    CU(cuMemcpyDtoH_v2(h, d, N * 4));
    for (uint32_t i = 0; i < N; i++) CHECK(h[i] == want, "%s: [%u] = 0x%x, expected 0x%x", what, i, h[i], want);
    free(h);
}

/* A captured host function: counts its runs, and checks that the copy
 * captured before it has landed in client memory. */
struct host_check {
    int calls;
    int saw_data;
    uint32_t *out;
    uint32_t first, last; /* what out[0] and out[N-1] hold once the copy landed */
};

static void host_fn(void *arg)
{
    struct host_check *hc = arg;
    hc->calls++;
    hc->saw_data += hc->out[0] == hc->first && hc->out[N - 1] == hc->last;
}

static void capture_and_replay(CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c)
{
    CUfunction fill = h_func("fill_u32"), add = h_func("vec_add");
    uint64_t n64 = N;
    int n32 = (int)N;
    uint32_t one_half = bits(1.5f);

    CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CU(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);

    /* a = 2.0f; a[0..N/2) = 1.5f; b = a; c = a + b */
    CU(cuMemsetD32Async(a, bits(2.0f), N, s));
    uint64_t half = N / 2;
    void *fargs[] = {&a, &one_half, &half};
    CU(cuLaunchKernel(fill, 4, 1, 1, 128, 1, 1, 0, s, fargs, NULL));

    /* the capture so far, as the session knows it */
    cuuint64_t cid = 0;
    CUgraph cg = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t ndeps = 0;
    CU(cuStreamGetCaptureInfo_v3(s, &st, &cid, &cg, &deps, &edges, &ndeps));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE && cg != NULL && ndeps == 1 && deps != NULL && deps[0] != NULL);
    CUgraphNode kernel_node = deps[0];
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(kernel_node, &type));
    CHECK(type == CU_GRAPH_NODE_TYPE_KERNEL, "the capture's last node is type %d", (int)type);

    uint32_t *h = malloc(N * 4), *out = malloc(N * 4), *out2 = malloc(N * 4);
    CHECK(h && out && out2);
    /* other streams are not capturing: host copies on them still work */
    CU(cuMemcpyDtoH_v2(h, a, 4));

    CU(cuMemcpyDtoDAsync_v2(b, a, N * 4, s));
    void *aargs[] = {&a, &b, &c, &n32};
    CU(cuLaunchKernel(add, 4, 1, 1, 128, 1, 1, 0, s, aargs, NULL));
    /* host work: c -> out, a function that looks at out, then a -> out2 */
    struct host_check hc = {0, 0, out, bits(3.0f), bits(4.0f)};
    CU(cuMemcpyDtoHAsync_v2(out, c, N * 4, s));
    CU(cuLaunchHostFunc(s, host_fn, &hc));
    CU(cuMemcpyDtoHAsync_v2(out2, a, N * 4, s));
    CHECK(hc.calls == 0, "a captured host function ran at capture time");
    CUgraph g = NULL;
    CU(cuStreamEndCapture(s, &g));
    CHECK(g != NULL);
    CU(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
    (void)n64;

    /* its nodes: the count, then the ids (the capture's ids again); as
     * many as natively: the host work added none */
    size_t count = 0;
    CU(cuGraphGetNodes(g, NULL, &count));
    CHECK(count == 7, "%zu nodes captured", count);
    CUgraphNode nodes[9];
    memset(nodes, 0xff, sizeof nodes);
    size_t cap = 9;
    CU(cuGraphGetNodes(g, nodes, &cap));
    CHECK(cap == 7 && nodes[7] == NULL && nodes[8] == NULL);
    CHECK(nodes[1] == kernel_node, "cuGraphGetNodes and cuStreamGetCaptureInfo disagree on a node's id");
    static const CUgraphNodeType want[7] = {CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_KERNEL,
                                            CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_KERNEL,
                                            CU_GRAPH_NODE_TYPE_MEMCPY, CU_GRAPH_NODE_TYPE_HOST,
                                            CU_GRAPH_NODE_TYPE_MEMCPY};
    for (int i = 0; i < 7; i++) {
        CU(cuGraphNodeGetType(nodes[i], &type));
        CHECK(type == want[i], "node %d: type %d, expected %d", i, (int)type, (int)want[i]);
    }
    cap = 2;
    CUgraphNode roots[2] = {0};
    CU(cuGraphGetRootNodes(g, roots, &cap));
    CHECK(cap == 1 && roots[0] == nodes[0]);

    /* replays recompute everything, and deliver the host work */
    CUgraphExec ge;
    CU(cuGraphInstantiateWithFlags(&ge, g, 0));
    CU(cuGraphUpload(ge, s));
    for (int k = 0; k < 3; k++) {
        CU(cuMemsetD8Async(c, 0xee, N * 4, s));
        memset(out, 0, N * 4);
        memset(out2, 0, N * 4);
        CU(cuGraphLaunch(ge, s));
        CU(cuStreamSynchronize(s));
        CU(cuMemcpyDtoH_v2(h, c, N * 4));
        int bad = 0, bad_out = 0, bad_out2 = 0;
        for (uint32_t i = 0; i < N; i++) {
            float want_c = i < N / 2 ? 3.0f : 4.0f, want_a = i < N / 2 ? 1.5f : 2.0f;
            bad += as_float(h[i]) != want_c;
            bad_out += as_float(out[i]) != want_c;
            bad_out2 += as_float(out2[i]) != want_a;
        }
        CHECK(!bad && !bad_out && !bad_out2, "launch %d: %d wrong on the device, %d and %d in client memory", k,
              bad, bad_out, bad_out2);
        CHECK(hc.calls == k + 1 && hc.saw_data == k + 1, "launch %d: the host function ran %d times, saw the copy %d",
              k, hc.calls, hc.saw_data);
    }
    memset(out, 0, N * 4);
    CU(cuGraphLaunch(ge, s));
    CU(cuGraphLaunch(ge, s)); /* two replays, one synchronization */
    CU(cuStreamSynchronize(s));
    CHECK(hc.calls == 5 && hc.saw_data == 5, "calls %d saw %d", hc.calls, hc.saw_data);

    /* a clone carries the host work; the original can go first */
    CUgraph g2;
    CUgraphExec ge2;
    CU(cuGraphClone(&g2, g));
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));
    CU(cuGraphInstantiateWithFlags(&ge2, g2, 0));
    memset(out2, 0, N * 4);
    CU(cuGraphLaunch(ge2, s));
    CU(cuStreamSynchronize(s));
    CHECK(hc.calls == 6 && as_float(out2[0]) == 1.5f && as_float(out2[N - 1]) == 2.0f);
    CU(cuGraphExecDestroy(ge2));
    CU(cuGraphDestroy(g2));
    free(h);
    free(out);
    free(out2);
    printf("ok capture: 7 nodes, replays deliver copies and run the host function, clone\n");
}

static void kernel_params_of(CUgraphNode node, CUfunction f, uint32_t value)
{
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0xcc, sizeof p);
    CU(cuGraphKernelNodeGetParams_v2(node, &p));
    CHECK(p.func == f && p.gridDimX == 4 && p.blockDimX == 128 && p.sharedMemBytes == 0 && p.kernelParams);
    uint32_t got;
    memcpy(&got, p.kernelParams[1], 4);
    CHECK(got == value, "kernel node parameter 1 is %u, expected %u", got, value);
}

static void hand_built(CUstream s, CUdeviceptr a, CUdeviceptr b)
{
    CUfunction fill = h_func("fill_u32");
    uint32_t value = 11;
    uint64_t n = N;
    void *args[] = {&a, &value, &n};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = fill;
    kp.gridDimX = 4, kp.gridDimY = 1, kp.gridDimZ = 1;
    kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
    kp.kernelParams = args;

    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode kn, cn;
    CU(cuGraphAddKernelNode_v2(&kn, g, NULL, 0, &kp));
    value = 99; /* the node copied the value when it was made */
    kernel_params_of(kn, fill, 11);

    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = a;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = b;
    cp.WidthInBytes = N * 4;
    cp.Height = 1;
    cp.Depth = 1;
    CU(cuGraphAddMemcpyNode(&cn, g, &kn, 1, &cp, NULL));
    CUDA_MEMCPY3D back;
    CU(cuGraphMemcpyNodeGetParams(cn, &back));
    CHECK(back.srcDevice == a && back.dstDevice == b && back.WidthInBytes == N * 4);
    /* a host-to-host node would have the server copy client memory to client memory */
    CUDA_MEMCPY3D hostcp = cp;
    hostcp.dstMemoryType = CU_MEMORYTYPE_HOST;
    hostcp.dstHost = &back;
    hostcp.srcMemoryType = CU_MEMORYTYPE_HOST;
    hostcp.srcHost = &back;
    hostcp.WidthInBytes = sizeof back;
    CUgraphNode bad;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddMemcpyNode(&bad, g, &kn, 1, &hostcp, NULL));

    CUgraphExec ge;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
    ip.hUploadStream = s;
    ip.result_out = (CUgraphInstantiateResult)77;
    CU(cuGraphInstantiateWithParams(&ge, g, &ip));
    CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS && ip.hErrNode_out == NULL);
    CU(cuGraphLaunch(ge, s));
    CU(cuStreamSynchronize(s));
    check_all(b, 11, "kernel node + memcpy node");

    /* the executable graph's copy of the node changes, the graph's does not */
    value = 22;
    CU(cuGraphExecKernelNodeSetParams_v2(ge, kn, &kp));
    CU(cuGraphLaunch(ge, s));
    CU(cuStreamSynchronize(s));
    check_all(b, 22, "after cuGraphExecKernelNodeSetParams");
    kernel_params_of(kn, fill, 11);

    /* the graph's node changes: a new instantiation sees it */
    value = 33;
    CU(cuGraphKernelNodeSetParams_v2(kn, &kp));
    kernel_params_of(kn, fill, 33);
    CUgraphExec ge2;
    CU(cuGraphInstantiateWithFlags(&ge2, g, 0));
    CU(cuGraphLaunch(ge2, s));
    CU(cuStreamSynchronize(s));
    check_all(b, 33, "re-instantiated");
    CU(cuGraphExecDestroy(ge2));
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));
    printf("ok hand-built graph: kernel node params packed, read back, updated; memcpy node\n");
}

/* The generic node API (cuGraphAddNode, cuGraph[Exec]NodeSetParams), as
 * XLA builds its command buffers: kernel, memset, memcpy and empty nodes. */
static void generic_nodes(CUstream s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c)
{
    uint32_t value = 5;
    uint64_t n = N;
    void *args[] = {&a, &value, &n};
    CUgraphNodeParams kp, mp, cp, ep;
    memset(&kp, 0, sizeof kp);
    kp.type = CU_GRAPH_NODE_TYPE_KERNEL;
    kp.kernel.func = h_func("fill_u32");
    kp.kernel.gridDimX = 4, kp.kernel.gridDimY = 1, kp.kernel.gridDimZ = 1;
    kp.kernel.blockDimX = 128, kp.kernel.blockDimY = 1, kp.kernel.blockDimZ = 1;
    kp.kernel.kernelParams = args;
    memset(&mp, 0, sizeof mp);
    mp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    mp.memset.dst = b, mp.memset.value = 0x42, mp.memset.elementSize = 4;
    mp.memset.width = N, mp.memset.height = 1, mp.memset.pitch = N * 4;
    memset(&cp, 0, sizeof cp);
    cp.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    cp.memcpy.copyParams.srcMemoryType = CU_MEMORYTYPE_DEVICE, cp.memcpy.copyParams.srcDevice = a;
    cp.memcpy.copyParams.dstMemoryType = CU_MEMORYTYPE_DEVICE, cp.memcpy.copyParams.dstDevice = c;
    cp.memcpy.copyParams.WidthInBytes = N * 4, cp.memcpy.copyParams.Height = 1, cp.memcpy.copyParams.Depth = 1;
    memset(&ep, 0, sizeof ep);
    ep.type = CU_GRAPH_NODE_TYPE_EMPTY;

    CUgraph g;
    CUgraphNode kn, mn, cn, en;
    CU(cuGraphCreate(&g, 0));
    CU(cuGraphAddNode_v2(&kn, g, NULL, NULL, 0, &kp));
    CU(cuGraphAddNode(&mn, g, NULL, 0, &mp));
    CU(cuGraphAddNode_v2(&cn, g, &kn, NULL, 1, &cp));
    CUgraphNode both[2] = {mn, cn};
    CUgraphEdgeData plain[2];
    memset(plain, 0, sizeof plain);
    CU(cuGraphAddNode_v2(&en, g, both, plain, 2, &ep));
    kernel_params_of(kn, h_func("fill_u32"), 5);
    CUgraphNodeParams sema; /* a type SCUDA does not forward */
    memset(&sema, 0, sizeof sema);
    sema.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    CUgraphNode bad;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &sema));

    CUgraphExec ge;
    CU(cuGraphInstantiateWithFlags(&ge, g, 0));
    CU(cuGraphLaunch(ge, s));
    CU(cuStreamSynchronize(s));
    check_all(b, 0x42, "memset node");
    check_all(c, 5, "kernel node, then memcpy node");

    value = 6;
    CU(cuGraphExecNodeSetParams(ge, kn, &kp));
    CU(cuGraphLaunch(ge, s));
    CU(cuStreamSynchronize(s));
    check_all(c, 6, "after cuGraphExecNodeSetParams");

    mp.memset.value = 0x43;
    CU(cuGraphNodeSetParams(mn, &mp));
    CUgraphExec ge2;
    CU(cuGraphInstantiateWithFlags(&ge2, g, 0));
    CU(cuGraphLaunch(ge2, s));
    CU(cuStreamSynchronize(s));
    check_all(b, 0x43, "after cuGraphNodeSetParams");
    CU(cuGraphExecDestroy(ge2));
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));
    printf("ok generic nodes: kernel, memset, memcpy, empty; set through the exec and the graph\n");
}

static void library_kernel_node(CUstream s, CUdeviceptr a)
{
    size_t len;
    char *ptx = h_read_file(h_ptx_path(), &len);
    CUlibrary lib;
    CU(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0));
    free(ptx);
    CUkernel k;
    CU(cuLibraryGetKernel(&k, lib, "fill_u32"));
    uint32_t value = 0xabcd;
    uint64_t n = N;
    void *args[] = {&a, &value, &n};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.kern = k; /* no function: the kernel, in the current context */
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraph g;
    CUgraphNode node;
    CUgraphExec ge;
    CU(cuGraphCreate(&g, 0));
    CU(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp));
    CU(cuGraphInstantiateWithFlags(&ge, g, 0));
    CU(cuGraphLaunch(ge, s));
    CU(cuStreamSynchronize(s));
    check_all(a, 0xabcd, "library kernel node");
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));

    /* A launch of the kernel itself, captured: the node's function is the
     * kernel's function in this context, which this client never looked
     * up. Its name and parameters still read back (cuDNN reads them). */
    CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    value = 0x1234;
    CU(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
    CU(cuStreamEndCapture(s, &g));
    size_t count = 1;
    CU(cuGraphGetNodes(g, &node, &count));
    CHECK(count == 1, "one captured node, not %zu", count);
    CUDA_KERNEL_NODE_PARAMS got;
    CU(cuGraphKernelNodeGetParams_v2(node, &got));
    const char *name = NULL;
    CU(cuFuncGetName(&name, got.func ? got.func : (CUfunction)got.kern));
    CHECK(name && strcmp(name, "fill_u32") == 0, "captured node's function is named %s", name ? name : "(null)");
    uint32_t v;
    memcpy(&v, got.kernelParams[1], 4);
    CHECK(v == 0x1234, "captured node's parameter 1 is %#x", v);
    CU(cuGraphDestroy(g));
    CU(cuLibraryUnload(lib));
    printf("ok kernel node of a library kernel\n");
}

int main(void)
{
    h_begin("graphs", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, c;
    CU(cuMemAlloc_v2(&a, N * 4));
    CU(cuMemAlloc_v2(&b, N * 4));
    CU(cuMemAlloc_v2(&c, N * 4));
    capture_and_replay(s, a, b, c);
    hand_built(s, a, b);
    library_kernel_node(s, a);
    generic_nodes(s, a, b, c);
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(b));
    CU(cuMemFree_v2(c));
    CU(cuStreamDestroy_v2(s));
    h_server_stop(&srv);
    printf("PASS graphs\n");
    return 0;
}
