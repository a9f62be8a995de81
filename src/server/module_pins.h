/* module_pins.h - the images this session keeps for its client, so that
 * loading one again needs no round trip (scuda_module_load_known,
 * docs/architecture.md, 3.8.1).
 *
 * Every distinct image the client loaded here is kept, first come first
 * kept, until MODULE_PIN_MAX bytes (messages.gen.h) are counted; the
 * client counts the same bytes and sends a one-way load only for images
 * within them (src/client/module_known.h). Only this session's own loads
 * put images here, so a digest answers only for what this client loaded:
 * the table is no oracle of other users' images. Thread-safe. */
#ifndef SCUDA_SERVER_MODULE_PINS_H
#define SCUDA_SERVER_MODULE_PINS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/module_store.h"

/* The client loaded these bytes here (the digest is the server's own:
 * computed here, or the module cache's key that found them). */
void module_pin(const uint8_t key[MODULE_KEY_LEN], const void *image, size_t len);

/* The kept image with this digest and length (len + 1 bytes, the last one
 * NUL, 8-byte aligned), valid for the session's life; NULL if none. */
const void *module_pinned(const uint8_t key[MODULE_KEY_LEN], uint64_t len);

#endif
