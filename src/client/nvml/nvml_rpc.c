/* nvml_rpc.c - encoding helpers for the generated NVML stubs; see nvml_shim.h
 * and src/common/nvml/nvml_wire.h. */
#define _GNU_SOURCE
#include "nvml_shim.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/protocol.h"

nvmlReturn_t nvml_call(rpc_call *c)
{
    /* Checked here so that conn.c's CUDA codes for them never reach the
     * caller looking like NVML codes (CUDA 2 = NVML INVALID_ARGUMENT). */
    if (c->req.oom) return NVML_ERROR_MEMORY;
    if (c->req.len > SCUDA_MAX_FRAME) return NVML_ERROR_INVALID_ARGUMENT;
    CUresult r = rpc_sync(c);
    switch ((int)r) {
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return NVML_ERROR_GPU_IS_LOST; /* connection lost */
    case CUDA_ERROR_NOT_SUPPORTED: return NVML_ERROR_NOT_SUPPORTED;    /* op unknown to the server */
    default: return (nvmlReturn_t)r;
    }
}

size_t nvml_versioned_size(const void *p, size_t dflt)
{
    if (p == NULL) return dflt;
    unsigned int version;
    memcpy(&version, p, sizeof version);
    size_t n = version & 0xFFFFFFu;
    /* An older version is smaller; a size beyond this header's struct is
     * garbage (NVML rejects its version), and reading that far could run
     * off the caller's memory. */
    return n >= sizeof version && n <= dflt ? n : dflt;
}

void nvml_put_ptr(wire_buf *b, const void *p, size_t n)
{
    wb_put_u8(b, p != NULL);
    if (p == NULL) return;
    /* Too big to be real: send nothing, the session rejects the size. */
    wb_put_blob(b, n <= NVML_MAX_ARRAY ? p : NULL, n <= NVML_MAX_ARRAY ? n : 0);
}

int nvml_get_ptr(wire_reader *r, void *p, size_t n)
{
    if (p == NULL) return 0;
    size_t len;
    const void *v = wr_blob(r, &len);
    if (v == NULL || len > n) return 0;
    memcpy(p, v, len);
    return 1;
}

void nvml_get_bytes(wire_reader *r, void *p, size_t cap)
{
    if (p == NULL) return;
    size_t len;
    const void *v = wr_blob(r, &len);
    if (v != NULL && len <= cap) memcpy(p, v, len);
}

void nvml_get_handle(wire_reader *r, void **p, const struct server *srv)
{
    if (p == NULL) return;
    int ok = wr_u8(r);
    uint64_t id = wr_u64(r);
    if (ok && !r->bad) *p = handle_from_server(srv, id);
}

void nvml_get_handles(wire_reader *r, void **p, size_t cap, const struct server *srv)
{
    if (p == NULL) return;
    size_t len;
    const uint8_t *v = wr_blob(r, &len);
    if (v == NULL || len % 8 != 0 || len / 8 > cap) return;
    for (size_t i = 0; i < len / 8; i++) {
        uint64_t id;
        memcpy(&id, v + 8 * i, 8);
        p[i] = handle_from_server(srv, id);
    }
}

void nvml_tag(const struct server *srv, void **p)
{
    if (p != NULL && *p != NULL) *p = handle_from_server(srv, nvml_wire_id(*p));
}

struct server *nvml_server_of(const void *h)
{
    if (servers_used <= 1) return &servers[0];
    unsigned tag = handle_tag_of((uint64_t)(uintptr_t)h);
    return (int)tag < servers_used ? &servers[tag] : NULL;
}

nvmlReturn_t nvml_apart(const char *name)
{
    static _Atomic int logged;
    if (!atomic_exchange_explicit(&logged, 1, memory_order_relaxed))
        LOG_WARN("%s named devices or objects of two servers: no server can answer it; "
                 "returning NVML_ERROR_NOT_SUPPORTED (logged once)", name);
    return NVML_ERROR_NOT_SUPPORTED;
}

void nvml_unsupported_once(int *once_flag, const char *name)
{
    if (atomic_exchange_explicit((_Atomic int *)once_flag, 1, memory_order_relaxed)) return;
    LOG_WARN("%s is not supported by SCUDA; returning NVML_ERROR_NOT_SUPPORTED", name);
}

nvmlReturn_t nvml_trace(const char *name, nvmlReturn_t r)
{
    dprintf(2, "scuda-nvml-trace[%d] %s -> %d\n", (int)getpid(), name, (int)r);
    return r;
}
