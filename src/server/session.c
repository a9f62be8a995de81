/* session.c - one client's session process.
 *
 * The dispatch loop reads frames in arrival order and runs each call
 * inline, so the GPU sees a client's work in the order the client issued
 * it. Calls marked blocking (synchronize, blocking copies) go to a worker
 * thread instead: their caller waits for the reply anyway, so nothing
 * after them from the same client thread can overtake them, and other
 * client threads' calls go on meanwhile (docs/architecture.md, 3.6 Threads and
 * blocking). */
#define _GNU_SOURCE
#include "session.h"
#include "srv_packed.h"
#include "srv_ipc.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bulk_join.h"
#include "device_window.h"
#include "driver_va.h"
#include "gpu_pool.h"
#include "session_stats.h"
#include "snapshot_dirty.h"
#include "dispatch.h"
#include "graph_host.h"
#include "handles.h"
#include "host_quota.h"
#include "legacy_ctx.h"
#include "migrate_in.h"
#include "migrate_state.h"
#include "migrate_switch.h"
#include "snapshot.h"
#include "module_cache.h"
#include "output.h"
#include "param_layout.h"
#include "quota.h"
#include "resume.h"
#include "staging.h"
#include "../common/hello.h"
#include "../common/libload.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/session_info.h"
#include "../common/transport.h"
#include "../common/clock.h"

struct driver_table real;

/* Every line a session logs is rate limited (log.h): a client must not be
 * able to fill the server's disk, and 100 lines at once then 10 a second
 * is more than any well-behaved session writes. */
#define SESSION_LOG_BURST 100
#define SESSION_LOG_PER_SECOND 10

/* Each thread remembers which context it made current, so a call costs a
 * cuCtxSetCurrent only when the context changes. Destroying, releasing or
 * resetting a context bumps the generation: every thread's memory is then
 * stale (an id can name a new context after a primary context comes back). */
static __thread uint32_t bound_ctx_id = UINT32_MAX;
static __thread unsigned bound_generation;
static _Atomic unsigned ctx_generation;
/* Blocking calls running on workers: a session waiting on the GPU is not idle. */
static _Atomic int calls_in_flight;
int session_calls_running(void) { return atomic_load(&calls_in_flight); }
/* Liveness (the section below the dispatch loop). */
static _Atomic int dispatch_busy;          /* the dispatch thread has a frame: reading it or running it */
static _Atomic uint64_t frames_out;        /* frames written to the client */
static _Atomic uint32_t client_dead_ms;    /* the client's SCUDA_DEAD_AFTER, from its pings */
static _Atomic int pong_due;               /* a ping asked for an answer */
static _Atomic int ack_due;                /* the client should hear what we received (resume.h) */
static _Atomic uint32_t pong_seq;          /* ...and this is its sequence number */
static _Atomic int pong_hands_secret;      /* ...and it was the client's first frame (resume.h) */
static void liveness_start(struct session *s);
static int liveness_note_ping(const void *payload, size_t len, int async, uint32_t seq);

/* ---- driver and session info ---------------------------------------- */


CUresult driver_lacks(const char *name)
{
    static const char *seen[64];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    int known = 0;
    for (int i = 0; i < 64 && seen[i] && !known; i++) known = strcmp(seen[i], name) == 0;
    for (int i = 0; i < 64 && !known; i++) {
        if (!seen[i]) {
            seen[i] = name;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (!known) LOG_WARN("this server's CUDA driver lacks %s; answering CUDA_ERROR_NOT_SUPPORTED (driver 580 has it)", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* --driver PATH, else the usual places, else the loader's own search (this
 * process has no shim loaded, so the bare name finds the real driver). */
static const char *driver_candidate(const char *path, size_t i)
{
    if (path) return i == 0 ? path : NULL;
    if (i < libload_driver_path_count) return libload_driver_paths[i];
    return i == libload_driver_path_count ? "libcuda.so.1" : NULL;
}

static int load_driver(const char *path, void **handle, char *err, size_t errlen)
{
    const char *p;
    for (size_t i = 0; (p = driver_candidate(path, i)) != NULL; i++) {
        void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(err, errlen, "%s", dlerror());
            continue;
        }
        if (driver_table_load(&real, h) > 0 && real.cuInit) {
            LOG_INFO("driver %s", p);
            *handle = h;
            return 0;
        }
        dlclose(h);
    }
    return -1;
}

static void gather_device(CUdevice d, struct device_info *di)
{
    REAL(cuDeviceGetName, di->name, sizeof di->name, d);
    if (real.cuDeviceGetUuid_v2) REAL(cuDeviceGetUuid_v2, &di->uuid, d);
    size_t mem = 0;
    REAL(cuDeviceTotalMem_v2, &mem, d);
    di->total_mem = mem;
    if (real.cuDeviceGetPCIBusId) REAL(cuDeviceGetPCIBusId, di->pci_bus_id, sizeof di->pci_bus_id, d);
    di->attr_count = CU_DEVICE_ATTRIBUTE_MAX < SCUDA_ATTR_SLOTS ? CU_DEVICE_ATTRIBUTE_MAX : SCUDA_ATTR_SLOTS;
    for (uint32_t a = 0; a < di->attr_count; a++) {
        int v = 0;
        di->attr_result[a] = REAL(cuDeviceGetAttribute, &v, (CUdevice_attribute)a, d);
        di->attr_value[a] = v;
    }
}

/* The file name of the library the driver's cuInit lives in, links
 * resolved: an NVIDIA driver's carries its build (libcuda.so.580.159.03). */
static void driver_build_of(void *symbol, char *out, size_t outlen)
{
    Dl_info info;
    char path[PATH_MAX];
    out[0] = '\0';
    if (!symbol || !dladdr(symbol, &info) || !info.dli_fname || !realpath(info.dli_fname, path)) return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n < outlen) memcpy(out, base, n + 1); /* a longer one is not said: cut, it could name another build */
}

static CUresult gather_info(struct session_info *si)
{
    memset(si, 0, sizeof *si);
    CUresult r = REAL(cuInit, 0);
    if (r != CUDA_SUCCESS) return r;
    REAL(cuDriverGetVersion, &si->driver_version);
    int count = 0;
    if ((r = REAL(cuDeviceGetCount, &count)) != CUDA_SUCCESS) return r;
    si->device_count = count > SCUDA_MAX_DEVICES ? SCUDA_MAX_DEVICES : (uint32_t)count;
    si->session_pid = (uint32_t)getpid();
    for (uint32_t d = 0; d < si->device_count; d++) gather_device((CUdevice)d, &si->dev[d]);
    CUmoduleLoadingMode mode = 0;
    if (REAL(cuModuleGetLoadingMode, &mode) == CUDA_SUCCESS) si->loading_mode = (int32_t)mode;
    driver_build_of((void *)real.cuInit, si->driver_build, sizeof si->driver_build);
    return CUDA_SUCCESS;
}

/* ---- context binding and deferred errors ---------------------------- */

CUresult session_bind_ctx(struct session *s, uint32_t ctx_id)
{
    unsigned gen = atomic_load(&ctx_generation);
    if (ctx_id == bound_ctx_id && gen == bound_generation) return CUDA_SUCCESS;
    void *ctx = NULL;
    CUresult r = handle_get(s, ctx_id, HK_CONTEXT, &ctx);
    if (r != CUDA_SUCCESS) return r;
    r = REAL(cuCtxSetCurrent, (CUcontext)ctx);
    if (r == CUDA_SUCCESS) {
        bound_ctx_id = ctx_id;
        bound_generation = gen;
    }
    return r;
}

/* A context went away or changed: every thread must bind again. */
void session_forget_bound_ctx(void)
{
    bound_ctx_id = UINT32_MAX;
    atomic_fetch_add(&ctx_generation, 1);
}

void session_defer_error(struct session *s, CUresult r, uint16_t op)
{
    LOG_INFO("async %s failed: %d (reported at the next synchronizing call)", scuda_op_name(op), r);
    pthread_mutex_lock(&s->error_lock);
    if (s->deferred_error == CUDA_SUCCESS) s->deferred_error = r;
    pthread_mutex_unlock(&s->error_lock);
}

static CUresult take_deferred_error(struct session *s)
{
    pthread_mutex_lock(&s->error_lock);
    CUresult r = s->deferred_error;
    s->deferred_error = CUDA_SUCCESS;
    pthread_mutex_unlock(&s->error_lock);
    return r;
}

/* ---- executing one call --------------------------------------------- */

struct pending_call {
    srv_call call;
    uint32_t ctx;
    int replayed; /* FRAME_REPLAYED: a failover journal's call, run in order */
    void *payload;
    uint64_t charged; /* host bytes charged while it waits for a worker */
};

static const struct op_entry *op_entry_of(uint16_t op)
{
    if (op >= NVML_OP_BASE) return nvml_op_lookup ? nvml_op_lookup(op) : NULL;
    return op < op_table_len ? &op_table[op] : NULL;
}

/* The result a reply carries for a call whose own result is `own`. An
 * earlier one-way call's error waits for a call that observes earlier work
 * (op flag `observes`: synchronize, query, copy to the host) and succeeds
 * itself; that reply carries the error instead, marked FRAME_DEFERRED, and
 * all the call's outputs. Any other call answers for itself, so what it
 * did (an allocation, a handle) never goes unreported behind an error
 * that is not its own. */
static CUresult reply_result(struct session *s, const srv_call *c, CUresult own, uint16_t *flags)
{
    const struct op_entry *e = op_entry_of(c->op);
    if (own != CUDA_SUCCESS || !e || !e->observes) return own;
    CUresult deferred = take_deferred_error(s);
    if (deferred == CUDA_SUCCESS) return own;
    *flags |= FRAME_DEFERRED;
    return deferred;
}

/* What a reply that carried device bytes is kept as: the same reply,
 * empty but for its result, marked FRAME_REDO. */
static void redo_stand_in(const struct frame_header *reply, uint32_t result, uint8_t out[FRAME_HEADER_LEN + 4])
{
    struct frame_header h = *reply;
    h.length = 4;
    h.flags = (uint16_t)((h.flags & ~FRAME_BULK) | FRAME_REDO);
    frame_header_encode(&h, out);
    memcpy(out + FRAME_HEADER_LEN, &result, 4);
}

/* One reply frame: its result, the bulk field (its length, then bulk_len
 * bytes) when flags has FRAME_BULK, then the encoded outputs; numbered
 * and kept for a resume. Device bytes are not copied to be kept: after a
 * resume the client gets the FRAME_REDO stand-in and asks again
 * (protocol.h, "Resume"). Returns resume_write_frame's answer. */
static int write_reply(struct session *s, uint16_t op, uint32_t seq, uint16_t flags, uint32_t result, const void *bulk,
                       uint64_t bulk_len, const void *out, size_t out_len)
{
    int has_bulk = (flags & FRAME_BULK) != 0;
    struct frame_header h = {.length = (uint32_t)(4 + (has_bulk ? 8 + bulk_len : 0) + out_len),
                             .op = op, .flags = flags, .seq = seq};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[5];
    int n = 0;
    iov[n++] = (struct iovec){hdr, sizeof hdr};
    iov[n++] = (struct iovec){&result, 4};
    if (has_bulk) {
        iov[n++] = (struct iovec){&bulk_len, 8};
        iov[n++] = (struct iovec){(void *)bulk, (size_t)bulk_len};
    }
    if (out_len) iov[n++] = (struct iovec){(void *)out, out_len};
    uint8_t redo[FRAME_HEADER_LEN + 4];
    if (has_bulk) redo_stand_in(&h, result, redo);
    int w = resume_write_frame(s, iov, n, has_bulk ? redo : NULL, sizeof redo);
    atomic_fetch_add_explicit(&frames_out, 1, memory_order_relaxed);
    return w;
}

static void send_reply(struct session *s, srv_call *c, CUresult r)
{
    output_forward(s);
    if (c->bulk != NULL && r == CUDA_SUCCESS && c->bulk_len > SCUDA_MAX_FRAME - SCUDA_REPLY_MARGIN) {
        /* Handlers cap what they return; this is the last line of defence. */
        LOG_ERROR("%s: reply of %zu bytes exceeds the frame limit", scuda_op_name(c->op), c->bulk_len);
        r = CUDA_ERROR_INVALID_VALUE;
    }
    int bulk = c->bulk != NULL && r == CUDA_SUCCESS;
    size_t out_len = r == CUDA_SUCCESS || c->out_on_error ? c->out.len : 0;
    uint16_t flags = FRAME_REPLY | (bulk ? FRAME_BULK : 0);
    uint32_t result = (uint32_t)reply_result(s, c, r, &flags);
    if (write_reply(s, c->op, c->seq, flags, result, c->bulk, bulk ? c->bulk_len : 0, c->out.data, out_len) != 0)
        LOG_DEBUG("the connection broke while we replied: %s (kept for a resume)", strerror(errno));
}

/* A reply sent after its handler returned (a snapshot whose memory
 * streamed after the hold: snapshot.c), from any thread: numbered and
 * kept as every reply, under the same lock. */
static _Atomic int late_replies_owed;

void session_owe_late_reply(void) { atomic_fetch_add(&late_replies_owed, 1); }

void session_reply_late(struct session *s, uint16_t op, uint32_t seq, const wire_buf *out)
{
    int w = write_reply(s, op, seq, FRAME_REPLY, CUDA_SUCCESS, NULL, 0, out->data, out->len);
    atomic_fetch_sub(&late_replies_owed, 1);
    if (w != 0) LOG_DEBUG("the connection broke while we replied late: %s (kept for a resume)", strerror(errno));
}

/* Driver calls run in the frame's context; ops flagged any_context in the
 * spec (context management) and NVML ops need none. */
static int needs_context(const struct op_entry *e, uint16_t op) { return op < NVML_OP_BASE && !e->any_context; }

/* ---- streamed replies --------------------------------------------------- */

int session_stream_begin(struct srv_call *c, uint64_t n)
{
    struct session *s = c->s;
    output_forward(s);
    uint16_t flags = FRAME_REPLY | FRAME_BULK;
    uint32_t result = (uint32_t)reply_result(s, c, CUDA_SUCCESS, &flags);
    struct frame_header h = {.length = (uint32_t)(4 + 8 + n), .op = c->op, .flags = flags, .seq = c->seq};
    uint8_t head[FRAME_HEADER_LEN + 12];
    frame_header_encode(&h, head);
    memcpy(head + FRAME_HEADER_LEN, &result, 4);
    memcpy(head + FRAME_HEADER_LEN + 4, &n, 8);
    uint8_t redo[FRAME_HEADER_LEN + 4];
    redo_stand_in(&h, result, redo);
    pthread_mutex_lock(&s->write_lock);
    resume_keep_locked(redo, sizeof redo);
    c->replied = 1;
    return session_stream_write(c, head, sizeof head);
}

int session_stream_write(struct srv_call *c, const void *p, size_t len)
{
    atomic_fetch_add_explicit(&frames_out, 1, memory_order_relaxed); /* bytes going out are a sign of life */
    return io_write_full(c->s->fd, p, len);
}

void session_stream_end(struct srv_call *c) { pthread_mutex_unlock(&c->s->write_lock); }

/* A host-to-device copy with the semantics of cuMemcpyHtoD runs as an
 * async DMA so the next chunk can arrive meanwhile; the dispatcher waits
 * for it before running whatever call comes next. */
static struct staging *copy_in_flight;

void session_after_copy(struct staging *b) { copy_in_flight = b; }

static void finish_copy_in_flight(void)
{
    if (copy_in_flight) staging_wait(copy_in_flight);
    copy_in_flight = NULL;
}

/* SCUDA_LOG=debug: a failed call's name and the head of its arguments, so
 * a failure the program only sees as an error code can be traced. */
static void log_failed_call(const srv_call *c, const wire_reader *args, const struct op_entry *e, CUresult r)
{
    if (!scuda_log_enabled(SCUDA_LOG_DEBUG)) return;
    char hex[2 * 40 + 1] = "";
    size_t n = args->left < 40 ? args->left : 40;
    for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", args->p[i]);
    LOG_DEBUG("%s%s failed: %d; arguments %s", c->async ? "one-way " : "", e ? e->name : "unknown op", (int)r, hex);
}

/* Report a call's result r (a reply, or a deferred error for a one-way
 * call) and free it. */
/* What the parent's /metrics and `scuda ps` show of this session (session_stats.h). */
static void count_call(const srv_call *c, CUresult r)
{
    struct session_counters *st = session_stats_mine();
    if (!st) return;
    atomic_fetch_add_explicit(&st->calls, 1, memory_order_relaxed);
    if (r != CUDA_SUCCESS) atomic_fetch_add_explicit(&st->errors, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->bytes_out, c->out.len, memory_order_relaxed);
    atomic_store_explicit(&st->device_mem, quota_used(), memory_order_relaxed);
    atomic_store_explicit(&st->module_hits, module_cache_hits(), memory_order_relaxed);
}

static void finish_call(struct session *s, struct pending_call *p, CUresult r)
{
    srv_call *c = &p->call;
    count_call(c, r);
    if (c->async) {
        if (r != CUDA_SUCCESS) session_defer_error(s, r, c->op);
    } else if (c->replied) {
        if (r != CUDA_SUCCESS) session_defer_error(s, r, c->op); /* failed mid-stream */
    } else {
        send_reply(s, c, r);
    }
    wb_free(&c->out);
    host_quota_free(c->bulk_free);
    msg_arena_free(&p->call.arena);
    free(p->payload);
    host_quota_release(p->charged);
    free(p);
}

static void run_call(struct session *s, struct pending_call *p)
{
    srv_call *c = &p->call;
    const struct op_entry *e = op_entry_of(c->op);
    const wire_reader args = c->in;
    CUresult r;
    if (!e || !e->handler) {
        /* Rate limited like every line of a session (log.h). */
        LOG_WARN("client asked for op %u, which this server does not know; "
                 "upgrade the server to the client's version", c->op);
        r = CUDA_ERROR_NOT_SUPPORTED;
    } else if (!needs_context(e, c->op) || (r = session_bind_ctx(s, p->ctx)) == CUDA_SUCCESS || p->ctx == 0) {
        r = e->handler(c);
    }
    if (r != CUDA_SUCCESS) log_failed_call(c, &args, e, r);
    finish_call(s, p, r);
}

/* ---- workers for blocking calls -------------------------------------- */

struct work_queue {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    struct pending_call **items;
    size_t head, tail, cap;
    int idle;
    int threads;
};

static struct work_queue wq = {.lock = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

#define MAX_WORKERS 64
/* How long a replayed blocking call holds the calls after it (replay_barrier). */
#define REPLAY_BARRIER_MS 10000

static void *worker_main(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&wq.lock);
        wq.idle++;
        while (wq.head == wq.tail) pthread_cond_wait(&wq.cv, &wq.lock);
        wq.idle--;
        struct pending_call *p = wq.items[wq.head++ % wq.cap];
        pthread_mutex_unlock(&wq.lock);
        run_call(p->call.s, p); /* the call names its session: nothing of wq is read unlocked */
        atomic_fetch_sub(&calls_in_flight, 1);
    }
    return NULL;
}

/* The bound on calls waiting for a worker (--max-queued-calls).
 *
 * A full queue fails the call (CUDA_ERROR_OUT_OF_MEMORY, logged) instead
 * of pausing the reading of the socket, because a pause can deadlock: the
 * calls on the workers may wait for GPU work that only a later frame
 * releases (a stream waiting on cuStreamWaitValue32 for a value that a
 * later cuStreamWriteValue32 or copy writes), and a paused session would
 * never read that frame. Nothing legitimate comes near the bound: a client
 * thread has at most one waiting call, so only a client with thousands of
 * threads in a synchronize at once, or one that sends waiting calls
 * without waiting for their replies, meets it. */
static int queue_full(struct session *s, uint16_t op)
{
    uint64_t max = s->opt->max_queued_calls ? s->opt->max_queued_calls : SCUDA_MAX_QUEUED_CALLS_DEFAULT;
    pthread_mutex_lock(&wq.lock);
    int full = wq.tail - wq.head >= max;
    pthread_mutex_unlock(&wq.lock);
    if (full)
        LOG_WARN("%llu blocking calls already wait for a worker: refused %s with CUDA_ERROR_OUT_OF_MEMORY; "
                 "raise the server's --max-queued-calls if this client needs more",
                 (unsigned long long)max, scuda_op_name(op));
    return full;
}

static int enqueue_blocking(struct pending_call *p)
{
    pthread_mutex_lock(&wq.lock);
    if (wq.tail - wq.head == wq.cap) {
        size_t cap = wq.cap ? wq.cap * 2 : 64;
        struct pending_call **items = malloc(cap * sizeof *items);
        if (!items) {
            pthread_mutex_unlock(&wq.lock);
            return -1;
        }
        for (size_t i = 0; i < wq.tail - wq.head; i++) items[i] = wq.items[(wq.head + i) % wq.cap];
        wq.tail -= wq.head;
        wq.head = 0;
        free(wq.items);
        wq.items = items;
        wq.cap = cap;
    }
    wq.items[wq.tail++ % wq.cap] = p;
    int spawn = wq.idle == 0 && wq.threads < MAX_WORKERS;
    if (spawn) wq.threads++;
    pthread_cond_signal(&wq.cv);
    pthread_mutex_unlock(&wq.lock);
    if (spawn) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, NULL) == 0) pthread_detach(t);
    }
    return 0;
}

/* ---- blocking calls that would not block ------------------------------- */

/* A synchronize on a stream or event whose work is already done returns at
 * once; so does a copy to the client on an idle stream. Running those
 * inline saves the hand-off to a worker thread, which is most of the cost
 * of a round trip like PyTorch's .item(). The driver's query calls answer
 * without waiting. */
/* Work that finishes within this long is waited for inline: a small
 * kernel ahead of PyTorch's .item() ends in microseconds. */
#define INLINE_WAIT_NS 30000


static int would_block(struct session *s, struct pending_call *p)
{
    uint64_t id;
    void *h;
    int is_event = 0;
    if (!op_wait_target(p->call.op, &p->call.in, &id, &is_event)) return 1;
    if (session_bind_ctx(s, p->ctx) != CUDA_SUCCESS) return 1;
    if (handle_get(s, id, is_event ? HK_EVENT : HK_STREAM, &h) != CUDA_SUCCESS) return 1;
    uint64_t deadline = now_ns() + INLINE_WAIT_NS;
    for (;;) {
        CUresult q = is_event ? REAL(cuEventQuery, (CUevent)h) : REAL(cuStreamQuery, (CUstream)h);
        if (q != CUDA_ERROR_NOT_READY) return 0;
        if (now_ns() > deadline) return 1;
    }
}

/* ---- the dispatch loop ----------------------------------------------- */

/* The dispatch thread's input buffer. The client batches small one-way
 * frames into single writes; reading them back in large chunks keeps the
 * session's cost per launch at a parse instead of two system calls. Large
 * payloads (bulk copies) skip the buffer and land in their own memory. */
#define INBUF_SIZE (1u << 20)

static struct {
    uint8_t *data;
    size_t start, end;
} inbuf;

/* Set when the dispatch thread waits for a frame's first byte: an
 * operator's move (migrate_request_post) may then take its turn. */
static int at_frame_boundary, ctl_woke;
/* How often a waiting dispatch thread looks for an operator's move. */
#define CTL_LOOK_MS 100

/* Wait for input. With an idle timeout, a client silent that long loses
 * its session, between frames or in the middle of one (a frame half sent
 * would otherwise hold the session forever), unless one of its calls is
 * still running: a session waiting on the GPU is not idle. */
static int wait_input(struct session *s)
{
    int idle_ms = s->opt->idle_timeout_s > 0 ? s->opt->idle_timeout_s * 1000 : 0;
    int dead_ms = s->opt->dead_after_s > 0 ? s->opt->dead_after_s * 1000 : 0;
    int wait_ms = idle_ms && (!dead_ms || idle_ms < dead_ms) ? idle_ms : dead_ms;
    uint64_t since = now_ns(), slice_since = since;
    while (wait_ms > 0 || s->ctl_fd >= 0) {
        int slice = s->ctl_fd >= 0 && (wait_ms <= 0 || wait_ms > CTL_LOOK_MS) ? CTL_LOOK_MS : wait_ms;
        int rc = io_wait_input(s->fd, slice);
        if (rc != 0) return rc < 0 ? -1 : 0;
        if (at_frame_boundary && migrate_request_waiting()) {
            ctl_woke = 1;
            errno = EINTR;
            return -1;
        }
        /* The bounds below count whole periods of wait_ms, as before. */
        if (wait_ms <= 0 || now_ns() - slice_since < (uint64_t)wait_ms * 1000000u) continue;
        slice_since = now_ns();
        /* A live client pings whenever it has sent nothing for a quarter
         * of this, even while its calls run: silence means it is gone. */
        if (dead_ms && now_ns() - since >= (uint64_t)dead_ms * 1000000u) {
            LOG_WARN("client sent nothing for %d s (--dead-after): declared dead, ending the session; "
                     "a stopped or hung client, or a network partition (raise --dead-after if clients "
                     "are this slow)", s->opt->dead_after_s);
            errno = ETIMEDOUT;
            return -1;
        }
        if (idle_ms && atomic_load(&calls_in_flight) == 0) {
            LOG_WARN("client idle for %d s: closing the session", s->opt->idle_timeout_s);
            errno = ETIMEDOUT;
            return -1;
        }
    }
    return 0;
}

/* One read of at most cap bytes from the socket; n > 0, or -1 (EOF gives
 * ECONNRESET). */
/* Set when the connection broke (EOF, reset, an error), as opposed to a
 * verdict of ours (--dead-after, --idle-timeout): only a break waits for
 * a resume. */
static int conn_broke;

static ssize_t read_socket(struct session *s, void *dst, size_t cap)
{
    /* Under an idle timeout, bytes already waiting are read without a poll
     * first: a large payload arrives in many reads. */
    int timed = s->opt->idle_timeout_s > 0 || s->opt->dead_after_s > 0 || s->ctl_fd >= 0;
    for (;;) {
        ssize_t n = io_read_some(s->fd, dst, cap, timed ? 0 : -1);
        if (n > 0) {
            at_frame_boundary = 0;
            return n;
        }
        if (!timed || (errno != EAGAIN && errno != EWOULDBLOCK) || wait_input(s) != 0) {
            if (ctl_woke) return -1;
            /* Altered bytes (EPROTO: a TLS record that does not verify)
             * are an attack or a broken path, not a break to resume. */
            conn_broke = errno != ETIMEDOUT && errno != EPROTO;
            return -1;
        }
    }
}

static int inbuf_fill(struct session *s)
{
    if (!inbuf.data && !(inbuf.data = malloc(INBUF_SIZE))) return -1;
    if (inbuf.start == inbuf.end) inbuf.start = inbuf.end = 0;
    ssize_t n = read_socket(s, inbuf.data + inbuf.end, INBUF_SIZE - inbuf.end);
    if (n < 0) return -1;
    inbuf.end += (size_t)n;
    return 0;
}

/* Read exactly n bytes: what is buffered first, then from the socket
 * (large payloads straight into dst). */
static int read_exact(struct session *s, void *dst, size_t n)
{
    uint8_t *d = dst;
    while (n > 0) {
        size_t have = inbuf.end - inbuf.start;
        if (have) {
            size_t k = have < n ? have : n;
            memcpy(d, inbuf.data + inbuf.start, k);
            inbuf.start += k;
            d += k;
            n -= k;
        } else if (n >= INBUF_SIZE / 2) {
            ssize_t k = read_socket(s, d, n);
            if (k < 0) return -1;
            d += k;
            n -= (size_t)k;
        } else {
            if (inbuf.end > INBUF_SIZE / 2) inbuf.start = inbuf.end = 0;
            if (inbuf_fill(s) != 0) return -1;
        }
    }
    return 0;
}

/* How long the dispatch thread polls for the next call before it sleeps. */
#define INPUT_SPIN_NS 20000

/* The next frame header. A program that waits for a reply sends its next
 * call within microseconds: look for it before sleeping. */
static int read_header(struct session *s, uint8_t *hdr)
{
    at_frame_boundary = inbuf.end == inbuf.start;
    if (inbuf.end == inbuf.start) io_spin_for_input(s->fd, INPUT_SPIN_NS);
    return read_exact(s, hdr, FRAME_HEADER_LEN);
}

/* Receive a large request's bulk bytes (an op whose request ends in a
 * bulk field: op_entry.bulk_head, from the spec) straight into pinned
 * memory, so that a host-to-device copy's DMA can overlap the next chunk's
 * arrival. The head (the fixed fields and the bulk length) stays the
 * payload; the handler finds the bytes in c->staging. Returns 0 when read
 * (that way or, when no staging buffer is free, the plain way), -1 on a
 * connection error. */
static int read_staged(struct session *s, struct pending_call *p, const struct frame_header *h, uint32_t head_len)
{
    uint8_t *head = malloc(head_len);
    if (!head || read_exact(s, head, head_len) != 0) {
        free(head);
        return -1;
    }
    uint64_t n;
    memcpy(&n, head + head_len - 8, 8);
    struct staging *b = NULL;
    if (n == h->length - head_len && session_bind_ctx(s, h->ctx) == CUDA_SUCCESS) b = staging_acquire();
    if (!b) {
        /* Plain way: the head goes back in front of the buffered input. */
        uint8_t *payload = malloc(h->length);
        if (!payload) {
            free(head);
            return -1;
        }
        memcpy(payload, head, head_len);
        free(head);
        if (read_exact(s, payload + head_len, h->length - head_len) != 0) {
            free(payload);
            return -1;
        }
        p->payload = payload;
        wr_init(&p->call.in, payload, h->length);
        return 0;
    }
    if (read_exact(s, staging_data(b), n) != 0) {
        staging_release_after(b, NULL);
        free(head);
        return -1;
    }
    p->payload = head;
    p->call.staging = b;
    p->call.arena.bulk_apart = 1; /* the bytes are in staging memory */
    wr_init(&p->call.in, head, head_len);
    return 0;
}

/* The call a frame with header h asks for; its arguments still to be
 * attached (p->payload and p->call.in). NULL when memory runs out. */
static struct pending_call *call_new(struct session *s, const struct frame_header *h)
{
    struct pending_call *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->ctx = h->ctx;
    p->call.s = s;
    p->call.op = h->op;
    p->call.seq = h->seq;
    p->call.async = (h->flags & FRAME_ASYNC) != 0;
    p->replayed = (h->flags & FRAME_REPLAYED) != 0;
    wb_init(&p->call.out);
    struct session_counters *st = session_stats_mine();
    if (st) atomic_fetch_add_explicit(&st->bytes_in, sizeof *h + h->length, memory_order_relaxed);
    snapshot_note_op(h->op); /* before it runs: the next snapshot copies what it may write */
    return p;
}

static void ask_for_ack(void);
static int send_pong(struct session *s, int reply, uint32_t seq, int must);

/* A compressed request (scuda_packed): the request inside takes its
 * place, as if it had come plain. One that cannot be unpacked stays as
 * it is, for srv_scuda_packed to refuse. */
static void unpack_call(struct pending_call *p)
{
    uint16_t op;
    size_t n;
    void *plain = packed_open(p->payload, p->call.in.left, &op, &n);
    if (!plain) return;
    free(p->payload);
    p->payload = plain;
    p->call.op = op;
    wr_init(&p->call.in, plain, n);
    snapshot_note_op(op);
}

static struct pending_call *read_call(struct session *s)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    struct frame_header h;
    atomic_store(&dispatch_busy, 0);
    if (read_header(s, hdr) != 0) return NULL;
    atomic_store(&dispatch_busy, 1);
    frame_header_decode(hdr, &h);
    if (h.length > SCUDA_MAX_FRAME) {
        LOG_WARN("client sent a %u-byte frame (limit %u): closing the session", h.length, SCUDA_MAX_FRAME);
        return NULL;
    }
    struct pending_call *p = call_new(s, &h);
    if (!p) return NULL;
    const struct op_entry *e = op_entry_of(h.op);
    uint32_t head_len = e && h.op != OP_scuda_packed ? e->bulk_head : 0;
    if (head_len && h.length > head_len + (1u << 20) && h.length <= head_len + STAGING_SIZE) {
        if (read_staged(s, p, &h, head_len) != 0) {
            free(p);
            return NULL;
        }
    } else {
        void *payload = malloc(h.length ? h.length : 1);
        if (!payload || read_exact(s, payload, h.length) != 0) {
            free(p);
            free(payload);
            return NULL;
        }
        p->payload = payload;
        wr_init(&p->call.in, payload, h.length);
        if (h.op == OP_scuda_packed) unpack_call(p);
    }
    /* Read whole: it runs, whatever becomes of the connection. A caller
     * that waits for its acknowledgement (FRAME_ACK_ME) gets it from here
     * when no one writes, without a hand-off to the liveness thread. */
    if (resume_note_received(h.flags, h.length) && (!(h.flags & FRAME_ACK_ME) || !send_pong(s, 0, 0, 0)))
        ask_for_ack();
    return p;
}

/* An acknowledgement of our frames (resume.h). Returns 0, or -1 when it
 * is malformed. */
static int note_resume_ack(const void *payload, size_t len)
{
    wire_reader r;
    wr_init(&r, payload, len);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_resume_ack_req m;
    int rc = msg_scuda_resume_ack_req_get(&r, &arena, &m) == 0 && r.left == 0 ? 0 : -1;
    if (rc == 0) resume_acked(m.ack);
    msg_arena_free(&arena);
    return rc;
}

/* A malformed acknowledgement is refused like any malformed request. */
CUresult srv_scuda_resume_ack(srv_call *c)
{
    (void)c;
    return CUDA_ERROR_INVALID_VALUE;
}

/* The next call, after the pings and acknowledgements in front of it:
 * they are no calls, and never enter the dispatch queue. */
static struct pending_call *read_next_call(struct session *s)
{
    struct pending_call *p;
    while ((p = read_call(s)) != NULL && (p->call.op == OP_scuda_live_ping || p->call.op == OP_scuda_resume_ack)) {
        /* A malformed one goes on, to be refused like any malformed call. */
        int bad = p->call.op == OP_scuda_live_ping
                      ? liveness_note_ping(p->payload, p->call.in.left, p->call.async, p->call.seq)
                      : note_resume_ack(p->payload, p->call.in.left);
        if (bad) break;
        free(p->payload);
        wb_free(&p->call.out);
        free(p);
    }
    return p;
}

void session_run_frame(struct session *s, const struct frame_header *h, void *payload)
{
    struct pending_call *p = call_new(s, h);
    if (!p) {
        free(payload);
        return;
    }
    p->payload = payload;
    wr_init(&p->call.in, payload, h->length);
    finish_copy_in_flight();
    run_call(s, p);
    finish_copy_in_flight(); /* nothing left running when it returns */
}

/* A call that waits for a worker keeps its frame: charge both to the
 * session's host memory (host_quota.h). Returns 0, or -1 when refused. */
static int charge_queued(struct pending_call *p)
{
    uint64_t bytes = sizeof *p + p->call.in.left;
    if (host_quota_charge(bytes, "a queued blocking call") != 0) return -1;
    p->charged = bytes;
    return 0;
}

/* Fail a call that cannot wait for a worker, as if it had run. */
static void refuse_call(struct session *s, struct pending_call *p)
{
    if (p->call.staging) staging_release(p->call.staging);
    p->call.staging = NULL;
    finish_call(s, p, CUDA_ERROR_OUT_OF_MEMORY);
}

/* The next call; after a break, on the connection the client resumed
 * with. NULL when the client is gone for good. */
static struct pending_call *next_call(struct session *s)
{
    for (;;) {
        /* An operator's move runs here, between two calls, as a client's
         * scuda_migrate does. */
        if (migrate_request_waiting()) migrate_request_run(s);
        if (migrate_switch_pending()) {
            /* The client was told to resume on another server: read
             * nothing more here; it comes back, or this session ends. */
            int rc = migrate_switch_wait(s);
            migrate_request_answer(migrate_switch_outcome());
            if (rc != 0) return NULL;
            inbuf.start = inbuf.end = 0;
        }
        conn_broke = 0;
        ctl_woke = 0;
        struct pending_call *p = read_next_call(s);
        if (!p && ctl_woke) continue; /* between two frames: the request above */
        if (p || !conn_broke || resume_wait(s) != 0) return p;
        /* Whatever was buffered or half read is the client's to send again. */
        inbuf.start = inbuf.end = 0;
    }
}

/* A failover journal's blocking call (FRAME_REPLAYED) had its reply
 * before its caller went on, so later frames may use what it made (a
 * module a later one-way call takes a function from): wait until the
 * workers are done before reading on. Bounded, because a call can wait
 * for GPU work that only a later frame releases (cuStreamWaitValue32
 * released by another thread's cuStreamWriteValue32): past the bound the
 * replay goes on, out of order, and says so. */
static void replay_barrier(uint16_t op)
{
    static int warned;
    uint64_t deadline = now_ns() + (uint64_t)REPLAY_BARRIER_MS * 1000000u;
    for (unsigned us = 20; atomic_load(&calls_in_flight) > 0; us = us < 1000 ? us * 2 : us) {
        if (now_ns() > deadline) {
            if (!warned++)
                LOG_WARN("failover replay: %s still runs after %d ms (it may wait for work a later call releases); "
                         "later calls run without waiting for it", scuda_op_name(op), REPLAY_BARRIER_MS);
            return;
        }
        usleep(us);
    }
}

static void dispatch_loop(struct session *s)
{
    struct pending_call *p;
    while ((p = next_call(s)) != NULL) {
        finish_copy_in_flight();
        const struct op_entry *e = op_entry_of(p->call.op);
        int blocking = e && e->blocking && !p->call.async && would_block(s, p);
        if (blocking) {
            if (queue_full(s, p->call.op) || charge_queued(p) != 0) {
                refuse_call(s, p);
                continue;
            }
            int in_order = p->replayed;
            uint16_t op = p->call.op;
            atomic_fetch_add(&calls_in_flight, 1);
            if (enqueue_blocking(p) == 0) { /* p is the worker's now */
                if (in_order) replay_barrier(op);
                continue;
            }
            atomic_fetch_sub(&calls_in_flight, 1);
            host_quota_release(p->charged);
            p->charged = 0;
        }
        run_call(s, p);
    }
}

/* ---- liveness ----------------------------------------------------------- */

/* docs/architecture.md, 3.10. The client declares us dead when it waits
 * and hears nothing for its SCUDA_DEAD_AFTER. While the session owes it an
 * answer (the dispatch thread holds a frame, or a worker runs a call) and
 * has written nothing for a quarter of that, this thread sends a pong. It
 * never touches the driver, so a ten-minute kernel, or a dispatch thread
 * stuck in a slow driver call, is never mistaken for a hang; a stopped
 * process sends nothing, which is the point. It takes the socket only when
 * no one else writes (a reply being written is a sign of life already). */

static pthread_mutex_t pong_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pong_wake;

/* A ping the reader could not read (liveness_note_ping) is refused as a
 * malformed request; a good one never gets here. */
CUresult srv_scuda_live_ping(srv_call *c)
{
    (void)c;
    return CUDA_ERROR_INVALID_VALUE;
}

/* Returns 0, or -1 when the ping is malformed. */
static int liveness_note_ping(const void *payload, size_t len, int async, uint32_t seq)
{
    wire_reader r;
    wr_init(&r, payload, len);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_live_ping_req m;
    int rc = msg_scuda_live_ping_req_get(&r, &arena, &m) == 0 && r.left == 0 ? 0 : -1;
    if (rc == 0) {
        /* A hostile client must not make us spin: 100 ms at the least. */
        atomic_store(&client_dead_ms, m.dead_after_ms && m.dead_after_ms < 100 ? 100 : m.dead_after_ms);
        resume_acked(m.ack);
        if (m.leaving) resume_client_leaving();
        if (!async) {
            /* The first ping waits for its pong: answer at once. */
            pthread_mutex_lock(&pong_lock);
            atomic_store(&pong_seq, seq);
            /* The resume secret goes out once, to the ping a client opens
             * with: a stray ping later gets none. */
            atomic_store(&pong_hands_secret, resume_received() == 1);
            atomic_store(&pong_due, 1);
            pthread_cond_signal(&pong_wake);
            pthread_mutex_unlock(&pong_lock);
        }
    }
    msg_arena_free(&arena);
    return rc;
}

/* A pong, or (reply) the reply to the ping that asked for one. Both say
 * our --dead-after; the reply also hands out what a resume needs, and a
 * pong says what we received (resume.h). A pong that only keeps the
 * client patient (!must) is skipped when someone else writes: that is a
 * sign of life already. */
static int send_pong(struct session *s, int reply, uint32_t seq, int must)
{
    uint32_t mine = s->opt->dead_after_s > 0 ? (uint32_t)s->opt->dead_after_s * 1000u : 0;
    wire_buf b;
    wb_init(&b);
    struct frame_header h = {.op = OP_scuda_live_pong};
    if (reply) {
        wb_put_u32(&b, CUDA_SUCCESS);
        struct msg_scuda_live_ping_rep m = {.dead_after_ms = mine};
        if (atomic_load(&pong_hands_secret) && s->opt->resume_within_s > 0) {
            m.resume_within_ms = (uint32_t)s->opt->resume_within_s * 1000u;
            memcpy(m.resume_secret, resume_secret(), sizeof m.resume_secret);
        }
        msg_scuda_live_ping_rep_put(&b, &m);
        h = (struct frame_header){.op = OP_scuda_live_ping, .flags = FRAME_REPLY, .seq = seq};
    } else {
        struct msg_scuda_live_pong_req m = {.dead_after_ms = mine, .ack = resume_received()};
        msg_scuda_live_pong_req_put(&b, &m);
    }
    h.length = (uint32_t)b.len;
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {b.data, b.len}};
    if (reply) {
        resume_write_frame(s, iov, 2, NULL, 0); /* a reply: numbered and kept */
    } else {
        /* Pongs are not numbered: one lost in a break is worth nothing. */
        if (must) pthread_mutex_lock(&s->write_lock);
        else if (pthread_mutex_trylock(&s->write_lock) != 0) {
            wb_free(&b);
            return 0;
        }
        io_writev_full(s->fd, iov, 2);
        pthread_mutex_unlock(&s->write_lock);
    }
    atomic_fetch_add_explicit(&frames_out, 1, memory_order_relaxed);
    wb_free(&b);
    return 1;
}

/* The reader read a frame the client wants acknowledged, or much since
 * the last acknowledgement: the liveness thread sends a pong, so the
 * dispatch thread never waits for the socket. */
static void ask_for_ack(void)
{
    pthread_mutex_lock(&pong_lock);
    atomic_store(&ack_due, 1);
    pthread_cond_signal(&pong_wake);
    pthread_mutex_unlock(&pong_lock);
}

static int session_owes_client(void)
{
    return atomic_load(&dispatch_busy) || atomic_load(&calls_in_flight) > 0 || atomic_load(&late_replies_owed) > 0;
}

static void *liveness_main(void *arg)
{
    struct session *s = arg;
    uint64_t out_seen = atomic_load(&frames_out), quiet_since = now_ns();
    for (;;) {
        uint32_t ms = atomic_load(&client_dead_ms);
        uint64_t interval_ns = ms ? (uint64_t)ms * 1000000u / 4 : 0;
        uint64_t tick_ns = interval_ns && interval_ns < 100000000u ? interval_ns : 100000000u;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t until = (uint64_t)ts.tv_nsec + tick_ns;
        ts.tv_sec += (time_t)(until / 1000000000u);
        ts.tv_nsec = (long)(until % 1000000000u);
        pthread_mutex_lock(&pong_lock);
        while (!atomic_load(&pong_due) && !atomic_load(&ack_due) &&
               pthread_cond_timedwait(&pong_wake, &pong_lock, &ts) == 0) {
        }
        pthread_mutex_unlock(&pong_lock);
        if (atomic_exchange(&pong_due, 0)) send_pong(s, 1, atomic_load(&pong_seq), 1);
        if (atomic_exchange(&ack_due, 0)) send_pong(s, 0, 0, 1);
        uint64_t now = now_ns(), out = atomic_load(&frames_out);
        if (out != out_seen || !session_owes_client()) {
            out_seen = out;
            quiet_since = now;
        } else if (interval_ns && now - quiet_since >= interval_ns) {
            send_pong(s, 0, 0, 0);
            out_seen = atomic_load(&frames_out);
            quiet_since = now;
        }
    }
    return NULL;
}

static void liveness_start(struct session *s)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&pong_wake, &attr);
    pthread_condattr_destroy(&attr);
    pthread_t t;
    if (pthread_create(&t, NULL, liveness_main, s) != 0) {
        LOG_WARN("no liveness thread: a client waiting on a long call may declare this session dead (%s)",
                 strerror(errno));
        return;
    }
    pthread_detach(t);
}

/* Device memory lands in the session's windows unless the operator said
 * otherwise; below the quota, so that the quota counts what the
 * application asked for (device_window.h). */
static void install_window(const struct server_options *opt)
{
    if (opt->driver_placed_memory) return;
    struct window_config w = {
        .base = opt->window_base ? opt->window_base : WINDOW_BASE_DEFAULT,
        .size = opt->window_size ? opt->window_size : WINDOW_SIZE_DEFAULT,
        .cache_bytes = WINDOW_CACHE_DEFAULT,
    };
    window_install(&real, &w);
}

/* The driver's own mappings go to the arena from now on: before cuInit,
 * which makes most of them (driver_va.h). */
static void place_driver_mappings(void *driver, const struct server_options *opt, int log_fd)
{
    const char *log = getenv("SCUDA_DRIVER_VA_LOG");
    struct driver_va_config c = {
        .base = opt->driver_va_off ? 0 : opt->driver_va_base ? opt->driver_va_base : DRIVER_VA_BASE_DEFAULT,
        .size = opt->driver_va_size ? opt->driver_va_size : DRIVER_VA_SIZE_DEFAULT,
        .log_fd = log_fd,
        .log = (log && strcmp(log, "1") == 0) || scuda_log_enabled(SCUDA_LOG_DEBUG),
    };
    driver_va_start(driver, &c);
}

void session_main(int fd, int ctl_fd, const struct server_options *opt, int log_fd)
{
    static struct session s;
    s.fd = fd;
    s.ctl_fd = ctl_fd;
    s.opt = opt;
    s.log_fd = log_fd;
    pthread_mutex_init(&s.write_lock, NULL);
    pthread_mutex_init(&s.error_lock, NULL);
    scuda_log_set_role("session");
    scuda_log_set_fd(log_fd);
    tcp_tune(fd, 10);
    resume_init(fd);

    char err[512] = "";
    void *driver = NULL;
    if (load_driver(opt->driver_path, &driver, err, sizeof err) != 0) {
        LOG_ERROR("cannot load the CUDA driver (%s); install it or pass --driver PATH", err);
        hello_send_welcome(fd, WELCOME_NO_DEVICE, "the server cannot load its CUDA driver");
        _exit(1);
    }
    place_driver_mappings(driver, opt, log_fd);
    install_window(opt);
    quota_install(&real, opt->mem_quota);
    ipc_install(&real); /* after the window: imports reserve their addresses through it */
    /* What this client can make the session grow to (docs/operate.md, Session limits). */
    host_quota_init(opt->host_mem_quota ? opt->host_mem_quota : HOST_QUOTA_DEFAULT);
    staging_init();
    handles_set_limit(opt->max_handles ? opt->max_handles : SCUDA_MAX_HANDLES_DEFAULT);
    scuda_log_set_rate_limit(SESSION_LOG_BURST, SESSION_LOG_PER_SECOND);
    module_cache_init(opt->module_cache_dir, opt->module_cache_size);
    graph_host_install(&real);
    legacy_ctx_install(&real); /* the 32-bit exports in pre-3.2 contexts */
    param_layout_install(&real);
    migrate_state_install(&real);
    if (output_capture_start() != 0) LOG_WARN("device printf capture is off: %s", strerror(errno));
    static struct session_info si;
    CUresult r = gather_info(&si);
    char refusal[400];
    if ((r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE) &&
        gpu_pool_check(r == CUDA_SUCCESS ? si.device_count : 0, refusal, sizeof refusal) != 0) {
        LOG_ERROR("%s", refusal);
        hello_send_welcome(fd, WELCOME_NO_DEVICE, refusal);
        _exit(1);
    }
    if (r == CUDA_ERROR_NO_DEVICE && gpu_pool_explain_none(refusal, sizeof refusal)) {
        LOG_INFO("%s", refusal); /* what the client asked for: the driver's answer to it */
        hello_send_welcome(fd, WELCOME_NO_DEVICE, refusal);
        _exit(1);
    }
    if (r != CUDA_SUCCESS) {
        LOG_ERROR("cuInit on the server failed with %d", r);
        char msg[128];
        snprintf(msg, sizeof msg, "cuInit failed on the server with CUresult %d", r);
        hello_send_welcome(fd, WELCOME_NO_DEVICE, msg);
        _exit(1);
    }
    hello_send_session_welcome(fd, WELCOME_OK, "", &si);
    if (session_stats_mine()) { /* what the parent's --agent weighs free memory against */
        uint64_t total = 0;
        for (uint32_t d = 0; d < si.device_count; d++) total += si.dev[d].total_mem;
        atomic_store(&session_stats_mine()->device_total, total);
    }
    LOG_INFO("session started: %u device(s)", si.device_count);
    /* Joins are heard from here on: an import's memory comes over links
     * that join it (migrate_links.h). */
    if (bulk_join_listen(&s) != 0) LOG_WARN("no bulk joins for this session: %s", strerror(errno));
    if (migrate_in_expected()) migrate_in_run(&s); /* another server's session moves here */
    bulk_join_open_all();
    liveness_start(&s);
    if (migrate_in_expected()) migrate_switch_in_await(&s); /* its client resumes here */
    dispatch_loop(&s);
    /* The client is gone: exiting frees every allocation, context and
     * module it held, in the driver (docs/architecture.md, 2 Processes). */
    module_cache_log_summary();
    module_load_log_summary();
    LOG_INFO("client disconnected; session ends");
    snapshot_discard_all(); /* a standby's parked copy of it (snapshot.c) */
    scuda_log_flush_dropped();
    _exit(0);
}
