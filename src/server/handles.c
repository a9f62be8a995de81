/* handles.c - the session's map from client ids to real driver handles
 * (DESIGN §3, virtual handles). An id the session does not know is
 * CUDA_ERROR_INVALID_HANDLE, never a dereference. */
#include "dispatch.h"
#include "session.h"
#include "../common/idmap.h"

static struct idmap handles = IDMAP_INIT; /* one session per process */

static int is_special_stream(uint64_t id)
{
    return id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY || id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD;
}

CUresult handle_get(struct session *s, uint64_t id, enum handle_kind kind, void **real_handle)
{
    (void)s;
    *real_handle = NULL;
    if (id == 0) return CUDA_SUCCESS;
    if (kind == HK_STREAM && is_special_stream(id)) {
        *real_handle = (void *)(uintptr_t)id;
        return CUDA_SUCCESS;
    }
    uint32_t tag;
    void *v;
    if (idmap_get(&handles, id, &tag, &v) && (tag == kind || (kind == HK_FUNCTION && tag == HK_KERNEL))) {
        *real_handle = v;
        return CUDA_SUCCESS;
    }
    return kind == HK_CONTEXT ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_INVALID_HANDLE;
}

CUresult handle_put(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle)
{
    (void)s;
    if (is_special_stream(id)) return CUDA_ERROR_INVALID_VALUE;
    int rc = idmap_put(&handles, id, (uint32_t)kind, real_handle);
    return rc == 0 ? CUDA_SUCCESS : rc == -2 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
}

void handle_drop(struct session *s, uint64_t id)
{
    (void)s;
    idmap_del(&handles, id);
}

uint64_t handle_find_id(struct session *s, enum handle_kind kind, const void *real_handle)
{
    (void)s;
    return idmap_find_value(&handles, (uint32_t)kind, real_handle);
}
