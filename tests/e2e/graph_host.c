/* graph_host.c - graphs whose copies touch client memory, through SCUDA.
 *
 * A graph replays on the server; its copies from client memory read the
 * bytes the client has at each cuGraphLaunch, and its copies into client
 * memory deliver each launch's results:
 * - built by hand: a memcpy node from pageable host memory, a kernel, a
 *   memcpy node into host memory; launched several times with the host
 *   buffer changed between launches; the node's parameters come back with
 *   the application's host address;
 * - the same from pinned memory (cuMemHostAlloc);
 * - the same built by stream capture (cuMemcpyHtoDAsync/DtoHAsync). */
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

static void fill(float *in, float base)
{
    for (uint32_t i = 0; i < N; i++) in[i] = base + (float)i;
}

/* out must be in + in for every element */
static void check_doubled(const float *in, const uint32_t *out, const char *what, int launch)
{
    int bad = 0;
    for (uint32_t i = 0; i < N; i++) bad += as_float(out[i]) != 2.0f * in[i];
    CHECK(!bad, "%s, launch %d: %d of %u results wrong (out[1] = %g, in[1] = %g)", what, launch, bad, N,
          as_float(out[1]), in[1]);
}

static CUDA_MEMCPY3D linear_copy(size_t bytes)
{
    CUDA_MEMCPY3D p;
    memset(&p, 0, sizeof p);
    p.WidthInBytes = bytes;
    p.Height = 1;
    p.Depth = 1;
    return p;
}

/* in -> a (host to device), c = a + a, c -> out (device to host) */
static void built(CUstream s, CUdeviceptr a, CUdeviceptr c, float *in, uint32_t *out, const char *what)
{
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D up = linear_copy(N * 4);
    up.srcMemoryType = CU_MEMORYTYPE_HOST;
    up.srcHost = in;
    up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    up.dstDevice = a;
    CUgraphNode n_up, n_k, n_down;
    CU(cuGraphAddMemcpyNode(&n_up, g, NULL, 0, &up, ctx));
    int n32 = (int)N;
    void *args[] = {&a, &a, &c, &n32};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = h_func("vec_add");
    kp.gridDimX = 4, kp.gridDimY = 1, kp.gridDimZ = 1;
    kp.blockDimX = 128, kp.blockDimY = 1, kp.blockDimZ = 1;
    kp.kernelParams = args;
    CU(cuGraphAddKernelNode_v2(&n_k, g, &n_up, 1, &kp));
    CUDA_MEMCPY3D down = linear_copy(N * 4);
    down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    down.srcDevice = c;
    down.dstMemoryType = CU_MEMORYTYPE_HOST;
    down.dstHost = out;
    CU(cuGraphAddMemcpyNode(&n_down, g, &n_k, 1, &down, ctx));

    /* the node comes back as the application made it */
    CUDA_MEMCPY3D q;
    CU(cuGraphMemcpyNodeGetParams(n_up, &q));
    CHECK(q.srcMemoryType == CU_MEMORYTYPE_HOST && q.srcHost == in && q.dstDevice == a && q.WidthInBytes == N * 4);
    CU(cuGraphMemcpyNodeGetParams(n_down, &q));
    CHECK(q.dstMemoryType == CU_MEMORYTYPE_HOST && q.dstHost == out);

    CUgraphExec ge;
    CU(cuGraphInstantiateWithFlags(&ge, g, 0));
    for (int k = 0; k < 3; k++) {
        fill(in, 10.0f * (float)(k + 1)); /* each launch must see the bytes as they are now */
        memset(out, 0, N * 4);
        CU(cuGraphLaunch(ge, s));
        CU(cuStreamSynchronize(s));
        check_doubled(in, out, what, k);
    }
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));
    printf("ok %s: 3 launches read the host buffer as it was and delivered their results\n", what);
}

static void captured(CUstream s, CUdeviceptr a, CUdeviceptr c, float *in, uint32_t *out)
{
    int n32 = (int)N;
    void *args[] = {&a, &a, &c, &n32};
    CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    fill(in, -1.0f); /* what the capture sees does not matter: each launch reads anew */
    CU(cuMemcpyHtoDAsync_v2(a, in, N * 4, s));
    CU(cuLaunchKernel(h_func("vec_add"), 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
    CU(cuMemcpyDtoHAsync_v2(out, c, N * 4, s));
    CUgraph g;
    CU(cuStreamEndCapture(s, &g));
    size_t count = 0;
    CU(cuGraphGetNodes(g, NULL, &count));
    CHECK(count == 3, "%zu nodes captured, expected 3 (copy, kernel, copy)", count);
    CUgraphExec ge;
    CU(cuGraphInstantiateWithFlags(&ge, g, 0));
    for (int k = 0; k < 3; k++) {
        fill(in, 100.0f * (float)(k + 1));
        memset(out, 0, N * 4);
        CU(cuGraphLaunch(ge, s));
        CU(cuStreamSynchronize(s));
        check_doubled(in, out, "captured", k);
    }
    /* a clone's executable graph reads the same client memory */
    CUgraph g2;
    CUgraphExec ge2;
    CU(cuGraphClone(&g2, g));
    CU(cuGraphInstantiateWithFlags(&ge2, g2, 0));
    fill(in, 7.0f);
    CU(cuGraphLaunch(ge2, s));
    CU(cuStreamSynchronize(s));
    check_doubled(in, out, "captured, cloned", 0);
    CU(cuGraphExecDestroy(ge2));
    CU(cuGraphDestroy(g2));
    CU(cuGraphExecDestroy(ge));
    CU(cuGraphDestroy(g));
    printf("ok captured: host-to-device and device-to-host copies replay with the current bytes\n");
}

int main(void)
{
    h_begin("graph_host", 25);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);
    h_cuda_setup();
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, c;
    CU(cuMemAlloc_v2(&a, N * 4));
    CU(cuMemAlloc_v2(&c, N * 4));
    float *in = malloc(N * 4);
    uint32_t *out = malloc(N * 4);
    CHECK(in && out);
    built(s, a, c, in, out, "built, pageable");
    void *pin_in, *pin_out;
    CU(cuMemHostAlloc(&pin_in, N * 4, 0));
    CU(cuMemHostAlloc(&pin_out, N * 4, 0));
    built(s, a, c, pin_in, pin_out, "built, pinned");
    captured(s, a, c, in, out);
    CU(cuMemFreeHost(pin_in));
    CU(cuMemFreeHost(pin_out));
    free(in);
    free(out);
    CU(cuMemFree_v2(a));
    CU(cuMemFree_v2(c));
    CU(cuStreamDestroy_v2(s));
    h_server_stop(&srv);
    printf("PASS graph_host\n");
    return 0;
}
