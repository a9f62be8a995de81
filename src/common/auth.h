/* auth.h - the shared-token challenge of the SCUDA handshake.
 *
 * The server sends a random nonce; the client answers with
 * HMAC-SHA256(key = token, message = nonce). The token itself never
 * crosses the wire, and a fresh nonce per connection means a recorded
 * answer cannot be replayed (docs/architecture.md, 3.1 Handshake; protocol.h).
 *
 * SHA-256 (FIPS 180-4) and HMAC (RFC 2104) are implemented here rather
 * than taken from OpenSSL so that the shim has no crypto dependency. */
#ifndef SCUDA_AUTH_H
#define SCUDA_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_SHA256_LEN 32
#define AUTH_SHA256_BLOCK 64

typedef struct auth_sha256 {
    uint32_t state[8];
    uint64_t total;                  /* message bytes hashed so far */
    uint8_t block[AUTH_SHA256_BLOCK];
    size_t used;                     /* bytes waiting in block */
} auth_sha256;

void auth_sha256_init(auth_sha256 *c);
void auth_sha256_update(auth_sha256 *c, const void *data, size_t n);
void auth_sha256_final(auth_sha256 *c, uint8_t out[AUTH_SHA256_LEN]);

/* One-shot helpers. */
void auth_sha256_digest(const void *data, size_t n, uint8_t out[AUTH_SHA256_LEN]);
void auth_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                      uint8_t out[AUTH_SHA256_LEN]);

/* Fill out with n bytes from the kernel's CSPRNG: getrandom(2), falling back
 * to /dev/urandom. Aborts if neither works: a predictable nonce would make
 * recorded handshakes replayable, and there is no safe degraded mode. */
void auth_nonce(uint8_t *out, size_t n);

/* The handshake proof: HMAC-SHA256(key = token, msg = nonce). A NULL or
 * empty token gives 32 zero bytes ("no token", protocol.h). */
void auth_proof(const char *token, const uint8_t nonce[16], uint8_t out[32]);

/* The proof of a bulk join (protocol.h, "Bulk connections"):
 * HMAC-SHA256(key = the session's join secret, msg = nonce of the joining
 * connection || u32 session pid || u32 index, little-endian). Binding the
 * nonce makes a recorded join useless; binding pid and index makes a
 * proof good for one slot of one session only. */
void auth_join_proof(const uint8_t secret[32], const uint8_t nonce[16], uint32_t pid, uint32_t index,
                     uint8_t out[32]);

/* 1 if a and b hold the same n bytes, else 0. Runs in time that depends
 * only on n, so a wrong proof leaks nothing about the right one. */
int auth_equal(const uint8_t *a, const uint8_t *b, size_t n);

#endif
