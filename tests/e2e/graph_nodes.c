/* graph_nodes.c - graph node types that replay client work or name
 * session objects, through SCUDA:
 * - host nodes added by hand: each launch runs the client's function,
 *   before the synchronize that observes the graph done returns; the node's
 *   parameters come back as the application gave them; set on the graph's
 *   node (later instantiations and clones see it, an earlier executable
 *   graph does not) and on an executable graph's node; added through
 *   cuGraphAddNode;
 * - a client that dies with host work pending does not hold up its server;
 * - kernel node attributes, cuGraphExecUpdate, memory allocation nodes
 *   and batch memory-operation nodes (below, as the stand-in models them);
 * - cuGraphDebugDotPrint writes the client's path;
 * - a user object's destructor runs in the client when the last
 *   reference goes;
 * - conditional nodes' body graphs come back from the add, and child
 *   graphs are added with cuGraphAddNode;
 * - nodes added after more dependencies than the client keeps on its
 *   stack. */
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

    CUgraphNode k2 = nodes[0] == h2 ? nodes[1] : nodes[0]; /* the clone's kernel node */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphHostNodeGetParams(k2, &q));
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

static uint32_t first_word(CUdeviceptr buf)
{
    uint32_t v = 0;
    CU(cuMemcpyDtoH_v2(&v, buf, 4));
    return v;
}

/* Kernel node attributes: the member the id names travels both ways. */
static void kernel_attrs(CUdeviceptr buf)
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill(g, buf, 1, NULL, 0);
    CUkernelNodeAttrValue v;
    memset(&v, 0, sizeof v);
    v.priority = 3;
    CU(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    memset(&v, 0, sizeof v);
    v.clusterDim.x = 2, v.clusterDim.y = 1, v.clusterDim.z = 1;
    CU(cuGraphKernelNodeSetAttribute(k, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v));
    memset(&v, 0xee, sizeof v);
    CU(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v));
    CHECK(v.priority == 3, "priority came back as %d", v.priority);
    CU(cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, &v));
    CHECK(v.clusterDim.x == 2 && v.clusterDim.y == 1 && v.clusterDim.z == 1, "cluster dim %u %u %u", v.clusterDim.x,
          v.clusterDim.y, v.clusterDim.z);
    /* a stream-only attribute: the driver's answer, not a guess */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuGraphKernelNodeGetAttribute(k, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v));
    CU(cuGraphDestroy(g));
    printf("ok kernel node attributes: priority and cluster dimension set and read back\n");
}

/* cuGraphExecUpdate: a graph of the same shape updates the executable
 * graph; one of another shape names the node at fault by its handle. */
static void exec_update(CUstream s, CUdeviceptr buf)
{
    CUgraph g1, g2, g3;
    CU(cuGraphCreate(&g1, 0));
    add_fill(g1, buf, 11, NULL, 0);
    CU(cuGraphCreate(&g2, 0));
    add_fill(g2, buf, 22, NULL, 0);
    CU(cuGraphCreate(&g3, 0));
    CUgraphNode e3;
    CU(cuGraphAddEmptyNode(&e3, g3, NULL, 0));
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g1, 0));
    launch_sync(e, s);
    CHECK(first_word(buf) == 11);
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0xff, sizeof info);
    CU(cuGraphExecUpdate_v2(e, g2, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS && !info.errorNode && !info.errorFromNode);
    launch_sync(e, s);
    CHECK(first_word(buf) == 22, "after the update the graph wrote %u, expected 22", first_word(buf));
    memset(&info, 0, sizeof info);
    CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate_v2(e, g3, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED && info.errorNode == e3,
          "result %d, error node %p (expected %p)", (int)info.result, (void *)info.errorNode, (void *)e3);
    CUgraphNode err = NULL;
    CUgraphExecUpdateResult res = CU_GRAPH_EXEC_UPDATE_SUCCESS;
    CU_EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, cuGraphExecUpdate(e, g3, &err, &res)); /* the pre-12.0 export */
    CHECK(res == CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED && err == e3);
    launch_sync(e, s);
    CHECK(first_word(buf) == 22, "a failed update changed the graph");
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g1));
    CU(cuGraphDestroy(g2));
    CU(cuGraphDestroy(g3));
    printf("ok cuGraphExecUpdate: updated, and a mismatch names the client's node\n");
}

/* An allocation node's address is device memory to the client: a kernel
 * node writes it, a copy reads it, its pointer attributes say device. */
static void alloc_nodes(CUstream s)
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    ap.accessDescs = &acc;
    ap.accessDescCount = 1;
    ap.bytesize = 1024;
    CUgraphNode an;
    CU(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap));
    CHECK(ap.dptr != 0, "the allocation node returned no address");
    add_fill(g, ap.dptr, 33, &an, 1);
    CUDA_MEM_ALLOC_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    CU(cuGraphMemAllocNodeGetParams(an, &q));
    CHECK(q.dptr == ap.dptr && q.bytesize == 1024 && q.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE,
          "the node's parameters came back changed");
    unsigned type = 0;
    CU(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ap.dptr));
    CHECK(type == CU_MEMORYTYPE_DEVICE, "the allocation's memory type is %u", type);
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CHECK(first_word(ap.dptr) == 33, "the kernel node wrote %u into the allocation", first_word(ap.dptr));
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));
    printf("ok allocation nodes: the address is device memory to the client\n");
}

/* Batch memory-operation nodes: the operations travel both ways; each
 * launch writes the values; set on the graph's node, on the executable
 * graph's node, and added with cuGraphAddNode. */
static void mem_op_nodes(CUstream s, CUdeviceptr buf)
{
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = buf;
    ops[0].writeValue.value = 0xabcd0001u;
    ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[1].writeValue.address = buf + 8;
    ops[1].writeValue.value64 = 0x1122334455667788ull;
    CUDA_BATCH_MEM_OP_NODE_PARAMS p = {ctx, 2, ops, 0};
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill(g, buf, 0, NULL, 0);
    CUgraphNode n;
    CU(cuGraphAddBatchMemOpNode(&n, g, &k, 1, &p));
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(n, &type));
    CHECK(type == CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "node type %d", (int)type);
    CUDA_BATCH_MEM_OP_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    CU(cuGraphBatchMemOpNodeGetParams(n, &q));
    CHECK(q.ctx == ctx && q.count == 2 && q.paramArray && q.paramArray != ops && q.flags == 0,
          "the node's parameters came back changed");
    CHECK(q.paramArray[1].writeValue.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64 &&
              q.paramArray[1].writeValue.address == buf + 8 &&
              q.paramArray[1].writeValue.value64 == 0x1122334455667788ull,
          "the node's second operation came back changed");
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    uint32_t w[4];
    CU(cuMemcpyDtoH_v2(w, buf, sizeof w));
    CHECK(w[0] == 0xabcd0001u && w[1] == 0 && w[2] == 0x55667788u && w[3] == 0x11223344u,
          "the launch wrote %08x %08x %08x %08x", w[0], w[1], w[2], w[3]);

    /* set on the graph's node: a new instantiation writes 2; e still writes 0xabcd0001 */
    ops[0].writeValue.value = 2;
    p.count = 1;
    CU(cuGraphBatchMemOpNodeSetParams(n, &p));
    CUgraphExec e2;
    CU(cuGraphInstantiateWithFlags(&e2, g, 0));
    launch_sync(e2, s);
    CHECK(first_word(buf) == 2, "the set node wrote %08x", first_word(buf));
    launch_sync(e, s);
    CHECK(first_word(buf) == 0xabcd0001u, "the earlier executable graph wrote %08x", first_word(buf));
    /* set on the executable graph's node */
    ops[0].writeValue.value = 3;
    CU(cuGraphExecBatchMemOpNodeSetParams(e, n, &p));
    launch_sync(e, s);
    CHECK(first_word(buf) == 3, "after the exec set the graph wrote %08x", first_word(buf));

    /* the generic calls */
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    np.memOp.ctx = ctx;
    np.memOp.count = 1;
    np.memOp.paramArray = ops;
    ops[0].writeValue.value = 4;
    CUgraph g2;
    CU(cuGraphCreate(&g2, 0));
    CUgraphNode n2;
    CU(cuGraphAddNode(&n2, g2, NULL, 0, &np));
    CUgraphExec e3;
    CU(cuGraphInstantiateWithFlags(&e3, g2, 0));
    launch_sync(e3, s);
    CHECK(first_word(buf) == 4, "a node added with cuGraphAddNode wrote %08x", first_word(buf));
    ops[0].writeValue.value = 5;
    CU(cuGraphExecNodeSetParams(e3, n2, &np));
    launch_sync(e3, s);
    CHECK(first_word(buf) == 5, "after cuGraphExecNodeSetParams the graph wrote %08x", first_word(buf));
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuGraphBatchMemOpNodeGetParams(k, &q));

    CU(cuGraphExecDestroy(e));
    CU(cuGraphExecDestroy(e2));
    CU(cuGraphExecDestroy(e3));
    CU(cuGraphDestroy(g));
    CU(cuGraphDestroy(g2));
    printf("ok batch memory-operation nodes: writes at each launch; get, set, exec set, cuGraphAddNode\n");
}

/* cuGraphDebugDotPrint: the driver's text lands at the application's
 * path, on the client; a path the client cannot write is its error. */
static void dot_print(CUdeviceptr buf)
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill(g, buf, 1, NULL, 0), em;
    CU(cuGraphAddEmptyNode(&em, g, &k, 1));
    char dir[] = "/tmp/e2e-graph-dot-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[64], bad[96];
    snprintf(path, sizeof path, "%s/g.dot", dir);
    snprintf(bad, sizeof bad, "%s/missing/g.dot", dir);
    CU(cuGraphDebugDotPrint(g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE));
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cuGraphDebugDotPrint wrote no file at %s", path);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    CHECK(strstr(text, "digraph") && strstr(text, "->") && strstr(text, "}"),
          "the file is not the graph's dot text: %s", text);
    CU_EXPECT(CUDA_ERROR_OPERATING_SYSTEM, cuGraphDebugDotPrint(g, bad, 0));
    unlink(path);
    rmdir(dir);
    CU(cuGraphDestroy(g));
    printf("ok cuGraphDebugDotPrint: the text is written at the client's path\n");
}

/* User objects: the destructor is the client's and runs here once, when
 * the session's last reference goes: the graph's and its executable
 * graph's, or the object's own released by hand. */
static int destroyed_a, destroyed_b;
static void CUDA_CB destroy_count(void *p) { ++*(int *)p; }

static void user_objects(CUstream s, CUdeviceptr buf)
{
    CUuserObject oa, ob;
    CU(cuUserObjectCreate(&oa, &destroyed_a, destroy_count, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    add_fill(g, buf, 9, NULL, 0);
    CU(cuGraphRetainUserObject(g, oa, 1, CU_GRAPH_USER_OBJECT_MOVE)); /* the graph holds the only reference */
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CU(cuGraphDestroy(g));
    CU(cuCtxSynchronize());
    CHECK(destroyed_a == 0, "the destructor ran while the executable graph holds the object");
    CU(cuGraphExecDestroy(e));
    CU(cuCtxSynchronize());
    CHECK(destroyed_a == 1, "the destructor ran %d times after the last reference went (1)", destroyed_a);

    CU(cuUserObjectCreate(&ob, &destroyed_b, destroy_count, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CU(cuUserObjectRelease(ob, 1));
    CU(cuCtxSynchronize());
    CHECK(destroyed_b == 0, "the destructor ran with a reference left");
    CU(cuUserObjectRetain(ob, 1));
    CU(cuUserObjectRelease(ob, 2));
    CU(cuCtxSynchronize());
    CU(cuCtxSynchronize());
    CHECK(destroyed_b == 1 && destroyed_a == 1, "destructors ran %d and %d times (1, 1)", destroyed_b, destroyed_a);
    CUuserObject bad;
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE,
              cuUserObjectCreate(&bad, NULL, NULL, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    printf("ok user objects: the client's destructor runs once, when the last reference goes\n");
}

/* More dependencies than the client keeps on its stack (graph.h,
 * GRAPH_ADD_SMALL_DEPS): each add sends all of them, as the ids the
 * driver knows (the stand-in refuses a dependency outside the graph), and
 * the launch runs the nodes after them. */
#define MANY_DEPS 40
static void many_dependencies(CUstream s, CUdeviceptr buf)
{
    CUgraph g;
    CU(cuGraphCreate(&g, 0));
    CUgraphNode deps[MANY_DEPS];
    for (int i = 0; i < MANY_DEPS; i++) CU(cuGraphAddEmptyNode(&deps[i], g, NULL, 0));
    int runs = 0;
    CUDA_HOST_NODE_PARAMS hp = {count, &runs};
    CUgraphNode host;
    CU(cuGraphAddHostNode(&host, g, deps, MANY_DEPS, &hp));
    add_fill(g, buf, 44, deps, MANY_DEPS);
    CUstreamBatchMemOpParams op;
    memset(&op, 0, sizeof op);
    op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    op.writeValue.address = buf + 512 * sizeof(uint32_t);
    op.writeValue.value = 0x4444u;
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CUDA_BATCH_MEM_OP_NODE_PARAMS mp = {ctx, 1, &op, 0};
    CUgraphNode mem_op;
    CU(cuGraphAddBatchMemOpNode(&mem_op, g, deps, MANY_DEPS, &mp));
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CHECK(runs == 1, "the host node after %d dependencies ran %d times", MANY_DEPS, runs);
    CHECK(first_word(buf) == 44, "the kernel node after %d dependencies wrote %u", MANY_DEPS, first_word(buf));
    uint32_t word;
    CU(cuMemcpyDtoH_v2(&word, buf + 512 * sizeof(uint32_t), sizeof word));
    CHECK(word == 0x4444u, "the memory-operation node after %d dependencies wrote %#x", MANY_DEPS, word);
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));
    printf("ok %d dependencies: host, kernel and memory-operation nodes are added after all of them\n", MANY_DEPS);
}

/* A conditional node with its handle: the driver's body graphs come back
 * as handles this client can add nodes to. */
static CUgraphNode add_cond(CUgraph g, CUgraphConditionalNodeType type, unsigned size, unsigned value,
                            const CUgraphNode *deps, size_t n, CUgraph *bodies)
{
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CUgraphConditionalHandle h;
    CU(cuGraphConditionalHandleCreate(&h, g, ctx, value, CU_GRAPH_COND_ASSIGN_DEFAULT));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    np.conditional.handle = h;
    np.conditional.type = type;
    np.conditional.size = size;
    np.conditional.ctx = ctx;
    CUgraphNode node;
    CU(cuGraphAddNode(&node, g, deps, n, &np));
    CHECK(np.conditional.phGraph_out != NULL, "no body graphs came back");
    for (unsigned i = 0; i < size; i++) {
        bodies[i] = np.conditional.phGraph_out[i];
        CHECK(bodies[i] != NULL, "body %u is NULL", i);
    }
    return node;
}

/* Conditional nodes (IF with an else body, WHILE) as the stand-in models
 * them: the value is the handle's default at each launch (a kernel cannot
 * set it there); and child graphs added with cuGraphAddNode, copied or
 * moved in. */
static void conditional_nodes(CUstream s, CUdeviceptr buf)
{
    CUgraph g, body[2];
    CU(cuGraphCreate(&g, 0));
    CUgraphNode k = add_fill(g, buf, 1, NULL, 0);
    CUgraphNode c = add_cond(g, CU_GRAPH_COND_TYPE_IF, 1, 1, &k, 1, body);
    CUgraphNodeType type;
    CU(cuGraphNodeGetType(c, &type));
    CHECK(type == CU_GRAPH_NODE_TYPE_CONDITIONAL, "node type %d", (int)type);
    add_fill(body[0], buf, 41, NULL, 0);
    /* host work in a body cannot be delivered: refused, not lost */
    CUDA_HOST_NODE_PARAMS hp = {count, &runs_d};
    CUgraphNode hx;
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddHostNode(&hx, body[0], NULL, 0, &hp));
    uint32_t host[4];
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = buf;
    cp.dstMemoryType = CU_MEMORYTYPE_HOST;
    cp.dstHost = host;
    cp.WidthInBytes = sizeof host;
    cp.Height = cp.Depth = 1;
    CUcontext ctx;
    CU(cuCtxGetCurrent(&ctx));
    CU_EXPECT(CUDA_ERROR_NOT_SUPPORTED, cuGraphAddMemcpyNode(&hx, body[0], NULL, 0, &cp, ctx));
    CUgraphExec e;
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CHECK(first_word(buf) == 41, "a true IF node's body wrote %u (41)", first_word(buf));
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));

    CU(cuGraphCreate(&g, 0));
    k = add_fill(g, buf, 2, NULL, 0);
    add_cond(g, CU_GRAPH_COND_TYPE_IF, 2, 0, &k, 1, body);
    add_fill(body[0], buf, 43, NULL, 0);
    add_fill(body[1], buf, 42, NULL, 0);
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CHECK(first_word(buf) == 42, "a false IF node ran %u (its else body writes 42)", first_word(buf));
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));

    CU(cuGraphCreate(&g, 0));
    k = add_fill(g, buf, 3, NULL, 0);
    add_cond(g, CU_GRAPH_COND_TYPE_WHILE, 1, 0, &k, 1, body);
    add_fill(body[0], buf, 44, NULL, 0);
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    CHECK(first_word(buf) == 3, "a WHILE node whose value is 0 ran its body (%u)", first_word(buf));
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));

    /* child graphs: copied (the child stays the application's) and moved */
    CUgraph copied, moved;
    CU(cuGraphCreate(&g, 0));
    CU(cuGraphCreate(&copied, 0));
    CU(cuGraphCreate(&moved, 0));
    add_fill(copied, buf, 50, NULL, 0);
    add_fill(moved, buf + 256 * 4, 51, NULL, 0);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.graph = copied;
    np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE;
    CUgraphNode n1, n2;
    CU(cuGraphAddNode(&n1, g, NULL, 0, &np));
    np.graph.graph = moved;
    np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CU(cuGraphAddNode(&n2, g, &n1, 1, &np));
    CU(cuGraphDestroy(copied));
    CU(cuGraphInstantiateWithFlags(&e, g, 0));
    launch_sync(e, s);
    uint32_t second = 0;
    CU(cuMemcpyDtoH_v2(&second, buf + 256 * 4, 4));
    CHECK(first_word(buf) == 50 && second == 51, "the child graphs wrote %u and %u (50, 51)", first_word(buf),
          second);
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g)); /* and the moved child with it */
    printf("ok conditional nodes (IF, IF/else, WHILE; host work in a body refused) and child graphs copied or moved "
           "with cuGraphAddNode\n");
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
    CU(cuMemAlloc_v2(&buf, 4096)); /* two fills of 256 words */
    host_nodes(s, buf);
    kernel_attrs(buf);
    exec_update(s, buf);
    alloc_nodes(s);
    mem_op_nodes(s, buf);
    dot_print(buf);
    user_objects(s, buf);
    conditional_nodes(s, buf);
    many_dependencies(s, buf);
    h_copy_round_trip(5); /* the session serves on after all of it */
    CU(cuMemFree_v2(buf));
    CU(cuStreamDestroy_v2(s));
    h_server_stop(&srv);
    printf("PASS graph_nodes\n");
    return 0;
}
