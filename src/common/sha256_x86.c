/* sha256_x86.c - SHA-256 blocks with the x86 SHA extensions (SHA-NI).
 *
 * The instructions keep the eight working variables in two registers,
 * laid out as (A, B, E, F) and (C, D, G, H) from the high lane down:
 * SHA256RNDS2 runs two rounds on them, taking W[t] + K[t] for both from
 * the low half of a third register; SHA256MSG1 and SHA256MSG2 compute the
 * message schedule's sigma terms four words at a time. See sha256_blocks.h
 * for why this exists; auth.c uses it only when the CPU reports SHA, SSSE3
 * and SSE4.1. */
#include "sha256_blocks.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

int sha256_x86_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int sha = (b >> 29) & 1;
    return ssse3 && sse41 && sha;
}

#define TARGET __attribute__((target("sha,ssse3,sse4.1")))

/* W[t..t+3] for t >= 16, from the four vectors before it:
 * W[t] = ssig1(W[t-2]) + W[t-7] + ssig0(W[t-15]) + W[t-16]. */
TARGET static __m128i schedule(__m128i w16, __m128i w12, __m128i w8, __m128i w4)
{
    __m128i t = _mm_sha256msg1_epu32(w16, w12);     /* W[t-16] + ssig0(W[t-15]) */
    t = _mm_add_epi32(t, _mm_alignr_epi8(w4, w8, 4)); /* + W[t-7] */
    return _mm_sha256msg2_epu32(t, w4);              /* + ssig1(W[t-2]) */
}

TARGET void sha256_blocks_x86(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    /* Words are big-endian in the message. */
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i abcd = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i efgh = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i t0 = _mm_shuffle_epi32(abcd, 0xB1); /* lanes 0..3: b, a, d, c */
    __m128i t1 = _mm_shuffle_epi32(efgh, 0x1B); /* lanes 0..3: h, g, f, e */
    __m128i abef = _mm_alignr_epi8(t0, t1, 8);
    __m128i cdgh = _mm_blend_epi16(t1, t0, 0xF0);

    for (; nblocks > 0; nblocks--, p += 64) {
        __m128i abef0 = abef, cdgh0 = cdgh, w[4];
        for (int i = 0; i < 4; i++) w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), bswap);
        for (int r = 0; r < 16; r++) { /* four rounds each */
            if (r >= 4) w[r & 3] = schedule(w[r & 3], w[(r + 1) & 3], w[(r + 2) & 3], w[(r + 3) & 3]);
            __m128i wk = _mm_add_epi32(w[r & 3], _mm_loadu_si128((const __m128i *)&sha256_k[4 * r]));
            /* Two rounds make the old (A,B,E,F) the new (C,D,G,H). */
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }

    t0 = _mm_shuffle_epi32(abef, 0x1B); /* lanes 0..3: a, b, e, f */
    t1 = _mm_shuffle_epi32(cdgh, 0xB1); /* lanes 0..3: g, h, c, d */
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(t0, t1, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(t1, t0, 8));
}

#else

int sha256_x86_usable(void) { return 0; }

void sha256_blocks_x86(uint32_t state[8], const uint8_t *p, size_t nblocks)
{
    sha256_blocks_portable(state, p, nblocks);
}

#endif
