/* hooks.h - hand-written ends of generated stubs (spec flag `hook`).
 *
 * A stub marked `hook` in codegen/driver_spec.py returns
 * hook_EXPORT(r, args...) after its call: r is the call's result, which
 * the hook returns (or replaces). They keep mirrored memory (coherence.h)
 * in step with frees, hints and synchronizations. Defined in managed.c. */
#ifndef SCUDA_CLIENT_HOOKS_H
#define SCUDA_CLIENT_HOOKS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/wire.h"
#include "attr_store.h" /* attr_store_config_changed (spec flag `func_config`) */

/* Allocations over a slow link (alloc_ahead.c): a spare of the size asked
 * answers at once; the device's free memory counts the spares. */
int hook_guard_cuMemAlloc_v2(CUresult *r, CUdeviceptr *dptr, size_t bytesize);
CUresult hook_cuMemGetInfo_v2(CUresult r, size_t *free, size_t *total);

/* Before the call (spec flag `pre_hook`): a managed allocation stops being
 * mirrored before the session frees it, so no fetch can reach freed memory. */
void hook_pre_cuMemFree(CUdeviceptr_v1 dptr);
void hook_pre_cuMemFree_v2(CUdeviceptr dptr);
CUresult hook_cuMemPrefetchAsync(CUresult r, CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult hook_cuMemPrefetchAsync_v2(CUresult r, CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream);
CUresult hook_cuStreamAttachMemAsync(CUresult r, CUstream hStream, CUdeviceptr dptr, size_t length,
                                     unsigned int flags);
/* Before the call (spec flag `guard`): nonzero when the call is answered
 * here, with *r its result. cross_server.c: what names objects of two
 * servers of a client of several (servers.h). */
/* attr_set.c (spec flag one_way_when): nonzero when the driver surely
 * accepts the set, which then goes one-way. */
int hook_one_way_cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value);
int hook_one_way_cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev);
/* occupancy.c: a function that misses the memo twice gets a row of
 * cluster widths in one round trip. The key (request) encoder is the
 * generated one (spec flag memo_miss). */
void memo_key_cuOccupancyMaxActiveClusters(wire_buf *key, int *numClusters, CUfunction func,
                                           const CUlaunchConfig *config);
int hook_memo_miss_cuOccupancyMaxActiveClusters(CUresult *r, const wire_buf *key, int *numClusters, CUfunction func,
                                                const CUlaunchConfig *config);
int hook_guard_cuStreamWaitEvent(CUresult *r, CUstream hStream, CUevent hEvent, unsigned int Flags);
int hook_guard_cuCtxEnablePeerAccess(CUresult *r, CUcontext peerContext, unsigned int Flags);
int hook_guard_cuDeviceCanAccessPeer(CUresult *r, int *canAccessPeer, CUdevice dev, CUdevice peerDev);
int hook_guard_cuDeviceGetP2PAttribute(CUresult *r, int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                       CUdevice dstDevice);
/* context.c: the flags cuCtxGetFlags answers with follow a successful set. */
CUresult hook_cuCtxSetFlags(CUresult r, unsigned int flags);
CUresult hook_cuGreenCtxDestroy(CUresult r, CUgreenCtx hCtx);
CUresult hook_cuStreamQuery(CUresult r, CUstream hStream);
CUresult hook_cuEventQuery(CUresult r, CUevent hEvent);
CUresult hook_cuEventSynchronize(CUresult r, CUevent hEvent);

/* host_memory.c: a device address that lies in cuMemHostAlloc memory makes
 * that memory a mirror the GPU can reach (unified addressing). Memsets
 * call it before they are sent (spec flag `pre_hook`); so do launches,
 * for every pointer-sized word of their parameters. */
CUresult host_pinned_touch(uint64_t p);
/* Each aligned 8-byte word of words[0..n): a launch's packed parameters.
 * With no unmirrored cuMemHostAlloc memory, one load and nothing else.
 * CUDA_ERROR_NOT_SUPPORTED when a word is the address of registered
 * (cuMemHostRegister) memory, which the GPU cannot reach through SCUDA. */
CUresult host_pinned_touch_words(const void *words, size_t n);
/* 1 when [p, p + n) lies in one range of page-locked memory
 * (cuMemHostAlloc or cuMemHostRegister): an asynchronous copy from it may
 * read it later (bulk.c). */
int host_memory_pinned(const void *p, size_t n);
/* logs.c: a registration the session's driver dropped; its record goes. */
CUresult hook_cuLogsUnregisterCallback(CUresult r, CUlogsCallbackHandle callback);
/* async_notify.c: the same for an async notification's registration. */
CUresult hook_cuDeviceUnregisterAsyncNotification(CUresult r, CUdevice device, CUasyncCallbackHandle callback);
#define HOOK_MEMSET(NAME) \
    static inline void hook_pre_##NAME(uint64_t dst, ...) { (void)host_pinned_touch(dst); }
HOOK_MEMSET(cuMemsetD8)
HOOK_MEMSET(cuMemsetD8_v2)
HOOK_MEMSET(cuMemsetD8Async)
HOOK_MEMSET(cuMemsetD16)
HOOK_MEMSET(cuMemsetD16_v2)
HOOK_MEMSET(cuMemsetD16Async)
HOOK_MEMSET(cuMemsetD32)
HOOK_MEMSET(cuMemsetD32_v2)
HOOK_MEMSET(cuMemsetD32Async)
HOOK_MEMSET(cuMemsetD2D8)
HOOK_MEMSET(cuMemsetD2D8_v2)
HOOK_MEMSET(cuMemsetD2D8Async)
HOOK_MEMSET(cuMemsetD2D16)
HOOK_MEMSET(cuMemsetD2D16_v2)
HOOK_MEMSET(cuMemsetD2D16Async)
HOOK_MEMSET(cuMemsetD2D32)
HOOK_MEMSET(cuMemsetD2D32_v2)
HOOK_MEMSET(cuMemsetD2D32Async)
#undef HOOK_MEMSET

/* After an attribute set of function or kernel h (spec flag
 * `invalidates_memo_of`), whether it succeeded or not: the limits read
 * from its image no longer tell its dynamic shared memory's (module.c,
 * launch.c). */
void hook_attribute_set(const void *h);

#endif
