/* sha256_blocks.h - the SHA-256 compression function over whole 64-byte
 * blocks, for auth.c, which picks one implementation at first use:
 *   - portable C (auth.c), everywhere;
 *   - the x86 SHA extensions (sha256_x86.c), where the CPU has them: about
 *     ten times faster. The module cache hashes every image a program loads,
 *     on the client and again on the server, so hashing is on the path of a
 *     program's startup.
 * Internal to src/common (and the unit test that compares the two). */
#ifndef SCUDA_SHA256_BLOCKS_H
#define SCUDA_SHA256_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* FIPS 180-4 §4.2.2 round constants. */
extern const uint32_t sha256_k[64];

void sha256_blocks_portable(uint32_t state[8], const uint8_t *p, size_t nblocks);

/* 1 when this CPU (and build) can run sha256_blocks_x86. */
int sha256_x86_usable(void);
void sha256_blocks_x86(uint32_t state[8], const uint8_t *p, size_t nblocks);

#endif
