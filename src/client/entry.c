/* entry.c - the calls that find other calls: cuGetProcAddress and
 * cuGetExportTable, plus error strings and the shim's private ping.
 *
 * These run before cuInit (cudart asks for cuInit itself through
 * cuGetProcAddress), so they settle the shim's mode first: in passthrough
 * mode the real driver answers, so that an application never mixes our
 * tables with the real driver's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "servers.h"
#include "export_tables.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

void *procaddr_lookup(const char *symbol, int cudaVersion, cuuint64_t flags);
void shim_ensure_init(void);

static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    void *fn = procaddr_lookup(symbol, cudaVersion, flags);
    *pfn = fn;
    if (status) *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!fn) LOG_DEBUG("cuGetProcAddress: %s (version %d) not found", symbol, cudaVersion);
    return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *symbolStatus)
{
    shim_ensure_init();
    if (shim_mode == SHIM_PASSTHROUGH)
        return real_driver.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    shim_ensure_init();
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

EXPORT CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    shim_ensure_init();
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuGetExportTable(ppExportTable, pExportTableId);
    return scuda_get_export_table(ppExportTable, pExportTableId);
}

/* ---- error strings -------------------------------------------------------- */

/* The real driver's strings, fetched once per code from the server, so a
 * program prints exactly what it prints natively. */
#define ERROR_CACHE 1024

struct error_text {
    char *name;
    char *text;
};

static struct error_text error_cache[ERROR_CACHE];
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

/* Before a session exists (or without one) a few names must still work:
 * a program reports why cuInit failed. */
static const char *offline_name(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA_ERROR_DEVICE_UNAVAILABLE";
    default: return NULL;
    }
}

static const char *offline_text(CUresult e)
{
    switch (e) {
    case CUDA_SUCCESS: return "no error";
    case CUDA_ERROR_NO_DEVICE: return "no CUDA-capable device is detected";
    case CUDA_ERROR_NOT_INITIALIZED: return "initialization error";
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return "CUDA-capable device(s) is/are busy or unavailable";
    default: return NULL;
    }
}

static const struct error_text *remote_error(CUresult e)
{
    if ((unsigned)e >= ERROR_CACHE || !shim_remote()) return NULL;
    pthread_mutex_lock(&error_lock);
    struct error_text *t = &error_cache[e];
    if (!t->name) {
        rpc_call c;
        struct msg_scuda_error_string_req m = {(uint32_t)e};
        struct msg_scuda_error_string_rep rep;
        rpc_begin(&c, OP_scuda_error_string);
        msg_scuda_error_string_req_put(&c.req, &m);
        if (rpc_sync(&c) == CUDA_SUCCESS && msg_scuda_error_string_rep_get(&c.out, &c.arena, &rep) == 0 &&
            rep.name && rep.text) {
            t->text = strdup(rep.text);
            t->name = t->text ? strdup(rep.name) : NULL;
        }
        rpc_end(&c);
    }
    pthread_mutex_unlock(&error_lock);
    return t->name ? t : NULL;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuGetErrorName(error, pStr);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    const struct error_text *t = remote_error(error);
    *pStr = t ? t->name : offline_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (shim_mode == SHIM_PASSTHROUGH) return real_driver.cuGetErrorString(error, pStr);
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    const struct error_text *t = remote_error(error);
    *pStr = t ? t->text : offline_text(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- the shim's private API ---------------------------------------------- */

/* For bench/torch_bench.py: how many calls have waited for a reply so far
 * (the round trips a stretch of a program paid: ask before and after it). */
EXPORT uint64_t scuda_client_waits(void) { return rpc_wait_count(); }

/* For `scuda info` and `scuda bench`: round trips of an empty call. Fills
 * rtt_us[0..iterations) in microseconds; returns 0 on success. */
EXPORT int scuda_client_ping(double *rtt_us, int iterations)
{
    shim_ensure_init();
    if (!shim_remote() || !rtt_us) return -1;
    for (int i = 0; i < iterations; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        rpc_call c;
        struct msg_scuda_ping_req m = {0};
        rpc_begin(&c, OP_scuda_ping);
        msg_scuda_ping_req_put(&c.req, &m);
        CUresult r = rpc_sync(&c);
        rpc_end(&c);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r != CUDA_SUCCESS) return -1;
        rtt_us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    return 0;
}

/* For `scuda info`: which of SCUDA_SERVER's entries (0 for the first or
 * only server) device `ordinal` is on; -1 for no such device, or no server. */
EXPORT int scuda_client_device_server(int ordinal)
{
    shim_ensure_init();
    if (!shim_remote()) return -1;
    const struct gdev *g = gdev_get(&gdevs, ordinal);
    return g ? g->s->index : -1;
}

/* For tests and `scuda bench`: bytes this process sent to and received
 * from the server, frames included. Returns 0 in REMOTE mode. */
EXPORT int scuda_client_wire_bytes(uint64_t *sent, uint64_t *received)
{
    if (!shim_remote() || !sent || !received) return -1;
    *sent = *received = 0;
    for (int i = 0; i < SCUDA_MAX_SERVERS; i++) {
        uint64_t s, r;
        conn_wire_bytes(&servers[i], &s, &r);
        *sent += s;
        *received += r;
    }
    return 0;
}
