/* loopback_runtime.c - just enough of the shim and the session for the
 * generated code to run in one process: rpc_sync() hands the encoded
 * request straight to op_table[] (dispatch.gen.c) and the reply back to
 * the generated client stub. The "real driver" is whatever the test puts
 * into `real` and `real_driver`. Test-only (codegen/test_gen.py). */
#include <stdlib.h>
#include <string.h>

#include "loopback.h"
#include "client/servers.h"

volatile int shim_mode = SHIM_REMOTE;
_Thread_local int shim_trace_depth;
int shim_trace_enter(const char *name)
{
    (void)name;
    return 1;
}
CUresult shim_init_error = CUDA_SUCCESS;
struct driver_table real_driver;
struct driver_table real;
uint32_t lb_ctx_id = 1;
struct lb_counts lb;

uint32_t shim_current_ctx_id(void) { return lb_ctx_id; }

static uint64_t next_id = 0x1000;
uint64_t handle_new_id(void) { return next_id += 0x10; }
/* The loopback has one thread and no real streams: the special handle
 * stands in for the thread's own stream, so wrappers stay checkable. */
uint64_t per_thread_stream_id(void) { return (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD; }

/* ---- handles ------------------------------------------------------------ */

#define MAXH 256
static struct { uint64_t id; int kind; void *real; } handles[MAXH];

CUresult handle_get(struct session *s, uint64_t id, enum handle_kind kind, void **real_handle)
{
    (void)s;
    *real_handle = NULL;
    if (id == 0) return CUDA_SUCCESS;
    if (kind == HK_STREAM && (id == (uint64_t)(uintptr_t)CU_STREAM_LEGACY ||
                              id == (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD)) {
        *real_handle = (void *)(uintptr_t)id;
        return CUDA_SUCCESS;
    }
    for (int i = 0; i < MAXH; i++)
        if (handles[i].id == id && (handles[i].kind == (int)kind || (kind == HK_FUNCTION && handles[i].kind == HK_KERNEL))) {
            *real_handle = handles[i].real;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_HANDLE;
}

CUresult handle_put(struct session *s, uint64_t id, enum handle_kind kind, void *real_handle)
{
    (void)s;
    for (int i = 0; i < MAXH; i++)
        if (handles[i].id == id) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAXH; i++)
        if (handles[i].id == 0) {
            handles[i].id = id;
            handles[i].kind = (int)kind;
            handles[i].real = real_handle;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

void handle_drop(struct session *s, uint64_t id)
{
    (void)s;
    for (int i = 0; i < MAXH; i++)
        if (handles[i].id == id) handles[i].id = 0;
}

uint64_t handle_find_id(struct session *s, enum handle_kind kind, const void *real_handle)
{
    (void)s;
    for (int i = 0; i < MAXH; i++)
        if (handles[i].id && handles[i].kind == (int)kind && handles[i].real == real_handle) return handles[i].id;
    return 0;
}

/* Like the session's: an existing id, else a new one from the server range. */
static uint64_t next_server_id = HANDLE_SERVER_ID_BASE;
uint64_t handle_export(struct session *s, enum handle_kind kind, void *real_handle)
{
    if (real_handle == NULL) return 0;
    uint64_t id = handle_find_id(s, kind, real_handle);
    if (id || kind == HK_CONTEXT) return id;
    id = next_server_id += 16;
    return handle_put(s, id, kind, real_handle) == CUDA_SUCCESS ? id : 0;
}

/* ---- capture bookkeeping (src/client/graph.c) ------------------------------ */

int lb_captures;
void capture_begun(void) { lb_captures++; }
void capture_ended(CUresult r)
{
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) lb_captures--;
}

/* ---- rpc ------------------------------------------------------------------ */

/* The one server every call goes to, as the shim's servers[0]: index 0, so
 * ids read from replies keep no tag (handle_from_server). Routing
 * (servers.h) finds it for every handle, device and pointer: the device
 * list is empty, so devices go as they are. */
struct server servers[SCUDA_MAX_SERVERS];
struct gdev_table gdevs;
int servers_used = 1;
_Thread_local struct server *servers_thread_server;
const struct gdev *gdev_get(const struct gdev_table *t, int ordinal) { (void)t, (void)ordinal; return NULL; }
int gdev_find(const struct gdev_table *t, const struct server *s, int local) { (void)t, (void)s, (void)local; return -1; }
struct server *server_of_ptr(uint64_t p) { (void)p; return &servers[0]; }

void rpc_begin_on(rpc_call *c, uint16_t op, struct server *srv)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->srv = srv;
    wb_init(&c->req);
}

void rpc_begin(rpc_call *c, uint16_t op) { rpc_begin_on(c, op, &servers[0]); }

static CUresult pending_error = CUDA_SUCCESS;

static CUresult dispatch(rpc_call *c, int async)
{
    srv_call call;
    memset(&call, 0, sizeof call);
    call.op = c->op;
    call.async = async;
    wr_init(&call.in, c->req.data, c->req.len);
    wb_init(&call.out);
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (c->op < op_table_len && op_table[c->op].handler) r = op_table[c->op].handler(&call);
    lb.last_op = c->op;
    lb.last_blocking = c->op < op_table_len ? op_table[c->op].blocking : 0;
    if (async) {
        lb.async_calls++;
        if (r != CUDA_SUCCESS && pending_error == CUDA_SUCCESS) pending_error = r;
        wb_free(&call.out);
        return CUDA_SUCCESS;
    }
    lb.sync_calls++;
    c->reply = malloc(call.out.len ? call.out.len : 1);
    memcpy(c->reply, call.out.data, call.out.len);
    wr_init(&c->out, c->reply, call.out.len);
    wb_free(&call.out);
    return r;
}

/* An observing call that succeeded carries the session's pending error to
 * the client, which reports it from rpc_report_deferred (session.c, conn.c). */
static CUresult delivered_error = CUDA_SUCCESS;

CUresult rpc_sync(rpc_call *c)
{
    CUresult r = dispatch(c, 0);
    if (r == CUDA_SUCCESS && c->op < op_table_len && op_table[c->op].observes && pending_error != CUDA_SUCCESS) {
        if (delivered_error == CUDA_SUCCESS) delivered_error = pending_error;
        pending_error = CUDA_SUCCESS;
    }
    return r;
}

CUresult rpc_report_deferred(CUresult r)
{
    if (r != CUDA_SUCCESS || delivered_error == CUDA_SUCCESS) return r;
    r = delivered_error;
    delivered_error = CUDA_SUCCESS;
    return r;
}

CUresult rpc_async(rpc_call *c)
{
    CUresult r = dispatch(c, 1);
    rpc_end(c);
    return r;
}

void rpc_end(rpc_call *c)
{
    free(c->reply);
    c->reply = NULL;
    wb_free(&c->req);
}

/* ---- hooks (src/client/hooks.h): no mirrored memory here ---------------- */

#include "client/hooks.h"

void hook_pre_cuMemFree(CUdeviceptr_v1 dptr) { (void)dptr; }
void hook_pre_cuMemFree_v2(CUdeviceptr dptr) { (void)dptr; }
CUresult host_pinned_touch(uint64_t p) { (void)p; return CUDA_SUCCESS; }
CUresult host_pinned_touch_words(const void *w, size_t n) { (void)w, (void)n; return CUDA_SUCCESS; }
CUresult hook_cuMemPrefetchAsync(CUresult r, CUdeviceptr p, size_t n, CUdevice d, CUstream s)
{
    (void)p, (void)n, (void)d, (void)s;
    return r;
}
CUresult hook_cuMemPrefetchAsync_v2(CUresult r, CUdeviceptr p, size_t n, CUmemLocation l, unsigned f, CUstream s)
{
    (void)p, (void)n, (void)l, (void)f, (void)s;
    return r;
}
CUresult hook_cuStreamAttachMemAsync(CUresult r, CUstream s, CUdeviceptr p, size_t n, unsigned f)
{
    (void)s, (void)p, (void)n, (void)f;
    return r;
}
/* No spares here: every allocation is the plain call. */
int hook_guard_cuMemAlloc_v2(CUresult *r, CUdeviceptr *p, size_t n) { (void)r, (void)p, (void)n; return 0; }
CUresult hook_cuMemGetInfo_v2(CUresult r, size_t *f, size_t *t) { (void)f, (void)t; return r; }
/* Guards let every call through: one server. */
int hook_guard_cuStreamWaitEvent(CUresult *r, CUstream s, CUevent e, unsigned f) { (void)r, (void)s, (void)e, (void)f; return 0; }
int hook_guard_cuCtxEnablePeerAccess(CUresult *r, CUcontext c, unsigned f) { (void)r, (void)c, (void)f; return 0; }
int hook_guard_cuDeviceCanAccessPeer(CUresult *r, int *v, CUdevice a, CUdevice b) { (void)r, (void)v, (void)a, (void)b; return 0; }
int hook_guard_cuDeviceGetP2PAttribute(CUresult *r, int *v, CUdevice_P2PAttribute at, CUdevice a, CUdevice b)
{
    (void)r, (void)v, (void)at, (void)a, (void)b;
    return 0;
}
int hook_memo_miss_cuOccupancyMaxActiveClusters(CUresult *r, const wire_buf *k, int *n, CUfunction f,
                                                const CUlaunchConfig *c)
{
    (void)r, (void)k, (void)n, (void)f, (void)c;
    return 0;
}
void hook_attribute_set(const void *h) { (void)h; }
void attr_store_config_changed(void) {}
int memo_kept_recall(uint16_t op, const void *func, const wire_buf *args, void *value, size_t *value_len)
{
    (void)op, (void)func, (void)args, (void)value, (void)value_len;
    return 0;
}
void memo_kept_keep(uint16_t op, const void *func, const wire_buf *args, const void *value, size_t value_len)
{
    (void)op, (void)func, (void)args, (void)value, (void)value_len;
}
int hook_one_way_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) { (void)f, (void)a, (void)v; return 0; }
int hook_one_way_cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
    (void)a, (void)v, (void)k, (void)d;
    return 0;
}
CUresult hook_cuStreamQuery(CUresult r, CUstream s) { (void)s; return r; }
CUresult hook_cuEventQuery(CUresult r, CUevent e) { (void)e; return r; }
CUresult hook_cuEventSynchronize(CUresult r, CUevent e) { (void)e; return r; }
CUresult hook_cuCtxSetFlags(CUresult r, unsigned int flags) { (void)flags; return r; }
CUresult hook_cuGreenCtxDestroy(CUresult r, CUgreenCtx g) { (void)g; return r; }
CUresult hook_cuLogsUnregisterCallback(CUresult r, CUlogsCallbackHandle h) { (void)h; return r; }
CUresult hook_cuDeviceUnregisterAsyncNotification(CUresult r, CUdevice d, CUasyncCallbackHandle h) { (void)d, (void)h; return r; }
