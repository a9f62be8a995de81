/* launch.h - kernel parameters as they travel (launch.c), shared by
 * launches and graph kernel nodes (graph.c). */
#ifndef SCUDA_CLIENT_LAUNCH_H
#define SCUDA_CLIENT_LAUNCH_H

#include <cuda.h>

#include "module.h"
#include "../common/wire.h"

/* Append a kernel's parameters to b, packed with d's layout: u32 count,
 * then each parameter's u32 offset and u32 size, then a blob of the packed
 * bytes. A buffer passed through `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER)
 * travels as count LAUNCH_RAW_PARAMS and a blob. The session rebuilds
 * kernelParams from them (src/server/launch_params.h). */
#define LAUNCH_RAW_PARAMS 0xffffffffu
CUresult launch_pack_params(const struct func_desc *d, void **kernelParams, void **extra, wire_buf *b);

/* The calling thread must not hand the session host work or client memory
 * to capture: if hStream is capturing, log why `what` cannot be captured
 * and return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (graph.c). */
CUresult capture_refuse(CUstream hStream, const char *what);

#endif
