/* nvml_devices.c - NVML's device list over several servers.
 *
 * With SCUDA_SERVER=a,b the driver shim shows every GPU of every server as
 * one list (servers.h, gdevs), with CUDA_VISIBLE_DEVICES applied over it
 * by the client. Programs ask NVML for the same list (PyTorch counts the
 * devices with nvmlDeviceGetCount_v2 before CUDA), so the NVML shim builds
 * the very same table (servers_open.c) and answers the calls that count,
 * index or look up devices from it: the `multi` lines of
 * codegen/nvml_spec.py. Every other call goes to the server of its handle
 * (the handle's tag). With one server none of this runs: each call goes
 * to that server as it is, and the session answers (it applies
 * CUDA_VISIBLE_DEVICES itself, src/server/nvml/nvml_devices.c).
 *
 * NVML device g is CUDA device g: its handle is the one its server's
 * session gives for the device's UUID (from the session info, as CUDA
 * knows it). A device whose UUID NVML does not know (a driver that names
 * devices differently) falls back to the server's own index. */
#include "nvml_shim.h"

#include <string.h>
#include <strings.h>

#include "nvml_multi.gen.h"

/* ---- init and shutdown: every server's session --------------------------- */

#define ON_EVERY_SERVER(call)                                                   \
    do {                                                                        \
        nvmlReturn_t first_ = NVML_SUCCESS;                                     \
        for (int k = 0; k < servers_used; k++) {                                \
            struct server *s = &servers[k];                                     \
            nvmlReturn_t r_ = (call);                                           \
            if (r_ != NVML_SUCCESS && first_ == NVML_SUCCESS) first_ = r_;      \
        }                                                                       \
        return first_;                                                          \
    } while (0)

nvmlReturn_t nvml_multi_nvmlInit(void) { ON_EVERY_SERVER(nvml_on_nvmlInit(s)); }
nvmlReturn_t nvml_multi_nvmlInit_v2(void) { ON_EVERY_SERVER(nvml_on_nvmlInit_v2(s)); }
nvmlReturn_t nvml_multi_nvmlInitWithFlags(unsigned int flags) { ON_EVERY_SERVER(nvml_on_nvmlInitWithFlags(s, flags)); }
nvmlReturn_t nvml_multi_nvmlShutdown(void) { ON_EVERY_SERVER(nvml_on_nvmlShutdown(s)); }

/* ---- counting and indexing ------------------------------------------------ */

nvmlReturn_t nvml_multi_nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (deviceCount == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    /* The first server's NVML says whether NVML is initialized (after
     * nvmlShutdown it is not); the list is the client's. */
    unsigned first;
    nvmlReturn_t r = nvml_on_nvmlDeviceGetCount_v2(&servers[0], &first);
    if (r == NVML_SUCCESS) *deviceCount = (unsigned)gdevs.count;
    return r;
}

nvmlReturn_t nvml_multi_nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvml_multi_nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    const struct gdev *g = gdev_get(&gdevs, (int)index);
    if (g == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT; /* as NVML says */
    char uuid[48];
    gdev_uuid_text(g, uuid, sizeof uuid);
    nvmlReturn_t r = nvml_on_nvmlDeviceGetHandleByUUID(g->s, uuid, device);
    if (r == NVML_ERROR_NOT_FOUND) r = nvml_on_nvmlDeviceGetHandleByIndex_v2(g->s, (unsigned)g->local, device);
    return r;
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvml_multi_nvmlDeviceGetHandleByIndex_v2(index, device);
}

/* The client's index of the device of handle `device`: by its UUID in its
 * server's part of the list, else (the fallback of GetHandleByIndex) by
 * the server's own index. NVML_ERROR_NOT_FOUND: a device of that server
 * that the list leaves out (CUDA_VISIBLE_DEVICES). */
static nvmlReturn_t global_index(nvmlDevice_t device, unsigned *index)
{
    struct server *s = nvml_server_of(device);
    if (s == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], mine[48];
    nvmlReturn_t r = nvmlDeviceGetUUID(device, uuid, sizeof uuid);
    if (r != NVML_SUCCESS) return r;
    for (int g = 0; g < gdevs.count; g++) {
        if (gdevs.dev[g].s != s) continue;
        gdev_uuid_text(&gdevs.dev[g], mine, sizeof mine);
        if (strcasecmp(mine, uuid) == 0) {
            *index = (unsigned)g;
            return NVML_SUCCESS;
        }
    }
    unsigned local;
    r = nvml_on_nvmlDeviceGetIndex(s, device, &local);
    if (r != NVML_SUCCESS) return r;
    int g = gdev_find(&gdevs, s, (int)local);
    if (g < 0) return NVML_ERROR_NOT_FOUND;
    /* Only a device whose UUID NVML does not share with CUDA. */
    gdev_uuid_text(&gdevs.dev[g], mine, sizeof mine);
    nvmlDevice_t again;
    if (nvml_on_nvmlDeviceGetHandleByUUID(s, mine, &again) != NVML_ERROR_NOT_FOUND) return NVML_ERROR_NOT_FOUND;
    *index = (unsigned)g;
    return NVML_SUCCESS;
}

nvmlReturn_t nvml_multi_nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return global_index(device, index);
}

/* /dev/nvidiaN's N is unique on one machine; over several servers two
 * devices would share 0, so each device's minor number is its index. */
nvmlReturn_t nvml_multi_nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    if (minorNumber == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    return global_index(device, minorNumber);
}

/* ---- lookups: the first server that has the device, if the list shows it - */

/* r from a lookup on one server: a device the list leaves out is not found. */
static nvmlReturn_t shown(nvmlReturn_t r, const nvmlDevice_t *device)
{
    unsigned g;
    if (r == NVML_SUCCESS && global_index(*device, &g) != NVML_SUCCESS) return NVML_ERROR_NOT_FOUND;
    return r;
}

#define ASK_EACH_SERVER(call)                                                   \
    do {                                                                        \
        if (device == NULL) return NVML_ERROR_INVALID_ARGUMENT;                 \
        for (int k = 0; k < servers_used; k++) {                                \
            struct server *s = &servers[k];                                     \
            nvmlReturn_t r_ = shown((call), device);                            \
            if (r_ != NVML_ERROR_NOT_FOUND) return r_;                          \
        }                                                                       \
        return NVML_ERROR_NOT_FOUND;                                            \
    } while (0)

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    ASK_EACH_SERVER(nvml_on_nvmlDeviceGetHandleByUUID(s, uuid, device));
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByUUIDV(const nvmlUUID_t *uuid, nvmlDevice_t *device)
{
    ASK_EACH_SERVER(nvml_on_nvmlDeviceGetHandleByUUIDV(s, uuid, device));
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    ASK_EACH_SERVER(nvml_on_nvmlDeviceGetHandleByPciBusId_v2(s, pciBusId, device));
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    ASK_EACH_SERVER(nvml_on_nvmlDeviceGetHandleByPciBusId(s, pciBusId, device));
}

nvmlReturn_t nvml_multi_nvmlDeviceGetHandleBySerial(const char *serial, nvmlDevice_t *device)
{
    ASK_EACH_SERVER(nvml_on_nvmlDeviceGetHandleBySerial(s, serial, device));
}

/* ---- nvidia-smi's private table (nvml_xt.c) ---------------------------------- */

nvmlReturn_t nvml_device_on_server(unsigned index, struct server **srv, unsigned *local)
{
    nvmlDevice_t dev;
    nvmlReturn_t r = nvml_multi_nvmlDeviceGetHandleByIndex_v2(index, &dev);
    if (r != NVML_SUCCESS) return r;
    *srv = nvml_server_of(dev);
    return *srv ? nvml_on_nvmlDeviceGetIndex(*srv, dev, local) : NVML_ERROR_INVALID_ARGUMENT;
}
