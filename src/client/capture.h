/* capture.h - stream capture in the client (capture.c).
 *
 * A graph replays on the server. capture_status() tells whether hStream
 * is capturing (it asks the session only while captures are going in this
 * process). A capturing stream gets device-to-host copies and host
 * functions through capture_dtoh() and capture_hostfn(): the session
 * captures a copy into a staging buffer and a host node, and delivers the
 * bytes or runs the function here at each replay (src/server/graph_host.h).
 * Anything else with a host side is refused by capture_refuse(): it logs
 * why `what` cannot be captured and returns
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED. */
#ifndef SCUDA_CLIENT_CAPTURE_H
#define SCUDA_CLIENT_CAPTURE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

CUresult capture_status(CUstream hStream, CUstreamCaptureStatus *status);
CUresult capture_refuse(CUstream hStream, const char *what);
CUresult capture_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream hStream);
CUresult capture_hostfn(CUstream hStream, CUhostFn fn, void *userData);

/* A FRAME_HOST_WORK frame of `len` payload bytes is next on fd: copy a
 * replayed graph's bytes into client memory, or run a captured host
 * function. 0, or -1 when the connection failed. The connection calls it
 * (conn_set_host_work_handler, set at cuInit). */
int capture_host_deliver(int fd, uint32_t len);

#endif
