/* module_held.h - the images of the module cache this session promised its
 * client (scuda_module_held), so that the client loads any of them one-way
 * by digest (scuda_module_load_held, docs/architecture.md, 3.8.1).
 *
 * A new process of a user who ran before loads mostly images the server's
 * module cache already has (a framework's kernels, the same every run);
 * over a slow link sending their bytes again cost more than the rest of
 * a training step. The session lists the user's images once and maps
 * each listed file, so that eviction (another session's, deleting the
 * file) cannot take an image between the list and the load: the promise
 * holds for the session's life. Each image's digest is checked at its
 * first use, as a read from the store is. Thread-safe. */
#ifndef SCUDA_SERVER_MODULE_HELD_H
#define SCUDA_SERVER_MODULE_HELD_H

#include <stdint.h>

#include "../common/messages.gen.h"

/* The promised images, at most max of them, into out (MODULE_HELD_MAX
 * room); the first call makes the list, later ones answer the same.
 * Returns how many. */
uint32_t module_held_list(uint32_t max, struct msg_held_image *out);

/* The promised image with this digest and length, its bytes checked
 * (8-byte aligned, valid for the session's life), or NULL. */
const void *module_held_image(const uint8_t key[IMAGE_DIGEST_LEN], uint64_t len);

#endif
