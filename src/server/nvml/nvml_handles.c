/* nvml_handles.c - the session's map between NVML handles and the ids the
 * client holds (docs/architecture.md, 3.5 Virtual handles: the client never sees
 * a server pointer). Unlike
 * CUDA handles, NVML's are made by NVML during a call, so the session picks
 * the ids; a handle gets the same id every time it comes back (programs
 * compare device handles). */
#include "nvml_server.h"

#include <string.h>

#include "../../common/idmap.h"

static struct idmap handles = IDMAP_INIT;
static uint64_t next_id = 0x1000;
static pthread_mutex_t next_lock = PTHREAD_MUTEX_INITIALIZER;

nvmlReturn_t nh_get(enum nvml_handle_kind kind, uint64_t id, void **real)
{
    uint32_t tag;
    *real = NULL;
    if (id == 0) return NVML_SUCCESS; /* NULL: NVML answers for itself */
    if (idmap_get(&handles, id, &tag, real) && tag == (uint32_t)kind) return NVML_SUCCESS;
    *real = NULL;
    return NVML_ERROR_INVALID_ARGUMENT;
}

uint64_t nh_id(enum nvml_handle_kind kind, void *real)
{
    if (real == NULL) return 0;
    pthread_mutex_lock(&next_lock); /* one find-or-add at a time: one id per handle */
    uint64_t id = idmap_find_value(&handles, (uint32_t)kind, real);
    if (id == 0) {
        id = next_id;
        next_id += 8;
        if (idmap_put(&handles, id, (uint32_t)kind, real) != 0) id = 0;
    }
    pthread_mutex_unlock(&next_lock);
    return id;
}

void nh_drop(uint64_t id) { idmap_del(&handles, id); }

nvmlReturn_t nh_field_in(enum nvml_handle_kind kind, void *field, size_t n, size_t off)
{
    uint64_t id;
    void *real;
    if (off + sizeof real > n) return NVML_SUCCESS; /* an older, shorter version */
    memcpy(&real, field, sizeof real);
    id = (uint64_t)(uintptr_t)real;
    nvmlReturn_t r = nh_get(kind, id, &real);
    if (r == NVML_SUCCESS) memcpy(field, &real, sizeof real);
    return r;
}

void nh_field_out(enum nvml_handle_kind kind, void *field, size_t n, size_t off)
{
    void *real;
    if (off + sizeof real > n) return;
    memcpy(&real, field, sizeof real);
    uint64_t id = nh_id(kind, real);
    memcpy(field, &id, sizeof id);
}
