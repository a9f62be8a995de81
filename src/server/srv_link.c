/* srv_link.c - the session's side of run-time linking (src/client/link.c).
 *
 * A link is the driver's CUlinkState under the client's id (HK_LINK_STATE:
 * the session's cleanup destroys what the client left), with the log
 * buffers its cuLinkCreate options asked for, which the driver fills
 * during every add and the completion: each reply carries both logs as
 * they stand, also when the call failed. An input's bytes get a NUL after
 * them that its size does not count, so a PTX text without one cannot make
 * the driver read past the request. An archive (CU_JIT_INPUT_LIBRARY) goes
 * through a private temporary file, the one form the driver takes it in. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatch.h"
#include "host_quota.h"
#include "jit_args.h"
#include "staging.h"
#include "../common/log.h"
#include "../common/messages.gen.h"

struct link_logs {
    CUlinkState st;
    struct jit_options jit; /* cuLinkCreate's options, log buffers included */
    struct link_logs *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct link_logs *all;

static struct link_logs *logs_of(CUlinkState st)
{
    pthread_mutex_lock(&lock);
    struct link_logs *l = all;
    while (l && l->st != st) l = l->next;
    pthread_mutex_unlock(&lock);
    return l;
}

static void logs_forget(CUlinkState st)
{
    pthread_mutex_lock(&lock);
    struct link_logs **pp = &all;
    while (*pp && (*pp)->st != st) pp = &(*pp)->next;
    struct link_logs *l = *pp;
    if (l) *pp = l->next;
    pthread_mutex_unlock(&lock);
    if (l) {
        free_jit_logs(&l->jit);
        free(l);
    }
}

CUresult srv_scuda_link_create(srv_call *c)
{
    struct msg_scuda_link_create_req m;
    if (msg_scuda_link_create_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct link_logs *l = calloc(1, sizeof *l);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    if (jit_options_from(m.jit, m.jit_count, &l->jit) != 0) {
        free(l);
        return CUDA_ERROR_INVALID_VALUE;
    }
    CUresult r = REAL(cuLinkCreate_v2, l->jit.n, l->jit.n ? l->jit.opt : NULL, l->jit.n ? l->jit.val : NULL,
                      &l->st);
    if (r == CUDA_SUCCESS && (r = handle_put(c->s, m.link, HK_LINK_STATE, l->st)) != CUDA_SUCCESS)
        REAL(cuLinkDestroy, l->st);
    if (r != CUDA_SUCCESS) {
        free_jit_logs(&l->jit);
        free(l);
        return r;
    }
    pthread_mutex_lock(&lock);
    l->next = all;
    all = l;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* An archive, through a temporary file only this session can read. */
static CUresult add_library(CUlinkState st, const void *data, size_t len, struct jit_options *j)
{
    char path[] = "/tmp/scuda-link-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    int ok = write_all(fd, data, len);
    close(fd);
    CUresult r = ok ? REAL(cuLinkAddFile_v2, st, CU_JIT_INPUT_LIBRARY, path, j->n, j->n ? j->opt : NULL,
                           j->n ? j->val : NULL)
                    : CUDA_ERROR_OPERATING_SYSTEM;
    unlink(path);
    return r;
}

static CUresult add_input(CUlinkState st, const struct msg_scuda_link_add_req *m, const void *data,
                          struct jit_options *j)
{
    size_t len = (size_t)m->data_len;
    if (m->type == CU_JIT_INPUT_LIBRARY) return add_library(st, data, len, j);
    char *copy = host_quota_alloc(len + 1, "a link input's copy");
    if (!copy) return CUDA_ERROR_OUT_OF_MEMORY;
    if (len) memcpy(copy, data, len);
    copy[len] = '\0';
    CUresult r = REAL(cuLinkAddData_v2, st, (CUjitInputType)m->type, copy, len, m->name, j->n,
                      j->n ? j->opt : NULL, j->n ? j->val : NULL);
    host_quota_free(copy);
    return r;
}

CUresult srv_scuda_link_add(srv_call *c)
{
    struct msg_scuda_link_add_req m;
    if (msg_scuda_link_add_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.link, HK_LINK_STATE, &st);
    struct link_logs *l = r == CUDA_SUCCESS ? logs_of((CUlinkState)st) : NULL;
    if (r != CUDA_SUCCESS || !l) return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_HANDLE;
    struct jit_options j;
    if (jit_options_from(m.jit, m.jit_count, &j) != 0) return CUDA_ERROR_INVALID_VALUE;
    const void *data = c->staging ? staging_data(c->staging) : m.data;
    r = data || m.data_len == 0 ? add_input((CUlinkState)st, &m, data, &j) : CUDA_ERROR_INVALID_VALUE;
    free_jit_logs(&j);
    c->out_on_error = 1; /* the logs say why */
    struct msg_scuda_link_add_rep rep = {l->jit.info_log, l->jit.error_log};
    msg_scuda_link_add_rep_put(&c->out, &rep);
    return r;
}

CUresult srv_scuda_link_complete(srv_call *c)
{
    struct msg_scuda_link_complete_req m;
    if (msg_scuda_link_complete_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.link, HK_LINK_STATE, &st);
    struct link_logs *l = r == CUDA_SUCCESS ? logs_of((CUlinkState)st) : NULL;
    if (r != CUDA_SUCCESS || !l) return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_HANDLE;
    void *image = NULL;
    size_t size = 0;
    r = REAL(cuLinkComplete, (CUlinkState)st, &image, &size);
    if (r == CUDA_SUCCESS && (!image || size > LINK_IMAGE_MAX)) {
        LOG_WARN("a linked image of %zu bytes is larger than SCUDA returns in one reply (%u): "
                 "CUDA_ERROR_NOT_SUPPORTED", size, (unsigned)LINK_IMAGE_MAX);
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    c->out_on_error = 1;
    struct msg_scuda_link_complete_rep rep = {l->jit.info_log, l->jit.error_log, r == CUDA_SUCCESS ? image : NULL,
                                              r == CUDA_SUCCESS ? size : 0};
    msg_scuda_link_complete_rep_put(&c->out, &rep);
    return r;
}

CUresult srv_cuLinkDestroy(srv_call *c)
{
    struct msg_cuLinkDestroy_req m;
    if (msg_cuLinkDestroy_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    void *st;
    CUresult r = handle_get(c->s, m.link, HK_LINK_STATE, &st);
    if (r != CUDA_SUCCESS) return r;
    r = REAL(cuLinkDestroy, (CUlinkState)st);
    if (r == CUDA_SUCCESS) {
        handle_drop(c->s, m.link);
        logs_forget((CUlinkState)st);
    }
    return r;
}
