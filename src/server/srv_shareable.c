/* srv_shareable.c - the session's side of shareable handles
 * (cuMemExportToShareableHandle, cuMemPoolExportToShareableHandle and their
 * imports; docs/architecture.md, 9.19).
 *
 * The driver's file descriptor is a descriptor of this process: it stays
 * here, published in the server's export registry like an IPC export
 * (srv_ipc.h), and the client gets the registry's token. An import in a
 * sibling session of the same user fetches the descriptor through the
 * broker and imports it with the driver; only POSIX file descriptors are
 * exported (the one type a token can stand for between processes). */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/messages.gen.h"
#include "dispatch.h"
#include "handlers.gen.h"
#include "ipc_registry.h"
#include "srv_ipc.h"

static CUresult export_fd(uint8_t kind, void *obj, uint64_t flags, int *fd)
{
    if (kind == SHAREABLE_MEMORY)
        return REAL(cuMemExportToShareableHandle, fd, (CUmemGenericAllocationHandle)(uintptr_t)obj,
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, flags);
    return REAL(cuMemPoolExportToShareableHandle, fd, (CUmemoryPool)obj, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                flags);
}

static int kind_valid(uint8_t kind) { return kind == SHAREABLE_MEMORY || kind == SHAREABLE_POOL; }

static enum handle_kind handle_kind_of(uint8_t kind) { return kind == SHAREABLE_MEMORY ? HK_MEM_ALLOC : HK_MEMPOOL; }

static uint32_t registry_kind_of(uint8_t kind) { return kind == SHAREABLE_MEMORY ? IPC_SHARED_ALLOC : IPC_SHARED_POOL; }

CUresult srv_scuda_shareable_export(srv_call *c)
{
    struct msg_scuda_shareable_export_req m;
    if (msg_scuda_shareable_export_req_get(&c->in, &c->arena, &m) != 0 || !kind_valid(m.kind))
        return CUDA_ERROR_INVALID_VALUE;
    void *obj = NULL;
    CUresult r = handle_get(c->s, m.handle, handle_kind_of(m.kind), &obj);
    int fd = -1;
    if (r == CUDA_SUCCESS) r = export_fd(m.kind, obj, m.flags, &fd);
    if (r != CUDA_SUCCESS) return r;
    struct msg_scuda_shareable_export_rep rep;
    r = ipc_share_fd(registry_kind_of(m.kind), (uint64_t)(uintptr_t)obj, fd, rep.token);
    if (r == CUDA_SUCCESS) msg_scuda_shareable_export_rep_put(&c->out, &rep);
    return r;
}

/* Import fd with the driver; *obj is the new handle. */
static CUresult import_fd(uint8_t kind, int fd, uint64_t flags, void **obj)
{
    void *os_handle = (void *)(intptr_t)fd;
    if (kind == SHAREABLE_MEMORY) {
        CUmemGenericAllocationHandle h = 0;
        CUresult r = REAL(cuMemImportFromShareableHandle, &h, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        *obj = (void *)(uintptr_t)h;
        return r;
    }
    CUmemoryPool pool = NULL;
    CUresult r = REAL(cuMemPoolImportFromShareableHandle, &pool, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                      flags);
    *obj = pool;
    return r;
}

static void release(uint8_t kind, void *obj)
{
    if (kind == SHAREABLE_MEMORY) REAL(cuMemRelease, (CUmemGenericAllocationHandle)(uintptr_t)obj);
    else REAL(cuMemPoolDestroy, (CUmemoryPool)obj);
}

CUresult srv_scuda_shareable_import(srv_call *c)
{
    struct msg_scuda_shareable_import_req m;
    if (msg_scuda_shareable_import_req_get(&c->in, &c->arena, &m) != 0 || !kind_valid(m.kind))
        return CUDA_ERROR_INVALID_VALUE;
    int fd = -1;
    CUresult r = ipc_open_fd(registry_kind_of(m.kind), m.token, &fd);
    if (r != CUDA_SUCCESS) return r;
    void *obj = NULL;
    r = import_fd(m.kind, fd, m.flags, &obj);
    close(fd); /* the driver keeps its own reference, as after a native import */
    if (r != CUDA_SUCCESS) return r;
    r = handle_put(c->s, m.handle, handle_kind_of(m.kind), obj);
    if (r != CUDA_SUCCESS) release(m.kind, obj);
    return r;
}
