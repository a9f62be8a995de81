/* module_known.h - the images each server's session keeps for this client,
 * with their functions' names, so that loading one of them again is a
 * one-way message (scuda_module_load_known, docs/architecture.md, 3.8.1).
 *
 * The session keeps every distinct image this client loaded there, up to
 * MODULE_PIN_MAX bytes in all, first come first kept (srv_module_pins.c).
 * This table counts the same bytes the same way, and may count an image
 * twice (after forgetting it) but never less, so whatever it calls known
 * the session holds. It is bounded and forgets freely: a forgotten image
 * is loaded with a round trip, as the first time. A session that moved to
 * another server (resume_moves) keeps nothing there: its images are
 * forgotten here too, and counted anew. */
#ifndef SCUDA_CLIENT_MODULE_KNOWN_H
#define SCUDA_CLIENT_MODULE_KNOWN_H

#include <stddef.h>
#include <stdint.h>

#include "module.h"
#include "../common/auth.h"

/* A load of this image (len bytes, as a library or not) on server
 * `server` succeeded with these functions: remember them, within the
 * session's budget. Returns 1 when the image is now kept, 0 when it was
 * already, -1 when it is not (past the budget, or out of memory). */
int module_known_note(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                      const struct func_desc *funcs, uint32_t n);

/* When the session on `server` holds this image: 1, with a copy of its
 * functions (names, and the parameter layouts learnt so far; free each
 * one's name, offset and size, and the array) in *funcs, *n. */
int module_known_get(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                     struct func_desc **funcs, uint32_t *n);

/* Function `index` of this image has the layout in d (asked of the session
 * at its first launch): later loads of the image know it from the start,
 * and their first launch needs no round trip. A layout is the image's,
 * whatever module of it the session made. */
void module_known_learn(int server, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len, int is_library,
                        uint32_t index, const struct func_desc *d);

#endif
