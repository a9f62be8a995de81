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

#include "../common/driver_table.gen.h"

struct session;

/* Wrap t's graph entries (instantiate, clone, child graphs, launch,
 * destroy, end of capture) to track which graphs hold host work. */
void graph_host_install(struct driver_table *t);
/* Send the host work queued by replays (call with no lock held). */
void graph_host_forward(struct session *s);

#endif
