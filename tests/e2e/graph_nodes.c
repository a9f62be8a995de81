/* graph_nodes.c - graph node types that replay client work or name
 * session objects, through SCUDA:
 * - host nodes added by hand: each launch runs the client's function,
 *   before the synchronize that observes the graph done returns; the node's
 *   parameters come back as the application gave them; set on the graph's
 *   node (later instantiations and clones see it, an earlier executable
 *   graph does not) and on an executable graph's node; added through
 *   cuGraphAddNode;
 * - a client that dies with host work pending does not hold up its server;
 * - kernel node attributes, cuGraphExecUpdate and memory allocation nodes
 *   (below, as the stand-in models them). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static int runs_a, runs_b, runs_c, runs_d;
static void CUDA_CB count(void *p) { ++*(int *)p; }
static void CUDA_CB count2(void *p) { ++*(int *)p; }

static CUgraphNode add_fill(CUgraph g, CUdeviceptr buf, uint32_t value, const CUgraphNode *deps, size_t n)
{
    uint64_t n64 = 256;
    void *args[] = {&buf, &value, &n64};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = h_func("fill_u32");
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 256, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraphNode node;
    CU(cuGraphAddKernelNode_v2(&node, g, deps, n, &kp));
    return node;
}

static void launch_sync(CUgraphExec e, CUstream s)
{
    CU(cuGraphLaunch(e, s));
    CU(cuStreamSynchronize(s));
}

static void host_nodes(CUstream s, CUdeviceptr buf)
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill(g, buf, 7, NULL, 0);
    CUDA_HOST_NODE_PARAMS hp = {count, &runs_a};
    CUgraphNode h;
    CU(cuGraphAddHostNode(&h, g, &k, 1, &hp));
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(h, &type));
    CHECK(type == CU_GRAPH_NODE_TYPE_HOST, "node type %d", (int)type);

    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int i = 0; i < 3; i++) {
        launch_sync(e, s);
        CHECK(runs_a == i + 1, "launch %d: the host node ran %d times, expected %d", i, runs_a, i + 1);
    }
    CUDA_HOST_NODE_PARAMS q = {NULL, NULL};
    CU(cuGraphHostNodeGetParams(h, &q));
    CHECK(q.fn == count && q.userData == &runs_a, "the node's parameters came back changed");

    /* set on the graph's node: a new instantiation runs it, e does not */
    CUDA_HOST_NODE_PARAMS hb = {count2, &runs_b};
    CU(cuGraphHostNodeSetParams(h, &hb));
    CU(cuGraphHostNodeGetParams(h, &q));
    CHECK(q.fn == count2 && q.userData == &runs_b);
    CUgraphExec e2;
    CU(cuGraphInstantiateWithFlags(&e2, g, 0));
    launch_sync(e2, s);
    launch_sync(e, s);
    CHECK(runs_b == 1 && runs_a == 4, "after the set: new exec ran b %d times (1), old exec ran a %d (4)", runs_b,
          runs_a);

    /* set on an executable graph's node */
    CUDA_HOST_NODE_PARAMS hc = {count, &runs_c};
    CU(cuGraphExecHostNodeSetParams(e, h, &hc));
    launch_sync(e, s);
    CHECK(runs_c == 1 && runs_a == 4, "exec set: c ran %d times (1), a %d (4)", runs_c, runs_a);

    /* a clone's node runs the graph's current function */
    CUgraph g2;
    CUgraphNode nodes[2], h2 = NULL;
    size_t nn = 2;
    CU(cuGraphClone(&g2, g));
    CU(cuGraphGetNodes(g2, nodes, &nn));
    for (size_t i = 0; i < nn; i++)
        if (cuGraphNodeGetType(nodes[i], &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_HOST) h2 = nodes[i];
    CHECK(nn == 2 && h2, "the clone has %zu nodes", nn);
    CU(cuGraphHostNodeGetParams(h2, &q));
    CHECK(q.fn == count2 && q.userData == &runs_b, "the clone's host node has other parameters");
    CU(cuGraphDestroy(g)); /* the clone keeps the node's function alive */
    CUgraphExec e3;
    CU(cuGraphInstantiateWithFlags(&e3, g2, 0));
    launch_sync(e3, s);
    CHECK(runs_b == 2, "the clone's executable graph ran b %d times (2)", runs_b);

    /* the generic call */
    CUgraph g4;
    CU(cuGraphCreate(&g4, 0));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    np.host.fn = count;
    np.host.userData = &runs_d;
    CUgraphNode h4;
    CU(cuGraphAddNode(&h4, g4, NULL, 0, &np));
    CUgraphExec e4;
    CU(cuGraphInstantiateWithFlags(&e4, g4, 0));
    launch_sync(e4, s);
    launch_sync(e4, s);
    CHECK(runs_d == 2, "a host node added with cuGraphAddNode ran %d times (2)", runs_d);

    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphHostNodeGetParams(k, &q)); /* a kernel node */
    CUDA_HOST_NODE_PARAMS bad = {NULL, NULL};
    CUgraphNode hx;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphAddHostNode(&hx, g4, NULL, 0, &bad));

    CU(cuGraphExecDestroy(e));
    CU(cuGraphExecDestroy(e2));
    CU(cuGraphExecDestroy(e3));
    CU(cuGraphExecDestroy(e4));
    CU(cuGraphDestroy(g2));
    CU(cuGraphDestroy(g4));
    printf("ok host nodes: launches run the client's function; get, set, exec set, clones, cuGraphAddNode\n");
}

/* A client that launches a graph with a host node and dies before it
 * waits: the session never waits for the client's function. */
static int dying_client(void *arg)
{
    (void)arg;
    h_cuda_setup();
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUDA_HOST_NODE_PARAMS hp = {count, &runs_a};
    CUgraphNode h;
    CU(cuGraphAddHostNode(&h, g, NULL, 0, &hp));
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    for (int i = 0; i < 50; i++) CU(cuGraphLaunch(e, s));
    _exit(0); /* no synchronize, no exit handlers: the host work is never asked for */
}

int main(void)
{
    h_begin("graph_nodes", 40);
    struct h_server srv;
    h_server_start(&srv, "main", NULL);

    h_wait_ok(h_spawn(dying_client, NULL, 20, -1, -1), 20000, "a client that dies with host work pending");

    h_cuda_setup();
    CUstream s;
    CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr buf;
    CU(cuMemAlloc_v2(&buf, 1024));
    host_nodes(s, buf);
    h_copy_round_trip(5); /* the session serves on after all of it */
    CU(cuMemFree_v2(buf));
    CU(cuStreamDestroy_v2(s));
    h_server_stop(&srv);
    printf("PASS graph_nodes\n");
    return 0;
}
