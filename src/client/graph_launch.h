/* graph_launch.h - cuGraphLaunch with the bytes of host-to-device nodes
 * (graph_launch.c). */
#ifndef SCUDA_CLIENT_GRAPH_LAUNCH_H
#define SCUDA_CLIENT_GRAPH_LAUNCH_H

#include <cuda.h>

/* The executable graph's upload records may have changed (a memcpy node
 * set on it): ask the session again at its next launch. */
void graph_launch_forget(CUgraphExec exec);

#endif
