/* nvml_servers.c - the NVML shim of a client of two servers
 * (SCUDA_SERVER=a,b; docs/architecture.md, "NVML over several servers").
 *
 * Server a's stand-ins model one GPU, server b's two; each server's UUIDs
 * carry a tag of their own (STANDIN_UUID_TAG), which the NVML stand-in
 * also adds, in MiB, to each GPU's used memory. In a child per case
 * (each shim reads its settings once), with CUDA_VISIBLE_DEVICES unset,
 * "2,0", and b's first GPU by UUID then a's by index:
 *   - nvmlDeviceGetCount_v2 equals cuDeviceGetCount;
 *   - NVML device i has CUDA device i's UUID, name and PCI bus id, says
 *     index i (nvmlDeviceGetIndex) and minor number i, and is found again
 *     by its UUID;
 *   - its memory info comes from its own server (the used memory carries
 *     that server's tag);
 *   - handle i + 1 of the list is NVML_ERROR_INVALID_ARGUMENT, and a UUID
 *     the list leaves out is NVML_ERROR_NOT_FOUND;
 *   - a call naming devices of two servers is NVML_ERROR_NOT_SUPPORTED.
 * And `scuda info --server a,b` lists a's device (index 0) under a and
 * b's two (1 and 2) under b; --json says each device's server. */
#define _GNU_SOURCE
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

#define NV(call)                                                                                   \
    do {                                                                                           \
        nvmlReturn_t nv_r_ = (call);                                                               \
        CHECK(nv_r_ == NVML_SUCCESS, "%s returned %d", #call, nv_r_);                              \
    } while (0)
#define NV_EXPECT(want, call)                                                                      \
    do {                                                                                           \
        nvmlReturn_t nv_r_ = (call);                                                               \
        CHECK(nv_r_ == (want), "%s returned %d, want %d", #call, nv_r_, (want));                   \
    } while (0)

#define TAG_A 10
#define TAG_B 11
#define MIB (1024ull * 1024ull)

/* The UUID text of the CUDA stand-in's physical GPU `index` of the server
 * with tag `tag`: what NVML and nvidia-smi -L write. */
static void standin_uuid(int tag, int index, char *out, size_t n)
{
    snprintf(out, n, "GPU-53435544-412d-5354-414e-44494e00%02x%02x", tag, index);
}

struct expect {
    const char *visible; /* NULL: unset */
    int count;
    int tags[3]; /* the server of each device, by its tag */
    const char *hidden; /* a UUID the list leaves out, or NULL */
};

static void cuda_uuid(CUdevice d, char *out, size_t n)
{
    CUuuid u;
    CU(cuDeviceGetUuid_v2(&u, d));
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(out, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* NVML device i against CUDA device i. */
static void same_device(const struct expect *e, int i, nvmlDevice_t *dev)
{
    const char *v = e->visible ? e->visible : "(unset)";
    NV(nvmlDeviceGetHandleByIndex_v2((unsigned)i, dev));
    char nu[96], cu[96], nn[96], cn[96];
    NV(nvmlDeviceGetUUID(*dev, nu, sizeof nu));
    cuda_uuid(i, cu, sizeof cu);
    CHECK(strcasecmp(nu, cu) == 0, "CUDA_VISIBLE_DEVICES='%s': NVML device %d is %s, CUDA's is %s", v, i, nu, cu);
    NV(nvmlDeviceGetName(*dev, nn, sizeof nn));
    CU(cuDeviceGetName(cn, sizeof cn, i));
    CHECK(strcmp(nn, cn) == 0, "NVML device %d is named '%s', CUDA's '%s'", i, nn, cn);
    nvmlPciInfo_t pci;
    NV(nvmlDeviceGetPciInfo_v3(*dev, &pci));
    char cbus[32];
    CU(cuDeviceGetPCIBusId(cbus, sizeof cbus, i));
    CHECK(strcasecmp(pci.busIdLegacy, cbus) == 0, "NVML device %d is at %s, CUDA's at %s", i, pci.busIdLegacy, cbus);

    unsigned index = 99, minor = 99;
    NV(nvmlDeviceGetIndex(*dev, &index));
    CHECK(index == (unsigned)i, "CUDA_VISIBLE_DEVICES='%s': NVML device %d says index %u", v, i, index);
    NV(nvmlDeviceGetMinorNumber(*dev, &minor));
    CHECK(minor == (unsigned)i, "NVML device %d says minor number %u", i, minor);
    nvmlDevice_t again = NULL;
    NV(nvmlDeviceGetHandleByUUID(nu, &again));
    CHECK(again == *dev, "NVML device %d: by UUID %p, by index %p", i, (void *)again, (void *)*dev);

    /* A per-device query answered by the device's own server. */
    nvmlMemory_t m;
    NV(nvmlDeviceGetMemoryInfo(*dev, &m));
    CHECK(m.used == (64ull + (unsigned)e->tags[i]) * MIB,
          "CUDA_VISIBLE_DEVICES='%s': NVML device %d's memory info came from the server of tag %llu, not %d", v, i,
          m.used / MIB - 64, e->tags[i]);
}

static int sees(void *arg)
{
    const struct expect *e = arg;
    if (e->visible) setenv("CUDA_VISIBLE_DEVICES", e->visible, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
    int n = -1;
    CU(cuInit(0));
    CU(cuDeviceGetCount(&n));
    CHECK(n == e->count, "CUDA shows %d devices, not %d", n, e->count);
    NV(nvmlInit_v2());
    unsigned count = 0;
    NV(nvmlDeviceGetCount_v2(&count));
    CHECK(count == (unsigned)n, "CUDA_VISIBLE_DEVICES='%s': NVML counts %u devices, CUDA %d",
          e->visible ? e->visible : "(unset)", count, n);
    nvmlDevice_t dev[3];
    for (int i = 0; i < n; i++) same_device(e, i, &dev[i]);
    nvmlDevice_t none;
    NV_EXPECT(NVML_ERROR_INVALID_ARGUMENT, nvmlDeviceGetHandleByIndex_v2((unsigned)n, &none));
    if (e->hidden) NV_EXPECT(NVML_ERROR_NOT_FOUND, nvmlDeviceGetHandleByUUID(e->hidden, &none));
    for (int i = 1; i < n; i++) {
        if (e->tags[i] == e->tags[0]) continue;
        int same = 7;
        NV_EXPECT(NVML_ERROR_NOT_SUPPORTED, nvmlDeviceOnSameBoard(dev[0], dev[i], &same));
        break;
    }
    NV(nvmlShutdown());
    return 0;
}

/* `scuda info ARGS` with CUDA_VISIBLE_DEVICES unset: its stdout. */
static char *info(const char *args)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "env -u CUDA_VISIBLE_DEVICES SCUDA_LOG=warn '%s' info %s", SCUDA_BIN, args);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL, "cannot run %s", cmd);
    static char out[16384];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    CHECK(st == 0, "%s: exit status %d\n%s", cmd, st, out);
    return out;
}

/* needle's place in hay after `from`, or fail. */
static const char *after(const char *hay, const char *from, const char *needle)
{
    const char *p = strstr(from, needle);
    CHECK(p != NULL, "scuda info: no '%s' after where it should be:\n%s", needle, hay);
    return p + strlen(needle);
}

static void info_lists_both(const char *a, const char *b)
{
    char args[300], line[300];
    snprintf(args, sizeof args, "--server %s,%s", a, b);
    const char *out = info(args);
    const char *p = after(out, out, "Devices:    3");
    snprintf(line, sizeof line, "server %s:\n  0 ", a);
    p = after(out, p, line);
    snprintf(line, sizeof line, "server %s:\n  1 ", b);
    p = after(out, p, line);
    after(out, p, "\n  2 ");
    snprintf(args, sizeof args, "--json --server %s,%s", a, b);
    out = info(args);
    snprintf(line, sizeof line, "{\"index\": 2, \"server\": \"%s\"", b);
    after(out, out, line);
    snprintf(line, sizeof line, "{\"index\": 0, \"server\": \"%s\"", a);
    after(out, out, line);
    printf("ok scuda info --server a,b: every server's devices, grouped, with their index in the one list\n");
}

int main(void)
{
    h_begin("nvml_servers", 80);
    setenv("SCUDA_NVML_PATH", NVML_STANDIN_LIB, 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    struct h_server a, b;
    setenv("STANDIN_DEVICES", "1", 1);
    setenv("STANDIN_UUID_TAG", "10", 1); /* TAG_A: the server, and so its sessions, inherit it */
    h_server_start(&a, "nvml-a", NULL);
    setenv("STANDIN_DEVICES", "2", 1);
    setenv("STANDIN_UUID_TAG", "11", 1); /* TAG_B */
    h_server_start(&b, "nvml-b", NULL);
    unsetenv("STANDIN_UUID_TAG");
    unsetenv("STANDIN_DEVICES");
    char both[160];
    snprintf(both, sizeof both, "%s,%s", a.addr, b.addr);
    setenv("SCUDA_SERVER", both, 1);

    static char b0[64], by_uuid[160], a0[64];
    standin_uuid(TAG_B, 0, b0, sizeof b0);
    standin_uuid(TAG_A, 0, a0, sizeof a0);
    snprintf(by_uuid, sizeof by_uuid, "%s,0", b0);
    const struct expect cases[] = {
        {NULL, 3, {TAG_A, TAG_B, TAG_B}, NULL},
        {"2,0", 2, {TAG_B, TAG_A}, b0},
        {by_uuid, 2, {TAG_B, TAG_A}, NULL},
        {"1", 1, {TAG_B}, a0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[200];
        snprintf(what, sizeof what, "NVML over two servers, CUDA_VISIBLE_DEVICES='%s'",
                 cases[i].visible ? cases[i].visible : "(unset)");
        h_wait_ok(h_spawn(sees, (void *)&cases[i], 30, -1, -1), 30000, what);
        printf("ok %s: NVML's list is CUDA's\n", what);
    }
    info_lists_both(a.addr, b.addr);
    h_server_stop(&a);
    h_server_stop(&b);
    printf("PASS nvml_servers\n");
    return 0;
}
