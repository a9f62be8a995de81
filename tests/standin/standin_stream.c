/* SCUDA CPU stand-in driver: streams, events, and the executor.
 *
 * Stream model (see README.md):
 *  - Each stream is a FIFO of operations. An operation submitted to an idle
 *    stream (nothing queued, nothing running, no implicit dependency) runs
 *    at once, in the caller's thread, under the global lock. Otherwise it is
 *    queued, and one executor thread runs queued operations in order.
 *  - Kernel "sleep_ms" never blocks a thread: it is a queued operation that
 *    completes at its deadline. Work queued behind it waits; other streams
 *    do not.
 *  - Host functions and stream callbacks always run on one callback thread,
 *    after the work before them, and block only their own stream.
 *  - The legacy default stream (NULL, CU_STREAM_LEGACY) waits for work
 *    already submitted to the context's blocking streams, and they wait for
 *    it (CU_STREAM_NON_BLOCKING streams are exempt), as on the real driver.
 *    The per-thread default stream (CU_STREAM_PER_THREAD, or NULL in the
 *    _ptsz/_ptds entry points) is a blocking stream of its own per thread.
 *  - An event recorded on a stream completes when the work before it does;
 *    its timestamp (CLOCK_MONOTONIC) is taken then.
 */
#include "standin_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_t si_exec_thread, si_cb_thread;
static bool si_exec_started, si_cb_started, si_shutdown;
static pthread_cond_t si_cb_cv = PTHREAD_COND_INITIALIZER;
static bool si_cb_busy;

typedef struct si_job {
    si_stream *s;
    si_op *op;
    CUresult status;
    struct si_job *next;
} si_job;
static si_job *si_jobs_head, *si_jobs_tail;

/* ------------------------------------------------------------------ */
/* stream objects                                                      */

si_stream *si_stream_new(si_ctx *c, int kind, unsigned flags, int prio)
{
    si_stream *s = si_xcalloc(1, sizeof(*s));
    s->id = si_next_id();
    s->ctx = c;
    s->kind = kind;
    s->flags = flags;
    s->priority = prio;
    s->sync_policy = CU_SYNC_POLICY_AUTO;
    s->domain_map.remote = 1; /* the driver's default map: default_ 0, remote 1 */
    s->next_all = si_g.stream_list;
    si_g.stream_list = s;
    si_hset_add(&si_g.all_streams, s);
    if (kind == SI_SK_USER) {
        si_hset_add(&si_g.streams, s);
        si_book_take(c, &s->book);
    }
    if (kind == SI_SK_PTDS) {
        s->owner = pthread_self();
        s->next_ptds = c->ptds_list;
        c->ptds_list = s;
    }
    return s;
}

/* frees s, already unlinked from the stream list */
static void si_stream_release(si_stream *s)
{
    si_hset_del(&si_g.all_streams, s);
    si_hset_del(&si_g.streams, s);
    si_book_give(&s->book);
    while (s->head) {
        si_op *op = s->head;
        s->head = op->next;
        si_op_free(op);
    }
    free(s);
}

void si_stream_free(si_stream *s)
{
    for (si_stream **pp = &si_g.stream_list; *pp; pp = &(*pp)->next_all)
        if (*pp == s) {
            *pp = s->next_all;
            break;
        }
    si_stream_release(s);
}

bool si_stream_idle(const si_stream *s)
{
    return !s->head && !s->running;
}

bool si_stream_live(const si_stream *s, uint64_t id)
{
    return si_hset_has(&si_g.all_streams, s) && s->id == id;
}

static si_stream *si_ptds(si_ctx *c)
{
    pthread_t self = pthread_self();
    for (si_stream *s = c->ptds_list; s; s = s->next_ptds)
        if (pthread_equal(s->owner, self))
            return s;
    return si_stream_new(c, SI_SK_PTDS, 0, 0);
}

CUresult si_resolve_stream(CUstream h, bool ptsz, si_stream **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        si_ctx *c = NULL;
        rc = si_get_ctx(&c);
        if (rc)
            return rc;
        bool pt = h == CU_STREAM_PER_THREAD || (h == NULL && ptsz);
        *out = pt ? si_ptds(c) : c->legacy;
        return CUDA_SUCCESS;
    }
    si_stream *s = (si_stream *)h;
    if (!si_hset_has(&si_g.streams, s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (si_g.sticky)
        return si_g.sticky;
    *out = s;
    return CUDA_SUCCESS;
}

/* like si_resolve_stream, without the sticky error (queries) */
static CUresult si_stream_query_arg(CUstream h, bool ptsz, si_stream **out)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        si_ctx *c = si_current();
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        bool pt = h == CU_STREAM_PER_THREAD || (h == NULL && ptsz);
        *out = pt ? si_ptds(c) : c->legacy;
        return CUDA_SUCCESS;
    }
    if (!si_hset_has(&si_g.streams, h))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (si_stream *)h;
    return CUDA_SUCCESS;
}

void si_destroy_ctx_streams_events(si_ctx *c)
{
    si_stream **pp = &si_g.stream_list;
    while (*pp) {
        si_stream *s = *pp;
        if (s->ctx == c) {
            *pp = s->next_all;
            si_stream_release(s);
        } else {
            pp = &s->next_all;
        }
    }
    c->legacy = NULL;
    c->ptds_list = NULL;
    si_event **ep = &si_g.event_list;
    while (*ep) {
        si_event *e = *ep;
        if (e->ctx == c) {
            *ep = e->next_all;
            si_hset_del(&si_g.events, e);
            si_book_give(&e->book);
            free(e);
        } else {
            ep = &e->next_all;
        }
    }
}

/* ------------------------------------------------------------------ */
/* operations                                                          */

si_op *si_op_new(int kind)
{
    si_op *op = si_xcalloc(1, sizeof(*op));
    op->kind = kind;
    return op;
}

void si_op_free(si_op *op)
{
    if (!op)
        return;
    if (op->kind == SI_OP_COPY)
        free(op->u.copy.staging);
    if (op->kind == SI_OP_KERNEL)
        si_kargs_free(&op->u.kernel);
    free(op);
}

static bool si_event_valid(const si_event *e, uint64_t id)
{
    return si_hset_has(&si_g.events, e) && e->id == id;
}

static bool si_wait_satisfied(const si_op *op)
{
    const si_stream *t = op->u.wait.s;
    if (!si_stream_live(t, op->u.wait.s_id))
        return true; /* destroyed streams have drained */
    return t->done_seq >= op->u.wait.seq;
}

static void si_memset_exec(const si_op *op)
{
    size_t row = op->u.memset.width * op->u.memset.elem;
    size_t span = op->u.memset.height ? (op->u.memset.height - 1) * op->u.memset.pitch + row : 0;
    if (!si_range(op->u.memset.dst, span))
        return; /* freed meanwhile: never touch it */
    for (size_t y = 0; y < op->u.memset.height; y++) {
        unsigned char *p = (unsigned char *)(op->u.memset.dst + y * op->u.memset.pitch);
        uint32_t v = op->u.memset.value;
        switch (op->u.memset.elem) {
        case 1:
            memset(p, (int)(v & 0xff), op->u.memset.width);
            break;
        case 2: {
            uint16_t w = (uint16_t)v;
            for (size_t i = 0; i < op->u.memset.width; i++)
                memcpy(p + 2 * i, &w, 2);
            break;
        }
        default:
            for (size_t i = 0; i < op->u.memset.width; i++)
                memcpy(p + 4 * i, &v, 4);
            break;
        }
    }
}

/* runs a ready operation (not host functions / callbacks), lock held */
static void si_op_exec(si_stream *s, si_op *op)
{
    si_ctx *c = s->ctx;
    switch (op->kind) {
    case SI_OP_COPY:
        if (!si_g.sticky && si_copy_validate(&op->u.copy.c) == CUDA_SUCCESS)
            si_copy_exec(&op->u.copy.c);
        break;
    case SI_OP_MEMSET:
        if (!si_g.sticky)
            si_memset_exec(op);
        break;
    case SI_OP_KERNEL:
        si_kernel_exec(c, &op->u.kernel);
        break;
    case SI_OP_FREE:
        si_pool_free_exec(op->u.free.base, op->u.free.alloc_id);
        break;
    case SI_OP_EVENT: {
        si_event *e = op->u.event.ev;
        if (si_event_valid(e, op->u.event.ev_id) && e->stream == s &&
            (e->seq == op->seq || e->seq == UINT64_MAX)) {
            e->has_time = true;
            e->time_ns = si_now_ns();
        }
        break;
    }
    default:
        break;
    }
}

static bool si_needs_barrier(const si_stream *s)
{
    if (s->flags & CU_STREAM_NON_BLOCKING)
        return false;
    if (s->kind == SI_SK_LEGACY) {
        for (si_stream *t = si_g.stream_list; t; t = t->next_all)
            if (t != s && t->ctx == s->ctx && !(t->flags & CU_STREAM_NON_BLOCKING) &&
                !si_stream_idle(t))
                return true;
        return false;
    }
    return !si_stream_idle(s->ctx->legacy);
}

static void si_append(si_stream *s, si_op *op)
{
    op->seq = ++s->enq_seq;
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
}

static void si_add_wait(si_stream *s, si_stream *t)
{
    si_op *w = si_op_new(SI_OP_WAIT);
    w->u.wait.s = t;
    w->u.wait.s_id = t->id;
    w->u.wait.seq = t->enq_seq;
    si_append(s, w);
}

/* implicit dependencies between the legacy stream and blocking streams */
static void si_add_barriers(si_stream *s)
{
    if (s->flags & CU_STREAM_NON_BLOCKING)
        return;
    if (s->kind == SI_SK_LEGACY) {
        for (si_stream *t = si_g.stream_list; t; t = t->next_all)
            if (t != s && t->ctx == s->ctx && !(t->flags & CU_STREAM_NON_BLOCKING) &&
                !si_stream_idle(t))
                si_add_wait(s, t);
    } else if (!si_stream_idle(s->ctx->legacy)) {
        si_add_wait(s, s->ctx->legacy);
    }
}

bool si_would_inline(const si_stream *s)
{
    return si_stream_idle(s) && !si_needs_barrier(s);
}

uint64_t si_submit(si_stream *s, si_op *op)
{
    if (s->capture) {
        /* recorded into the capture's graph: nothing runs, nothing to wait for */
        si_capture_op(s, op);
        return s->done_seq;
    }
    bool deferred_kind = op->kind == SI_OP_SLEEP || op->kind == SI_OP_HOSTFN ||
                         op->kind == SI_OP_CALLBACK;
    if (!deferred_kind && si_would_inline(s)) {
        op->seq = ++s->enq_seq;
        si_op_exec(s, op);
        s->done_seq = op->seq;
        uint64_t seq = op->seq;
        si_op_free(op);
        return seq;
    }
    si_add_barriers(s);
    if (op->kind == SI_OP_SLEEP && si_stream_idle(s)) {
        op->u.sleep.started = true;
        op->u.sleep.deadline = si_now_ns() + op->u.sleep.ms * 1000000ull;
    }
    si_append(s, op);
    uint64_t seq = op->seq;
    si_exec_kick();
    return seq;
}

void si_wait_seq(si_stream *s, uint64_t seq)
{
    uint64_t id = s->id;
    while (si_stream_live(s, id) && s->done_seq < seq)
        si_wait_done();
}

void si_stream_wait_idle(si_stream *s)
{
    si_wait_seq(s, s->enq_seq);
}

/* ------------------------------------------------------------------ */
/* executor and callback threads                                       */

static void si_complete_head(si_stream *s)
{
    si_op *op = s->head;
    s->head = op->next;
    if (!s->head)
        s->tail = NULL;
    s->done_seq = op->seq;
    si_op_free(op);
}

static void *si_cb_main(void *arg)
{
    (void)arg;
    si_enter();
    for (;;) {
        while (!si_jobs_head && !si_shutdown)
            pthread_cond_wait(&si_cb_cv, &si_lock);
        if (!si_jobs_head)
            break;
        si_job *j = si_jobs_head;
        si_jobs_head = j->next;
        if (!si_jobs_head)
            si_jobs_tail = NULL;
        si_cb_busy = true;
        si_op *op = j->op;
        bool skip = op->kind == SI_OP_HOSTFN && j->status != CUDA_SUCCESS;
        si_leave();
        si_in_callback = 1;
        if (!skip) {
            if (op->kind == SI_OP_HOSTFN)
                op->u.hostfn.fn(op->u.hostfn.user);
            else
                op->u.callback.fn(op->u.callback.handle, j->status, op->u.callback.user);
        }
        si_in_callback = 0;
        si_enter();
        si_cb_busy = false;
        si_stream *s = j->s;
        if (s->head == op)
            si_complete_head(s);
        s->running = false;
        free(j);
        pthread_cond_broadcast(&si_done_cv);
        pthread_cond_signal(&si_exec_cv);
    }
    si_leave();
    return NULL;
}

static void si_dispatch_callback(si_stream *s, si_op *op)
{
    if (!si_cb_started) {
        if (pthread_create(&si_cb_thread, NULL, si_cb_main, NULL) != 0) {
            fputs("standin: cannot start the callback thread\n", stderr);
            abort();
        }
        si_cb_started = true;
    }
    si_job *j = si_xcalloc(1, sizeof(*j));
    j->s = s;
    j->op = op;
    j->status = si_g.sticky;
    if (si_jobs_tail)
        si_jobs_tail->next = j;
    else
        si_jobs_head = j;
    si_jobs_tail = j;
    s->running = true;
    pthread_cond_signal(&si_cb_cv);
}

/* runs what is ready on s; true if anything changed */
static bool si_pump(si_stream *s, uint64_t now, uint64_t *next)
{
    bool progressed = false;
    while (s->head && !s->running) {
        si_op *op = s->head;
        switch (op->kind) {
        case SI_OP_SLEEP:
            if (!op->u.sleep.started) {
                op->u.sleep.started = true;
                op->u.sleep.deadline = now + op->u.sleep.ms * 1000000ull;
            }
            if (now < op->u.sleep.deadline && !si_g.sticky) {
                if (op->u.sleep.deadline < *next)
                    *next = op->u.sleep.deadline;
                return progressed;
            }
            break;
        case SI_OP_WAIT:
            if (!si_wait_satisfied(op))
                return progressed;
            break;
        case SI_OP_HOSTFN:
        case SI_OP_CALLBACK:
            si_dispatch_callback(s, op);
            return true;
        default:
            si_op_exec(s, op);
            break;
        }
        si_complete_head(s);
        progressed = true;
    }
    return progressed;
}

static void *si_exec_main(void *arg)
{
    (void)arg;
    si_enter();
    while (!si_shutdown) {
        uint64_t next = UINT64_MAX;
        bool progressed = false;
        uint64_t now = si_now_ns();
        for (si_stream *s = si_g.stream_list; s; s = s->next_all)
            if (si_pump(s, now, &next))
                progressed = true;
        /* streams destroyed with work pending go once drained */
        si_stream **pp = &si_g.stream_list;
        while (*pp) {
            si_stream *s = *pp;
            if (s->zombie && si_stream_idle(s)) {
                *pp = s->next_all;
                si_stream_release(s);
                progressed = true;
            } else {
                pp = &s->next_all;
            }
        }
        if (progressed) {
            pthread_cond_broadcast(&si_done_cv);
            continue;
        }
        if (next == UINT64_MAX) {
            pthread_cond_wait(&si_exec_cv, &si_lock);
        } else {
            struct timespec ts;
            si_abs_timespec(next, &ts);
            pthread_cond_timedwait(&si_exec_cv, &si_lock, &ts);
        }
    }
    si_leave();
    return NULL;
}

void si_exec_kick(void)
{
    if (!si_exec_started) {
        if (pthread_create(&si_exec_thread, NULL, si_exec_main, NULL) != 0) {
            fputs("standin: cannot start the executor thread\n", stderr);
            abort();
        }
        si_exec_started = true;
    }
    pthread_cond_signal(&si_exec_cv);
}

__attribute__((destructor)) static void si_fini(void)
{
    pthread_mutex_lock(&si_lock);
    si_shutdown = true;
    bool exec = si_exec_started, cb = si_cb_started && !si_cb_busy;
    if (exec)
        pthread_cond_signal(&si_exec_cv);
    if (si_cb_started)
        pthread_cond_signal(&si_cb_cv);
    pthread_mutex_unlock(&si_lock);
    if (exec)
        pthread_join(si_exec_thread, NULL);
    if (cb)
        pthread_join(si_cb_thread, NULL);
}

/* ------------------------------------------------------------------ */
/* stream API                                                          */

#define SI_LEAST_PRIO 0
#define SI_GREATEST_PRIO (-5)

static CUresult si_stream_create(CUstream *phStream, unsigned int Flags, int priority)
{
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (rc)
        return rc;
    if (!phStream || (Flags != CU_STREAM_DEFAULT && Flags != CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if (priority > SI_LEAST_PRIO)
        priority = SI_LEAST_PRIO;
    if (priority < SI_GREATEST_PRIO)
        priority = SI_GREATEST_PRIO;
    *phStream = (CUstream)si_stream_new(c, SI_SK_USER, Flags, priority);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    si_enter();
    CUresult rc = si_stream_create(phStream, Flags, 0);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    si_enter();
    CUresult rc = si_stream_create(phStream, flags, priority);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    si_enter();
    CUresult rc = si_check_init();
    si_stream *s = (si_stream *)hStream;
    if (!rc && !si_hset_has(&si_g.streams, s))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        si_hset_del(&si_g.streams, s);
        if (si_stream_idle(s)) {
            si_stream_free(s);
        } else {
            s->zombie = true; /* the executor frees it once drained */
            si_exec_kick();
        }
    }
    si_leave();
    return rc;
}

/* legacy stream: its own work plus what blocking streams had submitted */
static bool si_legacy_idle(const si_stream *s)
{
    if (!si_stream_idle(s))
        return false;
    for (si_stream *t = si_g.stream_list; t; t = t->next_all)
        if (t != s && t->ctx == s->ctx && !(t->flags & CU_STREAM_NON_BLOCKING) &&
            !si_stream_idle(t))
            return false;
    return true;
}

static CUresult si_stream_query(CUstream h, bool ptsz)
{
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (rc)
        return rc;
    bool idle = s->kind == SI_SK_LEGACY ? si_legacy_idle(s) : si_stream_idle(s);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult si_stream_sync(CUstream h, bool ptsz)
{
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (rc)
        return rc;
    if (si_in_callback)
        return CUDA_ERROR_NOT_PERMITTED;
    si_ctx *c = s->ctx;
    if (s->kind == SI_SK_LEGACY) {
        /* a marker on the legacy stream waits for the blocking streams */
        typedef struct {
            si_stream *s;
            uint64_t id, seq;
        } mark;
        size_t n = 0, cap = 8;
        mark *m = si_xcalloc(cap, sizeof(mark));
        for (si_stream *t = si_g.stream_list; t; t = t->next_all) {
            if (t->ctx != c || (t != s && (t->flags & CU_STREAM_NON_BLOCKING)))
                continue;
            if (n == cap) {
                cap *= 2;
                mark *nm = realloc(m, cap * sizeof(mark));
                if (!nm)
                    abort();
                m = nm;
            }
            m[n].s = t;
            m[n].id = t->id;
            m[n].seq = t->enq_seq;
            n++;
        }
        for (size_t i = 0; i < n; i++)
            si_wait_seq(m[i].s, m[i].seq);
        free(m);
    } else {
        si_stream_wait_idle(s);
    }
    if (si_ctx_valid(c)) {
        si_flush_printf(c);
        return si_g.sticky;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    si_enter();
    CUresult rc = si_stream_query(hStream, false);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    si_enter();
    CUresult rc = si_stream_sync(hStream, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    si_enter();
    CUresult rc = si_stream_query(hStream, true);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    si_enter();
    CUresult rc = si_stream_sync(hStream, true);
    si_leave();
    return rc;
}

static bool si_event_complete(const si_event *e)
{
    if (!e->recorded)
        return true;
    if (!si_stream_live(e->stream, e->stream_id))
        return true;
    return e->stream->done_seq >= e->seq;
}

static CUresult si_stream_wait_event(CUstream h, CUevent hEvent, unsigned int Flags, bool ptsz)
{
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (rc)
        return rc;
    si_event *e = (si_event *)hEvent;
    if (!si_hset_has(&si_g.events, e))
        return CUDA_ERROR_INVALID_HANDLE;
    if (Flags != CU_EVENT_WAIT_DEFAULT && Flags != CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    si_event_wait_on(s, e, e->id);
    return CUDA_SUCCESS;
}

void si_event_wait_on(si_stream *s, si_event *e, uint64_t id)
{
    if (!si_event_valid(e, id) || si_event_complete(e) || e->stream == s)
        return;
    si_op *op = si_op_new(SI_OP_WAIT);
    op->u.wait.s = e->stream;
    op->u.wait.s_id = e->stream_id;
    op->u.wait.seq = e->seq;
    si_add_barriers(s);
    si_append(s, op);
    si_exec_kick();
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    si_enter();
    CUresult rc = si_stream_wait_event(hStream, hEvent, Flags, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    si_enter();
    CUresult rc = si_stream_wait_event(hStream, hEvent, Flags, true);
    si_leave();
    return rc;
}

/* stream property queries: NULL/special handles name the current context's */
#define SI_STREAM_GETTER(NAME, PTSZ, TYPE, EXPR)                   \
    SI_API CUresult CUDAAPI NAME(CUstream hStream, TYPE *out)      \
    {                                                              \
        si_enter();                                                \
        si_stream *s = NULL;                                       \
        CUresult rc = si_stream_query_arg(hStream, PTSZ, &s);      \
        if (!rc && !out)                                           \
            rc = CUDA_ERROR_INVALID_VALUE;                         \
        if (!rc)                                                   \
            *out = (EXPR);                                         \
        si_leave();                                                \
        return rc;                                                 \
    }

SI_STREAM_GETTER(cuStreamGetPriority, false, int, s->priority)
SI_STREAM_GETTER(cuStreamGetPriority_ptsz, true, int, s->priority)
SI_STREAM_GETTER(cuStreamGetFlags, false, unsigned int, s->flags)
SI_STREAM_GETTER(cuStreamGetFlags_ptsz, true, unsigned int, s->flags)
SI_STREAM_GETTER(cuStreamGetId, false, unsigned long long, s->id)
SI_STREAM_GETTER(cuStreamGetId_ptsz, true, unsigned long long, s->id)
SI_STREAM_GETTER(cuStreamGetCtx, false, CUcontext, (CUcontext)s->ctx)
SI_STREAM_GETTER(cuStreamGetCtx_ptsz, true, CUcontext, (CUcontext)s->ctx)
SI_STREAM_GETTER(cuStreamGetDevice, false, CUdevice, s->ctx->dev)
SI_STREAM_GETTER(cuStreamGetDevice_ptsz, true, CUdevice, s->ctx->dev)
SI_STREAM_GETTER(cuStreamIsCapturing, false, CUstreamCaptureStatus, si_capture_status(s))
SI_STREAM_GETTER(cuStreamIsCapturing_ptsz, true, CUstreamCaptureStatus, si_capture_status(s))

/* Stream attributes, as driver 580 answers them on an H200: the access
 * policy window, synchronization policy, priority and memory sync domain
 * (map) have a meaning for a stream; every other id is INVALID_VALUE. A
 * getter writes only the member its id names. */
static CUresult si_stream_attr(si_stream *s, CUstreamAttrID id, CUstreamAttrValue *v, bool set)
{
    switch ((int)id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        if (set) s->apw = v->accessPolicyWindow; else v->accessPolicyWindow = s->apw;
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        if (set && (v->syncPolicy < CU_SYNC_POLICY_AUTO || v->syncPolicy > CU_SYNC_POLICY_BLOCKING_SYNC))
            return CUDA_ERROR_INVALID_VALUE;
        if (set) s->sync_policy = v->syncPolicy; else v->syncPolicy = s->sync_policy;
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        if (set) s->priority = v->priority; else v->priority = s->priority;
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        if (set) s->domain_map = v->memSyncDomainMap; else v->memSyncDomainMap = s->domain_map;
        return CUDA_SUCCESS;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
        if (set && v->memSyncDomain > CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE) return CUDA_ERROR_INVALID_VALUE;
        if (set) s->domain = v->memSyncDomain; else v->memSyncDomain = s->domain;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult si_stream_attr_call(CUstream h, CUstreamAttrID id, CUstreamAttrValue *v, bool set, bool ptsz)
{
    si_enter();
    si_stream *s = NULL;
    CUresult rc = si_stream_query_arg(h, ptsz, &s);
    if (!rc && !v)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc)
        rc = si_stream_attr(s, id, v, set);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamGetAttribute(CUstream h, CUstreamAttrID id, CUstreamAttrValue *v)
{
    return si_stream_attr_call(h, id, v, false, false);
}

SI_API CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID id, CUstreamAttrValue *v)
{
    return si_stream_attr_call(h, id, v, false, true);
}

SI_API CUresult CUDAAPI cuStreamSetAttribute(CUstream h, CUstreamAttrID id, const CUstreamAttrValue *v)
{
    return si_stream_attr_call(h, id, (CUstreamAttrValue *)v, true, false);
}

SI_API CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID id, const CUstreamAttrValue *v)
{
    return si_stream_attr_call(h, id, (CUstreamAttrValue *)v, true, true);
}

static CUresult si_stream_get_ctx2(CUstream h, CUcontext *pCtx, CUgreenCtx *pGreenCtx, bool ptsz)
{
    si_stream *s = NULL;
    CUresult rc = si_stream_query_arg(h, ptsz, &s);
    if (rc)
        return rc;
    if (!pCtx && !pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    if (pCtx)
        *pCtx = (CUcontext)s->ctx;
    if (pGreenCtx)
        *pGreenCtx = NULL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    si_enter();
    CUresult rc = si_stream_get_ctx2(hStream, pCtx, pGreenCtx, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx,
                                               CUgreenCtx *pGreenCtx)
{
    si_enter();
    CUresult rc = si_stream_get_ctx2(hStream, pCtx, pGreenCtx, true);
    si_leave();
    return rc;
}

static CUresult si_add_host_op(CUstream h, bool ptsz, si_op *op)
{
    si_stream *s = NULL;
    CUresult rc = si_resolve_stream(h, ptsz, &s);
    if (rc) {
        si_op_free(op);
        return rc;
    }
    si_submit(s, op);
    return CUDA_SUCCESS;
}

static CUresult si_stream_add_callback(CUstream h, CUstreamCallback cb, void *user,
                                       unsigned int flags, bool ptsz)
{
    if (!cb || flags != 0)
        return si_check_init() ? si_check_init() : CUDA_ERROR_INVALID_VALUE;
    si_op *op = si_op_new(SI_OP_CALLBACK);
    op->u.callback.fn = cb;
    op->u.callback.handle = h;
    op->u.callback.user = user;
    return si_add_host_op(h, ptsz, op);
}

static CUresult si_launch_host_func(CUstream h, CUhostFn fn, void *user, bool ptsz)
{
    if (!fn)
        return si_check_init() ? si_check_init() : CUDA_ERROR_INVALID_VALUE;
    si_op *op = si_op_new(SI_OP_HOSTFN);
    op->u.hostfn.fn = fn;
    op->u.hostfn.user = user;
    return si_add_host_op(h, ptsz, op);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                     unsigned int flags)
{
    si_enter();
    CUresult rc = si_stream_add_callback(hStream, callback, userData, flags, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                                 void *userData, unsigned int flags)
{
    si_enter();
    CUresult rc = si_stream_add_callback(hStream, callback, userData, flags, true);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    si_enter();
    CUresult rc = si_launch_host_func(hStream, fn, userData, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    si_enter();
    CUresult rc = si_launch_host_func(hStream, fn, userData, true);
    si_leave();
    return rc;
}

/* ------------------------------------------------------------------ */
/* events                                                              */

#define SI_EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    si_enter();
    si_ctx *c = NULL;
    CUresult rc = si_get_ctx(&c);
    if (!rc && (!phEvent || (Flags & ~SI_EVENT_FLAGS) ||
                ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (!rc) {
        si_event *e = si_xcalloc(1, sizeof(*e));
        e->id = si_next_id();
        e->ctx = c;
        e->flags = Flags;
        e->next_all = si_g.event_list;
        si_g.event_list = e;
        si_hset_add(&si_g.events, e);
        si_book_take(c, &e->book);
        *phEvent = (CUevent)e;
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    si_enter();
    CUresult rc = si_check_init();
    si_event *e = (si_event *)hEvent;
    if (!rc && !si_hset_has(&si_g.events, e))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        si_hset_del(&si_g.events, e);
        for (si_event **pp = &si_g.event_list; *pp; pp = &(*pp)->next_all)
            if (*pp == e) {
                *pp = e->next_all;
                break;
            }
        si_book_give(&e->book);
        free(e);
    }
    si_leave();
    return rc;
}

static CUresult si_event_record(CUevent hEvent, CUstream h, unsigned int flags, bool ptsz)
{
    CUresult rc = si_check_init();
    if (rc)
        return rc;
    si_event *e = (si_event *)hEvent;
    if (!si_hset_has(&si_g.events, e))
        return CUDA_ERROR_INVALID_HANDLE;
    if (flags != CU_EVENT_RECORD_DEFAULT && flags != CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    si_stream *s = NULL;
    rc = si_resolve_stream(h, ptsz, &s);
    if (rc)
        return rc;
    if (s->ctx != e->ctx)
        return CUDA_ERROR_INVALID_HANDLE;
    si_event_record_on(s, e, e->id);
    return CUDA_SUCCESS;
}

void si_event_record_on(si_stream *s, si_event *e, uint64_t id)
{
    if (!si_event_valid(e, id))
        return; /* an event record node whose event was destroyed */
    e->recorded = true;
    e->stream = s;
    e->stream_id = s->id;
    e->has_time = false;
    e->seq = UINT64_MAX;
    si_op *op = si_op_new(SI_OP_EVENT);
    op->u.event.ev = e;
    op->u.event.ev_id = e->id;
    e->seq = si_submit(s, op);
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    si_enter();
    CUresult rc = si_event_record(hEvent, hStream, 0, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    si_enter();
    CUresult rc = si_event_record(hEvent, hStream, 0, true);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    si_enter();
    CUresult rc = si_event_record(hEvent, hStream, flags, false);
    si_leave();
    return rc;
}

SI_API CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                                    unsigned int flags)
{
    si_enter();
    CUresult rc = si_event_record(hEvent, hStream, flags, true);
    si_leave();
    return rc;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    si_enter();
    CUresult rc = si_check_init();
    si_event *e = (si_event *)hEvent;
    if (!rc && !si_hset_has(&si_g.events, e))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && si_g.sticky)
        rc = si_g.sticky;
    if (!rc && !si_event_complete(e))
        rc = CUDA_ERROR_NOT_READY;
    si_leave();
    return rc;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    si_enter();
    CUresult rc = si_check_init();
    si_event *e = (si_event *)hEvent;
    if (!rc && !si_hset_has(&si_g.events, e))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && si_in_callback)
        rc = CUDA_ERROR_NOT_PERMITTED;
    if (!rc) {
        uint64_t id = e->id;
        si_ctx *c = e->ctx;
        while (si_event_valid(e, id) && !si_event_complete(e))
            si_wait_done();
        if (si_ctx_valid(c)) {
            si_flush_printf(c);
            rc = si_g.sticky;
        }
    }
    si_leave();
    return rc;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    si_enter();
    CUresult rc = si_check_init();
    si_event *a = (si_event *)hStart, *b = (si_event *)hEnd;
    /* driver 580 answers a NULL output with CUDA_ERROR_INVALID_HANDLE too */
    if (!rc && (!pMilliseconds || !si_hset_has(&si_g.events, a) ||
                !si_hset_has(&si_g.events, b)))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && si_g.sticky)
        rc = si_g.sticky;
    if (!rc && ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && (!a->recorded || !b->recorded))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc && (!si_event_complete(a) || !si_event_complete(b)))
        rc = CUDA_ERROR_NOT_READY;
    if (!rc && (!a->has_time || !b->has_time))
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (!rc) {
        double ms = ((double)b->time_ns - (double)a->time_ns) / 1e6;
        *pMilliseconds = (float)ms;
    }
    si_leave();
    return rc;
}
