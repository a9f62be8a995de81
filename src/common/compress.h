/* compress.h - zstd for striped copies over slow links
 * (docs/architecture.md, "Compressed copies").
 *
 * A thin wrapper over Debian's libzstd at a fast level, a cheap probe that
 * tells how well a chunk compresses and how long that takes, and the one
 * rule both sides use to decide, per chunk, whether compressing it makes
 * the copy faster: the sender compresses a chunk only when its compressed
 * bytes on the wire, plus the time to compress and decompress them, take
 * less than COMPRESS_MARGIN of the time its plain bytes take. */
#ifndef SCUDA_COMPRESS_H
#define SCUDA_COMPRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* zstd's level 1: on this kind of data (zeros, low-entropy tensors) it is
 * as fast as the negative levels and compresses better. */
#define COMPRESS_LEVEL 1
/* The probe compresses COMPRESS_PROBE_SPOTS pieces of COMPRESS_PROBE_PIECE
 * bytes spread over the chunk (64 KiB in all): a chunk half zeros, half
 * noise is seen as such, not by its first bytes. */
#define COMPRESS_PROBE_PIECE (16u << 10)
#define COMPRESS_PROBE_SPOTS 4
/* Compress only when that is predicted to take at most this share of the
 * plain copy's time: the prediction is rough, and a near tie is not worth
 * the CPU. */
#define COMPRESS_MARGIN 0.8
/* auto never compresses over a link measured at this rate or faster: there
 * the link is as fast as a core compresses ordinary data (a loopback, a
 * LAN), and the CPU is better left to the application. */
#define COMPRESS_AUTO_MAX_MBPS 4000.0

/* SCUDA_COMPRESS (client): auto (the default), on, off. */
enum compress_mode { COMPRESS_AUTO, COMPRESS_ON, COMPRESS_OFF };
enum compress_mode compress_mode_setting(void);
/* SCUDA_LINK_MBPS (client): the link's rate in Mbit/s as the user states
 * it, instead of the one measured; 0 when unset (or invalid, logged). */
double compress_link_setting(void);

/* The per-copy policy a striped copy's announcement carries in bits 1-7
 * of its mode byte (protocol.h, "Compressed chunks"): 0 never compress,
 * COMPRESS_POLICY_ALWAYS compress every chunk that shrinks, else the
 * client's estimate of the link's rate, 2^((p - 1) / 8) Mbit/s (1 Mbit/s
 * to about 50 Gbit/s, in steps of 9%). */
#define COMPRESS_POLICY_ALWAYS 127u
unsigned compress_policy_of_rate(double mbps); /* 1..126 */
double compress_policy_rate(unsigned policy);   /* Mbit/s */
/* The policy of a copy under mode, with the link measured at mbps (0:
 * not yet measured). */
unsigned compress_policy(enum compress_mode mode, double mbps);

/* What the probe saw: compressed / plain, and the CPU cost of compressing
 * and decompressing, in ns per plain byte. */
struct compress_probe {
    double ratio;
    double ns_per_byte;
};
void compress_probe(const void *src, size_t n, struct compress_probe *p);
/* Whether a chunk the probe saw goes compressed, under `policy`, on one of
 * `streams` connections that share the link. */
int compress_worth(unsigned policy, int streams, const struct compress_probe *p);

/* Compress n bytes into dst (cap bytes). Returns the compressed length,
 * or 0 when it failed or would not be shorter than n (send it plain). */
size_t compress_chunk(void *dst, size_t cap, const void *src, size_t n);
/* Decompress zn bytes into exactly n bytes at dst. Returns 0, or -1 (a
 * zstd error, or a frame of another length: never writes past dst + n). */
int decompress_chunk(void *dst, size_t n, const void *src, size_t zn);

/* Whole requests (src/client/request_pack.c): the n parts, one after the
 * other, into one zstd frame that states their total size. Returns the
 * compressed length, or 0 when it failed or would not be shorter. */
size_t compress_parts(void *dst, size_t cap, const struct iovec *parts, int n);
/* The size a zstd frame of zn bytes says it holds: 1 to max bytes, else 0
 * (no frame, no size stated, or over max: hostile, or not ours). */
size_t decompress_size(const void *src, size_t zn, size_t max);

#endif
