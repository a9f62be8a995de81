/* graph_add.c - see graph.h: the steps every hand-written add of a graph
 * node shares, so that each add says only what its node carries, and the
 * arrays node queries hand out, kept per node. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "../common/messages.gen.h"

CUresult graph_add_begin(struct graph_add *a, CUgraphNode *ph, const CUgraphNode *deps, size_t n)
{
    if (!ph || (n && !deps) || n > GRAPH_MAX_DEPS) return CUDA_ERROR_INVALID_VALUE;
    uint64_t *ids = a->small;
    a->heap = NULL;
    a->requested = 0;
    if (n > GRAPH_ADD_SMALL_DEPS && !(ids = a->heap = malloc(n * sizeof *ids))) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) ids[i] = handle_wire_id(deps[i]);
    a->deps = ids;
    a->deps_count = (uint32_t)n;
    a->node = handle_new_id();
    return CUDA_SUCCESS;
}

wire_buf *graph_add_request(struct graph_add *a, uint16_t op)
{
    rpc_begin(&a->c, op);
    a->requested = 1;
    return &a->c.req;
}

CUresult graph_add_sync(struct graph_add *a)
{
    /* The request holds its own copy of the ids now. */
    free(a->heap);
    a->heap = NULL;
    a->deps = NULL;
    return rpc_sync(&a->c);
}

CUresult graph_add_end(struct graph_add *a, CUresult r, CUgraphNode *ph)
{
    free(a->heap);
    a->heap = NULL;
    if (a->requested) rpc_end(&a->c);
    a->requested = 0;
    if (r == CUDA_SUCCESS) *ph = (CUgraphNode)handle_from_id(a->node);
    return r;
}

void *graph_keep_copy(struct idmap *kept, CUgraphNode node, const void *bytes, size_t n, CUresult *r)
{
    void *copy = NULL;
    if (n && !(copy = malloc(n))) {
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    if (n) memcpy(copy, bytes, n);
    uint64_t id = handle_wire_id(node);
    free(idmap_del(kept, id));
    if (copy && idmap_put(kept, id, 0, copy) != 0) {
        free(copy);
        *r = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    return copy;
}
