/* nvml_remote.c - the NVML shim against `scuda server` and the stand-in NVML.
 *
 * The session loads tests/standin/nvml (SCUDA_NVML_PATH) and the CUDA
 * stand-in. Checks: only the GPU the session's CUDA driver has is shown;
 * NVML's own errors come back unchanged; each argument shape the generator
 * emits round-trips (strings, versioned structs, count + array with
 * INSUFFICIENT_SIZE, in-out arrays, a struct pointing to an array, a handle
 * inside an output struct, handle arrays); the process list shows the
 * session process and its memory; nvidia-smi's private table; a forked
 * child connects anew; and with no server, nvmlInit fails within 5 s naming
 * the address. */
#define _GNU_SOURCE
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* nvmlDeviceGetTemperature is deprecated, and still what nvidia-smi and pynvml call. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define NV(call)                                                                       \
    do {                                                                               \
        nvmlReturn_t nv_r_ = (call);                                                   \
        CHECK(nv_r_ == NVML_SUCCESS, "%s returned %d (%s)", #call, nv_r_, nvmlErrorString(nv_r_)); \
    } while (0)
#define NV_EXPECT(want, call)                                                          \
    do {                                                                               \
        nvmlReturn_t nv_r_ = (call);                                                   \
        CHECK(nv_r_ == (want), "%s returned %d, want %d", #call, nv_r_, (want));       \
    } while (0)

#define SERVED_UUID "GPU-53435544-412d-5354-414e-44494e000000" /* the CUDA stand-in's device 0 */
#define HIDDEN_UUID "GPU-00000000-0000-0000-0000-0000000000ff"

nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *uuid);

static void devices(nvmlDevice_t *dev)
{
    unsigned count = 0;
    NV(nvmlDeviceGetCount_v2(&count));
    CHECK(count == 1, "the session serves 1 GPU, NVML shows %u", count);
    NV(nvmlDeviceGetHandleByIndex_v2(0, dev));
    NV_EXPECT(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByIndex_v2(1, dev + 1));
    unsigned index = 9;
    NV(nvmlDeviceGetIndex(*dev, &index));
    CHECK(index == 0, "index %u", index);

    char name[96], uuid[96];
    NV(nvmlDeviceGetName(*dev, name, sizeof name));
    CHECK(strcmp(name, "SCUDA CPU stand-in") == 0, "name '%s'", name);
    NV(nvmlDeviceGetUUID(*dev, uuid, sizeof uuid));
    CHECK(strcmp(uuid, SERVED_UUID) == 0, "uuid '%s'", uuid);
    char tiny[4] = "xyz";
    NV_EXPECT(NVML_ERROR_INSUFFICIENT_SIZE, nvmlDeviceGetName(*dev, tiny, sizeof tiny));
    CHECK(strcmp(tiny, "xyz") == 0, "a failed call wrote the caller's buffer");

    nvmlDevice_t by_uuid = NULL;
    NV(nvmlDeviceGetHandleByUUID(SERVED_UUID, &by_uuid));
    CHECK(by_uuid == *dev, "one device, two handles: %p %p", (void *)by_uuid, (void *)*dev);
    NV_EXPECT(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByUUID(HIDDEN_UUID, &by_uuid));

    /* A handle the session never gave out is NVML's INVALID_ARGUMENT, and
     * never a dereference of a server pointer. */
    NV_EXPECT(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetName((nvmlDevice_t)(uintptr_t)0xdead0, name, sizeof name));
    const char *s = nvmlErrorString(NVML_ERROR_INVALID_ARGUMENT);
    CHECK(strcmp(s, "Invalid Argument (stand-in)") == 0, "error string '%s' is not the server's", s);
}

static void memory_and_utilization(nvmlDevice_t dev)
{
    nvmlMemory_t m;
    NV(nvmlDeviceGetMemoryInfo(dev, &m));
    CHECK(m.total == 16384ull << 20 && m.used == 64ull << 20, "memory %llu/%llu", m.used, m.total);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    NV(nvmlDeviceGetMemoryInfo_v2(dev, &m2));
    CHECK(m2.reserved == 300ull << 20, "reserved %llu", m2.reserved);
    m2.version = 0x01000000 | 16; /* a version NVML does not know */
    NV_EXPECT(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, nvmlDeviceGetMemoryInfo_v2(dev, &m2));

    unsigned last = 1000;
    for (int i = 0; i < 5; i++) {
        nvmlUtilization_t u;
        NV(nvmlDeviceGetUtilizationRates(dev, &u));
        CHECK(u.gpu <= 100 && u.gpu != last, "utilization %u", u.gpu);
        last = u.gpu;
    }
    unsigned t = 0;
    NV(nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &t));
    CHECK(t == 41, "temperature %u", t);
}

static void processes(nvmlDevice_t dev, pid_t session)
{
    unsigned n = 0;
    NV_EXPECT(NVML_ERROR_INSUFFICIENT_SIZE, nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, NULL));
    CHECK(n == 1, "count on INSUFFICIENT_SIZE: %u", n);
    nvmlProcessInfo_t p[4];
    n = 4;
    NV(nvmlDeviceGetComputeRunningProcesses_v3(dev, &n, p));
    CHECK(n == 1 && p[0].pid == (unsigned)session && p[0].usedGpuMemory == 64ull << 20,
          "process %u pid %u (session %d) memory %llu", n, p[0].pid, (int)session, p[0].usedGpuMemory);
    char name[64];
    NV(nvmlSystemGetProcessName(p[0].pid, name, sizeof name));
    CHECK(strcmp(name, "scuda") == 0, "process name '%s'", name);

    nvmlProcessDetail_v1_t detail[2];
    nvmlProcessDetailList_t list = {.version = nvmlProcessDetailList_v1, .numProcArrayEntries = 2,
                                    .procArray = detail};
    NV(nvmlDeviceGetRunningProcessDetailList(dev, &list));
    CHECK(list.procArray == detail && list.numProcArrayEntries == 1 && detail[0].pid == (unsigned)session,
          "detail list: %u entries, pid %u", list.numProcArrayEntries, detail[0].pid);
}

static void shapes(nvmlDevice_t dev)
{
    nvmlFieldValue_t f[3] = {{.fieldId = 5}, {.fieldId = 7}, {.fieldId = 100}};
    NV(nvmlDeviceGetFieldValues(dev, 3, f));
    CHECK(f[0].value.uiVal == 10 && f[1].value.uiVal == 14 && f[2].value.uiVal == 200, "field values");

    unsigned n = 4;
    nvmlDevice_t near[4] = {0};
    NV(nvmlDeviceGetTopologyNearestGpus(dev, NVML_TOPOLOGY_SYSTEM, &n, near));
    CHECK(n == 1 && near[0] != NULL && near[0] != dev, "nearest: %u", n);

    nvmlEventSet_t set;
    NV(nvmlEventSetCreate(&set));
    NV(nvmlDeviceRegisterEvents(dev, nvmlEventTypeXidCriticalError, set));
    nvmlEventData_t e;
    NV(nvmlEventSetWait_v2(set, &e, 10));
    CHECK(e.device == dev && e.eventData == 79, "event from %p (want %p), data %llu", (void *)e.device,
          (void *)dev, e.eventData);
    NV(nvmlEventSetFree(set));
    NV_EXPECT(NVML_ERROR_INVALID_ARGUMENT, nvmlEventSetFree(set)); /* the id is gone */

    nvmlGpmMetricsGet_t g = {0};
    NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, nvmlGpmMetricsGet(&g)); /* not forwarded */
    unsigned mw;
    NV_EXPECT(NVML_ERROR_FUNCTION_NOT_FOUND, nvmlDeviceGetPowerUsage(dev, &mw)); /* the stand-in lacks it */
}

typedef nvmlReturn_t (*bus_id_fn)(unsigned, char *, unsigned);
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned *, void *, uintptr_t);
typedef nvmlReturn_t (*part_fn)(nvmlDevice_t, char *, unsigned, unsigned *);
typedef nvmlReturn_t (*any_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t);

static void export_table(nvmlDevice_t dev, pid_t session)
{
    static const unsigned char smi[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                          0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
    static const unsigned char other[16] = {1};
    const uintptr_t *t = NULL;
    NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, nvmlInternalGetExportTable((const void **)&t, other));
    NV(nvmlInternalGetExportTable((const void **)&t, smi));
    CHECK(t && t[0] == 270 * sizeof(uintptr_t), "table size %lu", t ? (unsigned long)t[0] : 0ul);

    /* Bus id of the session's device 0: NVML's device 1 (0 is not served). */
    char bus[34];
    NV(((bus_id_fn)t[81])(0, bus, sizeof bus));
    CHECK(strcmp(bus, "00000000:0F:00.0") == 0, "slot 81: '%s'", bus);
    NV_EXPECT(NVML_ERROR_INVALID_ARGUMENT, ((bus_id_fn)t[81])(1, bus, sizeof bus));

    static unsigned char entries[2][4128];
    unsigned n = 2, pid;
    NV(((procs_fn)t[213])(dev, &n, entries, 2));
    memcpy(&pid, entries[0], 4);
    CHECK(n == 1 && pid == (unsigned)session && strcmp((char *)entries[0] + 32, "scuda") == 0,
          "slot 213: %u entries, pid %u, name '%s'", n, pid, (char *)entries[0] + 32);

    /* Forwarded blind: both outputs come back, bytes it did not write stay. */
    char part[80];
    memset(part, 'x', sizeof part);
    unsigned extra = 0;
    NV(((part_fn)t[231])(dev, part, sizeof part, &extra));
    CHECK(strcmp(part, "2335-895-A1") == 0 && part[12] == 'x' && extra == 7, "slot 231: '%s', %u", part, extra);
    NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, ((any_fn)t[26])(0x4c3003, 0x4c3016, (uintptr_t)part, 0));
    NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, ((any_fn)t[100])(0x4c3003, 0, 0, 0)); /* not a device call */
    NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, ((any_fn)t[20])((uintptr_t)dev, 0, 0, 0)); /* GPU reset */
}

/* A forked child must not use the parent's connection: it starts
 * uninitialized and its own nvmlInit connects anew. */
static int forked_child(void *arg)
{
    (void)arg;
    unsigned n = 0;
    NV_EXPECT(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
    NV(nvmlInit_v2());
    NV(nvmlDeviceGetCount_v2(&n));
    CHECK(n == 1, "count in the child: %u", n);
    NV(nvmlShutdown());
    return 0;
}

/* No server: nvmlInit fails fast and names the address. */
static int no_server_client(void *arg)
{
    (void)arg;
    setenv("SCUDA_SERVER", "127.0.0.1:1", 1);
    uint64_t t0 = h_now_ms();
    nvmlReturn_t r = nvmlInit_v2();
    uint64_t took = h_now_ms() - t0;
    CHECK(r == NVML_ERROR_DRIVER_NOT_LOADED, "nvmlInit: %d", r);
    CHECK(took < 5000, "nvmlInit took %llu ms", (unsigned long long)took);
    unsigned n;
    NV_EXPECT(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&n));
    NV_EXPECT(NVML_ERROR_DRIVER_NOT_LOADED, nvmlInit_v2());
    return 0;
}

static void no_server(void)
{
    char path[512];
    int fd = h_temp_file("nvml-no-server", path, sizeof path);
    pid_t pid = h_spawn(no_server_client, NULL, 10, -1, fd);
    close(fd);
    h_wait_ok(pid, 15000, "nvml no-server client");
    char *err = h_read_file(path, NULL);
    CHECK(strstr(err, "127.0.0.1:1") != NULL, "stderr does not name the address:\n%s", err);
    free(err);
}

int main(void)
{
    h_begin("nvml_remote", 50);
    no_server();
    setenv("SCUDA_NVML_PATH", NVML_STANDIN_LIB, 1);
    struct h_server s;
    h_server_start(&s, "nvml", NULL);
    NV_EXPECT(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&(unsigned){0}));
    NV(nvmlInit_v2());
    pid_t session = 0;
    CHECK(h_wait_sessions(&s, 1, 5000) && h_server_sessions(&s, &session, 1) == 1, "no session");

    nvmlDevice_t dev[2];
    devices(dev);
    memory_and_utilization(dev[0]);
    processes(dev[0], session);
    shapes(dev[0]);
    export_table(dev[0], session);
    h_wait_ok(h_spawn(forked_child, NULL, 10, -1, -1), 15000, "forked child");
    NV(nvmlDeviceGetMemoryInfo(dev[0], &(nvmlMemory_t){0})); /* the parent's session is unharmed */

    NV(nvmlShutdown());
    NV_EXPECT(NVML_ERROR_UNINITIALIZED, nvmlDeviceGetCount_v2(&(unsigned){0}));
    h_server_stop(&s);
    printf("PASS\n");
    return 0;
}
