/* auth.c - SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104), nonces, and the
 * handshake proof. See auth.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "auth.h"

#include <stdatomic.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sha256_blocks.h"

/* ---- SHA-256 ---------------------------------------------------------- */

/* FIPS 180-4 §4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes. */
const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

/* §4.1.2 */
static uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
static uint32_t maj(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
static uint32_t bsig0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
static uint32_t bsig1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
static uint32_t ssig0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
static uint32_t ssig1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Wipe secrets (keys, key-derived pads) so they do not linger on the stack.
 * The volatile pointer stops the compiler from dropping a "dead" store. */
static void wipe(void *p, size_t n)
{
    volatile uint8_t *v = p;
    while (n--) *v++ = 0;
}

/* §6.2.2: one 512-bit block. */
static void sha256_block(uint32_t H[8], const uint8_t block[64])
{
    uint32_t W[64];
    for (int t = 0; t < 16; t++) W[t] = load_be32(block + 4 * t);
    for (int t = 16; t < 64; t++) W[t] = ssig1(W[t - 2]) + W[t - 7] + ssig0(W[t - 15]) + W[t - 16];

    uint32_t a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], f = H[5], g = H[6], h = H[7];
    for (int t = 0; t < 64; t++) {
        uint32_t T1 = h + bsig1(e) + ch(e, f, g) + sha256_k[t] + W[t];
        uint32_t T2 = bsig0(a) + maj(a, b, c);
        h = g;
        g = f;
        f = e;
        e = d + T1;
        d = c;
        c = b;
        b = a;
        a = T1 + T2;
    }
    H[0] += a; H[1] += b; H[2] += c; H[3] += d;
    H[4] += e; H[5] += f; H[6] += g; H[7] += h;
    wipe(W, sizeof W);
}

void sha256_blocks_portable(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    for (; nblocks > 0; nblocks--, p += 64) sha256_block(state, p);
}

/* The fastest implementation this CPU runs, chosen at first use. */
static void sha256_blocks(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    static _Atomic int x86 = -1;
    int use = atomic_load_explicit(&x86, memory_order_relaxed);
    if (use < 0) atomic_store_explicit(&x86, use = sha256_x86_usable(), memory_order_relaxed);
    if (use)
        sha256_blocks_x86(state, p, nblocks);
    else
        sha256_blocks_portable(state, p, nblocks);
}

void auth_sha256_init(auth_sha256 *c)
{
    /* §5.3.3: square roots of the first 8 primes. */
    static const uint32_t H0[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    memcpy(c->state, H0, sizeof H0);
    c->total = 0;
    c->used = 0;
}

void auth_sha256_update(auth_sha256 *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    c->total += n;
    while (n > 0) {
        if (c->used == 0 && n >= AUTH_SHA256_BLOCK) {
            /* Whole blocks straight from the input: no copy. */
            size_t whole = n / AUTH_SHA256_BLOCK;
            sha256_blocks(c->state, p, whole);
            p += whole * AUTH_SHA256_BLOCK;
            n -= whole * AUTH_SHA256_BLOCK;
            continue;
        }
        size_t take = AUTH_SHA256_BLOCK - c->used;
        if (take > n) take = n;
        memcpy(c->block + c->used, p, take);
        c->used += take;
        p += take;
        n -= take;
        if (c->used == AUTH_SHA256_BLOCK) {
            sha256_blocks(c->state, c->block, 1);
            c->used = 0;
        }
    }
}

void auth_sha256_final(auth_sha256 *c, uint8_t out[AUTH_SHA256_LEN])
{
    /* §5.1.1: append 0x80, zeros up to 56 mod 64, then the bit length. */
    uint64_t bits = c->total * 8;
    c->block[c->used++] = 0x80;
    if (c->used > 56) {
        memset(c->block + c->used, 0, AUTH_SHA256_BLOCK - c->used);
        sha256_blocks(c->state, c->block, 1);
        c->used = 0;
    }
    memset(c->block + c->used, 0, 56 - c->used);
    store_be32(c->block + 56, (uint32_t)(bits >> 32));
    store_be32(c->block + 60, (uint32_t)bits);
    sha256_blocks(c->state, c->block, 1);

    for (int i = 0; i < 8; i++) store_be32(out + 4 * i, c->state[i]);
    wipe(c, sizeof *c);
}

void auth_sha256_digest(const void *data, size_t n, uint8_t out[AUTH_SHA256_LEN])
{
    auth_sha256 c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, data, n);
    auth_sha256_final(&c, out);
}

/* ---- HMAC-SHA256 (RFC 2104) ------------------------------------------- */

void auth_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                      uint8_t out[AUTH_SHA256_LEN])
{
    /* A key longer than the block is replaced by its hash; a shorter one is
     * zero-padded to the block size. */
    uint8_t k[AUTH_SHA256_BLOCK] = {0};
    if (keylen > AUTH_SHA256_BLOCK)
        auth_sha256_digest(key, keylen, k);
    else if (keylen > 0)
        memcpy(k, key, keylen);

    uint8_t pad[AUTH_SHA256_BLOCK];
    uint8_t inner[AUTH_SHA256_LEN];
    auth_sha256 c;

    for (int i = 0; i < AUTH_SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x36;
    auth_sha256_init(&c);
    auth_sha256_update(&c, pad, sizeof pad);
    auth_sha256_update(&c, msg, msglen);
    auth_sha256_final(&c, inner);

    for (int i = 0; i < AUTH_SHA256_BLOCK; i++) pad[i] = k[i] ^ 0x5c;
    auth_sha256_init(&c);
    auth_sha256_update(&c, pad, sizeof pad);
    auth_sha256_update(&c, inner, sizeof inner);
    auth_sha256_final(&c, out);

    wipe(k, sizeof k);
    wipe(pad, sizeof pad);
    wipe(inner, sizeof inner);
}

/* ---- nonces, proofs, comparison --------------------------------------- */

/* Returns 0 when all n bytes came from getrandom(2); -1 when the kernel
 * lacks it (ENOSYS, old kernels and some seccomp sandboxes). */
static int nonce_getrandom(uint8_t *out, size_t n)
{
    while (n > 0) {
        ssize_t got = getrandom(out, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        out += got;
        n -= (size_t)got;
    }
    return 0;
}

static int nonce_urandom(uint8_t *out, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (n > 0) {
        ssize_t got = read(fd, out, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            close(fd);
            return -1;
        }
        out += got;
        n -= (size_t)got;
    }
    close(fd);
    return 0;
}

void auth_nonce(uint8_t *out, size_t n)
{
    if (nonce_getrandom(out, n) == 0) return;
    if (nonce_urandom(out, n) == 0) return;
    static const char msg[] =
        "scuda: no source of randomness (getrandom(2) and /dev/urandom both failed); "
        "cannot make a safe authentication nonce\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    abort();
}

void auth_proof(const char *token, const uint8_t nonce[16], uint8_t out[32])
{
    if (token == NULL || token[0] == '\0') {
        memset(out, 0, 32);
        return;
    }
    auth_hmac_sha256(token, strlen(token), nonce, 16, out);
}

void auth_join_proof(const uint8_t secret[32], const uint8_t nonce[16], uint32_t pid, uint32_t index,
                     uint8_t out[32])
{
    uint8_t msg[16 + 4 + 4];
    memcpy(msg, nonce, 16);
    for (int i = 0; i < 4; i++) {
        msg[16 + i] = (uint8_t)(pid >> (8 * i));
        msg[20 + i] = (uint8_t)(index >> (8 * i));
    }
    auth_hmac_sha256(secret, 32, msg, sizeof msg, out);
}

int auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    /* Accumulate every difference; no early exit, no data-dependent branch. */
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < n; i++) diff |= a[i] ^ b[i];
    return (int)(1 & (((unsigned)diff - 1) >> 8));
}
