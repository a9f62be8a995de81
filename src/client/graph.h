/* graph.h - what the graph files of the client share (graph.c,
 * graph_host_node.c, graph_mem.c, graph_update.c, graph_attr.c). */
#ifndef SCUDA_CLIENT_GRAPH_H
#define SCUDA_CLIENT_GRAPH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Node handles as wire ids, in `small` (cap elements) or in *heap (free
 * it). NULL when out of memory. */
const uint64_t *graph_node_ids(const CUgraphNode *nodes, size_t n, uint64_t *small, size_t cap, uint64_t **heap);

#endif
