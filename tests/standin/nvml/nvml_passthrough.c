/* nvml_passthrough.c - the NVML shim with no server configured.
 *
 * With a local libnvidia-ml (here the stand-in, named by SCUDA_REAL_NVML)
 * every call goes straight to it: all its GPUs, its own handles, its error
 * strings, its private table. Pointed at the shim itself, the shim refuses
 * to load it (it would call itself) and nvmlInit fails cleanly. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvml.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

nvmlReturn_t nvmlInternalGetExportTable(const void **table, const void *uuid);

static void no_server_anywhere(void)
{
    unsetenv("SCUDA_SERVER");
    char home[] = "/tmp/scuda-nvml-home-XXXXXX"; /* no ~/.config/scuda/host */
    CHECK(mkdtemp(home) != NULL);
    setenv("HOME", home, 1);
}

static int local_nvml(void *arg)
{
    (void)arg;
    no_server_anywhere();
    setenv("SCUDA_REAL_NVML", NVML_STANDIN_LIB, 1);
    CHECK(nvmlInit_v2() == NVML_SUCCESS);
    unsigned n = 0;
    CHECK(nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS && n == 2, "count %u", n);
    nvmlDevice_t d;
    char name[96];
    CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS);
    CHECK(nvmlDeviceGetName(d, name, sizeof name) == NVML_SUCCESS);
    CHECK(strcmp(name, "SCUDA Stand-in Hidden GPU") == 0, "name '%s'", name);
    CHECK(strcmp(nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found (stand-in)") == 0);
    unsigned mw;
    CHECK(nvmlDeviceGetPowerUsage(d, &mw) == NVML_ERROR_FUNCTION_NOT_FOUND);
    static const unsigned char smi[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                          0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
    const void *t = NULL;
    CHECK(nvmlInternalGetExportTable(&t, smi) == NVML_SUCCESS && t != NULL);
    char bus[34];
    typedef nvmlReturn_t (*bus_id_fn)(unsigned, char *, unsigned);
    CHECK(((bus_id_fn)((const uintptr_t *)t)[81])(0, bus, sizeof bus) == NVML_SUCCESS);
    CHECK(strcmp(bus, "00000000:07:00.0") == 0, "bus id '%s'", bus);
    CHECK(nvmlShutdown() == NVML_SUCCESS);
    return 0;
}

static int self_as_nvml(void *arg)
{
    no_server_anywhere();
    setenv("SCUDA_REAL_NVML", (const char *)arg, 1);
    nvmlReturn_t r = nvmlInit_v2();
    CHECK(r == NVML_ERROR_DRIVER_NOT_LOADED, "nvmlInit with the shim as the real NVML: %d", r);
    return 0;
}

int main(void)
{
    h_begin("nvml_passthrough", 30);
    h_wait_ok(h_spawn(local_nvml, NULL, 10, -1, -1), 15000, "passthrough to the stand-in");
    /* The shim's own file, found through a symbol it exports. */
    Dl_info self;
    CHECK(dladdr((void *)&nvmlInit_v2, &self) && self.dli_fname);
    h_wait_ok(h_spawn(self_as_nvml, (void *)self.dli_fname, 10, -1, -1), 15000, "shim as its own NVML");
    printf("PASS\n");
    return 0;
}
