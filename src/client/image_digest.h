/* image_digest.h - the SHA-256 of a module image, computed once per image
 * for the life of the process (docs/architecture.md, 3.8.1).
 *
 * Libraries such as cuDNN load the same cubins from the same addresses
 * again and again; hashing each again cost half a second per 20 tokens of
 * a GPT-2 generate. An image is known by its address and length and a
 * cheap fingerprint of its bytes (a few sampled 64-byte blocks, the first
 * and the last among them), so an image rewritten in place at the same
 * address is hashed again unless every sampled block stayed the same. */
#ifndef SCUDA_CLIENT_IMAGE_DIGEST_H
#define SCUDA_CLIENT_IMAGE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/auth.h"

/* The SHA-256 of the len bytes at image into digest. Returns 1 when it
 * came from the cache (no hashing), 0 when it was computed. Thread-safe. */
int image_digest(const void *image, size_t len, uint8_t digest[AUTH_SHA256_LEN]);

#endif
