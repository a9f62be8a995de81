/* graph.h - what the graph files of the client share (graph.c,
 * graph_add.c, graph_host_node.c, graph_mem.c, graph_mem_op.c,
 * graph_node.c, graph_update.c, graph_attr.c). */
#ifndef SCUDA_CLIENT_GRAPH_H
#define SCUDA_CLIENT_GRAPH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "rpc.h"
#include "../common/idmap.h"

/* Dependencies up to this many travel from a buffer on the stack. */
#define GRAPH_ADD_SMALL_DEPS 32

/* One node being added by a hand-written cuGraphAdd*Node. Every add
 * checks its handle out and its dependencies, gets a new node id, sends
 * the dependencies as wire ids and hands the node out only when the
 * session made it; the calls differ only in their message:
 *
 *     struct graph_add a;
 *     CUresult r = graph_add_begin(&a, phGraphNode, dependencies, numDependencies);
 *     if (r != CUDA_SUCCESS) return r;
 *     struct msg_X_req m = {.node = a.node, .deps = a.deps, .deps_count = a.deps_count, ...};
 *     msg_X_req_put(graph_add_request(&a, OP_X), &m);
 *     r = graph_add_sync(&a);
 *     ... a reply, if any, is read from a.c.out while r == CUDA_SUCCESS ...
 *     return graph_add_end(&a, r, phGraphNode);
 *
 * graph_add_end also ends an add that failed before its request (its
 * own preparation failed): every path after a successful begin ends. */
struct graph_add {
    uint64_t node;        /* the new node's id */
    const uint64_t *deps; /* its dependencies as wire ids */
    uint32_t deps_count;
    rpc_call c;    /* valid from graph_add_request to graph_add_end */
    int requested; /* graph_add_request was called */
    uint64_t small[GRAPH_ADD_SMALL_DEPS], *heap;
};

/* CUDA_ERROR_INVALID_VALUE for no ph, dependencies missing or more than
 * GRAPH_MAX_DEPS; CUDA_ERROR_OUT_OF_MEMORY when their ids do not fit in
 * memory. Nothing to end unless it returns CUDA_SUCCESS. */
CUresult graph_add_begin(struct graph_add *a, CUgraphNode *ph, const CUgraphNode *deps, size_t n);
/* Begins the call of op: the request to put the message into. */
wire_buf *graph_add_request(struct graph_add *a, uint16_t op);
/* Sends the request and waits for the session's answer. */
CUresult graph_add_sync(struct graph_add *a);
/* Ends the add; on success (r == CUDA_SUCCESS) hands the node out in *ph.
 * Returns r. */
CUresult graph_add_end(struct graph_add *a, CUresult r, CUgraphNode *ph);

/* A query's array handed to the application stays the node's, as the
 * driver's does, until the next query of that node: a copy of the bytes
 * replaces the node's earlier one in `kept`. Returns the copy (NULL for
 * no bytes); *r becomes CUDA_ERROR_OUT_OF_MEMORY when it cannot be kept. */
void *graph_keep_copy(struct idmap *kept, CUgraphNode node, const void *bytes, size_t n, CUresult *r);

#endif
