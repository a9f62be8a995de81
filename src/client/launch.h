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

/* Stream capture and client memory (graph.c). A graph replays on the
 * server. capture_status() tells whether hStream is capturing (it asks the
 * session only while captures are going in this process). A capturing
 * stream gets device-to-host copies and host functions through
 * capture_dtoh() and capture_hostfn(): the session captures a copy into a
 * staging buffer and a host node, and delivers the bytes or runs the
 * function here at each replay (src/server/graph_host.h). Anything else
 * with a host side is refused by capture_refuse(): it logs why `what`
 * cannot be captured and returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
CUresult capture_status(CUstream hStream, CUstreamCaptureStatus *status);
CUresult capture_refuse(CUstream hStream, const char *what);
CUresult capture_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream hStream);
CUresult capture_hostfn(CUstream hStream, CUhostFn fn, void *userData);

#endif
