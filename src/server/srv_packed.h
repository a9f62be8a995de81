/* srv_packed.h - requests that came compressed (scuda_packed; the client's
 * side is src/client/request_pack.c). */
#ifndef SCUDA_SERVER_SRV_PACKED_H
#define SCUDA_SERVER_SRV_PACKED_H

#include <stddef.h>
#include <stdint.h>

/* The request inside a scuda_packed payload of len bytes: its op in *op
 * and its payload, n bytes in new memory (the caller frees it). NULL when
 * it cannot be unpacked (a bad frame, a size over SCUDA_MAX_FRAME, a
 * packed op inside): the packed request then runs as itself, and
 * srv_scuda_packed refuses it. */
void *packed_open(const void *payload, size_t len, uint16_t *op, size_t *n);

#endif
