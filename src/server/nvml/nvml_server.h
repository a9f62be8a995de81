/* nvml_server.h - NVML in the session process: the real library, virtual
 * handles, the devices this session serves, and the helpers the generated
 * handlers (nvml_dispatch.gen.c) decode and encode a call with.
 *
 * A handler's shape:
 *     struct ns_frame k;  ns_begin(&k, c);
 *     ... decode every argument (ns_get_ptr, ns_alloc_array, wr_*) ...
 *     r = ns_ready(&k);                 // malformed or oversized: an error
 *     ... translate handle ids (nh_get) ...
 *     r = nvml_real.NAME(...);
 *     ... encode every output (ns_put_*), whatever r is ...
 *     return ns_end(&k, r);             // frees the frame's buffers
 * The wire format is in src/common/nvml/nvml_wire.h. */
#ifndef SCUDA_SERVER_NVML_H
#define SCUDA_SERVER_NVML_H

#include <nvml.h>
#include <stddef.h>
#include <stdint.h>

#include "../dispatch.h"
#include "../../common/nvml/nvml_table.gen.h"
#include "../../common/nvml/nvml_wire.h"

/* ---- the real NVML (nvml_loader.c) ------------------------------------ */

/* Loaded at the session's first NVML call: SCUDA_NVML_PATH, else the
 * system's libnvidia-ml.so.1 by path. */
extern struct nvml_table nvml_real;
nvmlReturn_t nvml_load(void); /* NVML_ERROR_LIBRARY_NOT_FOUND when absent */

/* ---- virtual handles (nvml_handles.c) ------------------------------------ */

enum nvml_handle_kind {
    NH_DEVICE = 1, NH_UNIT, NH_EVENT_SET, NH_GPU_INSTANCE, NH_COMPUTE_INSTANCE,
    NH_GPM_SAMPLE, NH_SYSTEM_EVENT_SET,
};

/* The real handle of id (id 0 is NULL). Unknown id, or one of another
 * kind: NVML_ERROR_INVALID_ARGUMENT, what NVML says of a bad handle. */
nvmlReturn_t nh_get(enum nvml_handle_kind kind, uint64_t id, void **real);
/* The id of a real handle, made on first sight (0 when out of memory). */
uint64_t nh_id(enum nvml_handle_kind kind, void *real);
void nh_drop(uint64_t id);
/* A handle field of a struct the client sent (n bytes of it; the field at
 * offset off): id to real handle on the way in, real handle to id out. */
nvmlReturn_t nh_field_in(enum nvml_handle_kind kind, void *field, size_t n, size_t off);
void nh_field_out(enum nvml_handle_kind kind, void *field, size_t n, size_t off);

/* ---- the devices this session serves (nvml_devices.c) --------------------- */

/* NVML_SUCCESS if the client may see this device handle, else
 * NVML_ERROR_NOT_FOUND (a GPU the session's CUDA driver does not show). */
nvmlReturn_t nvml_device_visible(nvmlDevice_t dev);
/* The real NVML index of the session's device `index`. */
nvmlReturn_t nvml_served_index(unsigned index, unsigned *nvml_index);

/* Handlers return nvmlReturn_t values in the CUresult slot of the reply. */
#define NV(r) ((CUresult)(r))

/* ---- one call's decoding and encoding (nvml_frame.c) ----------------------- */

#define NS_MAX_BUFFERS 16

struct ns_frame {
    srv_call *c;
    nvmlReturn_t err; /* first problem while decoding */
    int n;
    struct { void *p; size_t len; void *orig; } buf[NS_MAX_BUFFERS];
};

void ns_begin(struct ns_frame *k, srv_call *c);
/* A pointer to one value: NULL when the client sent NULL. mode 0: exactly
 * `size` bytes; 1: a versioned struct of 4..NVML_MAX_STRUCT bytes (the
 * buffer is at least `size`); 2: must be exactly `size` bytes, else
 * NVML_ERROR_ARGUMENT_VERSION_MISMATCH. *n gets the bytes received. */
void *ns_get_ptr(struct ns_frame *k, size_t size, int mode, size_t *n);
/* An input array of exactly `bytes` bytes (NULL when the client sent NULL). */
void *ns_get_array(struct ns_frame *k, size_t bytes);
/* A zeroed output buffer of `bytes` when present, else NULL. */
void *ns_alloc_array(struct ns_frame *k, int present, size_t bytes);
/* After decoding: the first decoding error, or the NVML load error. */
nvmlReturn_t ns_ready(struct ns_frame *k);

void ns_put_ptr(struct ns_frame *k, const void *p, size_t n);
/* The same, but the client's own bytes when r is an error (a struct whose
 * handle fields were translated must not go back half translated). */
void ns_put_ptr_or_original(struct ns_frame *k, const void *p, size_t n, nvmlReturn_t r);
/* u8 ok, u64 id. Returns r, or NVML_ERROR_NOT_FOUND for a device this
 * session does not serve. */
nvmlReturn_t ns_put_handle(struct ns_frame *k, enum nvml_handle_kind kind, void *real, nvmlReturn_t r);
void ns_put_str(struct ns_frame *k, const char *s, nvmlReturn_t r, size_t cap);
/* min(bytes, the buffer's size) bytes of p on success, else none. */
void ns_put_array(struct ns_frame *k, const void *p, nvmlReturn_t r, size_t bytes);
void ns_put_handles(struct ns_frame *k, enum nvml_handle_kind kind, void **p, nvmlReturn_t r, size_t count);
/* The real NVML lacks this export. */
nvmlReturn_t ns_missing(const char *name);
CUresult ns_end(struct ns_frame *k, nvmlReturn_t r);

#endif
