/* res_desc.h - a CUDA_RESOURCE_DESC as the res_desc record of the spec
 * (docs/architecture.md, 9.16 Textures and surfaces), one codec for both
 * ends. The record carries only the named type's fields; the array or
 * mipmapped array travels as an id, which each end translates its own way
 * (the client's virtual handles, the session's handle table). */
#ifndef SCUDA_RES_DESC_H
#define SCUDA_RES_DESC_H

#include <cuda.h>

#include "messages.gen.h"

/* Whether the resource type names an array or a mipmapped array (its
 * handle travels as an id) rather than device memory. */
int res_desc_has_handle(uint32_t type);

/* The array or mipmapped array d names, or NULL for the pointer kinds. */
void *res_desc_handle(const CUDA_RESOURCE_DESC *d);

/* The record for d, with handle_id standing for its handle. Returns 0, or
 * -1 for a resource type CUDA does not have (the record is then zero). */
int res_desc_to_msg(const CUDA_RESOURCE_DESC *d, uint64_t handle_id, struct msg_res_desc *m);

/* The descriptor for m, with handle standing for its id. Returns 0, or -1
 * for a resource type CUDA does not have. */
int res_desc_from_msg(const struct msg_res_desc *m, void *handle, CUDA_RESOURCE_DESC *d);

#endif
