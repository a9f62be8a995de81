/* bulk.h - striped copies: large host<->device copies over several extra
 * TCP connections to the session at once, because one TCP stream cannot
 * fill a fast link (protocol.h, "Bulk connections";
 * docs/architecture.md, 9.9 Copies and striping).
 *
 * The connections are opened at the first copy of BULK_MIN_COPY bytes or
 * more (BULK_MIN_COPY_TLS over TLS), SCUDA_BULK_STREAMS of them (config.h). When they cannot be opened
 * (an older server, a firewall that lets one connection through) one log
 * line says so and every copy uses the main connection, as before. */
#ifndef SCUDA_CLIENT_BULK_H
#define SCUDA_CLIENT_BULK_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Copies smaller than this go over the main connection, which is faster
 * for them (no announcement, no hand-off to the connections' threads). */
#define BULK_MIN_COPY (8u << 20)
/* The same over TLS. There a stream seals (or opens) each record and then
 * sends (or receives) it on one thread, so the main connection's copy
 * runs at about half a plain stream's speed, whatever its size; spread
 * over the bulk connections the crypto runs on k threads per side at
 * once. From 1 MiB on that pays for the announcement and the hand-off. */
#define BULK_MIN_COPY_TLS (1u << 20)
/* Over TLS, the least each connection a copy uses carries: a copy of n
 * bytes uses at most n / BULK_SHARE_MIN_TLS connections (a 1 MiB copy 2,
 * 4 MiB all 8), whatever SCUDA_BULK_STREAMS. Each connection costs a copy
 * fixed work on both sides (thread wake-ups, a chunk header and its
 * record, a DMA per chunk); below this share that outweighs the crypto
 * it spreads (on the GPU host, 1 MiB ran at 6 GB/s over 4 connections,
 * 4.3 over 8). */
#define BULK_SHARE_MIN_TLS (512u << 10)

/* Copy n bytes from src to device address dst, striped. Returns 1 when
 * the copy was made that way (its result in *r), 0 when striping is not
 * available (the caller copies over the main connection). stream is the
 * stream's wire id (handle_wire_id), mode 0 synchronous or 1 asynchronous (memcpy.c). */
int bulk_htod(uint64_t dst, const void *src, size_t n, uint64_t stream, int mode, CUresult *r);
/* The mirror image: device address src to dst. */
int bulk_dtoh(void *dst, uint64_t src, size_t n, uint64_t stream, int mode, CUresult *r);

/* In a forked child: the connections belong to the parent. */
void bulk_forget_after_fork(void);

#endif
