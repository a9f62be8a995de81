/* cross_server.h - what the rest of the client calls in cross_server.c:
 * copies between device memory of two servers (docs/architecture.md,
 * 9.26). */
#ifndef SCUDA_CLIENT_CROSS_SERVER_H
#define SCUDA_CLIENT_CROSS_SERVER_H

#include <cuda.h>
#include <stddef.h>

#include "peer.h"

/* Copy n bytes from `from` to `to` (ends on two servers: their server,
 * device address and context id; their stream is chosen here) server to
 * server over a peer link, the bytes never crossing this client, for a
 * copy on stream st (mode COPY_SYNC or COPY_ASYNC, copy.h). The copy runs
 * after every earlier call on st and on both ends' contexts, and has
 * landed when this returns, for the asynchronous forms too. */
CUresult cross_server_copy(struct peer_end *to, struct peer_end *from, size_t n, CUstream st, int mode);

#endif
