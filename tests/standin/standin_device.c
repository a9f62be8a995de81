/* SCUDA CPU stand-in driver: initialization, version, devices. */
#include "standin_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SI_DEVICE_NAME "SCUDA CPU stand-in"

static long si_env_long(const char *name, long def, long lo, long hi)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (!end || *end || x < lo || x > hi) {
        fprintf(stderr, "standin: ignoring bad %s=%s\n", name, v);
        return def;
    }
    return x;
}

CUresult si_check_init(void)
{
    return si_g.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult si_device_check(CUdevice dev)
{
    if (!si_g.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= si_g.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

static si_ctx *si_primary_new(int dev)
{
    si_ctx *c = si_xcalloc(1, sizeof(*c));
    c->dev = dev;
    c->primary = true;
    return c;
}

/* "SCUDA-STANDIN", STANDIN_UUID_TAG in byte 14, the physical index in
 * byte 15. Real GPUs never share a UUID, but two stand-in processes would:
 * a test with several servers gives each its own tag so that every device
 * in the client's list is told apart by UUID, as on real machines. Read
 * here each time, since CUDA_VISIBLE_DEVICES is matched against UUIDs
 * before cuInit has set anything up. */
static void si_uuid_bytes(unsigned char out[16], int physical)
{
    static const unsigned char base[16] = {'S', 'C', 'U', 'D', 'A', '-', 'S', 'T',
                                           'A', 'N', 'D', 'I', 'N', 0, 0, 0};
    memcpy(out, base, 16);
    out[14] = (unsigned char)si_env_long("STANDIN_UUID_TAG", 0, 0, 255);
    out[15] = (unsigned char)physical;
}

/* One CUDA_VISIBLE_DEVICES entry: an index, or a UUID as NVML and
 * nvidia-smi -L write it ("GPU-5343..."). Returns the physical GPU, or -1. */
static int si_visible_entry(const char *e, size_t len, int nphys)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, e, len);
    buf[len] = 0;
    char *end;
    long v = strtol(buf, &end, 10);
    if (end != buf && *end == 0)
        return v >= 0 && v < nphys ? (int)v : -1;
    for (int p = 0; p < nphys; p++) {
        unsigned char b[16];
        char u[64];
        si_uuid_bytes(b, p);
        snprintf(u, sizeof u, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        if (strcasecmp(u, buf) == 0)
            return p;
    }
    return -1;
}

/* The physical GPUs the process sees, in its order, as the real driver
 * reads CUDA_VISIBLE_DEVICES: the list stops at the first entry that names
 * no GPU (or one already listed). Returns how many. */
static int si_visible(int nphys, int *phys)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) {
        for (int i = 0; i < nphys; i++)
            phys[i] = i;
        return nphys;
    }
    int n = 0;
    while (*v && n < nphys) {
        size_t len = strcspn(v, ",");
        int p = si_visible_entry(v, len, nphys);
        for (int i = 0; i < n && p >= 0; i++)
            if (phys[i] == p)
                p = -1;
        if (p < 0)
            break;
        phys[n++] = p;
        v += len;
        if (*v == ',')
            v++;
    }
    return n;
}

CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    si_enter();
    CUresult rc = CUDA_SUCCESS;
    if (si_g.initialized)
        goto out;
    if (si_g.init_error) {
        rc = si_g.init_error;
        goto out;
    }
    int phys[SI_MAX_DEVICES];
    int ndev = si_visible((int)si_env_long("STANDIN_DEVICES", 1, 0, SI_MAX_DEVICES), phys);
    long mb = si_env_long("STANDIN_MEM_MB", 1024, 1, 1L << 20);
    if (ndev == 0) {
        rc = si_g.init_error = CUDA_ERROR_NO_DEVICE;
        goto out;
    }
    si_g.mem_bytes = (size_t)mb << 20;
    for (int i = 0; i < ndev; i++) {
        si_device *d = &si_g.dev[i];
        d->ordinal = i;
        d->physical = phys[i];
        d->total = si_g.mem_bytes;
        rc = si_va_init(d);
        if (rc != CUDA_SUCCESS) {
            si_g.init_error = rc;
            goto out;
        }
        d->primary = si_primary_new(i);
    }
    si_g.ndev = ndev;
    si_g.initialized = true;
out:
    si_leave();
    return rc;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = SI_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= si_g.ndev)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = si_g.ndev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", SI_DEVICE_NAME);
    return CUDA_SUCCESS;
}

static void si_uuid(CUuuid *uuid, CUdevice dev)
{
    si_uuid_bytes((unsigned char *)uuid->bytes, si_g.dev[dev].physical);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    si_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = si_g.dev[dev].total;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

static int si_pci_bus(CUdevice dev)
{
    return 0x18 + si_g.dev[dev].physical;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", si_pci_bus(dev));
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (!dev || !pciBusId)
        return CUDA_ERROR_INVALID_VALUE;
    /* [domain:]bus:device.function, hex */
    unsigned dom = 0, bus = 0, devn = 0, fn = 0;
    int n = sscanf(pciBusId, "%x:%x:%x.%x", &dom, &bus, &devn, &fn);
    if (n != 4) {
        dom = 0;
        n = sscanf(pciBusId, "%x:%x.%x", &bus, &devn, &fn);
        if (n != 3)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (int i = 0; i < si_g.ndev; i++) {
        if (dom == 0 && bus == (unsigned)si_pci_bus(i) && devn == 0 && fn == 0) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

/* Values of an H100 SXM (sm_90), driver 580, for every CUdevice_attribute. */
static bool si_attr_value(CUdevice_attribute a, CUdevice dev, int *v)
{
    switch ((int)a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: *v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = SI_SM_COUNT; break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *v = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: *v = 512; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = si_pci_bus(dev); break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 52428800; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *v = 3; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE: *v = 8192; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE: *v = 8192; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS: *v = 2046; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: *v = 16384; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS: *v = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS: *v = 2046; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: *v = 268435456; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH: *v = 131072; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: *v = 65000; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: *v = 2097120; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH: *v = 32768; break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: *v = dev; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO: *v = 2; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = SI_MAX_DYN_SHMEM_OPTIN; break;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE: *v = 32505856; break;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: *v = 134217728; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: *v = 4; break;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_NUMA_ID: *v = -1; break;
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID: *v = 0x233010de; break;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID: *v = 0x16c110de; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED: *v = 0; break;
    default: return false;
    }
    return true;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    int v = 0;
    if (!si_attr_value(attrib, dev, &v))
        return CUDA_ERROR_INVALID_VALUE;
    *pi = v;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetProperties(CUdevprop *prop, CUdevice dev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    memset(prop, 0, sizeof(*prop));
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->sharedMemPerBlock = 49152;
    prop->totalConstantMemory = 65536;
    prop->SIMDWidth = 32;
    prop->memPitch = 2147483647;
    prop->regsPerBlock = 65536;
    prop->clockRate = 1980000;
    prop->textureAlign = 512;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CUresult rc = si_device_check(dev);
    if (rc)
        return rc;
    rc = si_device_check(peerDev);
    if (rc)
        return rc;
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib,
                                         CUdevice srcDevice, CUdevice dstDevice)
{
    CUresult rc = si_device_check(srcDevice);
    if (rc)
        return rc;
    rc = si_device_check(dstDevice);
    if (rc)
        return rc;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (srcDevice == dstDevice)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *value = 1; break;
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
