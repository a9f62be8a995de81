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
/* A host-to-device copy from client memory on a capturing stream: the
 * graph copies from a staging buffer of the session, which the client
 * fills from src at each cuGraphLaunch (graph_launch.c). */
CUresult capture_htod(CUdeviceptr dst, const void *src, size_t n, CUstream hStream);

/* Host-side records of memcpy nodes (graph.c): kind HOST_WORK_DATA (bytes
 * the session sends back into p) or CAPTURE_UPLOAD (bytes read from p at
 * each launch). A record lives until the session says to forget it, or
 * capture_record_drop() when the session never learnt of it. */
#define CAPTURE_UPLOAD 0x100
CUresult capture_record_new(int kind, void *p, size_t n, uint64_t *id);
void capture_record_drop(uint64_t id);
/* A run record (HOST_WORK_RUN) of a host node (graph_host_node.c): the
 * session has the client run fn(user) at each replay of the node. */
CUresult capture_run_record_new(CUhostFn fn, void *user, uint64_t *id);
/* A run record's function and data; -1 when id is none. */
int capture_run_record(uint64_t id, CUhostFn *fn, void **user);
/* An upload record's source; -1 when id is none. */
int capture_upload_source(uint64_t id, const void **src, size_t *n);
/* Whether any upload record was made in this process (else no launch has
 * bytes to send). */
int capture_uploads_made(void);
/* Whether a stream capture may be going on in this process (counted as
 * shim.h says): what must act as the driver does during one asks it. */
int capture_any(void);

/* A FRAME_HOST_WORK frame of `len` payload bytes is next on fd: copy a
 * replayed graph's bytes into client memory, or run a captured host
 * function. 0, or -1 when the connection failed. The connection calls it
 * (conn_set_host_work_handler, set at cuInit). */
int capture_host_deliver(int fd, uint32_t len);
/* logs.c: a HOST_WORK_LOG frame's `len` bytes for registration `id` are
 * next on fd: run its callback. 0, or -1 when the connection failed. */
int logs_deliver(int fd, uint64_t id, size_t len);
/* async_notify.c: the same for a HOST_WORK_NOTIFY frame. */
int async_notify_deliver(int fd, uint64_t id, size_t len);

#endif
