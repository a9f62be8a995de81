/* value_sizes.h - sizes of values whose type depends on another argument,
 * for the generated code of both sides (codegen/driver_spec.py uses them
 * in buffer lengths: `value=out[scuda_mempool_attr_size(attr)]`).
 *
 * A helper answers 0 for a value it does not know; the generated client
 * and server then refuse the call (CUDA_ERROR_INVALID_VALUE) instead of
 * guessing a size the driver might write past. */
#ifndef SCUDA_VALUE_SIZES_H
#define SCUDA_VALUE_SIZES_H

#include <cuda.h>
#include <stddef.h>

/* cuMemPoolGetAttribute / cuMemPoolSetAttribute: the reuse flags are int,
 * the thresholds and counters cuuint64_t (cuda.h, CUmemPool_attribute). */
static inline size_t scuda_mempool_attr_size(CUmemPool_attribute attr)
{
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        return sizeof(int);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        return sizeof(cuuint64_t);
    default:
        return 0;
    }
}

/* cuPointerSetAttribute: SYNC_MEMOPS is the one attribute a program sets;
 * its value is read as an unsigned int (the driver's documentation). */
static inline size_t scuda_pointer_set_attr_size(CUpointer_attribute attr)
{
    return attr == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ? sizeof(unsigned int) : 0;
}

/* cuStreamGetAttribute / cuStreamSetAttribute: the member of
 * CUstreamAttrValue each attribute with a meaning for a stream reads or
 * writes (driver 580 answers INVALID_VALUE for every other id). The access
 * policy window's base_ptr is a device address: it travels as a value. */
static inline size_t scuda_stream_attr_size(CUstreamAttrID attr)
{
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return sizeof(CUaccessPolicyWindow);
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY: return sizeof(CUsynchronizationPolicy);
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: return sizeof(int);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: return sizeof(CUlaunchMemSyncDomainMap);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return sizeof(CUlaunchMemSyncDomain);
    default: return 0;
    }
}

/* cuGraphKernelNodeGetAttribute / SetAttribute: the member of
 * CUkernelNodeAttrValue each attribute valid for a graph node reads or
 * writes. None holds a host pointer: the window's base_ptr is a device
 * address and a device-updatable node's devNode a device-side handle. */
static inline size_t scuda_kernel_node_attr_size(CUkernelNodeAttrID attr)
{
    CUkernelNodeAttrValue v;
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: return sizeof v.accessPolicyWindow;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE: return sizeof v.cooperative;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: return sizeof v.clusterDim;
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return sizeof v.clusterSchedulingPolicyPreference;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY: return sizeof v.priority;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: return sizeof v.memSyncDomainMap;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN: return sizeof v.memSyncDomain;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION: return sizeof v.preferredClusterDim;
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: return sizeof v.deviceUpdatableKernelNode;
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: return sizeof v.sharedMemCarveout;
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING: return sizeof v.nvlinkUtilCentricScheduling;
    default: return 0;
    }
}

#endif
