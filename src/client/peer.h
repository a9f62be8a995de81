/* peer.h - copies between devices of two servers that go server to server
 * over a peer link, never through this client (docs/architecture.md,
 * 3.12 Peer links; src/server/peer_link.h). */
#ifndef SCUDA_CLIENT_PEER_H
#define SCUDA_CLIENT_PEER_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

struct server;

/* One side of a peer copy: its server, the device address there, the
 * stream's wire id on that server (0: the legacy stream) and the context
 * id the call runs in there (rpc_call.ctx; 0: conn_ctx_on's choice). */
struct peer_end {
    struct server *srv;
    uint64_t ptr;
    uint64_t stream;
    uint32_t ctx;
};

/* Copy n bytes from `from` to `to`, both ends' streams ordered, returning
 * when they landed. The link between the two sessions is set up at the
 * first copy of the pair and kept; a copy that finds it broken fails, and
 * the next one sets a new link up. Returns the first failure of the two
 * ends (CUDA_ERROR_DEVICE_UNAVAILABLE: the link broke). */
CUresult peer_copy(const struct peer_end *from, const struct peer_end *to, size_t n);

#endif
