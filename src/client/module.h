/* module.h - what the client knows of loaded modules, libraries and their
 * functions: names, and parameter layouts once asked for, so that
 * cuModuleGetFunction and launches need no round trip (docs/architecture.md, 3.8 Modules). */
#ifndef SCUDA_CLIENT_MODULE_H
#define SCUDA_CLIENT_MODULE_H

#include <cuda.h>

#include "../common/auth.h"
#include "../common/image_kernels.h"
#include "../common/messages.gen.h"
#include <stdint.h>

struct func_desc {
    char *name;
    uint32_t nparams;
    uint32_t *offset;
    uint32_t *size;
    uint32_t param_bytes; /* size of the packed parameter buffer */
    int layout_known;     /* 0 until the session could tell (see func_layout) */
    struct kernel_limits limits; /* read from the image (launch.c); known 0 when not */
    int attribute_set;           /* an attribute of it was set: atomic (hook_attribute_set) */
    int64_t dyn_smem_set;        /* 1 + the dynamic shared memory limit its last set surely gave it, else 0:
                                  * atomic (attr_set.c) */
};

/* The function's parameter layout, asked of the session the first time if
 * the load could not tell it (a library loaded before any context was
 * current). Returns CUDA_SUCCESS when d's layout fields are valid. */
CUresult func_layout(const void *h, struct func_desc *d);

/* Layout of the function or kernel whose handle is h; NULL if unknown.
 * *is_kernel (if not NULL) tells a CUkernel from a CUfunction. */
struct func_desc *func_lookup_kind(const void *h, int *is_kernel);
static inline struct func_desc *func_lookup(const void *h) { return func_lookup_kind(h, 0); }

/* A function this client never looked up, named by the session in a reply
 * (a graph kernel node's function): from now on func_lookup knows it, with
 * this name and layout (n (offset, size) pairs of u32, `total` packed
 * bytes; NULL: unknown, asked at first launch), so launches, name queries
 * and node updates work on it too. */
void func_adopt(uint64_t id, const char *name, uint32_t n, const struct msg_param_slot *layout, size_t total);

/* For the function or kernel handle h: its load's identity (the image's
 * digest and the JIT options) and its name, fed to c; 1, or 0 when the
 * image was loaded without a digest (attr_store.h). */
int func_identity(const void *h, auth_sha256 *c);
/* 1 if library names a library this client loaded and has not unloaded. */
int library_known(CUlibrary library);

/* library_managed.c: stop mirroring the __managed__ variables of an
 * unloaded library (session id). */
void library_managed_forget(uint64_t library);

#endif
