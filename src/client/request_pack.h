/* request_pack.h - module images compressed on the wire over a slow link
 * (docs/architecture.md, "Compressed module images").
 *
 * A request that carries a module image goes as one scuda_packed request
 * instead, its whole payload compressed with zstd, when the link is slow
 * enough and the image compresses well enough that the compressed bytes
 * plus the CPU take less time than the plain bytes: the same rule as the
 * chunks of a striped copy (compress.h), on the link's rate measured by
 * those copies, SCUDA_LINK_MBPS, or, before either, an assumed 1 Gbit/s
 * over a link whose round trip is 2 ms or more. SCUDA_COMPRESS=off never
 * packs, =on packs whenever it shrinks the request. */
#ifndef SCUDA_CLIENT_REQUEST_PACK_H
#define SCUDA_CLIENT_REQUEST_PACK_H

#include "rpc.h"

/* Called after the request is put (c->req, c->bulk) and before it is
 * sent: replaces it with its packed form when that pays. c keeps the
 * compressed bytes until rpc_end. Returns 1 when packed. */
int request_pack(rpc_call *c);

#endif
