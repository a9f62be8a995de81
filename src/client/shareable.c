/* shareable.c - cuMemExportToShareableHandle, cuMemPoolExportToShareableHandle
 * and their imports (docs/architecture.md, 9.19).
 *
 * The driver's file descriptor belongs to the session's process on the
 * server and can never be a descriptor of this one. What the application
 * gets instead is a real local descriptor: a sealed memfd holding the token
 * of the server's export registry. The application passes it on as it
 * would the driver's (SCM_RIGHTS to a peer process, fork), and the peer's
 * shim reads the token back and asks its own session to import; the
 * server checks that both sessions are of one user, as for IPC. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "handles.h"
#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"

#define SHAREABLE_MAGIC "SCUDASHR"

/* What the memfd holds. */
struct shareable_file {
    char magic[8];
    uint8_t kind, pad[7];
    uint8_t token[SHAREABLE_TOKEN_LEN];
};

/* The handle types a token can stand for: a POSIX descriptor. Fabric and
 * Win32 handles name things the client's process cannot hold (the GPU
 * fabric of the server's node, Windows handles). */
static CUresult type_supported(CUmemAllocationHandleType type, const char *call)
{
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_SUCCESS;
    static int once;
    if (!__atomic_exchange_n(&once, 1, __ATOMIC_RELAXED))
        LOG_WARN("%s: handle type %d is not supported by SCUDA (a fabric or Win32 handle names memory of the "
                 "server's node); use CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR", call, (int)type);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* A sealed memfd with the token: the application's descriptor. */
static CUresult token_fd(uint8_t kind, const uint8_t *token, int *out)
{
    struct shareable_file f = {.kind = kind};
    memcpy(f.magic, SHAREABLE_MAGIC, sizeof f.magic);
    memcpy(f.token, token, sizeof f.token);
    int fd = memfd_create("scuda-shareable", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        LOG_WARN("shareable handle: memfd_create failed: %m");
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (pwrite(fd, &f, sizeof f, 0) != (ssize_t)sizeof f ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        LOG_WARN("shareable handle: cannot write its memfd: %m");
        close(fd);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    *out = fd;
    return CUDA_SUCCESS;
}

static CUresult share(uint8_t kind, uint64_t id, unsigned long long flags, int *fd_out)
{
    rpc_call c;
    struct msg_scuda_shareable_export_req m = {.kind = kind, .handle = id, .flags = flags};
    rpc_begin(&c, OP_scuda_shareable_export);
    msg_scuda_shareable_export_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    struct msg_scuda_shareable_export_rep rep;
    if (r == CUDA_SUCCESS && msg_scuda_shareable_export_rep_get(&c.out, &c.arena, &rep) != 0)
        r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) r = token_fd(kind, rep.token, fd_out);
    rpc_end(&c);
    return r;
}

/* The token in an application's descriptor. A descriptor that is not one
 * of SCUDA's (a real driver's, a file) cannot name memory of the server. */
static CUresult read_token(int fd, uint8_t kind, uint8_t *token, const char *call)
{
    struct shareable_file f;
    if (pread(fd, &f, sizeof f, 0) != (ssize_t)sizeof f || memcmp(f.magic, SHAREABLE_MAGIC, sizeof f.magic) != 0 ||
        f.kind != kind) {
        LOG_WARN("%s: descriptor %d is not a SCUDA shareable handle of this kind; import only descriptors that "
                 "an export through SCUDA made", call, fd);
        return CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(token, f.token, sizeof f.token);
    return CUDA_SUCCESS;
}

static CUresult import(uint8_t kind, void *os_handle, uint64_t id, unsigned long long flags, const char *call)
{
    struct msg_scuda_shareable_import_req m = {.kind = kind, .handle = id, .flags = flags};
    CUresult r = read_token((int)(intptr_t)os_handle, kind, m.token, call);
    if (r != CUDA_SUCCESS) return r;
    rpc_call c;
    rpc_begin(&c, OP_scuda_shareable_import);
    msg_scuda_shareable_import_req_put(&c.req, &m);
    r = rpc_sync(&c);
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                             CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SHIM_ENTER(cuMemExportToShareableHandle, (shareableHandle, handle, handleType, flags));
    if (shareableHandle == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = type_supported(handleType, "cuMemExportToShareableHandle");
    return r ? r : share(SHAREABLE_MEMORY, (uint64_t)handle, flags, (int *)shareableHandle);
}

EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                               CUmemAllocationHandleType shHandleType)
{
    SHIM_ENTER(cuMemImportFromShareableHandle, (handle, osHandle, shHandleType));
    if (handle == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = type_supported(shHandleType, "cuMemImportFromShareableHandle");
    uint64_t id = handle_new_id();
    if (r == CUDA_SUCCESS) r = import(SHAREABLE_MEMORY, osHandle, id, 0, "cuMemImportFromShareableHandle");
    if (r == CUDA_SUCCESS) *handle = (CUmemGenericAllocationHandle)id;
    return r;
}

EXPORT CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                 CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SHIM_ENTER(cuMemPoolExportToShareableHandle, (handle_out, pool, handleType, flags));
    if (handle_out == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = type_supported(handleType, "cuMemPoolExportToShareableHandle");
    return r ? r : share(SHAREABLE_POOL, handle_wire_id(pool), flags, (int *)handle_out);
}

EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                   CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SHIM_ENTER(cuMemPoolImportFromShareableHandle, (pool_out, handle, handleType, flags));
    if (pool_out == NULL) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = type_supported(handleType, "cuMemPoolImportFromShareableHandle");
    uint64_t id = handle_new_id();
    if (r == CUDA_SUCCESS) r = import(SHAREABLE_POOL, handle, id, flags, "cuMemPoolImportFromShareableHandle");
    if (r == CUDA_SUCCESS) *pool_out = (CUmemoryPool)handle_from_id(id);
    return r;
}
