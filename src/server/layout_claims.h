/* layout_claims.h - the parameter layouts a client read from a module
 * image itself (scuda_module_load_new; src/common/image_kernels.h), held
 * until the driver's own are known.
 *
 * A launch's parameters are placed at the offsets the client believes,
 * and read by the driver at its own: a layout the client got wrong would
 * pass wrong bytes without an error. So when the session first asks the
 * driver for a kernel's layout (param_layout.c, at its first launch or
 * kernel node, before the driver runs it), it compares the client's with
 * it, and refuses every launch of that kernel when they differ.
 *
 * Not at the binding: asking a library's kernel for its layout
 * (cuKernelGetParamInfo) loads the library into the current context on
 * driver 580, and so places its globals at a time a second server that
 * rebuilds the session (a move, a standby's snapshot) does not replay:
 * the globals then land elsewhere there. The first launch asks the driver
 * anyway, by a way the sequence of placing events notes (migrate_seq.c). */
#ifndef SCUDA_SERVER_LAYOUT_CLAIMS_H
#define SCUDA_SERVER_LAYOUT_CLAIMS_H

#include <cuda.h>
#include <stdint.h>

#include "module_cache.h"
#include "param_layout.h"
#include "../common/messages.gen.h"

/* Keep the client's layouts of module `id`'s n kernels, named as the
 * driver names them (the names already matched the client's), in the
 * session's host memory (host_quota.h); with image_kept (the session keeps
 * the image, digest `key`, for one-way re-loads: module_pins.h) also for
 * the modules re-loaded from it. 0, or -1 when refused (nothing is then
 * checked for it). */
int layout_claims_keep(uint64_t id, const uint8_t key[MODULE_KEY_LEN], int image_kept, uint32_t n,
                       const struct msg_func_desc *driver_funcs, const struct msg_layout_info *client_layouts);

/* Module `id` was re-loaded one-way from the kept image `key`: the claims
 * kept for that image, if any, are its too. */
void layout_claims_share(uint64_t id, const uint8_t key[MODULE_KEY_LEN]);

/* Kernel or function h (its real handle) of module `id`, named `name`, is
 * bound: h's claim, if the image came with claims, is kept for
 * layout_claims_settle. Asks the driver nothing. CUDA_SUCCESS, or
 * CUDA_ERROR_OUT_OF_MEMORY. */
CUresult layout_claims_bind(uint64_t id, const char *name, const void *h);

/* f is kernel k's function in a context (cuKernelGetFunction): a claim
 * waiting for k waits for f too, so that launches through f are checked. */
void layout_claims_alias(const void *f, const void *k);

/* The driver's layout of h is l: 0 when h has no claim waiting or the
 * claim is l (the claim is then settled), -1 when they differ (logged,
 * and kept: every launch of h is refused). */
int layout_claims_settle(const void *h, const struct param_layout *l);

/* Module `id` is unloaded. */
void layout_claims_drop(uint64_t id);

#endif
