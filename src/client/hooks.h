/* hooks.h - hand-written ends of generated stubs (spec flag `hook`).
 *
 * A stub marked `hook` in codegen/driver_spec.py returns
 * hook_EXPORT(r, args...) after its call: r is the call's result, which
 * the hook returns (or replaces). They keep mirrored memory (coherence.h)
 * in step with frees, hints and synchronizations. Defined in managed.c. */
#ifndef SCUDA_CLIENT_HOOKS_H
#define SCUDA_CLIENT_HOOKS_H

#include <cuda.h>

/* Before the call (spec flag `pre_hook`): a managed allocation stops being
 * mirrored before the session frees it, so no fetch can reach freed memory. */
void hook_pre_cuMemFree(CUdeviceptr_v1 dptr);
void hook_pre_cuMemFree_v2(CUdeviceptr dptr);
CUresult hook_cuMemPrefetchAsync(CUresult r, CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult hook_cuMemPrefetchAsync_v2(CUresult r, CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream);
CUresult hook_cuStreamAttachMemAsync(CUresult r, CUstream hStream, CUdeviceptr dptr, size_t length,
                                     unsigned int flags);
CUresult hook_cuStreamQuery(CUresult r, CUstream hStream);
CUresult hook_cuEventQuery(CUresult r, CUevent hEvent);
CUresult hook_cuEventSynchronize(CUresult r, CUevent hEvent);

#endif
