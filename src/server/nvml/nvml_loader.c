/* nvml_loader.c - the session's real libnvidia-ml, loaded at its first NVML
 * call (a session that only runs CUDA never loads it).
 *
 * SCUDA_NVML_PATH names it (tests use a CPU stand-in); else the system's
 * copy is found by path, like the driver. A library that turns out to be
 * SCUDA's own shim (a server started with the shim on LD_LIBRARY_PATH) is
 * refused: calling it would send the session's calls back to a server. */
#define _GNU_SOURCE
#include "nvml_server.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../common/log.h"

struct nvml_table nvml_real;

static const char *candidates[] = {
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "libnvidia-ml.so.1",
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static nvmlReturn_t load_result = NVML_ERROR_LIBRARY_NOT_FOUND;

static int try_load(const char *path, char *err, size_t errlen)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "%s", dlerror());
        return 0;
    }
    if (dlsym(h, "scuda_nvml_shim")) {
        snprintf(err, errlen, "%s is SCUDA's NVML shim, not NVIDIA's library", path);
        dlclose(h);
        return 0;
    }
    if (nvml_table_load(&nvml_real, h) <= 0 || !nvml_real.nvmlInit_v2) {
        snprintf(err, errlen, "%s has no nvmlInit_v2", path);
        dlclose(h);
        return 0;
    }
    LOG_INFO("NVML %s", path);
    return 1;
}

static void load_once(void)
{
    char err[512] = "not found";
    const char *forced = getenv("SCUDA_NVML_PATH");
    size_t n = forced && *forced ? 1 : sizeof candidates / sizeof candidates[0];
    for (size_t i = 0; i < n; i++) {
        if (try_load(forced && *forced ? forced : candidates[i], err, sizeof err)) {
            load_result = NVML_SUCCESS;
            return;
        }
    }
    LOG_ERROR("cannot load NVML (%s): NVML calls of this session fail with "
              "NVML_ERROR_LIBRARY_NOT_FOUND; install the driver's libnvidia-ml.so.1 "
              "or set SCUDA_NVML_PATH for the server", err);
}

nvmlReturn_t nvml_load(void)
{
    pthread_once(&once, load_once);
    return load_result;
}
