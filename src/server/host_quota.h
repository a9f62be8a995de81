/* host_quota.h - the per-session host memory account (--host-mem-quota).
 *
 * The device quota (quota.h) bounds what a session holds on the GPU; this
 * one bounds what a client can make the session hold in its own memory:
 * host mirrors (zero-copy memory, pinned under a real driver), staging and
 * striping buffers, blocking calls queued for a worker with their frames,
 * reply buffers, captured graphs' host copies, module image copies and the
 * session's module table. One process is one session, so the account is
 * process-wide. A charge past the quota is refused with one log line that
 * names the quota and the option; the caller fails its call with
 * CUDA_ERROR_OUT_OF_MEMORY (or falls back to a path that needs no more
 * memory) and the session goes on. */
#ifndef SCUDA_SERVER_HOST_QUOTA_H
#define SCUDA_SERVER_HOST_QUOTA_H

#include <stddef.h>
#include <stdint.h>

/* The default of --host-mem-quota. */
#define HOST_QUOTA_DEFAULT (8ull << 30)

/* Set the quota in bytes (0: no quota, charges are only counted). */
void host_quota_init(uint64_t limit);

/* Charge `bytes` for `what` (a few words for the log line). Returns 0, or
 * -1 when the session would pass its quota (nothing is charged then). */
int host_quota_charge(uint64_t bytes, const char *what);
/* A function that frees memory the session keeps only to be fast, and
 * returns the bytes it gave back: a charge that would be refused calls it
 * once, then tries again. It must not block (the caller may hold locks). */
void host_quota_set_reclaim(uint64_t (*fn)(void));
/* Give back what a successful charge took. */
void host_quota_release(uint64_t bytes);
/* Bytes charged now. */
uint64_t host_quota_used(void);

/* malloc(n) charged to the account (NULL when refused or out of memory),
 * and its free; host_quota_free(NULL) does nothing. */
void *host_quota_alloc(size_t n, const char *what);
void host_quota_free(void *p);

#endif
