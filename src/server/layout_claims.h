/* layout_claims.h - the parameter layouts a client read from a module
 * image itself (scuda_module_load_new; src/common/image_kernels.h), held
 * until its kernels are bound.
 *
 * A launch's parameters are placed at the offsets the client believes,
 * and read by the driver at its own: a layout the client got wrong would
 * pass wrong bytes without an error. So when a kernel of such an image is
 * bound (cuModuleGetFunction, cuLibraryGetKernel: before any launch of
 * it), the session compares its driver's layout (cuFuncGetParamInfo,
 * cuKernelGetParamInfo: the image's metadata, which loads no kernel) with
 * the client's, and refuses the binding when they differ. A layout the
 * driver cannot tell (a driver before CUDA 12.4) is not checked. */
#ifndef SCUDA_SERVER_LAYOUT_CLAIMS_H
#define SCUDA_SERVER_LAYOUT_CLAIMS_H

#include <cuda.h>
#include <stdint.h>

#include "module_cache.h"
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

/* CUDA_SUCCESS when image `id` has no claim for `name`, or the driver's
 * layout of h (a CUfunction, or a CUkernel when is_kernel) is the one
 * claimed or cannot be told; else CUDA_ERROR_INVALID_IMAGE, logged. */
CUresult layout_claims_check(uint64_t id, const char *name, void *h, int is_kernel);

/* Module `id` is unloaded. */
void layout_claims_drop(uint64_t id);

#endif
