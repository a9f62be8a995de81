/* launch_params.h - a kernel's parameters as they travel (the launch_params
 * record of messages.gen.h), turned into the kernelParams array (or the
 * `extra` buffer) the driver wants. Shared by launches (srv_launch.c) and
 * graph kernel nodes (srv_graph.c).
 *
 *   struct launch_params lp;
 *   CUresult r = launch_params_build(f, is_kernel, &m.params, &lp);
 *   ... REAL(cuLaunchKernelEx, &cfg, f, lp.kernel_params, lp.extra) ...
 *   launch_params_free(&lp);
 *
 * The packed bytes carry no layout: launch_params_build places each
 * parameter where the driver says the kernel reads it (param_layout.h), so
 * the driver never reads past what the request carried. */
#ifndef SCUDA_SERVER_LAUNCH_PARAMS_H
#define SCUDA_SERVER_LAUNCH_PARAMS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/messages.gen.h"

struct launch_params {
    /* the driver's arguments: at most one is set */
    void **kernel_params;
    void **extra;
    /* storage: parameters hold doubles and pointers, so the driver gets an
     * aligned copy of the bytes */
    uint64_t small[512];
    void *small_ptrs[64];
    void *buf;
    size_t size;
    void *extra_words[5];
};

/* Check p against the layout the driver reports for function (or kernel,
 * is_kernel) h and build lp. CUDA_ERROR_INVALID_VALUE, with one log line,
 * when the bytes do not hold every parameter the kernel reads, or when the
 * driver cannot tell the layout and p carries parameters; else
 * CUDA_ERROR_OUT_OF_MEMORY at worst. lp needs launch_params_free() after
 * success only. */
CUresult launch_params_build(void *h, int is_kernel, const struct msg_launch_params *p, struct launch_params *lp);
void launch_params_free(struct launch_params *lp);

#endif
