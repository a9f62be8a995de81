/* test_auth.c - SHA-256 against FIPS 180-4 examples, HMAC-SHA256 against
 * RFC 4231, and the proof / nonce / comparison helpers. */
#include "common/auth.h"
#include "common/sha256_blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", p[i]);
}

static void check_hex(const char *what, const uint8_t *got, size_t n, const char *want)
{
    char h[2 * 64 + 1];
    hex(got, n, h);
    int ok = strcmp(h, want) == 0;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) {
        printf("     got  %s\n     want %s\n", h, want);
        failures++;
    }
}

static void check(const char *what, int ok)
{
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static void test_sha256(void)
{
    uint8_t d[32];

    auth_sha256_digest("", 0, d);
    check_hex("sha256(\"\")", d, 32, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

    auth_sha256_digest("abc", 3, d);
    check_hex("sha256(\"abc\")", d, 32, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    auth_sha256_digest(m448, strlen(m448), d);
    check_hex("sha256(448-bit message)", d, 32,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    /* A million 'a's, fed in odd-sized pieces to exercise block carry-over. */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    auth_sha256 c;
    auth_sha256_init(&c);
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        auth_sha256_update(&c, chunk, n);
        left -= n;
    }
    auth_sha256_final(&c, d);
    check_hex("sha256(1,000,000 x 'a')", d, 32,
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

    /* Messages of 55, 56 and 64 bytes sit on the padding boundaries. */
    char m[64];
    memset(m, 'a', sizeof m);
    auth_sha256_digest(m, 55, d);
    check_hex("sha256(55 x 'a')", d, 32, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    auth_sha256_digest(m, 56, d);
    check_hex("sha256(56 x 'a')", d, 32, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    auth_sha256_digest(m, 64, d);
    check_hex("sha256(64 x 'a')", d, 32, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

/* The x86 SHA extensions and the portable code agree, block by block,
 * over pseudo-random data (the known answers above ran on whichever this
 * CPU uses). */
static void test_sha256_paths(void)
{
    if (!sha256_x86_usable()) {
        printf("skip sha256 x86 path: this CPU has no SHA extensions\n");
        return;
    }
    enum { BLOCKS = 64 };
    static uint8_t data[BLOCKS * 64];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof data; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (uint8_t)(x >> 16);
    }
    int same = 1;
    for (size_t n = 1; n <= BLOCKS; n += 7) {
        uint32_t a[8], b[8];
        for (int i = 0; i < 8; i++) a[i] = b[i] = 0x01020304u * (uint32_t)(i + 1) + (uint32_t)n;
        sha256_blocks_portable(a, data + 64 * (BLOCKS - n), n);
        sha256_blocks_x86(b, data + 64 * (BLOCKS - n), n);
        same &= memcmp(a, b, sizeof a) == 0;
    }
    check("sha256: x86 SHA extensions match the portable code", same);
}

static void fill(uint8_t *p, uint8_t v, size_t n) { memset(p, v, n); }

static void test_hmac(void)
{
    uint8_t key[131], data[152], out[32];

    /* RFC 4231 §4.2, test case 1 */
    fill(key, 0x0b, 20);
    auth_hmac_sha256(key, 20, "Hi There", 8, out);
    check_hex("hmac-sha256 RFC 4231 case 1", out, 32,
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");

    /* §4.3, case 2: a key shorter than the output */
    const char *d2 = "what do ya want for nothing?";
    auth_hmac_sha256("Jefe", 4, d2, strlen(d2), out);
    check_hex("hmac-sha256 RFC 4231 case 2", out, 32,
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");

    /* §4.4, case 3 */
    fill(key, 0xaa, 20);
    fill(data, 0xdd, 50);
    auth_hmac_sha256(key, 20, data, 50, out);
    check_hex("hmac-sha256 RFC 4231 case 3", out, 32,
              "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");

    /* §4.5, case 4 */
    for (int i = 0; i < 25; i++) key[i] = (uint8_t)(i + 1);
    fill(data, 0xcd, 50);
    auth_hmac_sha256(key, 25, data, 50, out);
    check_hex("hmac-sha256 RFC 4231 case 4", out, 32,
              "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");

    /* §4.7, case 6: a key longer than the block, hashed first */
    fill(key, 0xaa, 131);
    const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    auth_hmac_sha256(key, 131, d6, strlen(d6), out);
    check_hex("hmac-sha256 RFC 4231 case 6", out, 32,
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

    /* §4.8, case 7: long key and long data */
    const char *d7 =
        "This is a test using a larger than block-size key and a larger than block-size data. "
        "The key needs to be hashed before being used by the HMAC algorithm.";
    auth_hmac_sha256(key, 131, d7, strlen(d7), out);
    check_hex("hmac-sha256 RFC 4231 case 7", out, 32,
              "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_proof(void)
{
    uint8_t nonce[16], out[32], want[32], zero[32] = {0};
    for (int i = 0; i < 16; i++) nonce[i] = (uint8_t)i;

    auth_proof(NULL, nonce, out);
    check("auth_proof(NULL token) is all zeros", memcmp(out, zero, 32) == 0);
    memset(out, 0xff, 32);
    auth_proof("", nonce, out);
    check("auth_proof(\"\" token) is all zeros", memcmp(out, zero, 32) == 0);

    auth_proof("s3cret", nonce, out);
    auth_hmac_sha256("s3cret", 6, nonce, 16, want);
    check("auth_proof = HMAC-SHA256(token, nonce)", memcmp(out, want, 32) == 0);
    check("auth_proof with a token is not zeros", memcmp(out, zero, 32) != 0);
}

/* Known answer from Python: hmac.new(bytes(range(32)),
 * bytes(range(100, 116)) + struct.pack('<II', 4242, 3), sha256). */
static void test_join_proof(void)
{
    uint8_t secret[32], nonce[16], out[32], other[32];
    for (int i = 0; i < 32; i++) secret[i] = (uint8_t)i;
    for (int i = 0; i < 16; i++) nonce[i] = (uint8_t)(100 + i);
    auth_join_proof(secret, nonce, 4242, 3, out);
    check_hex("auth_join_proof known answer", out, 32,
              "3db6af7085cd937bb96451141c02f3c610721c82483eae59b3abbba8dfacb24b");
    auth_join_proof(secret, nonce, 4242, 2, other);
    check("auth_join_proof binds the index", memcmp(out, other, 32) != 0);
    auth_join_proof(secret, nonce, 4243, 3, other);
    check("auth_join_proof binds the session pid", memcmp(out, other, 32) != 0);
    nonce[15] ^= 1;
    auth_join_proof(secret, nonce, 4242, 3, other);
    check("auth_join_proof binds the nonce", memcmp(out, other, 32) != 0);
    nonce[15] ^= 1;
    secret[0] ^= 1;
    auth_join_proof(secret, nonce, 4242, 3, other);
    check("auth_join_proof binds the secret", memcmp(out, other, 32) != 0);
}

static void test_equal(void)
{
    uint8_t a[32], b[32];
    for (int i = 0; i < 32; i++) a[i] = b[i] = (uint8_t)(i * 7);
    check("auth_equal: same bytes", auth_equal(a, b, 32) == 1);
    check("auth_equal: zero length", auth_equal(a, b, 0) == 1);
    b[0] ^= 1;
    check("auth_equal: first byte differs", auth_equal(a, b, 32) == 0);
    b[0] ^= 1;
    b[31] ^= 0x80;
    check("auth_equal: last byte differs", auth_equal(a, b, 32) == 0);
    b[31] = (uint8_t)(a[31] ^ 0xff);
    check("auth_equal: all bits of a byte differ", auth_equal(a, b, 32) == 0);
}

static void test_nonce(void)
{
    uint8_t a[16] = {0}, b[16] = {0}, zero[16] = {0};
    auth_nonce(a, sizeof a);
    auth_nonce(b, sizeof b);
    check("auth_nonce: two nonces differ", memcmp(a, b, 16) != 0);
    check("auth_nonce: not all zeros", memcmp(a, zero, 16) != 0);
    uint8_t big[4096];
    auth_nonce(big, sizeof big); /* more than one getrandom block */
    check("auth_nonce: 4096 bytes", memcmp(big + 4080, zero, 16) != 0);
}

int main(void)
{
    test_sha256();
    test_sha256_paths();
    test_hmac();
    test_proof();
    test_join_proof();
    test_equal();
    test_nonce();
    if (failures) {
        printf("test_auth: %d FAILED\n", failures);
        return 1;
    }
    printf("test_auth: all passed\n");
    return 0;
}
