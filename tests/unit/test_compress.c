/* test_compress.c - the zstd wrapper of compressed copies: a round trip is
 * byte-exact; decompression never yields other than the declared length
 * (a shorter or longer destination, a truncated frame, garbage all fail);
 * random bytes do not compress; the probe tells zeros from noise; the rule
 * compresses zeros over a slow link and never noise; the policy carries a
 * rate within a step; the settings parse. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#include "common/compress.h"

#define N (4u << 20)

static void fill_random(unsigned char *p, size_t n)
{
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
}

static void round_trips(unsigned char *plain, unsigned char *packed, unsigned char *back)
{
    memset(plain, 0, N);
    memcpy(plain + 12345, "not only zeros", 14);
    size_t z = compress_chunk(packed, N, plain, N);
    CHECK(z > 0 && z < N / 100);
    memset(back, 0xa5, N + 1);
    CHECK(decompress_chunk(back, N, packed, z) == 0);
    CHECK(memcmp(back, plain, N) == 0);
    CHECK(back[N] == 0xa5); /* nothing past the destination */
    /* Another length than the frame's: refused, whichever way. */
    CHECK(decompress_chunk(back, N - 1, packed, z) == -1);
    CHECK(decompress_chunk(back, N + 1, packed, z) == -1);
    /* A truncated frame, garbage, nothing. */
    CHECK(decompress_chunk(back, N, packed, z - 1) == -1);
    CHECK(decompress_chunk(back, N, "not a zstd frame at all", 23) == -1);
    CHECK(decompress_chunk(back, N, packed, 0) == -1);
    /* Random bytes do not shrink: 0, send them plain. */
    fill_random(plain, N);
    CHECK(compress_chunk(packed, N, plain, N) == 0);
}

static void probe_and_rule(unsigned char *plain)
{
    struct compress_probe zeros, noise;
    memset(plain, 0, N);
    compress_probe(plain, N, &zeros);
    fill_random(plain, N);
    compress_probe(plain, N, &noise);
    CHECK(zeros.ratio < 0.01 && zeros.ns_per_byte > 0);
    CHECK(noise.ratio > 0.95);
    /* The rule on the ratios measured, at a fixed CPU cost of 1 ns a byte:
     * the probe's own timing is the machine's (a loaded CI runner once
     * measured zeros at over 50 ns a byte), and the rule is what is tested. */
    struct compress_probe zeros_at = {.ratio = zeros.ratio, .ns_per_byte = 1.0};
    struct compress_probe noise_at = {.ratio = noise.ratio, .ns_per_byte = 1.0};
    unsigned wan = compress_policy(COMPRESS_AUTO, 1000);
    CHECK(compress_worth(wan, 8, &zeros_at) == 1);
    CHECK(compress_worth(wan, 8, &noise_at) == 0);
    CHECK(compress_worth(0, 8, &zeros_at) == 0);
    CHECK(compress_worth(COMPRESS_POLICY_ALWAYS, 8, &zeros) == 1);
    CHECK(compress_worth(COMPRESS_POLICY_ALWAYS, 8, &noise) == 0);
    /* A chunk that halves, over a link as fast as its CPU cost: no. */
    struct compress_probe half = {.ratio = 0.5, .ns_per_byte = 1.0};
    CHECK(compress_worth(compress_policy_of_rate(8000), 1, &half) == 0); /* 1 byte/ns: 0.5 + 1 > 0.8 */
    CHECK(compress_worth(compress_policy_of_rate(100), 1, &half) == 1);
}

static void policy(void)
{
    static const double rates[] = {1, 10, 200, 1000, 3000, 40000};
    for (unsigned i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        unsigned p = compress_policy_of_rate(rates[i]);
        CHECK(p >= 1 && p < COMPRESS_POLICY_ALWAYS);
        CHECK(fabs(compress_policy_rate(p) / rates[i] - 1) < 0.05);
    }
    CHECK(compress_policy_of_rate(1e9) == COMPRESS_POLICY_ALWAYS - 1);
    CHECK(compress_policy_of_rate(0.01) == 1);
    CHECK(compress_policy(COMPRESS_ON, 0) == COMPRESS_POLICY_ALWAYS);
    CHECK(compress_policy(COMPRESS_OFF, 100) == 0);
    CHECK(compress_policy(COMPRESS_AUTO, 0) == 0);                     /* not measured yet */
    CHECK(compress_policy(COMPRESS_AUTO, COMPRESS_AUTO_MAX_MBPS) == 0); /* a fast link */
    CHECK(compress_policy(COMPRESS_AUTO, 100) == compress_policy_of_rate(100));
}

static void settings(void)
{
    unsetenv("SCUDA_COMPRESS");
    CHECK(compress_mode_setting() == COMPRESS_AUTO);
    setenv("SCUDA_COMPRESS", "on", 1);
    CHECK(compress_mode_setting() == COMPRESS_ON);
    setenv("SCUDA_COMPRESS", "off", 1);
    CHECK(compress_mode_setting() == COMPRESS_OFF);
    setenv("SCUDA_COMPRESS", "fast", 1);
    CHECK(compress_mode_setting() == COMPRESS_AUTO);
    unsetenv("SCUDA_LINK_MBPS");
    CHECK(compress_link_setting() == 0);
    setenv("SCUDA_LINK_MBPS", "250.5", 1);
    CHECK(compress_link_setting() == 250.5);
    setenv("SCUDA_LINK_MBPS", "1000x", 1);
    CHECK(compress_link_setting() == 0);
    setenv("SCUDA_LINK_MBPS", "-3", 1);
    CHECK(compress_link_setting() == 0);
}

int main(void)
{
    unsigned char *plain = malloc(N), *packed = malloc(N), *back = malloc(N + 1);
    CHECK(plain && packed && back);
    round_trips(plain, packed, back);
    probe_and_rule(plain);
    policy();
    settings();
    free(plain);
    free(packed);
    free(back);
    printf("test_compress: %d checks, %d failed\n", checks, failures);
    return failures != 0;
}
