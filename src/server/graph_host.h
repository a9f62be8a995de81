/* graph_host.h - host work in graphs captured by a remote client.
 *
 * A graph replays on the server, so a device-to-host copy into client
 * memory, or a host function, cannot simply be captured. The client sends
 * them as scuda_capture_dtoh / scuda_capture_hostfn (src/client/graph.c);
 * the session captures a copy into a staging buffer and a host node, and
 * at each replay sends the bytes and "run this function" to the client as
 * FRAME_HOST_WORK frames, before the reply of its next synchronizing call
 * (protocol.h). The captured graph has the nodes it would have natively. */
#ifndef SCUDA_SERVER_GRAPH_HOST_H
#define SCUDA_SERVER_GRAPH_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/driver_table.gen.h"

struct session;

/* Wrap t's graph entries (instantiate, clone, child graphs, launch,
 * destroy, end of capture) to track which graphs hold host work. */
void graph_host_install(struct driver_table *t);
/* Send the host work queued by replays (call with no lock held). */
void graph_host_forward(struct session *s);
/* Queue host work of another kind (HOST_WORK_LOG, srv_logs.c) for the
 * client, sent with the next reply; may run on a driver thread. */
void graph_host_queue(uint8_t kind, uint64_t id, const void *data, size_t n);

/* A memcpy node's host side: a pinned staging buffer of the host side's
 * extent, split into records of at most SCUDA_CHUNK bytes with the
 * client's ids (upload: the client sends their bytes before each launch;
 * else they come back to it after). */
struct graph_host_side {
    void *staging;
    struct record **recs;
    size_t n;
};
CUresult graph_host_side_new(int upload, const uint64_t *ids, size_t nids, size_t extent,
                             struct graph_host_side *hs);
/* The node was made or changed: its graph (or executable graph) holds the
 * records from now on, in place of the node's earlier ones. 0, or -1 out
 * of memory (logged). */
int graph_host_side_hold_graph(struct graph_host_side *hs, CUgraph g, const void *node);
int graph_host_side_hold_exec(struct graph_host_side *hs, CUgraphExec e, const void *node);
/* The driver refused the node: drop the records. */
void graph_host_side_free(struct graph_host_side *hs);

/* body is a conditional node's body graph in parent: host work in it is
 * refused until parent is destroyed. */
void graph_host_body_made(CUgraph parent, CUgraph body);
/* 1 (logged, naming `what`) when g is a body graph, where host work cannot
 * be staged or delivered; else 0. */
int graph_host_refuse_in_body(CUgraph g, const char *what);

/* child was moved into parent (cuGraphAddNode): parent holds its host
 * work from now on, and child, which dies with parent, holds none. */
void graph_host_child_moved(CUgraph parent, CUgraph child);

/* Node ids -> a malloc'd array of real nodes (NULL when n is 0), for the
 * graph calls of srv_graph.c and graph_host.c. */
struct srv_call;
CUresult graph_resolve_deps(struct srv_call *c, const uint64_t *ids, uint64_t n, CUgraphNode **out);

#endif
