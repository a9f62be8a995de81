/* srv_ipc.c - see srv_ipc.h.
 *
 * A handle the client holds is SCUDA's, not the driver's: a magic, the
 * kind, a slot of the server's export registry and that slot's random
 * nonce (ipc_registry.h). The driver's handle, or the exported chunk's
 * file descriptor, stays on the server. Opening checks that the export
 * is live and belongs to a session of the same user; anything else is
 * refused (CUDA_ERROR_NOT_PERMITTED for another user's, logged). */
#define _GNU_SOURCE
#include "srv_ipc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "device_window.h"
#include "identity.h"
#include "ipc_broker.h"
#include "ipc_registry.h"

#define IPC_MAGIC "SCUDAIPC"
#define IPC_VERSION 1
#define IMPORTS_MAX 1024

/* The 64 bytes the client sees, in CUipcMemHandle / CUipcEventHandle. */
struct wire_handle {
    char magic[8];
    uint8_t version, kind, pad[2];
    uint32_t slot; /* little-endian on every server SCUDA runs on (x86-64, aarch64) */
    uint8_t nonce[IPC_NONCE_BYTES];
    uint8_t zero[32];
};
_Static_assert(sizeof(struct wire_handle) == 64, "an IPC handle is 64 bytes");
_Static_assert(sizeof(struct wire_handle) == IPC_TOKEN_BYTES, "a shareable token is an IPC handle");

/* What this session exported (so a second export of one pointer gives the
 * same handle) and imported (so close knows how to undo it). */
struct exported {
    uint64_t key; /* device pointer, event, or shared allocation or pool */
    struct wire_handle h;
    int own_fd; /* IPC_FD: this session's copy, for its own imports; else -1 */
};
struct imported {
    CUdeviceptr ptr, va;
    uint64_t size;
    CUmemGenericAllocationHandle handle; /* 0: opened through the driver's IPC */
};

static struct driver_table orig;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct exported exports[IPC_EXPORTS_MAX];
static size_t nexports;
static struct imported imports[IMPORTS_MAX];
static size_t nimports;

static bool exported_find(uint64_t key, uint32_t kind, struct wire_handle *h)
{
    for (size_t i = 0; i < nexports; i++)
        if (exports[i].key == key && exports[i].h.kind == kind) return *h = exports[i].h, true;
    return false;
}

/* Register e and describe it to the client in *h. */
static CUresult publish(struct ipc_export *e, uint64_t key, struct wire_handle *h, int fd)
{
    uint32_t slot;
    snprintf(e->user, sizeof e->user, "%s", session_identity());
    if (nexports == IPC_EXPORTS_MAX || ipc_registry_add(e, &slot) != 0) {
        LOG_WARN("IPC: the server's table of exports is full (%d); close or free shared memory", IPC_EXPORTS_MAX);
        if (fd >= 0) close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (fd >= 0 && ipc_broker_offer(slot, e->nonce, fd) != 0) {
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    memset(h, 0, sizeof *h);
    memcpy(h->magic, IPC_MAGIC, sizeof h->magic);
    h->version = IPC_VERSION;
    h->kind = (uint8_t)e->kind;
    h->slot = slot;
    memcpy(h->nonce, e->nonce, sizeof h->nonce);
    exports[nexports++] = (struct exported){.key = key, .h = *h, .own_fd = -1};
    return CUDA_SUCCESS;
}

static CUresult registry_check(void)
{
    if (ipc_registry_ready()) return CUDA_SUCCESS;
    LOG_WARN("IPC: this session has no export registry (it was not started by `scuda server`); "
             "interprocess handles are not available");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Window memory is VMM memory, which has no legacy IPC handle: its chunk
 * is exported as a file descriptor, handed to importers by the broker. */
static CUresult export_chunk(const struct window_chunk *c, CUdeviceptr p, struct ipc_export *e, int *fd)
{
    if (!c->shareable) {
        LOG_WARN("IPC: device %d cannot export memory as file descriptors; start the server with "
                 "--driver-placed-memory to share cuMemAlloc memory", c->device);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    CUresult r = orig.cuMemExportToShareableHandle(fd, c->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (r != CUDA_SUCCESS) return r;
    e->how = IPC_VMM;
    e->offset = p - c->addr;
    e->map_size = c->size;
    e->dev = c->device;
    return CUDA_SUCCESS;
}

static CUresult ipc_cuIpcGetMemHandle(CUipcMemHandle *out, CUdeviceptr p)
{
    CUresult r = registry_check();
    if (r != CUDA_SUCCESS || out == NULL) return r ? r : CUDA_ERROR_INVALID_VALUE;
    struct wire_handle h;
    struct ipc_export e = {.kind = IPC_MEM};
    struct window_chunk c;
    int fd = -1;
    pthread_mutex_lock(&lock);
    if (exported_find(p, IPC_MEM, &h)) r = CUDA_SUCCESS;
    else if (window_chunk_of(p, &c)) r = export_chunk(&c, p, &e, &fd);
    else if (orig.cuIpcGetMemHandle == NULL) r = CUDA_ERROR_NOT_SUPPORTED;
    else {
        CUipcMemHandle d;
        r = orig.cuIpcGetMemHandle(&d, p);
        e.how = IPC_DRIVER;
        memcpy(e.driver_handle, d.reserved, sizeof e.driver_handle);
    }
    if (r == CUDA_SUCCESS && e.how) r = publish(&e, p, &h, fd);
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) memcpy(out->reserved, &h, sizeof h);
    return r;
}

/* The export a client's handle names, if this session may open it. */
static CUresult resolve(const void *bytes, uint32_t kind, struct ipc_export *e)
{
    CUresult r = registry_check();
    if (r != CUDA_SUCCESS) return r;
    struct wire_handle h;
    memcpy(&h, bytes, sizeof h);
    if (memcmp(h.magic, IPC_MAGIC, sizeof h.magic) != 0 || h.version != IPC_VERSION || h.kind != kind ||
        !ipc_registry_find(h.slot, h.nonce, e)) {
        LOG_WARN("IPC: a handle that no live session of this server exported; the exporting process must "
                 "keep running and use the same server");
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (strcmp(e->user, session_identity()) != 0) {
        LOG_WARN("IPC: user %s tried to open a handle exported by user %s; refused (IPC is per user)",
                 session_identity(), e->user);
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if (e->pid == getpid() && e->how != IPC_FD)
        return CUDA_ERROR_INVALID_CONTEXT; /* as the driver: not in the exporting process */
    return CUDA_SUCCESS;
}

/* Map an exported chunk at an address of this session's window. */
static CUresult import_chunk(const struct ipc_export *e, uint32_t slot, const uint8_t *nonce, struct imported *im)
{
    const char *why = "";
    int fd = ipc_broker_fetch(e->pid, slot, nonce, &why);
    if (fd < 0) {
        LOG_WARN("IPC: cannot open memory of session %d: %s", (int)e->pid, why);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUdevice dev = 0;
    CUresult r = orig.cuCtxGetDevice(&dev);
    if (r == CUDA_SUCCESS)
        r = orig.cuMemImportFromShareableHandle(&im->handle, (void *)(intptr_t)fd,
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (r != CUDA_SUCCESS) return r;
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    r = orig.cuMemAddressReserve(&im->va, e->map_size, 0, 0, 0);
    if (r == CUDA_SUCCESS && (r = orig.cuMemMap(im->va, e->map_size, 0, im->handle, 0)) != CUDA_SUCCESS)
        orig.cuMemAddressFree(im->va, e->map_size);
    else if (r == CUDA_SUCCESS && (r = orig.cuMemSetAccess(im->va, e->map_size, &access, 1)) != CUDA_SUCCESS) {
        orig.cuMemUnmap(im->va, e->map_size);
        orig.cuMemAddressFree(im->va, e->map_size);
    }
    if (r != CUDA_SUCCESS) {
        orig.cuMemRelease(im->handle);
        return r;
    }
    im->size = e->map_size;
    im->ptr = im->va + e->offset;
    return CUDA_SUCCESS;
}

static CUresult open_mem(CUdeviceptr *out, CUipcMemHandle handle, unsigned flags, bool v2)
{
    struct ipc_export e;
    CUresult r = out ? resolve(handle.reserved, IPC_MEM, &e) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS) return r;
    struct wire_handle h;
    memcpy(&h, handle.reserved, sizeof h);
    struct imported im = {0};
    pthread_mutex_lock(&lock);
    if (nimports == IMPORTS_MAX) r = CUDA_ERROR_TOO_MANY_PEERS;
    else if (e.how == IPC_VMM) r = import_chunk(&e, h.slot, h.nonce, &im);
    else {
        CUipcMemHandle d;
        memcpy(d.reserved, e.driver_handle, sizeof d.reserved);
        CUresult (*fn)(CUdeviceptr *, CUipcMemHandle, unsigned) =
            v2 ? orig.cuIpcOpenMemHandle_v2 : orig.cuIpcOpenMemHandle;
        r = fn ? fn(&im.ptr, d, flags) : CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r == CUDA_SUCCESS) imports[nimports++] = im, *out = im.ptr;
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult ipc_cuIpcOpenMemHandle(CUdeviceptr *out, CUipcMemHandle handle, unsigned flags)
{
    return open_mem(out, handle, flags, false);
}

static CUresult ipc_cuIpcOpenMemHandle_v2(CUdeviceptr *out, CUipcMemHandle handle, unsigned flags)
{
    return open_mem(out, handle, flags, true);
}

static CUresult ipc_cuIpcCloseMemHandle(CUdeviceptr p)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nimports && imports[i].ptr != p) i++;
    bool found = i < nimports;
    struct imported im = found ? imports[i] : (struct imported){0};
    if (found) imports[i] = imports[--nimports];
    pthread_mutex_unlock(&lock);
    if (!found) return CUDA_ERROR_INVALID_VALUE; /* never opened in this session */
    if (im.handle == 0) return orig.cuIpcCloseMemHandle ? orig.cuIpcCloseMemHandle(p) : CUDA_ERROR_NOT_SUPPORTED;
    orig.cuCtxSynchronize(); /* as the driver's close: no queued work may still use it */
    orig.cuMemUnmap(im.va, im.size);
    orig.cuMemAddressFree(im.va, im.size);
    return orig.cuMemRelease(im.handle);
}

/* Events cross through the driver's own IPC (an event is not memory the
 * session places), wrapped in SCUDA's handle for the per-user check. */
static CUresult ipc_cuIpcGetEventHandle(CUipcEventHandle *out, CUevent ev)
{
    CUresult r = registry_check();
    if (r != CUDA_SUCCESS || out == NULL) return r ? r : CUDA_ERROR_INVALID_VALUE;
    if (orig.cuIpcGetEventHandle == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    struct wire_handle h;
    pthread_mutex_lock(&lock);
    if (!exported_find((uint64_t)(uintptr_t)ev, IPC_EVENT, &h)) {
        CUipcEventHandle d;
        struct ipc_export e = {.kind = IPC_EVENT, .how = IPC_DRIVER};
        r = orig.cuIpcGetEventHandle(&d, ev);
        memcpy(e.driver_handle, d.reserved, sizeof e.driver_handle);
        if (r == CUDA_SUCCESS) r = publish(&e, (uint64_t)(uintptr_t)ev, &h, -1);
    }
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) memcpy(out->reserved, &h, sizeof h);
    return r;
}

static CUresult ipc_cuIpcOpenEventHandle(CUevent *out, CUipcEventHandle handle)
{
    struct ipc_export e;
    CUresult r = out ? resolve(handle.reserved, IPC_EVENT, &e) : CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS) return r;
    if (orig.cuIpcOpenEventHandle == NULL) return CUDA_ERROR_NOT_SUPPORTED;
    CUipcEventHandle d;
    memcpy(d.reserved, e.driver_handle, sizeof d.reserved);
    return orig.cuIpcOpenEventHandle(out, d);
}

CUresult ipc_share_fd(uint32_t kind, uint64_t key, int fd, uint8_t token[IPC_TOKEN_BYTES])
{
    CUresult r = registry_check();
    if (r != CUDA_SUCCESS) {
        close(fd);
        return r;
    }
    struct wire_handle h;
    pthread_mutex_lock(&lock);
    if (exported_find(key, kind, &h)) {
        close(fd); /* the first export's descriptor already serves it */
    } else {
        int own = dup(fd);
        struct ipc_export e = {.kind = kind, .how = IPC_FD};
        r = own < 0 ? CUDA_ERROR_OPERATING_SYSTEM : publish(&e, key, &h, fd);
        if (r == CUDA_SUCCESS) exports[nexports - 1].own_fd = own;
        else if (own >= 0) close(own);
        if (own < 0) close(fd);
    }
    pthread_mutex_unlock(&lock);
    if (r == CUDA_SUCCESS) memcpy(token, &h, sizeof h);
    return r;
}

/* This session's own export of token h: a dup of its copy, or -1. */
static int own_export_fd(const struct wire_handle *h)
{
    int fd = -1;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nexports && fd < 0; i++)
        if (exports[i].h.slot == h->slot && exports[i].h.kind == h->kind && exports[i].own_fd >= 0)
            fd = dup(exports[i].own_fd);
    pthread_mutex_unlock(&lock);
    return fd;
}

CUresult ipc_open_fd(uint32_t kind, const uint8_t token[IPC_TOKEN_BYTES], int *fd)
{
    struct ipc_export e;
    CUresult r = resolve(token, kind, &e);
    if (r != CUDA_SUCCESS) return r;
    struct wire_handle h;
    memcpy(&h, token, sizeof h);
    if (e.pid == getpid()) {
        *fd = own_export_fd(&h);
        return *fd < 0 ? CUDA_ERROR_OPERATING_SYSTEM : CUDA_SUCCESS;
    }
    const char *why = "";
    *fd = ipc_broker_fetch(e.pid, h.slot, h.nonce, &why);
    if (*fd >= 0) return CUDA_SUCCESS;
    LOG_WARN("shareable handle: cannot open the export of session %d: %s", (int)e.pid, why);
    return CUDA_ERROR_INVALID_VALUE;
}

#define WRAP(name) t->name = ipc_##name

void ipc_install(struct driver_table *t)
{
    orig = *t;
    if (ipc_registry_ready() && ipc_registry_join(session_identity()) != 0)
        LOG_WARN("IPC: the server's table of sessions is full; this session's exports cannot be opened");
    WRAP(cuIpcGetMemHandle);
    WRAP(cuIpcOpenMemHandle);
    WRAP(cuIpcOpenMemHandle_v2);
    WRAP(cuIpcCloseMemHandle);
    WRAP(cuIpcGetEventHandle);
    WRAP(cuIpcOpenEventHandle);
}
