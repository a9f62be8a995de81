/* standin_nvml.c - a CPU stand-in for libnvidia-ml, for CI
 * (docs/architecture.md, 6 Tests).
 *
 * The session loads it through SCUDA_NVML_PATH (the NVML e2e tests), or the
 * shim through SCUDA_REAL_NVML (passthrough). Fake GPUs, in this order:
 *   0  "SCUDA Stand-in Hidden GPU": a UUID no CUDA stand-in device has, so
 *      a session must not show it (it serves the GPUs its CUDA driver has)
 *   1  "SCUDA CPU stand-in" (the CUDA stand-in's name too): the UUID of the
 *      CUDA stand-in's device 0
 *   2.. with STANDIN_DEVICES=N (as the CUDA stand-in reads it), the UUIDs
 *      of its devices 1..N-1, so one machine of several GPUs is modelled
 *      the same way by both stand-ins
 * STANDIN_UUID_TAG=T puts T in every UUID (as the CUDA stand-in does) and
 * adds T MiB to each GPU's used memory, so a test can tell which server's
 * NVML answered.
 * It implements a few calls of each shape the generator emits (strings,
 * versioned structs, count+array, in-out arrays, struct+array, handles in
 * structs, handle arrays, events) and nvidia-smi's private table, with
 * NVML's error behaviour for them; the rest are absent, as in an old NVML.
 * Its error strings end in "(stand-in)" so a test can tell where a string
 * came from. A test double, not a product feature. */
#include <nvml.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_NDEV 9 /* the hidden GPU and 8 */
#define MIB (1024ull * 1024ull)

struct nvmlDevice_st {
    const char *name;
    char uuid[48]; /* STANDIN_UUID_TAG goes in at nvmlInit */
    unsigned long long used;
    unsigned util;
};

struct nvmlEventSet_st {
    nvmlDevice_t dev;
    unsigned long long types;
};

static struct nvmlDevice_st devs[MAX_NDEV] = {
    {"SCUDA Stand-in Hidden GPU", "GPU-00000000-0000-0000-0000-0000000000ff", 0, 0},
    {"SCUDA CPU stand-in", "GPU-53435544-412d-5354-414e-44494e000000", 64 * MIB, 0},
};
static unsigned ndev = 2; /* 1 + STANDIN_DEVICES, set at nvmlInit */
static int init_count;
static struct nvmlEventSet_st sets[4];

static int valid(nvmlDevice_t d) { return d >= &devs[0] && d < &devs[ndev]; }

static nvmlReturn_t copy_str(char *dst, unsigned len, const char *s)
{
    if (dst == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

#define NEED_INIT()                                             \
    do {                                                        \
        if (init_count == 0) return NVML_ERROR_UNINITIALIZED;   \
    } while (0)
#define NEED_DEV(d)                                             \
    do {                                                        \
        NEED_INIT();                                            \
        if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;      \
    } while (0)

/* ---- init, errors, system ------------------------------------------------- */

/* STANDIN_DEVICES=N: the GPUs after the hidden one, with the CUDA
 * stand-in's physical index in byte 15 of the UUID (the last two hex
 * digits). STANDIN_UUID_TAG=N (0..255) goes in byte 14 of every UUID, as
 * the CUDA stand-in does, so the devices that share the CUDA stand-in's
 * UUIDs still do when several stand-in servers are told apart by their
 * tags. In the text form, byte 14 is the two hex digits 4 from the end. */
static void configure_devices(void)
{
    const char *nd = getenv("STANDIN_DEVICES");
    long want = nd && *nd ? strtol(nd, NULL, 10) : 1;
    ndev = want >= 1 && want < MAX_NDEV ? (unsigned)want + 1 : 2;
    for (unsigned i = 2; i < ndev; i++) {
        devs[i] = devs[1];
        char hex[3];
        snprintf(hex, sizeof hex, "%02x", (unsigned)((i - 1) & 0xffu)); /* byte 15: the CUDA stand-in's physical index */
        memcpy(devs[i].uuid + strlen(devs[i].uuid) - 2, hex, 2);
    }
    const char *v = getenv("STANDIN_UUID_TAG");
    char *end = NULL;
    long tag = v && *v ? strtol(v, &end, 10) : 0;
    if (v && *v && (*end || tag < 0 || tag > 255)) {
        fprintf(stderr, "standin nvml: ignoring bad STANDIN_UUID_TAG=%s\n", v);
        tag = 0;
    }
    for (unsigned i = 0; i < ndev; i++) {
        char hex[3];
        snprintf(hex, sizeof hex, "%02x", (unsigned)tag);
        memcpy(devs[i].uuid + strlen(devs[i].uuid) - 4, hex, 2);
        if (i > 0) devs[i].used = (64 + (unsigned long long)tag) * MIB;
    }
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    if (init_count++ == 0) configure_devices();
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    NEED_INIT();
    init_count--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success (stand-in)";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized (stand-in)";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument (stand-in)";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported (stand-in)";
    case NVML_ERROR_NOT_FOUND: return "Not Found (stand-in)";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size (stand-in)";
    default: return "Unknown Error (stand-in)";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    NEED_INIT();
    return copy_str(version, length, "580.00.01");
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    if (v == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *v = 13000;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    NEED_INIT();
    char path[64], comm[64] = "";
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return NVML_ERROR_NOT_FOUND;
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    return copy_str(name, length, comm);
}

/* ---- devices ------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    NEED_INIT();
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = ndev;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    NEED_INIT();
    if (index >= ndev || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    NEED_INIT();
    if (uuid == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < ndev; i++) {
        if (strcmp(devs[i].uuid, uuid) == 0) {
            *device = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    NEED_DEV(device);
    if (index == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)(device - devs);
    return NVML_SUCCESS;
}

/* The CUDA stand-in's bus for the same GPU (0x18 + its physical index);
 * the hidden GPU's is 0x17. */
static unsigned pci_bus(nvmlDevice_t d) { return 0x17 + (unsigned)(d - devs); }

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    NEED_DEV(device);
    if (pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = pci_bus(device);
    pci->pciDeviceId = 0x233010de;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *busId, nvmlDevice_t *device)
{
    NEED_INIT();
    unsigned dom = 0, bus = 0;
    if (busId == NULL || device == NULL || sscanf(busId, "%x:%x:", &dom, &bus) != 2)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < ndev; i++) {
        if (pci_bus(&devs[i]) == bus) {
            *device = &devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMig)
{
    NEED_DEV(device);
    if (isMig == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *isMig = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    NEED_DEV(device);
    return copy_str(name, length, device->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    NEED_DEV(device);
    return copy_str(uuid, length, device->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    NEED_DEV(device);
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = 16384 * MIB;
    memory->used = device->used;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    NEED_DEV(device);
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = 16384 * MIB;
    memory->reserved = 300 * MIB;
    memory->used = device->used;
    memory->free = memory->total - memory->reserved - memory->used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
    NEED_DEV(device);
    if (u == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    device->util = (device->util + 7) % 101; /* a live reading */
    u->gpu = device->util;
    u->memory = device->util / 2;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor, unsigned int *temp)
{
    NEED_DEV(device);
    if (temp == NULL || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 41;
    return NVML_SUCCESS;
}

/* The caller's process list: this process (the session, when the session
 * loaded us) using the device's memory. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                             nvmlProcessInfo_t *infos)
{
    NEED_DEV(device);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = device->used ? 1 : 0, cap = *count;
    *count = n;
    if (cap < n) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (n && infos == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (n) {
        infos[0].pid = (unsigned)getpid();
        infos[0].usedGpuMemory = device->used;
        infos[0].gpuInstanceId = infos[0].computeInstanceId = 0xFFFFFFFFu;
    }
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device, nvmlProcessDetailList_t *plist)
{
    NEED_DEV(device);
    if (plist == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (plist->version != nvmlProcessDetailList_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned n = device->used ? 1 : 0, cap = plist->numProcArrayEntries;
    plist->numProcArrayEntries = n;
    if (cap < n) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (n) {
        if (plist->procArray == NULL) return NVML_ERROR_INVALID_ARGUMENT;
        memset(&plist->procArray[0], 0, sizeof plist->procArray[0]);
        plist->procArray[0].pid = (unsigned)getpid();
        plist->procArray[0].usedGpuMemory = device->used;
    }
    return NVML_SUCCESS;
}

/* In and out: the caller names the fields, each gets twice its id. */
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    NEED_DEV(device);
    if (values == NULL || valuesCount < 0) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < valuesCount; i++) {
        values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        values[i].value.uiVal = values[i].fieldId * 2;
        values[i].nvmlReturn = NVML_SUCCESS;
    }
    return NVML_SUCCESS;
}

/* Every other device. */
EXPORT nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device, nvmlGpuTopologyLevel_t level,
                                                     unsigned int *count, nvmlDevice_t *array)
{
    (void)level;
    NEED_DEV(device);
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned cap = *count, n = 0;
    *count = ndev - 1;
    if (array == NULL) return cap == 0 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
    if (cap < ndev - 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned i = 0; i < ndev; i++)
        if (&devs[i] != device) array[n++] = &devs[i];
    return NVML_SUCCESS;
}

/* ---- events: a handle inside an output struct -------------------------------- */

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    NEED_INIT();
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < 4; i++) {
        if (sets[i].types == 0) {
            sets[i].types = ~0ull;
            sets[i].dev = NULL;
            *set = &sets[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_MEMORY;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set)
{
    NEED_DEV(device);
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    set->dev = device;
    set->types = types;
    return NVML_SUCCESS;
}

/* After the timeout, one Xid 79 from the registered device. */
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    NEED_INIT();
    if (set == NULL || data == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (set->dev == NULL) return NVML_ERROR_TIMEOUT;
    usleep(timeoutms * 1000u);
    memset(data, 0, sizeof *data);
    data->device = set->dev;
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = 79;
    data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFFu;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    NEED_INIT();
    if (set == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    set->types = 0;
    return NVML_SUCCESS;
}

/* ---- nvidia-smi's private table, as driver 580 lays out the slots SCUDA knows ---- */

static nvmlReturn_t xt_bus_id(unsigned index, char *buf, unsigned len)
{
    NEED_INIT();
    if (index >= ndev || buf == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    char id[32];
    snprintf(id, sizeof id, "00000000:%02X:00.0", 7 + 8 * index);
    return copy_str(buf, len, id);
}

/* Entries of 4128 bytes: pid u32 @0, memory u64 @8, name @32. */
static nvmlReturn_t xt_processes(nvmlDevice_t device, unsigned *count, unsigned char *entries, uintptr_t flags)
{
    (void)flags;
    NEED_DEV(device);
    unsigned n = device->used ? 1 : 0, cap = *count;
    *count = n;
    if (cap < n) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (n) {
        unsigned pid = (unsigned)getpid();
        unsigned long long mem = device->used;
        memset(entries, 0, 4128);
        memcpy(entries, &pid, 4);
        memcpy(entries + 8, &mem, 8);
        nvmlSystemGetProcessName(pid, (char *)entries + 32, 4096);
    }
    return NVML_SUCCESS;
}

/* A slot of unknown prototype to SCUDA: a string and a second output. */
static nvmlReturn_t xt_part_number(nvmlDevice_t device, char *buf, unsigned len, unsigned *extra)
{
    NEED_DEV(device);
    if (extra) *extra = 7;
    return copy_str(buf, len, "2335-895-A1");
}

static nvmlReturn_t xt_other(void) { return NVML_ERROR_NOT_SUPPORTED; }

EXPORT nvmlReturn_t nvmlInternalGetExportTable(const void **table, const unsigned char *uuid)
{
    static const unsigned char smi[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                          0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
    static uintptr_t t[270];
    if (table == NULL || uuid == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (memcmp(uuid, smi, 16) != 0) return NVML_ERROR_NOT_SUPPORTED;
    t[0] = sizeof t;
    for (int i = 1; i < 270; i++) t[i] = (uintptr_t)xt_other;
    t[81] = (uintptr_t)xt_bus_id;
    t[213] = t[214] = t[215] = (uintptr_t)xt_processes;
    t[231] = (uintptr_t)xt_part_number;
    *table = t;
    return NVML_SUCCESS;
}
