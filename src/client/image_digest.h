/* image_digest.h - the SHA-256 of a module image, computed once per image
 * for the life of the process (docs/architecture.md, 3.8.1).
 *
 * Libraries such as cuDNN load the same cubins again and again; hashing
 * each again cost half a second per 20 tokens of a GPT-2 generate. An
 * image is known by its address, its length and a 64-bit check of all its
 * bytes (xxHash64's rounds, several times SHA-256's speed). Not sampled
 * blocks: cuDNN builds kernels into heap buffers it frees, so a new image
 * often takes the address and length of the last one and differs from it
 * only in a few constants. */
#ifndef SCUDA_CLIENT_IMAGE_DIGEST_H
#define SCUDA_CLIENT_IMAGE_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/auth.h"

/* The SHA-256 of the len bytes at image into digest. Returns 1 when it
 * came from the cache (no hashing), 0 when it was computed. Thread-safe. */
int image_digest(const void *image, size_t len, uint8_t digest[AUTH_SHA256_LEN]);

#endif
