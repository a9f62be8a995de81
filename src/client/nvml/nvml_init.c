/* nvml_init.c - the first nvmlInit: a remote server or the local NVML.
 *
 * With a server configured (scuda run --server, SCUDA_SERVER, or
 * ~/.config/scuda/host) the shim connects to it, through the same
 * connection code as the driver shim (src/client/conn.c), and gets a
 * session of its own. SCUDA_SERVER may list several: the shim opens them
 * all and shows their devices as one list (nvml_devices.c). With none, every call passes through to this
 * machine's libnvidia-ml, found by path so that it can never resolve to
 * the shim itself. With neither, nvmlInit fails with
 * NVML_ERROR_DRIVER_NOT_LOADED (what NVML says on a machine without a
 * driver) and says how to configure a server. */
#define _GNU_SOURCE
#include "nvml_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../conn.h"
#include "../servers.h"
#include "../../common/config.h"
#include "../../common/libload.h"
#include "../../common/log.h"

volatile int nvml_mode = NVML_MODE_NONE;
struct nvml_table nvml_local;
int nvml_trace_on;

/* Lets the session refuse to load the shim as the "real" NVML. */
NVML_EXPORT const int scuda_nvml_shim = 1;

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static nvmlReturn_t init_error = NVML_SUCCESS; /* sticky once set */

static const char *local_candidates[] = {
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib/wsl/lib/libnvidia-ml.so.1",
};

static int accept_nvml(void *h, void *arg)
{
    (void)arg;
    if (dlsym(h, "scuda_nvml_shim") || nvml_table_load(&nvml_local, h) <= 0 || !nvml_local.nvmlInit_v2) {
        memset(&nvml_local, 0, sizeof nvml_local);
        return 0;
    }
    return 1;
}

static int load_local(void)
{
    const char *path = NULL;
    void *h = libload_open("SCUDA_REAL_NVML", local_candidates, sizeof local_candidates / sizeof local_candidates[0],
                           accept_nvml, NULL, &path);
    if (h) LOG_INFO("no server configured: passing NVML calls through to %s", path);
    return h != NULL;
}

/* A forked child must not use the parent's connection; its next nvmlInit
 * connects anew (its handles from before the fork are not valid there). */
static void child_after_fork(void)
{
    if (nvml_mode == NVML_MODE_REMOTE) {
        for (int k = 0; k < SCUDA_MAX_SERVERS; k++) conn_forget_after_fork(&servers[k]);
        nvml_mode = NVML_MODE_NONE;
        init_error = NVML_SUCCESS;
    }
    pthread_mutex_init(&init_lock, NULL);
}

static nvmlReturn_t decide(void)
{
    char addr[256];
    const char *source = NULL;
    if (scuda_resolve_server(NULL, addr, sizeof addr, &source) == 0) {
        LOG_INFO("NVML: using server %s (from %s)", addr, source);
        /* The driver shim's code (servers_open.c): every server of
         * SCUDA_SERVER, one device list, CUDA_VISIBLE_DEVICES applied over
         * it, so that NVML device i is CUDA device i. It has logged the
         * address, the cause and the fix of a failure. */
        int listed;
        if (servers_open(addr, source, &listed) != CUDA_SUCCESS) return NVML_ERROR_DRIVER_NOT_LOADED;
        nvml_mode = NVML_MODE_REMOTE;
        return NVML_SUCCESS;
    }
    if (load_local()) {
        nvml_mode = NVML_MODE_PASSTHROUGH;
        return NVML_SUCCESS;
    }
    LOG_ERROR("NVML: no SCUDA server is configured and this machine has no libnvidia-ml; "
              "set SCUDA_SERVER=HOST:PORT, save one with `scuda HOST:PORT`, "
              "or run the program as `scuda run --server HOST:PORT -- CMD`");
    return NVML_ERROR_DRIVER_NOT_LOADED;
}

nvmlReturn_t nvml_shim_init(void)
{
    if (nvml_mode != NVML_MODE_NONE) return NVML_SUCCESS;
    pthread_mutex_lock(&init_lock);
    static int atfork_done;
    if (!atfork_done) {
        atfork_done = 1;
        scuda_log_set_role("nvml");
        const char *t = getenv("SCUDA_NVML_TRACE");
        nvml_trace_on = t && *t && strcmp(t, "0") != 0;
        pthread_atfork(NULL, NULL, child_after_fork);
    }
    if (nvml_mode == NVML_MODE_NONE && init_error == NVML_SUCCESS) init_error = decide();
    nvmlReturn_t r = nvml_mode != NVML_MODE_NONE ? NVML_SUCCESS : init_error;
    pthread_mutex_unlock(&init_lock);
    return r;
}
