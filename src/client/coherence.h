/* coherence.h - client memory that mirrors memory on the server
 * (docs/architecture.md, 4 Memory kinds).
 *
 * Managed memory (cuMemAllocManaged) and zero-copy host memory
 * (cuMemHostGetDevicePointer) live on the server, where the GPU reaches
 * them; the application reads and writes a copy here. A region is that
 * copy: the application's view, an alias of the same pages that only this
 * library touches, and a state per page:
 *
 *   INVALID  the server may hold newer bytes; the view is PROT_NONE and a
 *            touch fetches the page (and, on sequential faults, more)
 *   CLEAN    both sides agree; the view is read-only and a write marks the
 *            page dirty
 *   DIRTY    the host wrote it; it is pushed before the next call that
 *            goes to the server, and is then CLEAN again
 *
 * After a call that synchronizes with the GPU, the pages the GPU may have
 * written become INVALID (only if some work was sent since the last time).
 * Memory attached to one stream (cuStreamAttachMemAsync, single) follows
 * only that stream's synchronizations and the context's. */
#ifndef SCUDA_CLIENT_COHERENCE_H
#define SCUDA_CLIENT_COHERENCE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Memory that can become a region: size bytes (page-rounded) backed by an
 * anonymous shared file, mapped twice. `at` != 0 asks for exactly that
 * address for the view (managed memory: the device address); EEXIST when
 * something is already mapped there. `at` == 0 places the view in a window
 * that the session's own mappings do not reach, so that the session can
 * mirror it at the same address (pinned host memory). 0 or an errno value. */
int coherence_map(uintptr_t at, size_t size, char **view, char **alias);
void coherence_unmap(char *view, char *alias, size_t size);

/* Start mirroring [view, view+size) <-> device address dev, pushing and
 * fetching in the calling thread's current context. `host_newer`:
 * the host bytes are the truth (pages start DIRTY), else both sides are
 * equal (pages start CLEAN). The region owns view and alias when
 * `owns_mapping` (coherence_forget unmaps them). */
CUresult coherence_add(char *view, char *alias, size_t size, uint64_t dev, int host_newer, int owns_mapping);
/* Mirror managed allocation [dev, dev+size) at the same address: the 2 MiB
 * blocks around it are mapped here unless already mirrored. 0, or the
 * errno of a failed mapping (EEXIST: the address is taken here); *res
 * says why otherwise. */
int coherence_add_managed(uint64_t dev, size_t size, CUresult *res);
/* The same for managed memory that already holds bytes (a library's
 * __managed__ variable, initialized and perhaps written by kernels): the
 * host reads the device's bytes at first touch instead of zeros. */
int coherence_add_managed_existing(uint64_t dev, size_t size, CUresult *res);
void coherence_forget_managed(uint64_t dev);
/* Stop mirroring the region whose view starts at view; 1 if there was one. */
int coherence_forget(const void *view);
/* The device address behind host address p (in a region), or 0. */
uint64_t coherence_device_address(const void *p);

/* The id a stream handle names in coherence_synced/attach: its stream_key,
 * or 0 (no single stream) for the NULL/legacy stream. */
uint64_t coherence_stream_key(CUstream s);

/* Push every dirty page: called before any frame goes to the server. */
void coherence_before_send(void);
/* A call that synchronized with the GPU returned: whole_context for a
 * context synchronize, else the synchronized stream's key (0: a stream
 * this library cannot name, such as an event's). */
void coherence_synced(uint64_t stream_id, int whole_context);
/* coherence_synced for a stream handle: the hook for stream_synced (rpc.h). */
void coherence_stream_synced(CUstream stream, int whole_context);
/* The server wrote device memory [dev, dev+n) (a copy or memset): the host
 * copy of it is stale. */
void coherence_device_wrote(uint64_t dev, size_t n);

/* A pointer this library may pass to a system call or memcpy instead of p
 * for n bytes: p itself unless it is in a region, else the alias, with the
 * pages made valid (fetched) and, if will_write, marked dirty. NULL when
 * a fetch failed (*err says why). */
void *coherence_host_view(const void *p, size_t n, int will_write, CUresult *err);
/* This library wrote [p, p+n) through the alias (after coherence_host_view
 * with will_write): those pages are dirty. */
void coherence_host_wrote(const void *p, size_t n);

/* A kernel was sent: until the next synchronizing call, a host write to
 * managed memory a kernel may use fails that call (coherence.c). */
void coherence_kernel_sent(void);

/* Hints: a prefetch to the host fetches eagerly at the next synchronize;
 * attaching to one stream scopes the region's synchronizations. */
void coherence_prefetch_to_host(uint64_t dev, size_t n);
void coherence_attach(uint64_t dev, uint64_t stream_id, unsigned flags);

/* managed.c: a device attribute as SCUDA can honour it (0 for concurrent
 * managed access, host-native atomics, pageable access and the like),
 * given the session driver's value. */
int managed_device_attribute(CUdevice_attribute a, int driver_value);

#endif
