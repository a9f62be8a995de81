/* fatbin_unpack.h - a compressed fatbin entry's payload, decompressed.
 *
 * nvcc compresses fatbin entries by default (CUDA 12: LZ4, CUDA 13: zstd
 * too; `-compress-mode`), and the driver decompresses an entry when it
 * loads it. SCUDA reads the code itself only to list the variables a
 * migration copies (image_globals, in the session) and the kernels of a
 * new image (image_kernels, in the client), so it decompresses only then,
 * only the one entry the device loads.
 *
 * What an entry header says (little-endian, offsets from the entry's
 * start; image_check.c reads them):
 *
 *   16  u32  compressed size: the codec's bytes at the payload's start
 *            (the payload is that, padded with zeros to a multiple of 8)
 *   40  u64  flags: 0x2000 LZ4 (one raw block, no frame), 0x8000 zstd
 *            (one or more frames)
 *   56  u64  uncompressed size
 *
 * Every one of them is hostile: the compressed size must lie inside the
 * payload, the uncompressed size be nonzero and at most
 * FATBIN_UNPACK_MAX (and, for LZ4, within what LZ4 can expand the bytes
 * to), and the codec must produce exactly that many bytes. */
#ifndef SCUDA_COMMON_FATBIN_UNPACK_H
#define SCUDA_COMMON_FATBIN_UNPACK_H

#include <stddef.h>
#include <stdint.h>

#define FATBIN_FLAG_LZ4 0x2000u
#define FATBIN_FLAG_ZSTD 0x8000u
#define FATBIN_COMPRESSED (FATBIN_FLAG_LZ4 | FATBIN_FLAG_ZSTD)

/* The decompression bomb bound: cuBLAS's largest cubins are tens of MiB. */
#define FATBIN_UNPACK_MAX ((uint64_t)1 << 30)

struct fatbin_packed {
    uint64_t flags;          /* the entry's flags: which codec */
    const uint8_t *payload;  /* the entry's payload, inside the image */
    uint64_t payload_len;    /* its size as the entry header says */
    uint64_t packed_len;     /* the compressed size (header offset 16) */
    uint64_t unpacked_len;   /* the uncompressed size (header offset 56) */
};

/* 0 with *out (malloc'd, the caller frees it) holding exactly
 * in->unpacked_len bytes; else -1 with the reason in why. */
int fatbin_unpack(const struct fatbin_packed *in, uint8_t **out, char *why, size_t whylen);

#endif
