/* nvml_frame.c - decoding and encoding one forwarded NVML call; see
 * nvml_server.h. Every size comes from the arguments, bounded by
 * nvml_wire.h's limits; a request that disagrees is refused whole. */
#define _GNU_SOURCE
#include "nvml_server.h"

#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"

void ns_begin(struct ns_frame *k, srv_call *c)
{
    memset(k, 0, sizeof *k);
    k->c = c;
}

static void fail(struct ns_frame *k, nvmlReturn_t err)
{
    if (k->err == NVML_SUCCESS) k->err = err;
}

/* A zeroed buffer of max(len, 1) bytes owned by the frame. */
static void *keep(struct ns_frame *k, size_t len, int with_orig)
{
    if (k->n == NS_MAX_BUFFERS) {
        fail(k, NVML_ERROR_INVALID_ARGUMENT);
        return NULL;
    }
    void *p = calloc(1, (len ? len : 1) * (with_orig ? 2 : 1));
    if (p == NULL) {
        fail(k, NVML_ERROR_MEMORY);
        return NULL;
    }
    k->buf[k->n].p = p;
    k->buf[k->n].len = len;
    k->buf[k->n].orig = with_orig ? (char *)p + len : NULL;
    k->n++;
    return p;
}

static size_t len_of(struct ns_frame *k, const void *p)
{
    for (int i = 0; i < k->n; i++)
        if (k->buf[i].p == p) return k->buf[i].len;
    return 0;
}

void *ns_get_ptr(struct ns_frame *k, size_t size, int mode, size_t *n)
{
    *n = 0;
    if (!wr_u8(&k->c->in)) return NULL;
    size_t len;
    const void *v = wr_blob(&k->c->in, &len);
    if (mode == 1 ? len < 4 || len > NVML_MAX_STRUCT : len != size) {
        fail(k, mode == 2 && len >= 4 ? NVML_ERROR_ARGUMENT_VERSION_MISMATCH : NVML_ERROR_INVALID_ARGUMENT);
        return NULL;
    }
    size_t have = len > size ? len : size;
    if (mode == 1 && v != NULL) {
        /* NVML writes as much as the version field says, which may be more
         * than the client sends (a newer struct than this nvml.h's). */
        unsigned int version;
        memcpy(&version, v, sizeof version);
        size_t claimed = version & 0xFFFFFFu;
        if (claimed > have && claimed <= NVML_MAX_STRUCT) have = claimed;
    }
    char *p = keep(k, have, 1);
    if (p == NULL) return NULL;
    if (v) memcpy(p, v, len);
    memcpy(p + have, p, have); /* the client's bytes, for ns_put_ptr_or_original */
    *n = len;
    return p;
}

void *ns_get_array(struct ns_frame *k, size_t bytes)
{
    if (!wr_u8(&k->c->in)) return NULL;
    size_t len;
    const void *v = wr_blob(&k->c->in, &len);
    if (bytes > NVML_MAX_ARRAY || len != bytes) {
        fail(k, NVML_ERROR_INVALID_ARGUMENT);
        return NULL;
    }
    void *p = keep(k, bytes, 0);
    if (p && v) memcpy(p, v, len);
    return p;
}

void *ns_alloc_array(struct ns_frame *k, int present, size_t bytes)
{
    if (!present) return NULL;
    if (bytes > NVML_MAX_ARRAY) {
        fail(k, NVML_ERROR_INVALID_ARGUMENT);
        return NULL;
    }
    return keep(k, bytes, 0);
}

nvmlReturn_t ns_ready(struct ns_frame *k)
{
    if (!wr_ok_end(&k->c->in)) {
        LOG_WARN("malformed NVML request (op %u)", k->c->op);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    return k->err != NVML_SUCCESS ? k->err : nvml_load();
}

void ns_put_ptr(struct ns_frame *k, const void *p, size_t n)
{
    if (p) wb_put_blob(&k->c->out, p, n);
}

void ns_put_ptr_or_original(struct ns_frame *k, const void *p, size_t n, nvmlReturn_t r)
{
    if (!p) return;
    size_t have = len_of(k, p);
    wb_put_blob(&k->c->out, r == NVML_SUCCESS ? p : (const char *)p + have, n);
}

nvmlReturn_t ns_put_handle(struct ns_frame *k, enum nvml_handle_kind kind, void *real, nvmlReturn_t r)
{
    if (r == NVML_SUCCESS && kind == NH_DEVICE) r = nvml_device_visible((nvmlDevice_t)real);
    uint64_t id = r == NVML_SUCCESS ? nh_id(kind, real) : 0;
    if (r == NVML_SUCCESS && id == 0) r = NVML_ERROR_MEMORY;
    wb_put_u8(&k->c->out, r == NVML_SUCCESS);
    wb_put_u64(&k->c->out, id);
    return r;
}

void ns_put_str(struct ns_frame *k, const char *s, nvmlReturn_t r, size_t cap)
{
    if (!s) return;
    size_t n = r == NVML_SUCCESS ? strnlen(s, cap) : 0;
    if (r == NVML_SUCCESS && n < cap) n++; /* the NUL */
    wb_put_blob(&k->c->out, s, n);
}

void ns_put_array(struct ns_frame *k, const void *p, nvmlReturn_t r, size_t bytes)
{
    if (!p) return;
    size_t have = len_of(k, p);
    wb_put_blob(&k->c->out, p, r == NVML_SUCCESS ? (bytes < have ? bytes : have) : 0);
}

void ns_put_handles(struct ns_frame *k, enum nvml_handle_kind kind, void **p, nvmlReturn_t r, size_t count)
{
    if (!p) return;
    size_t have = len_of(k, p) / sizeof *p;
    size_t n = r == NVML_SUCCESS ? (count < have ? count : have) : 0;
    uint8_t *ids = wb_reserve(&k->c->out, 8 + 8 * n);
    if (ids == NULL) return;
    uint64_t len = 8 * n;
    memcpy(ids, &len, 8);
    for (size_t i = 0; i < n; i++) {
        uint64_t id = nh_id(kind, p[i]);
        memcpy(ids + 8 + 8 * i, &id, 8);
    }
}

nvmlReturn_t ns_missing(const char *name)
{
    LOG_INFO("the server's NVML has no %s", name);
    return NVML_ERROR_FUNCTION_NOT_FOUND;
}

CUresult ns_end(struct ns_frame *k, nvmlReturn_t r)
{
    for (int i = 0; i < k->n; i++) free(k->buf[i].p);
    k->n = 0;
    /* Outputs go back whatever the result (NVML writes counts on errors). */
    k->c->out_on_error = 1;
    return (CUresult)r;
}
