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

#include "bulk.h"
#include "capture.h"
#include "coherence.h"
#include "conn.h"
#include "servers.h"
#include "context.h"
#include "export_tables.h"
#include "rpc.h"
#include "shim.h"
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

/* The connection, rpc and stream layers call nothing above themselves
 * (the NVML shim shares them); what they must tell the layers above goes
 * through these hooks, set before the first frame can arrive. */
static void connect_layers(void)
{
    conn_set_host_work_handler(capture_host_deliver);
    rpc_set_push_hook(coherence_before_send);
    stream_set_synced_hook(coherence_stream_synced);
    context_set_destroy_hook(scuda_export_tables_context_destroyed);
}

/* One server's connection, opened on a thread of its own so that a
 * client of several servers waits for the slowest, not for their sum.
 * conn_open bounds its own time (connect and handshake timeouts). */
struct opening {
    struct server *s;
    char addr[256];
    CUresult r;
};

static void *open_one(void *arg)
{
    struct opening *o = arg;
    o->r = conn_open(o->s, o->addr);
    return NULL;
}

/* Open SCUDA_SERVER's n entries (n > 1) at once. CUDA_SUCCESS when every
 * one is open: a client that silently lost a server would renumber the
 * devices of the others. */
static CUresult open_servers(const char *list, int n)
{
    static struct opening o[SCUDA_MAX_SERVERS];
    pthread_t t[SCUDA_MAX_SERVERS];
    int started[SCUDA_MAX_SERVERS] = {0};
    for (int k = 0; k < n; k++) {
        o[k].s = &servers[k];
        o[k].r = CUDA_ERROR_NO_DEVICE;
        servers[k].visible_here = 1;
        if (scuda_server_list_entry(list, k, o[k].addr, sizeof o[k].addr) != 0) {
            LOG_ERROR("SCUDA_SERVER's entry %d is too long for an address; fix SCUDA_SERVER", k + 1);
            continue;
        }
        started[k] = pthread_create(&t[k], NULL, open_one, &o[k]) == 0;
        if (!started[k]) open_one(&o[k]);
    }
    CUresult r = CUDA_SUCCESS;
    for (int k = 0; k < n; k++) {
        if (started[k]) pthread_join(t[k], NULL);
        if (o[k].r != CUDA_SUCCESS && r == CUDA_SUCCESS) r = o[k].r;
        if (o[k].r != CUDA_SUCCESS)
            LOG_ERROR("SCUDA_SERVER's entry %d (%s) did not open (the reason is above); start that server, "
                      "or remove it from SCUDA_SERVER, to use the others", k + 1, o[k].addr);
    }
    return r;
}

/* Connect to the configured server(s) and build the device list. */
static CUresult open_remote(const char *addr, const char *source)
{
    int listed = strcmp(source, "SCUDA_SERVER") == 0 ? scuda_server_list_len(getenv("SCUDA_SERVER")) : 1;
    if (listed > SCUDA_MAX_SERVERS) {
        LOG_ERROR("SCUDA_SERVER lists %d servers; a client uses at most %d: list fewer", listed, SCUDA_MAX_SERVERS);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (listed > 1) LOG_INFO("SCUDA_SERVER lists %d servers: their devices are numbered in that order", listed);
    CUresult r = listed > 1 ? open_servers(getenv("SCUDA_SERVER"), listed) : conn_open(&servers[0], addr);
    if (r == CUDA_SUCCESS && servers_build_devices(listed) != 0) r = CUDA_ERROR_NO_DEVICE;
    if (r == CUDA_SUCCESS && listed > 1 && gdevs.count == 0) {
        /* As the driver answers when CUDA_VISIBLE_DEVICES names no GPU. */
        LOG_INFO("CUDA_VISIBLE_DEVICES names none of the %d servers' devices", listed);
        r = CUDA_ERROR_NO_DEVICE;
    }
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

void shim_trace_call(const char *name)
{
    char line[160];
    int n = snprintf(line, sizeof line, "scuda[trace %d] %s\n", (int)getpid(), name);
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
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
