/* fatbin_unpack.c - see fatbin_unpack.h. Bounds first, allocation after:
 * no size from the header is trusted before it is checked. */
#include "fatbin_unpack.h"

#include "why.h"

#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

/* An LZ4 sequence's length bytes add at most 255 output bytes each, so
 * no block expands more than this: a header claiming more is a lie, and
 * is refused before the allocation it asks for. */
#define LZ4_MAX_RATIO 255u

static int check_sizes(const struct fatbin_packed *in, char *why, size_t whylen)
{
    if (in->packed_len == 0 || in->packed_len > in->payload_len)
        return why_fail(why, whylen, "compressed size %llu does not fit its %llu-byte payload",
                        (unsigned long long)in->packed_len, (unsigned long long)in->payload_len);
    if (in->unpacked_len == 0 || in->unpacked_len > FATBIN_UNPACK_MAX)
        return why_fail(why, whylen, "uncompressed size %llu is outside 1 .. %llu bytes",
                        (unsigned long long)in->unpacked_len, (unsigned long long)FATBIN_UNPACK_MAX);
    return 0;
}

static int unpack_lz4(const struct fatbin_packed *in, uint8_t *out, char *why, size_t whylen)
{
    /* packed_len <= payload_len, which lies inside a received image, but
     * LZ4 counts in int. */
    if (in->packed_len > INT_MAX) return why_fail(why, whylen, "LZ4 block of %llu bytes is too large", (unsigned long long)in->packed_len);
    int got = LZ4_decompress_safe((const char *)in->payload, (char *)out, (int)in->packed_len, (int)in->unpacked_len);
    if (got < 0) return why_fail(why, whylen, "its LZ4 block is corrupt");
    if ((uint64_t)got != in->unpacked_len)
        return why_fail(why, whylen, "its LZ4 block holds %d bytes, not the %llu its header says", got,
                        (unsigned long long)in->unpacked_len);
    return 0;
}

static int unpack_zstd(const struct fatbin_packed *in, uint8_t *out, char *why, size_t whylen)
{
    unsigned long long said = ZSTD_getFrameContentSize(in->payload, (size_t)in->packed_len);
    if (said == ZSTD_CONTENTSIZE_ERROR) return why_fail(why, whylen, "its payload is no zstd frame");
    if (said != ZSTD_CONTENTSIZE_UNKNOWN && said != in->unpacked_len)
        return why_fail(why, whylen, "its zstd frame holds %llu bytes, not the %llu its header says", said,
                        (unsigned long long)in->unpacked_len);
    /* One shot into a buffer of exactly the promised size: zstd stops
     * with an error rather than write past it. */
    size_t got = ZSTD_decompress(out, (size_t)in->unpacked_len, in->payload, (size_t)in->packed_len);
    if (ZSTD_isError(got)) return why_fail(why, whylen, "its zstd data is corrupt (%s)", ZSTD_getErrorName(got));
    if (got != in->unpacked_len)
        return why_fail(why, whylen, "its zstd data holds %zu bytes, not the %llu its header says", got,
                        (unsigned long long)in->unpacked_len);
    return 0;
}

int fatbin_unpack(const struct fatbin_packed *in, uint8_t **out, char *why, size_t whylen)
{
    *out = NULL;
    uint64_t codec = in->flags & FATBIN_COMPRESSED;
    if (codec != FATBIN_FLAG_LZ4 && codec != FATBIN_FLAG_ZSTD)
        return why_fail(why, whylen, "its compression (flags 0x%llx) is neither LZ4 nor zstd",
                        (unsigned long long)in->flags);
    if (check_sizes(in, why, whylen) != 0) return -1;
    if (codec == FATBIN_FLAG_LZ4 && in->unpacked_len / LZ4_MAX_RATIO > in->packed_len)
        return why_fail(why, whylen, "uncompressed size %llu is more than LZ4 can make of %llu bytes",
                        (unsigned long long)in->unpacked_len, (unsigned long long)in->packed_len);
    uint8_t *buf = malloc((size_t)in->unpacked_len);
    if (!buf) return why_fail(why, whylen, "no memory for its %llu uncompressed bytes", (unsigned long long)in->unpacked_len);
    int rc = codec == FATBIN_FLAG_LZ4 ? unpack_lz4(in, buf, why, whylen) : unpack_zstd(in, buf, why, whylen);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}
