/* nvml_devices.c - the GPUs this session serves, as NVML sees them.
 *
 * A session serves the GPUs its CUDA driver shows (CUDA_VISIBLE_DEVICES on
 * the server, for one). NVML itself shows every GPU of the machine, so the
 * calls that count or index devices are answered here (the `hook` lines of
 * codegen/nvml_spec.py): device i of the client is the i-th served GPU in
 * NVML's order, matched by UUID. When every GPU is served (the usual
 * case) the indices are NVML's own. When no UUID matches at all (a driver
 * that names its devices differently, e.g. MIG), every GPU is served. */
#include "nvml_server.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../../common/log.h"

#define MAX_GPUS 64

static struct {
    pthread_mutex_t lock;
    int ready;
    unsigned count;
    unsigned nvml_index[MAX_GPUS];
    nvmlDevice_t dev[MAX_GPUS];
} served = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int cuda_uuids(char uuids[][NVML_DEVICE_UUID_V2_BUFFER_SIZE], int max)
{
    int n = 0;
    if (!real.cuDeviceGetCount || !real.cuDeviceGetUuid_v2 || real.cuDeviceGetCount(&n) != CUDA_SUCCESS) return 0;
    if (n > max) n = max;
    for (int d = 0; d < n; d++) {
        CUuuid u;
        const unsigned char *b = (const unsigned char *)u.bytes;
        if (real.cuDeviceGetUuid_v2(&u, d) != CUDA_SUCCESS) {
            uuids[d][0] = '\0';
            continue;
        }
        snprintf(uuids[d], NVML_DEVICE_UUID_V2_BUFFER_SIZE,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
                 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    }
    return n;
}

static int cuda_has(char uuids[][NVML_DEVICE_UUID_V2_BUFFER_SIZE], int n, const char *uuid)
{
    for (int d = 0; d < n; d++)
        if (strcmp(uuids[d], uuid) == 0) return 1;
    return 0;
}

/* Called with the lock held. NVML must be initialized (the client's
 * nvmlInit); until it is, NVML's own error comes back and nothing is kept. */
static nvmlReturn_t load_served(void)
{
    unsigned all = 0;
    nvmlReturn_t r = nvml_real.nvmlDeviceGetCount_v2 ? nvml_real.nvmlDeviceGetCount_v2(&all) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r != NVML_SUCCESS) return r;
    if (all > MAX_GPUS) all = MAX_GPUS;
    static char uuids[MAX_GPUS][NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int ncuda = cuda_uuids(uuids, MAX_GPUS);
    nvmlDevice_t dev[MAX_GPUS];
    int match[MAX_GPUS], matches = 0;
    for (unsigned i = 0; i < all; i++) {
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
        dev[i] = NULL;
        match[i] = 0;
        if (nvml_real.nvmlDeviceGetHandleByIndex_v2(i, &dev[i]) != NVML_SUCCESS) continue;
        if (nvml_real.nvmlDeviceGetUUID && nvml_real.nvmlDeviceGetUUID(dev[i], uuid, sizeof uuid) == NVML_SUCCESS)
            match[i] = cuda_has(uuids, ncuda, uuid);
        matches += match[i];
    }
    if (matches == 0 && ncuda > 0)
        LOG_WARN("NVML: no GPU's UUID matches the CUDA devices of this session; showing all %u", all);
    served.count = 0;
    for (unsigned i = 0; i < all; i++) {
        if (matches > 0 ? !match[i] : ncuda == 0) continue;
        served.nvml_index[served.count] = i;
        served.dev[served.count] = dev[i];
        served.count++;
    }
    served.ready = 1;
    LOG_INFO("NVML: this session serves %u of %u GPU(s)", served.count, all);
    return NVML_SUCCESS;
}

static nvmlReturn_t ensure_served(void)
{
    pthread_mutex_lock(&served.lock);
    nvmlReturn_t r = served.ready ? NVML_SUCCESS : load_served();
    pthread_mutex_unlock(&served.lock);
    return r;
}

nvmlReturn_t nvml_served_index(unsigned index, unsigned *nvml_index)
{
    nvmlReturn_t r = ensure_served();
    if (r != NVML_SUCCESS) return r;
    if (index >= served.count) return NVML_ERROR_INVALID_ARGUMENT; /* as NVML says */
    *nvml_index = served.nvml_index[index];
    return NVML_SUCCESS;
}

static int served_position(nvmlDevice_t dev)
{
    for (unsigned i = 0; i < served.count; i++)
        if (served.dev[i] == dev) return (int)i;
    return -1;
}

nvmlReturn_t nvml_device_visible(nvmlDevice_t dev)
{
    if (ensure_served() != NVML_SUCCESS || served_position(dev) >= 0) return NVML_SUCCESS;
    /* A MIG device of a served GPU is visible too. */
    unsigned mig = 0;
    nvmlDevice_t parent = NULL;
    if (nvml_real.nvmlDeviceIsMigDeviceHandle && nvml_real.nvmlDeviceIsMigDeviceHandle(dev, &mig) == NVML_SUCCESS &&
        mig && nvml_real.nvmlDeviceGetDeviceHandleFromMigDeviceHandle &&
        nvml_real.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(dev, &parent) == NVML_SUCCESS &&
        served_position(parent) >= 0)
        return NVML_SUCCESS;
    return NVML_ERROR_NOT_FOUND;
}

/* ---- hooks: same prototypes as NVML's, called by nvml_dispatch.gen.c ---- */

nvmlReturn_t srv_nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (deviceCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    /* NVML's own answer first: after nvmlShutdown it is UNINITIALIZED. */
    unsigned all;
    nvmlReturn_t r = nvml_real.nvmlDeviceGetCount_v2 ? nvml_real.nvmlDeviceGetCount_v2(&all) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r == NVML_SUCCESS) r = ensure_served();
    if (r == NVML_SUCCESS) *deviceCount = served.count;
    return r;
}

nvmlReturn_t srv_nvmlDeviceGetCount(unsigned int *deviceCount) { return srv_nvmlDeviceGetCount_v2(deviceCount); }

nvmlReturn_t srv_nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    unsigned i;
    nvmlReturn_t r = nvml_served_index(index, &i);
    if (r != NVML_SUCCESS) return r;
    return nvml_real.nvmlDeviceGetHandleByIndex_v2(i, device);
}

nvmlReturn_t srv_nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    unsigned i;
    nvmlReturn_t r = nvml_served_index(index, &i);
    if (r != NVML_SUCCESS) return r;
    return nvml_real.nvmlDeviceGetHandleByIndex ? nvml_real.nvmlDeviceGetHandleByIndex(i, device)
                                                : nvml_real.nvmlDeviceGetHandleByIndex_v2(i, device);
}

nvmlReturn_t srv_nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t r = nvml_real.nvmlDeviceGetIndex ? nvml_real.nvmlDeviceGetIndex(device, index)
                                                  : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r != NVML_SUCCESS || ensure_served() != NVML_SUCCESS) return r;
    int pos = served_position(device);
    if (pos >= 0) *index = (unsigned)pos;
    return r;
}
