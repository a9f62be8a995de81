/* nvml_shim.h - the state every exported NVML entry point checks first, and
 * the helpers the generated stubs (nvml_stubs.gen.c) encode calls with.
 *
 * The NVML shim (libnvidia-ml.so.1) runs in one of these modes, settled by
 * the first nvmlInit*:
 *   REMOTE       a SCUDA server is configured: calls go to NVML in a
 *                session process of their own on the server (the shim has
 *                its own connection, made with the driver shim's conn.c)
 *   PASSTHROUGH  no server is configured and this machine has a real
 *                libnvidia-ml: every call goes straight to it
 *   NONE         before nvmlInit (calls return NVML_ERROR_UNINITIALIZED,
 *                as NVML does), or after a failed nvmlInit
 * SCUDA_NVML_TRACE=1 logs every call and its result on stderr. */
#ifndef SCUDA_CLIENT_NVML_SHIM_H
#define SCUDA_CLIENT_NVML_SHIM_H

#include <nvml.h>
#include <stddef.h>

#include "../rpc.h"
#include "../servers.h"
#include "../../common/nvml/nvml_table.gen.h"
#include "../../common/nvml/nvml_wire.h"

#define NVML_EXPORT __attribute__((visibility("default")))

enum nvml_mode {
    NVML_MODE_NONE = 0,
    NVML_MODE_REMOTE = 1,
    NVML_MODE_PASSTHROUGH = 2,
};

extern volatile int nvml_mode;
extern struct nvml_table nvml_local; /* the local libnvidia-ml, in PASSTHROUGH */
extern int nvml_trace_on;

/* Settle the mode (once: connect, or find the local NVML). Returns
 * NVML_SUCCESS, or the error every later nvmlInit returns too. */
nvmlReturn_t nvml_shim_init(void);

nvmlReturn_t nvml_trace(const char *name, nvmlReturn_t r);
static inline nvmlReturn_t nvml_traced(const char *name, nvmlReturn_t r)
{
    return __builtin_expect(nvml_trace_on, 0) ? nvml_trace(name, r) : r;
}

/* First statement of every exported entry point but the nvmlInit family. */
#define NVML_ENTER(name, args)                                                  \
    do {                                                                        \
        if (__builtin_expect(nvml_mode != NVML_MODE_REMOTE, 0)) {               \
            if (nvml_mode == NVML_MODE_PASSTHROUGH)                             \
                return nvml_traced(#name, nvml_local.name ? nvml_local.name args \
                                                          : NVML_ERROR_FUNCTION_NOT_FOUND); \
            return nvml_traced(#name, NVML_ERROR_UNINITIALIZED);                \
        }                                                                       \
    } while (0)

/* The nvmlInit family: the first call connects (or finds the local NVML). */
#define NVML_ENTER_INIT(name, args)                                             \
    do {                                                                        \
        nvmlReturn_t init_r_ = nvml_shim_init();                                \
        if (init_r_ != NVML_SUCCESS) return nvml_traced(#name, init_r_);        \
        NVML_ENTER(name, args);                                                 \
    } while (0)

/* Send c and wait: the session's nvmlReturn_t, or NVML_ERROR_GPU_IS_LOST
 * when the connection is gone. */
nvmlReturn_t nvml_call(rpc_call *c);

/* Bytes in a versioned struct (NVML_STRUCT_VERSION puts its size in the
 * low 24 bits of `version`), or dflt when p is NULL or the word is not a
 * size this header knows. */
size_t nvml_versioned_size(const void *p, size_t dflt);

/* u8 present, then (if present) a blob of the n bytes at p. */
void nvml_put_ptr(wire_buf *b, const void *p, size_t n);
/* Outputs: each writes to the caller's memory only when the reply holds
 * the value and p is not NULL, and never more than n bytes. */
int nvml_get_ptr(wire_reader *r, void *p, size_t n);
void nvml_get_bytes(wire_reader *r, void *p, size_t cap);
/* Handles the session of server srv gave out: tagged with srv
 * (handle_tag.h), so that a call naming one goes back there. */
void nvml_get_handle(wire_reader *r, void **p, const struct server *srv);
void nvml_get_handles(wire_reader *r, void **p, size_t cap, const struct server *srv);
/* Tag the handle at p (NULL: nothing) as server srv's. */
void nvml_tag(const struct server *srv, void **p);

/* The server a call naming handle h goes to (its tag). With one server,
 * always that one (the session judges the handle); with several, NULL
 * when the tag names none of them: the call returns
 * NVML_ERROR_INVALID_ARGUMENT, NVML's answer for a handle it never gave. */
struct server *nvml_server_of(const void *h);
/* What the session knows handle h by: its id without the tag. */
static inline uint64_t nvml_wire_id(const void *h) { return handle_untag((uint64_t)(uintptr_t)h); }
/* NVML_ERROR_NOT_SUPPORTED for a call whose handles belong to two
 * servers (no session can answer it), logged once per function. */
nvmlReturn_t nvml_apart(const char *name);

/* With several servers: the server of the client's device `index` and
 * that server's NVML index of it (nvml_devices.c). */
nvmlReturn_t nvml_device_on_server(unsigned index, struct server **srv, unsigned *local);

/* Log "NAME is not supported by SCUDA" once. */
void nvml_unsupported_once(int *once_flag, const char *name);

#endif
