/* link.c - run-time linking: cuLinkCreate, cuLinkAddData, cuLinkAddFile,
 * cuLinkComplete, cuLinkDestroy.
 *
 * The session's driver links (src/server/srv_link.c). A file named to
 * cuLinkAddFile is on the client's machine: the client reads it and sends
 * its bytes as data. The JIT options of cuLinkCreate stay the
 * application's for the link's life, as the driver keeps them: after every
 * add and the completion the session's logs are copied into the
 * application's log buffers (jit_request.h). cuLinkComplete's image is
 * copied into a buffer of the client's, valid until cuLinkDestroy, so the
 * application may load it with cuModuleLoadData (which finds it in the
 * module cache by its hash). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jit_request.h"
#include "rpc.h"
#include "shim.h"
#include "../common/ops.gen.h"

struct link {
    uint64_t id;
    struct jit_request jit; /* cuLinkCreate's options: the application's arrays */
    size_t info_cap, error_cap; /* their log buffers' sizes (the size options become outputs) */
    void *image;            /* cuLinkComplete's, until cuLinkDestroy */
    struct link *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct link *links;

static struct link *link_find(CUlinkState st)
{
    pthread_mutex_lock(&lock);
    struct link *l = links;
    while (l && l->id != handle_wire_id(st)) l = l->next;
    pthread_mutex_unlock(&lock);
    return l;
}

static struct link *link_take(CUlinkState st)
{
    pthread_mutex_lock(&lock);
    struct link **pp = &links;
    while (*pp && (*pp)->id != handle_wire_id(st)) pp = &(*pp)->next;
    struct link *l = *pp;
    if (l) *pp = l->next;
    pthread_mutex_unlock(&lock);
    return l;
}

static void take_logs(const struct link *l, const char *info, const char *error)
{
    jit_request_take_log(&l->jit, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, l->info_cap, info);
    jit_request_take_log(&l->jit, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, l->error_cap, error);
}

static CUresult link_create(unsigned n, CUjit_option *options, void **values, CUlinkState *out)
{
    if (!out || (n && (!options || !values))) return CUDA_ERROR_INVALID_VALUE;
    struct link *l = calloc(1, sizeof *l);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    *l = (struct link){.id = handle_new_id(), .jit = {n, options, values}};
    l->info_cap = jit_request_log_size(&l->jit, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
    l->error_cap = jit_request_log_size(&l->jit, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
    struct msg_jit_option opts[JIT_MAX_OPTIONS];
    struct msg_scuda_link_create_req m = {.link = l->id, .jit = opts};
    if (jit_request_put(&l->jit, opts, &m.jit_count, 0) != 0) {
        free(l);
        return CUDA_ERROR_INVALID_VALUE; /* more options than the session takes */
    }
    rpc_call c;
    rpc_begin(&c, OP_scuda_link_create);
    msg_scuda_link_create_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    if (r != CUDA_SUCCESS) {
        free(l);
        return r;
    }
    pthread_mutex_lock(&lock);
    l->next = links;
    links = l;
    pthread_mutex_unlock(&lock);
    *out = (CUlinkState)handle_from_id(l->id);
    return CUDA_SUCCESS;
}

static CUresult link_add(CUlinkState st, CUjitInputType type, const void *data, size_t size, const char *name,
                         unsigned n, CUjit_option *options, void **values)
{
    struct link *l = link_find(st);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if ((size && !data) || (n && (!options || !values))) return CUDA_ERROR_INVALID_VALUE;
    struct jit_request per_input = {n, options, values};
    struct msg_jit_option opts[JIT_MAX_OPTIONS];
    struct msg_scuda_link_add_req m = {.link = l->id, .type = (uint32_t)type, .name = name, .jit = opts,
                                       .data = data, .data_len = size};
    if (jit_request_put(&per_input, opts, &m.jit_count, 1) != 0) return CUDA_ERROR_INVALID_VALUE;
    rpc_call c;
    rpc_begin(&c, OP_scuda_link_add);
    msg_scuda_link_add_req_put(&c.req, &m);
    c.bulk = data;
    c.bulk_len = size;
    CUresult r = rpc_sync(&c);
    struct msg_scuda_link_add_rep rep;
    if (msg_scuda_link_add_rep_get(&c.out, &c.arena, &rep) == 0) take_logs(l, rep.info_log, rep.error_log);
    else if (r == CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN; /* not what any session sends */
    rpc_end(&c);
    return r;
}

/* A file on this machine, whole: NULL when it cannot be read. */
static void *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int ok = 1;
    for (;;) {
        if (n + 65536 > cap) {
            char *nb = realloc(buf, cap = (cap + 65536) * 2);
            if (!nb) {
                ok = 0;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 65536, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) ok = 0;
    fclose(f);
    if (!ok) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static CUresult link_add_file(CUlinkState st, CUjitInputType type, const char *path, unsigned n,
                              CUjit_option *options, void **values)
{
    if (!path) return CUDA_ERROR_INVALID_VALUE;
    if (!link_find(st)) return CUDA_ERROR_INVALID_HANDLE;
    size_t len = 0;
    void *bytes = read_file(path, &len);
    if (!bytes) return CUDA_ERROR_FILE_NOT_FOUND; /* the driver's answer for a file it cannot open */
    CUresult r = link_add(st, type, bytes, len, path, n, options, values);
    free(bytes);
    return r;
}

static CUresult link_complete(CUlinkState st, void **image_out, size_t *size_out)
{
    struct link *l = link_find(st);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if (!image_out || !size_out) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_link_complete_req m = {.link = l->id};
    rpc_call c;
    rpc_begin(&c, OP_scuda_link_complete);
    msg_scuda_link_complete_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    struct msg_scuda_link_complete_rep rep;
    if (msg_scuda_link_complete_rep_get(&c.out, &c.arena, &rep) != 0) {
        if (r == CUDA_SUCCESS) r = CUDA_ERROR_UNKNOWN;
    } else {
        take_logs(l, rep.info_log, rep.error_log);
        void *copy = r == CUDA_SUCCESS ? malloc(rep.image_len ? rep.image_len : 1) : NULL;
        if (r == CUDA_SUCCESS && !copy) r = CUDA_ERROR_OUT_OF_MEMORY;
        if (copy) {
            memcpy(copy, rep.image, rep.image_len);
            free(l->image); /* only one completion succeeds; the driver refuses a second */
            l->image = copy;
            *image_out = copy;
            *size_out = rep.image_len;
        }
    }
    rpc_end(&c);
    return r;
}

static CUresult link_destroy(CUlinkState st)
{
    struct link *l = link_take(st);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    struct msg_cuLinkDestroy_req m = {.link = l->id};
    rpc_call c;
    rpc_begin(&c, OP_cuLinkDestroy);
    msg_cuLinkDestroy_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    free(l->image);
    free(l);
    return r;
}

EXPORT CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues, CUlinkState *stateOut)
{
    SHIM_ENTER(cuLinkCreate, (numOptions, options, optionValues, stateOut));
    return link_create(numOptions, options, optionValues, stateOut);
}

EXPORT CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    SHIM_ENTER(cuLinkCreate_v2, (numOptions, options, optionValues, stateOut));
    return link_create(numOptions, options, optionValues, stateOut);
}

EXPORT CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                              unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    SHIM_ENTER(cuLinkAddData, (state, type, data, size, name, numOptions, options, optionValues));
    return link_add(state, type, data, size, name, numOptions, options, optionValues);
}

EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
                                 unsigned int numOptions, CUjit_option *options, void **optionValues)
{
    SHIM_ENTER(cuLinkAddData_v2, (state, type, data, size, name, numOptions, options, optionValues));
    return link_add(state, type, data, size, name, numOptions, options, optionValues);
}

EXPORT CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                              CUjit_option *options, void **optionValues)
{
    SHIM_ENTER(cuLinkAddFile, (state, type, path, numOptions, options, optionValues));
    return link_add_file(state, type, path, numOptions, options, optionValues);
}

EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
                                 CUjit_option *options, void **optionValues)
{
    SHIM_ENTER(cuLinkAddFile_v2, (state, type, path, numOptions, options, optionValues));
    return link_add_file(state, type, path, numOptions, options, optionValues);
}

EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    SHIM_ENTER(cuLinkComplete, (state, cubinOut, sizeOut));
    return link_complete(state, cubinOut, sizeOut);
}

EXPORT CUresult cuLinkDestroy(CUlinkState state)
{
    SHIM_ENTER(cuLinkDestroy, (state));
    return link_destroy(state);
}
