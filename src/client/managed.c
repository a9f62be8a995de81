/* managed.c - managed memory (cuMemAllocManaged) and the hooks that keep
 * mirrored memory in step with frees, hints and synchronizations.
 *
 * The session allocates the managed memory; this process maps a mirror of
 * it at the same address (coherence.h), so a pointer means the same bytes
 * on the host and in a kernel. If that address is taken here, the session
 * is asked again (it hands out a new address while the old one is held)
 * a few times before the call fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "coherence.h"
#include "hooks.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

/* Addresses tried before giving up on a mirror at the same address. */
#define MAP_TRIES 8

static CUresult session_alloc(uint64_t *dev, size_t bytesize, unsigned flags)
{
    struct msg_cuMemAllocManaged_req m = {bytesize, flags};
    struct msg_cuMemAllocManaged_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_cuMemAllocManaged);
    msg_cuMemAllocManaged_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS) {
        if (msg_cuMemAllocManaged_rep_get(&c.out, &c.arena, &rep) == 0) *dev = rep.dptr;
        else r = CUDA_ERROR_UNKNOWN;
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SHIM_ENTER(cuMemAllocManaged, (dptr, bytesize, flags));
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t held[MAP_TRIES];
    int nheld = 0;
    CUresult r;
    for (;;) {
        uint64_t dev;
        if ((r = session_alloc(&dev, bytesize, flags)) != CUDA_SUCCESS) break;
        int err = coherence_add_managed(dev, bytesize, &r);
        if (err == 0) {
            if (r == CUDA_SUCCESS) *dptr = dev;
            else cuMemFree_v2(dev);
            /* No kernel uses it until it is attached elsewhere (coherence.c's race check). */
            if (r == CUDA_SUCCESS && flags == CU_MEM_ATTACH_HOST) coherence_attach(dev, 0, CU_MEM_ATTACH_HOST);
            break;
        }
        held[nheld++] = dev; /* keep it, so the next address differs */
        if (err != EEXIST || nheld == MAP_TRIES) {
            LOG_ERROR("cuMemAllocManaged: cannot map %zu bytes at the device address 0x%llx in this process "
                      "(%s, %d tries); managed memory needs the same address on the host",
                      bytesize, (unsigned long long)dev, strerror(err), nheld);
            r = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
    }
    for (int i = 0; i < nheld; i++) cuMemFree_v2(held[i]);
    return r;
}

/* ---- hooks (hooks.h) ------------------------------------------------------ */

void hook_pre_cuMemFree_v2(CUdeviceptr dptr) { coherence_forget_managed(dptr); }

void hook_pre_cuMemFree(CUdeviceptr_v1 dptr) { coherence_forget_managed(dptr); }

CUresult hook_cuMemPrefetchAsync(CUresult r, CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    (void)hStream;
    if (r == CUDA_SUCCESS && dstDevice == CU_DEVICE_CPU) coherence_prefetch_to_host(devPtr, count);
    return r;
}

CUresult hook_cuMemPrefetchAsync_v2(CUresult r, CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    (void)flags;
    (void)hStream;
    int host = location.type == CU_MEM_LOCATION_TYPE_HOST || location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
               location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
    if (r == CUDA_SUCCESS && host) coherence_prefetch_to_host(devPtr, count);
    return r;
}

CUresult hook_cuStreamAttachMemAsync(CUresult r, CUstream hStream, CUdeviceptr dptr, size_t length,
                                     unsigned int flags)
{
    (void)length; /* managed memory attaches whole allocations */
    if (r == CUDA_SUCCESS) coherence_attach(dptr, coherence_stream_key(hStream), flags);
    return r;
}

CUresult hook_cuStreamQuery(CUresult r, CUstream hStream)
{
    if (r == CUDA_SUCCESS) coherence_synced(coherence_stream_key(hStream), 0);
    return r;
}

/* An event's stream is not known here: 0 makes every region stale. */
CUresult hook_cuEventQuery(CUresult r, CUevent hEvent)
{
    (void)hEvent;
    if (r == CUDA_SUCCESS) coherence_synced(0, 0);
    return r;
}

CUresult hook_cuEventSynchronize(CUresult r, CUevent hEvent) { return hook_cuEventQuery(r, hEvent); }

/* What the device attributes may promise about host and GPU sharing
 * memory. The session's driver answers for a GPU whose memory the host
 * reaches directly; through SCUDA the host works on a mirror that meets
 * the GPU's bytes only at synchronizations (coherence.h), so concurrent
 * access, host-native atomics, pageable access and the device use of
 * registered memory are not there, and a program that checks must take
 * its fallback path (docs/architecture.md, 4 Memory kinds). */
int managed_device_attribute(CUdevice_attribute a, int driver_value)
{
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
        return 0;
    default:
        return driver_value;
    }
}
