/* capture.c - stream capture in the client.
 *
 * - Capture bookkeeping for capture_status(): a count of the captures in
 *   progress, kept by the generated begin/end stubs, so that while none
 *   is going (nearly always) no call asks the session.
 * - Host work in captures: a device-to-host copy into client memory or a
 *   host function on a capturing stream becomes a record here (the
 *   destination, or the function) and a copy into a staging buffer or a
 *   host node in the session's graph (src/server/graph_host.c). A
 *   host-to-device copy from client memory becomes an upload record (the
 *   source) and a copy from a staging buffer, whose bytes the client sends
 *   at each cuGraphLaunch (graph_launch.c). At each
 *   replay the session sends the bytes, or "run it", before its next
 *   reply, and the reader thread delivers them (capture_host_deliver). So
 *   they happen before any synchronizing call that saw the graph finish
 *   returns, but no sooner: a host function runs only once some thread of
 *   the process waits for the session, and must not call CUDA (as
 *   natively).
 * - cuStreamGetCaptureInfo_v2/_v3 return driver-owned arrays of the
 *   capture's dependencies: the client copies them into a buffer of the
 *   calling thread, valid until that thread's next such call. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "servers.h"
#include "rpc.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* ---- capture bookkeeping ------------------------------------------------ */

static _Atomic int captures_active;

void capture_begun(void) { atomic_fetch_add(&captures_active, 1); }

int capture_any(void) { return atomic_load(&captures_active) > 0; }

void capture_ended(CUresult r)
{
    /* cuStreamEndCapture ends the capture when it succeeds and when it
     * reports the capture invalidated; other errors (not capturing, wrong
     * thread) leave it going. Counting high only costs a query. */
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) return;
    int n = atomic_load(&captures_active);
    while (n > 0 && !atomic_compare_exchange_weak(&captures_active, &n, n - 1)) {
    }
}

CUresult capture_status(CUstream hStream, CUstreamCaptureStatus *status)
{
    *status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (atomic_load(&captures_active) <= 0) return CUDA_SUCCESS;
    /* an error: e.g. the legacy stream during a global capture */
    return cuStreamIsCapturing(hStream, status);
}

/* PyTorch asks this before every synchronizing copy (~34 times a GPT-2
 * step). No stream can be capturing while no capture has begun in this
 * process (a stream joins a capture only through one), so the answer is
 * local then; during a capture the session answers. */
EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SHIM_ENTER(cuStreamIsCapturing, (hStream, captureStatus));
    if (!captureStatus) return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load(&captures_active) <= 0) {
        *captureStatus = CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
    }
    struct msg_cuStreamIsCapturing_req m = {handle_wire_id(hStream)};
    struct msg_cuStreamIsCapturing_rep rep;
    rpc_call c;
    rpc_begin_on(&c, OP_cuStreamIsCapturing, server_of_handle(hStream));
    msg_cuStreamIsCapturing_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_cuStreamIsCapturing_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuStreamIsCapturing: malformed reply from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    if (r == CUDA_SUCCESS) *captureStatus = (CUstreamCaptureStatus)rep.status;
    rpc_end(&c);
    return r;
}

CUresult capture_refuse(CUstream hStream, const char *what)
{
    CUstreamCaptureStatus status;
    CUresult r = capture_status(hStream, &status);
    if (r != CUDA_SUCCESS) return r;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_SUCCESS;
    LOG_WARN("stream capture: %s cannot be captured: the graph would replay on the server, which cannot "
             "reach the client's memory or run its code; returning CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
             what);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* ---- host work in captures ------------------------------------------------ */

struct host_record {
    int kind;      /* HOST_WORK_DATA: a copy; HOST_WORK_RUN: a function; CAPTURE_UPLOAD: a copy's source */
    void *dst;     /* CAPTURE_UPLOAD: the source */
    size_t n;
    CUhostFn fn;
    void *user;
};

static struct idmap host_records = IDMAP_INIT;
static _Atomic int uploads_made;

int capture_uploads_made(void) { return atomic_load(&uploads_made) > 0; }

CUresult capture_record_new(int kind, void *p, size_t n, uint64_t *id)
{
    struct host_record *rec = calloc(1, sizeof *rec);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    rec->kind = kind;
    rec->dst = p;
    rec->n = n;
    *id = handle_new_id();
    if (idmap_put(&host_records, *id, 0, rec) != 0) {
        free(rec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (kind == CAPTURE_UPLOAD) atomic_fetch_add(&uploads_made, 1);
    return CUDA_SUCCESS;
}

void capture_record_drop(uint64_t id) { free(idmap_del(&host_records, id)); }

CUresult capture_run_record_new(CUhostFn fn, void *user, uint64_t *id)
{
    CUresult r = capture_record_new(HOST_WORK_RUN, NULL, 0, id);
    void *v = NULL;
    if (r == CUDA_SUCCESS && idmap_get(&host_records, *id, NULL, &v)) {
        struct host_record *rec = v;
        rec->fn = fn;
        rec->user = user;
    }
    return r;
}

int capture_run_record(uint64_t id, CUhostFn *fn, void **user)
{
    void *v = NULL;
    struct host_record *rec = idmap_get(&host_records, id, NULL, &v) ? v : NULL;
    if (!rec || rec->kind != HOST_WORK_RUN) return -1;
    *fn = rec->fn;
    *user = rec->user;
    return 0;
}

int capture_upload_source(uint64_t id, const void **src, size_t *n)
{
    void *v = NULL;
    struct host_record *rec = idmap_get(&host_records, id, NULL, &v) ? v : NULL;
    if (!rec || rec->kind != CAPTURE_UPLOAD) return -1;
    *src = rec->dst;
    *n = rec->n;
    return 0;
}

/* Tell the session of a record: dev and n are a copy's device side, 0 for
 * a function. */
static CUresult capture_record(uint16_t op, struct host_record *rec, CUdeviceptr dev, CUstream hStream)
{
    uint64_t id = handle_new_id();
    if (idmap_put(&host_records, id, 0, rec) != 0) {
        free(rec);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (rec->kind == CAPTURE_UPLOAD) atomic_fetch_add(&uploads_made, 1);
    rpc_call c;
    rpc_begin(&c, op);
    if (op == OP_scuda_capture_dtoh) {
        struct msg_scuda_capture_dtoh_req m = {id, dev, rec->n, handle_wire_id(hStream)};
        msg_scuda_capture_dtoh_req_put(&c.req, &m);
    } else if (op == OP_scuda_capture_htod) {
        struct msg_scuda_capture_htod_req m = {id, dev, rec->n, handle_wire_id(hStream)};
        msg_scuda_capture_htod_req_put(&c.req, &m);
    } else {
        struct msg_scuda_capture_hostfn_req m = {id, handle_wire_id(hStream)};
        msg_scuda_capture_hostfn_req_put(&c.req, &m);
    }
    CUresult r = rpc_sync(&c);
    rpc_end(&c);
    if (r != CUDA_SUCCESS) free(idmap_del(&host_records, id));
    return r;
}

CUresult capture_dtoh(void *dst, CUdeviceptr src, size_t n, CUstream hStream)
{
    /* one record per chunk: each replay's bytes travel in frames of their own */
    for (size_t off = 0; off < n; off += SCUDA_CHUNK) {
        struct host_record *rec = calloc(1, sizeof *rec);
        if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
        rec->kind = HOST_WORK_DATA;
        rec->dst = (char *)dst + off;
        rec->n = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        CUresult r = capture_record(OP_scuda_capture_dtoh, rec, src + off, hStream);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

CUresult capture_htod(CUdeviceptr dst, const void *src, size_t n, CUstream hStream)
{
    /* one record per chunk: each launch's bytes travel in frames of their own */
    for (size_t off = 0; off < n; off += SCUDA_CHUNK) {
        struct host_record *rec = calloc(1, sizeof *rec);
        if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
        rec->kind = CAPTURE_UPLOAD;
        rec->dst = (char *)(uintptr_t)src + off;
        rec->n = n - off < SCUDA_CHUNK ? n - off : SCUDA_CHUNK;
        CUresult r = capture_record(OP_scuda_capture_htod, rec, dst + off, hStream);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

CUresult capture_hostfn(CUstream hStream, CUhostFn fn, void *userData)
{
    struct host_record *rec = calloc(1, sizeof *rec);
    if (!rec) return CUDA_ERROR_OUT_OF_MEMORY;
    rec->kind = HOST_WORK_RUN;
    rec->fn = fn;
    rec->user = userData;
    return capture_record(OP_scuda_capture_hostfn, rec, 0, hStream);
}

static int skip_bytes(int fd, size_t n)
{
    uint8_t buf[4096];
    while (n) {
        size_t k = n < sizeof buf ? n : sizeof buf;
        if (io_read_full(fd, buf, k) != 0) return -1;
        n -= k;
    }
    return 0;
}

/* A FRAME_HOST_WORK frame: a host_work head (messages.gen.h), then for
 * HOST_WORK_DATA the bytes, read straight into the record's buffer. */
int capture_host_deliver(int fd, uint32_t len)
{
    uint8_t head[HOST_WORK_HEAD_LEN];
    if (len < sizeof head || io_read_full(fd, head, sizeof head) != 0) return -1;
    struct msg_host_work w;
    struct msg_arena a;
    wire_reader in;
    msg_arena_init(&a);
    wr_init(&in, head, sizeof head);
    msg_get_host_work(&in, &a, &w);
    msg_arena_free(&a);
    if (!wr_ok_end(&in)) return -1; /* the spec and HOST_WORK_HEAD_LEN disagree */
    size_t rest = len - sizeof head;
    void *v = NULL;
    struct host_record *rec = idmap_get(&host_records, w.record, NULL, &v) ? v : NULL;
    switch (w.kind) {
    case HOST_WORK_DATA:
        if (rec && rec->kind == HOST_WORK_DATA && rest == rec->n) return io_read_full(fd, rec->dst, rest);
        LOG_WARN("graph host work: bytes for unknown record %llu dropped", (unsigned long long)w.record);
        return skip_bytes(fd, rest);
    case HOST_WORK_RUN:
        if (skip_bytes(fd, rest) != 0) return -1;
        if (rec && rec->kind == HOST_WORK_RUN) rec->fn(rec->user);
        return 0;
    case HOST_WORK_FORGET:
        free(idmap_del(&host_records, w.record));
        return skip_bytes(fd, rest);
    case HOST_WORK_LOG: /* a cuLogsRegisterCallback record's, not a capture's */
        return logs_deliver(fd, w.record, rest);
    case HOST_WORK_NOTIFY: /* a cuDeviceRegisterAsyncNotification record's */
        return async_notify_deliver(fd, w.record, rest);
    default:
        return skip_bytes(fd, rest);
    }
}

/* ---- capture info ---------------------------------------------------------- */

/* The dependency arrays handed out, per thread (freed at thread exit). */
struct capture_arrays {
    CUgraphNode *deps;
    CUgraphEdgeData *edges;
    size_t cap;
};

static pthread_key_t arrays_key;
static pthread_once_t arrays_once = PTHREAD_ONCE_INIT;

static void arrays_free(void *p)
{
    struct capture_arrays *a = p;
    if (!a) return;
    free(a->deps);
    free(a->edges);
    free(a);
}

static void arrays_init(void) { pthread_key_create(&arrays_key, arrays_free); }

static struct capture_arrays *thread_arrays(size_t n)
{
    pthread_once(&arrays_once, arrays_init);
    struct capture_arrays *a = pthread_getspecific(arrays_key);
    if (!a) {
        if (!(a = calloc(1, sizeof *a))) return NULL;
        pthread_setspecific(arrays_key, a);
    }
    if (n > a->cap) {
        CUgraphNode *d = realloc(a->deps, n * sizeof *d);
        if (d) a->deps = d;
        CUgraphEdgeData *e = realloc(a->edges, n * sizeof *e);
        if (e) a->edges = e;
        if (!d || !e) return NULL;
        a->cap = n;
    }
    return a;
}

/* Ask the session. The reply, v2's as a v3 one without edges, has its
 * arrays in c's arena. */
static CUresult capture_ask(rpc_call *c, uint16_t op, CUstream hStream, uint8_t want,
                            struct msg_cuStreamGetCaptureInfo_v3_rep *out)
{
    rpc_begin(c, op);
    CUresult r;
    int bad;
    if (op == OP_cuStreamGetCaptureInfo_v3) {
        struct msg_cuStreamGetCaptureInfo_v3_req m = {handle_wire_id(hStream), want};
        msg_cuStreamGetCaptureInfo_v3_req_put(&c->req, &m);
        if ((r = rpc_sync(c)) != CUDA_SUCCESS) return r;
        bad = msg_cuStreamGetCaptureInfo_v3_rep_get(&c->out, &c->arena, out) != 0;
    } else {
        struct msg_cuStreamGetCaptureInfo_v2_req m = {handle_wire_id(hStream), want};
        struct msg_cuStreamGetCaptureInfo_v2_rep v2;
        msg_cuStreamGetCaptureInfo_v2_req_put(&c->req, &m);
        if ((r = rpc_sync(c)) != CUDA_SUCCESS) return r;
        bad = msg_cuStreamGetCaptureInfo_v2_rep_get(&c->out, &c->arena, &v2) != 0;
        *out = (struct msg_cuStreamGetCaptureInfo_v3_rep){
            .status = v2.status, .id = v2.id, .graph = v2.graph, .num = v2.num,
            .deps = v2.deps, .deps_count = v2.deps_count};
    }
    /* num ids when wanted; num edges when wanted and the driver has them */
    uint64_t deps_n = want & CAPTURE_WANT_DEPS ? out->num : 0;
    if (bad || out->deps_count != deps_n ||
        (out->edges_count && (out->edges_count != out->num || !(want & CAPTURE_WANT_EDGES)))) {
        LOG_ERROR("cuStreamGetCaptureInfo: malformed reply from the server");
        return CUDA_ERROR_UNKNOWN;
    }
    return CUDA_SUCCESS;
}

/* The driver sees the same NULL outputs as the application's call: the
 * session passes NULL for those not wanted. */
static CUresult capture_info(uint16_t op, CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *num)
{
    uint8_t want = (status ? CAPTURE_WANT_STATUS : 0) | (id ? CAPTURE_WANT_ID : 0) |
                   (graph ? CAPTURE_WANT_GRAPH : 0) | (deps ? CAPTURE_WANT_DEPS : 0) |
                   (edges ? CAPTURE_WANT_EDGES : 0) | (num ? CAPTURE_WANT_NUM : 0);
    rpc_call c;
    struct msg_cuStreamGetCaptureInfo_v3_rep rep;
    CUresult r = capture_ask(&c, op, hStream, want, &rep);
    if (r != CUDA_SUCCESS) {
        rpc_end(&c);
        return r;
    }
    size_t n = (size_t)rep.num;
    /* each array has n elements (at most CAPTURE_MAX_DEPS, the decoder saw to it) or none */
    size_t len = rep.deps_count ? rep.deps_count : rep.edges_count;
    struct capture_arrays *a = NULL;
    if (len && !(a = thread_arrays(len))) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        for (size_t i = 0; i < rep.deps_count; i++) a->deps[i] = (CUgraphNode)handle_from_server(c.srv, rep.deps[i]);
        if (rep.edges_count) memcpy(a->edges, rep.edges, rep.edges_count * sizeof *a->edges);
        if (status) *status = (CUstreamCaptureStatus)rep.status;
        if (id) *id = rep.id;
        if (graph) *graph = (CUgraph)handle_from_server(c.srv, rep.graph);
        if (num) *num = n;
        if (deps) *deps = n ? a->deps : NULL;
        if (edges) *edges = rep.edges_count ? a->edges : NULL;
    }
    rpc_end(&c);
    return r;
}

EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    SHIM_ENTER(cuStreamGetCaptureInfo_v2,
               (hStream, captureStatus_out, id_out, graph_out, dependencies_out, numDependencies_out));
    return capture_info(OP_cuStreamGetCaptureInfo_v2, hStream, captureStatus_out, id_out, graph_out,
                        dependencies_out, NULL, numDependencies_out);
}

EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                          cuuint64_t *id_out, CUgraph *graph_out,
                                          const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
                                          size_t *numDependencies_out)
{
    SHIM_ENTER(cuStreamGetCaptureInfo_v3, (hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                                           edgeData_out, numDependencies_out));
    return capture_info(OP_cuStreamGetCaptureInfo_v3, hStream, captureStatus_out, id_out, graph_out,
                        dependencies_out, edgeData_out, numDependencies_out);
}
