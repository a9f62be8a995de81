/* migrate_graphs_wire.h - the records a moving session's graphs and
 * executable graphs travel in, shared by the exporter (migrate_graphs.c)
 * and the importer (migrate_graphs_in.c). Internal to the server; the
 * layout is described in migrate_graphs.c's opening comment. */
#ifndef SCUDA_SERVER_MIGRATE_GRAPHS_WIRE_H
#define SCUDA_SERVER_MIGRATE_GRAPHS_WIRE_H

#include <cuda.h>
#include <stdint.h>

/* A kernel reads at most 32764 bytes of parameters. */
#define ARGS_MAX 32768
#define NODES_MAX (1u << 20)
/* Child graphs nest no deeper: the importer recurses once per level. */
#define DEPTH_MAX 8

struct node_rec {
    uint32_t type;     /* CUgraphNodeType */
    uint32_t ndeps;    /* u32 indices of earlier nodes follow the record */
    uint32_t args_len; /* then a kernel's argument bytes */
    uint32_t sub_len;  /* then a child graph's description (a child graph node) */
    uint64_t id;       /* the node's id (the client's or the session's), 0: none */
    uint64_t ctx;      /* context id */
    uint64_t func, kern;
    uint64_t event;    /* an event record or wait node's event id */
    uint64_t graph_id; /* a child graph node's graph id (the session's), 0: none was asked */
    uint32_t grid[3], block[3];
    uint32_t shared, pad2;
    CUDA_MEMSET_NODE_PARAMS memset;
    CUDA_MEMCPY3D copy; /* arrays as ids; no host side */
};

/* The changes to an executable graph a move carries, replayed in order
 * after the other server instantiates again. */
enum change_call { CH_KERNEL = 1, CH_MEMSET, CH_MEMCPY, CH_ENABLED, CH_UPDATE };

/* A change on the wire: this header, then `len` bytes (a node record and
 * its argument bytes, a u32 for CH_ENABLED, a graph description for
 * CH_UPDATE). `node` indexes the nodes of the graph instantiated, as
 * cuGraphGetNodes listed them then (CH_UPDATE: none). */
struct change_hdr {
    uint32_t call, node, len, pad;
};

/* A node type's name, for the reasons a move gives. */
static inline const char *graph_node_type_name(unsigned t)
{
    static const char *const n[] = {"kernel", "memcpy", "memset", "host", "child graph", "empty", "event wait",
                                    "event record", "external semaphore signal", "external semaphore wait",
                                    "memory allocation", "memory free", "batch memory operation", "conditional"};
    return t < sizeof n / sizeof *n ? n[t] : "unknown";
}

#endif
