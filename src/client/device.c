/* device.c - device queries, answered from the session info that each
 * server sent at connect; no traffic (docs/architecture.md, 3.3 Call classes:
 * `local`). Ordinals index the client's device list over its servers
 * (gdevs, gdev.h), which with one server is that server's list. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "coherence.h"
#include "conn.h"
#include "servers.h"
#include "shim.h"

static const struct device_info *device_at(CUdevice dev)
{
    const struct gdev *g = gdev_get(&gdevs, dev);
    return g != NULL ? g->info : NULL;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
    SHIM_ENTER(cuDeviceGetCount, (count));
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = gdevs.count;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    SHIM_ENTER(cuDeviceGet, (device, ordinal));
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!device_at(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetName, (name, len, dev));
    const struct device_info *d = device_at(dev);
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", d->name);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetAttribute, (pi, attrib, dev));
    const struct device_info *d = device_at(dev);
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    if ((unsigned)attrib >= d->attr_count) return CUDA_ERROR_INVALID_VALUE;
    if (d->attr_result[attrib] != CUDA_SUCCESS) return (CUresult)d->attr_result[attrib];
    *pi = managed_device_attribute(attrib, d->attr_value[attrib]);
    return CUDA_SUCCESS;
}

static CUresult total_mem(size_t *bytes, CUdevice dev)
{
    const struct device_info *d = device_at(dev);
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)d->total_mem;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SHIM_ENTER(cuDeviceTotalMem_v2, (bytes, dev));
    return total_mem(bytes, dev);
}

/* The legacy 32-bit entry point (CUDA 2.x ABI). */
EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    SHIM_ENTER(cuDeviceTotalMem, (bytes, dev));
    size_t b;
    CUresult r = total_mem(bytes ? &b : NULL, dev);
    if (r == CUDA_SUCCESS) *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned)b;
    return r;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetUuid, (uuid, dev));
    const struct device_info *d = device_at(dev);
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    *uuid = d->uuid;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetUuid_v2, (uuid, dev));
    const struct device_info *d = device_at(dev);
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    *uuid = d->uuid;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetPCIBusId, (pciBusId, len, dev));
    const struct device_info *d = device_at(dev);
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!d) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(pciBusId, (size_t)len, "%s", d->pci_bus_id);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    SHIM_ENTER(cuDeviceGetByPCIBusId, (dev, pciBusId));
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    /* The first match: every machine has its own 0000:18:00.0, so two
     * servers' devices may share a bus id; the UUID tells them apart. */
    for (int i = 0; i < gdevs.count; i++) {
        if (strcasecmp(gdevs.dev[i].info->pci_bus_id, pciBusId) == 0) {
            *dev = (CUdevice)i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

static int attr(CUdevice dev, CUdevice_attribute a)
{
    int v = 0;
    cuDeviceGetAttribute(&v, a, dev);
    return v;
}

EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    SHIM_ENTER(cuDeviceComputeCapability, (major, minor, dev));
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    if (!device_at(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *major = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    *minor = attr(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    SHIM_ENTER(cuDeviceGetProperties, (prop, dev));
    if (!prop) return CUDA_ERROR_INVALID_VALUE;
    if (!device_at(dev)) return CUDA_ERROR_INVALID_DEVICE;
    memset(prop, 0, sizeof *prop);
    prop->maxThreadsPerBlock = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    prop->maxThreadsDim[0] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    prop->maxThreadsDim[1] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    prop->maxThreadsDim[2] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    prop->maxGridSize[0] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    prop->maxGridSize[1] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    prop->maxGridSize[2] = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    prop->sharedMemPerBlock = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    prop->totalConstantMemory = attr(dev, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
    prop->SIMDWidth = attr(dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    prop->memPitch = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
    prop->regsPerBlock = attr(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    prop->clockRate = attr(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    prop->textureAlign = attr(dev, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
    return CUDA_SUCCESS;
}
