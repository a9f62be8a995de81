/* module_held.h - the images each server's module cache holds for this
 * client's user, so that loading one of them is a one-way message by
 * digest (scuda_module_load_held, docs/architecture.md, 3.8.1) instead of
 * its bytes or a lookup that waits.
 *
 * The list is asked once per server (scuda_module_held), at the first
 * load that needs it, and again after the session moved to another server
 * (resume_moves), whose cache is another. The session keeps every listed
 * image readable for its life, so the list stays true. */
#ifndef SCUDA_CLIENT_MODULE_HELD_H
#define SCUDA_CLIENT_MODULE_HELD_H

#include <stdint.h>

#include "servers.h"
#include "../common/auth.h"

/* 1 when the session on srv promised the image with this digest and
 * length; asks for the list first if it has not yet. */
int module_held_has(struct server *srv, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len);

#endif
