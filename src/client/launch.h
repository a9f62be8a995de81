/* launch.h - kernel parameters as they travel (launch.c), shared by
 * launches and graph kernel nodes (graph.c). */
#ifndef SCUDA_CLIENT_LAUNCH_H
#define SCUDA_CLIENT_LAUNCH_H

#include <cuda.h>

#include "module.h"
#include "../common/messages.gen.h"

/* A kernel's parameters as they travel: the launch_params record of
 * messages.gen.h. A buffer passed through `extra`
 * (CU_LAUNCH_PARAM_BUFFER_POINTER) travels as it came, marked raw; else
 * each parameter is copied to its offset in d's layout. The session puts
 * the kernelParams pointers back together with the layout its driver
 * reports (src/server/launch_params.h). */
struct launch_pack {
    struct msg_launch_params params;
    uint64_t small[64]; /* most kernels' parameters fit */
    void *heap;
};
CUresult launch_pack_params(const struct func_desc *d, void **kernelParams, void **extra, struct launch_pack *pk);
void launch_pack_free(struct launch_pack *pk);

#endif
