/* init.c - cuInit: decide between a remote server and the local driver.
 *
 * With a server configured (scuda run --server, SCUDA_SERVER, or
 * ~/.config/scuda/host) every call goes to it; SCUDA_SERVER may list
 * several, whose devices the application sees as one list (servers.h). With none, the shim passes
 * every call through to this machine's real driver, found by PATH so that
 * it can never resolve to the shim itself. With neither, cuInit returns
 * CUDA_ERROR_NO_DEVICE and says how to configure a server. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_ahead.h"
#include "bulk.h"
#include "capture.h"
#include "coherence.h"
#include "conn.h"
#include "servers.h"
#include "context.h"
#include "export_tables.h"
#include "rpc.h"
#include "shim.h"
#include "../common/clock.h"
#include "../common/config.h"
#include "../common/libload.h"
#include "../common/log.h"

volatile int shim_mode = SHIM_UNINITIALIZED;
CUresult shim_init_error = CUDA_ERROR_NOT_INITIALIZED;
struct driver_table real_driver;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int accept_driver(void *h, void *arg)
{
    (void)arg;
    return dlsym(h, "cuGetExportTable") && driver_table_load(&real_driver, h) > 0;
}

static int load_local_driver(void)
{
    const char *path = NULL;
    void *h = libload_open("SCUDA_REAL_DRIVER", libload_driver_paths, libload_driver_path_count, accept_driver,
                           NULL, &path);
    if (h) LOG_INFO("no server configured: passing calls through to the local driver %s", path);
    return h != NULL;
}

static void child_after_fork(void)
{
    if (shim_remote()) {
        for (int i = 0; i < SCUDA_MAX_SERVERS; i++) {
            bulk_forget_after_fork(&servers[i]);
            conn_forget_after_fork(&servers[i]);
        }
        shim_mode = SHIM_FAILED;
        shim_init_error = CUDA_ERROR_NOT_INITIALIZED;
    }
}

/* A context went away: what the layers above kept about it goes too. */
static void context_gone(CUcontext ctx)
{
    scuda_export_tables_context_destroyed(ctx);
    alloc_ahead_context_gone(ctx);
}

/* The connection, rpc and stream layers call nothing above themselves
 * (the NVML shim shares them); what they must tell the layers above goes
 * through these hooks, set before the first frame can arrive. */
static void connect_layers(void)
{
    conn_set_host_work_handler(capture_host_deliver);
    rpc_set_push_hook(coherence_before_send);
    stream_set_synced_hook(coherence_stream_synced);
    context_set_destroy_hook(context_gone);
}

/* Connect to the configured server(s), build the device list, and give
 * each server its address windows. */
static CUresult open_remote(const char *addr, const char *source)
{
    int listed = 1;
    CUresult r = servers_open(addr, source, &listed);
    if (r == CUDA_SUCCESS) r = servers_send_windows(listed);
    return r;
}

static void init_once_fn(void)
{
    char addr[256];
    const char *source = NULL;
    scuda_log_set_role("client");
    pthread_atfork(NULL, NULL, child_after_fork);
    if (scuda_resolve_server(NULL, addr, sizeof addr, &source) == 0) {
        LOG_INFO("using server %s (from %s)", addr, source);
        connect_layers();
        CUresult r = open_remote(addr, source);
        if (r == CUDA_SUCCESS) {
            shim_mode = scuda_env_on("SCUDA_TRACE") ? SHIM_REMOTE_TRACED : SHIM_REMOTE;
            return;
        }
        shim_init_error = r;
        shim_mode = SHIM_FAILED;
        return;
    }
    if (load_local_driver()) {
        shim_mode = SHIM_PASSTHROUGH;
        return;
    }
    LOG_ERROR("no SCUDA server is configured and this machine has no GPU driver; "
              "set SCUDA_SERVER=HOST:PORT, save one with `scuda HOST:PORT`, "
              "or run the program as `scuda run --server HOST:PORT -- CMD`");
    shim_init_error = CUDA_ERROR_NO_DEVICE;
    shim_mode = SHIM_FAILED;
}

_Thread_local int shim_trace_depth;

int shim_trace_enter(const char *name)
{
    if (shim_trace_depth++ > 0) return 1;
    /* when (monotonic ms) and which thread: the gaps between calls show
     * where an application's time goes */
    char line[160];
    uint64_t t = now_ns();
    int n = snprintf(line, sizeof line, "scuda[trace %d] %llu.%03llu %ld %s\n", (int)getpid(),
                     (unsigned long long)(t / 1000000u), (unsigned long long)(t / 1000u % 1000u), (long)gettid(), name);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    return 1;
}

void shim_ensure_init(void) { pthread_once(&init_once, init_once_fn); }

EXPORT CUresult cuInit(unsigned int Flags)
{
    shim_ensure_init();
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuInit(Flags);
    if (!shim_remote()) return shim_init_error;
    return Flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    /* Answered before cuInit too, as the real driver does. */
    if (driverVersion == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuDriverGetVersion(driverVersion);
    *driverVersion = shim_remote() ? conn_info(&servers[0])->driver_version : CUDA_VERSION;
    return CUDA_SUCCESS;
}
