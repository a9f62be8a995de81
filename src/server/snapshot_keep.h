/* snapshot_keep.h - a new snapshot copy on a standby takes unchanged
 * device bytes from the copy parked before it, on the same standby,
 * instead of over the network (snapshot_keep.c; docs/architecture.md,
 * 9.24 Failover to a standby, "Unchanged memory stays on the standby"). */
#ifndef SCUDA_SERVER_SNAPSHOT_KEEP_H
#define SCUDA_SERVER_SNAPSHOT_KEEP_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

/* ---- the parked copy ---- */
/* Parked: answer copies of this session on this machine (a local socket
 * named by our pid; they prove themselves with the resume secret). */
void snapshot_keep_listen(void);
/* From the park loop: serve one waiting copy, if any. */
void snapshot_keep_serve(void);
/* No longer parked (the client failed over here). */
void snapshot_keep_close(void);

/* ---- the importing copy ---- */
/* Fill [addr, addr+size) of our device memory (the caller checked it is
 * ours) from parked copy `pid` on this machine, which holds the same
 * session's bytes there. Adds them to *bytes. Returns CUDA_SUCCESS, or an
 * error with why. */
CUresult snapshot_keep_fetch(uint32_t pid, const uint8_t *secret, uint64_t secret_len, uint64_t addr, uint64_t size,
                             uint64_t *bytes, char *why, size_t wl);
/* The import ended: free what fetching held. */
void snapshot_keep_fetch_end(void);

#endif
