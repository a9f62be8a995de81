/* snapshot.c - a snapshot for failover: the session's state exported to a
 * standby server, which parks it (docs/architecture.md, 9.24 Failover to a
 * standby; op scuda_snapshot_ahead).
 *
 * The export is a move's (migrate_copy_out: the same hold, the same items,
 * the same digest check) without its switch: the standby gets the resume
 * secret and both frame counts as they stand at this call (MIG_PARK), and
 * keeps the rebuilt session waiting for a resume instead of serving; the
 * client goes on here and journals what it sends from now on. If this
 * server dies, the client resumes the parked copy and replays the journal.
 *
 * The migration connection stays open while a copy is parked: a word on
 * it ("discard") frees the copy, its end without a word means this server
 * died, and the copy then waits --resume-within for the client. A copy is
 * discarded when the next snapshot begins (the client has this one's reply
 * by then, so it no longer needs the one before) and when the session ends
 * normally: at most two per session, and two only while a snapshot runs.
 *
 * The memory goes after the hold when it can be staged on the GPU
 * (migrate_stage.h): the dispatch thread holds the session, sends the
 * items, copies the memory aside and serves on; one thread streams the
 * staged bytes, parks the copy with the frame counts of the hold and
 * sends the request's reply itself (session_reply_late). While it runs a
 * new request is answered "ahead" at once and a move is refused. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "migrate_preload.h"
#include "migrate_state.h"
#include "migrate_switch.h"
#include "resume.h"
#include "session.h"
#include "session_stats.h"
#include "snapshot.h"
#include "snapshot_dirty.h"
#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/transport.h"
#include "../common/clock.h"


/* The standby adopts a secret and two counts: it answers at once. */
#define READY_TIMEOUT_MS 10000

static int parked_fd = -1; /* the connection to the standby holding the newest copy */
static char parked_to[256];  /* that standby, as the client named it */
static uint32_t parked_pid;  /* the copy's session there */
static struct migrate_range *parked_ranges; /* the device memory it holds */
static long nparked_ranges;
/* The copy before it, discarded when the next snapshot begins. */
static int previous_fd = -1;

/* The thread streaming a snapshot's memory after its hold. The statics
 * above are its while `streaming` is set; the dispatch thread touches
 * them only once it saw it clear (and joins the thread). */
static struct {
    pthread_t thread;
    int started;          /* dispatch thread: a thread to join */
    _Atomic int streaming;
    _Atomic int stop;     /* the session ends: stop at the next chunk */
} bg;

int snapshot_streaming(void) { return atomic_load(&bg.streaming); }

/* The streaming thread is done (or never ran): join it. */
static void reap(void)
{
    if (!bg.started) return;
    pthread_join(bg.thread, NULL);
    bg.started = 0;
}

static void discard(int fd)
{
    if (fd < 0) return;
    struct msg_migrate_verdict v = {.result = CUDA_SUCCESS, .why = "discard"};
    migrate_send_verdict(fd, &v);
    io_close(fd);
}

void snapshot_discard_all(void)
{
    atomic_store(&bg.stop, 1);
    reap();
    discard(previous_fd);
    previous_fd = -1;
    discard(parked_fd);
    parked_fd = -1;
    migrate_preload_abandon(); /* a snapshot's loading ahead the client never came back for */
}

/* The copy parked on `to` whose bytes this snapshot can keep: its pid,
 * or 0 when it is on another standby (or there is none). */
static uint32_t keepable(const char *to)
{
    return parked_fd >= 0 && strcmp(parked_to, to) == 0 ? parked_pid : 0;
}

/* Loading ahead (migrate_preload.h): the standby replays the session's
 * images while the session runs on, so that the hold replays only what
 * came after. The first request starts it and is answered "ahead"; the
 * client asks again at a later synchronizing call, which takes what the
 * standby loaded once it is done. Returns 1 when this request is to be
 * answered "ahead", 0 when the copy goes now (with *pre, fd -1 when
 * nothing was loaded ahead for it). A request at the journal's bound
 * (`now`) copies at once. */
static int loading_ahead(const char *to, int now, struct migrate_preloaded *pre)
{
    *pre = (struct migrate_preloaded){.fd = -1};
    if (migrate_preload_busy()) {
        if (migrate_preload_purpose() != PRELOAD_FOR_SNAPSHOT) return 0; /* a move's: the copy says so */
        if (!now && !migrate_preload_done()) return 1;
        migrate_preload_take(to, pre); /* another standby's (the pool moved on): closed */
        return 0;
    }
    if (now || !migrate_preload_worthwhile()) return 0;
    return migrate_preload_start(to, PRELOAD_FOR_SNAPSHOT) == 0;
}

/* A copy to `to`, keeping the parked copy's ranges that did not change.
 * A copy that kept bytes and failed (the parked copy gone, or a byte that
 * did change: the digests differ) is taken again in full. With *later
 * set the memory follows after the hold (stream_main). */
static int copy_out(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *pid,
                    struct msg_scuda_migrate_rep *mig, uint64_t *kept, unsigned *ahead, char *why, size_t wl,
                    struct migrate_later **later)
{
    static struct snapshot_written written; /* large: not on the stack; read by the streaming thread */
    snapshot_dirty_take(&written);
    migrate_out_keep_from(keepable(to), &written, parked_ranges, nparked_ranges);
    int fd = migrate_copy_out(s, to, pre, pid, mig, ahead, why, wl, later);
    *kept = migrate_out_kept();
    migrate_out_keep_from(0, NULL, NULL, 0);
    if (fd < 0 && *kept) {
        LOG_WARN("session %d: the snapshot that kept the parked copy's memory failed (%s); taking it in full",
                 (int)getpid(), why);
        *kept = 0;
        struct migrate_preloaded none = {.fd = -1};
        fd = migrate_copy_out(s, to, &none, pid, mig, ahead, why, wl, later);
    }
    return fd;
}

/* The ranges the last copy holds: v (malloc'd, taken) when it parked,
 * else dropped. */
static void remember_ranges(int parked, struct migrate_range *v, long n)
{
    if (!parked) {
        free(v);
        return;
    }
    free(parked_ranges);
    parked_ranges = v;
    nparked_ranges = n;
}

/* Hand the standby the connection state as it stood at the hold: the
 * resume secret, the client's frames run by then and ours numbered by
 * then. The standby needs none of our kept frames: the client, which has
 * every one of them when it gets this call's reply, resumes there
 * claiming exactly `sent`. Returns 0 when it said it parked the copy. */
static int park(int fd, uint64_t received, uint64_t sent, char *why, size_t wl)
{
    struct msg_migrate_item it = {.kind = MIG_PARK, .a = received, .b = sent, .data = resume_secret(),
                                  .data_len = RESUME_SECRET_LEN};
    return migrate_hand_over_item(fd, &it, 1u << 30, "parked", "the standby", "park the copy", why, wl);
}

/* The frame counts as they stand (a copy taken on the dispatch thread:
 * they stand still while it runs). */
static void counts_now(struct session *s, uint64_t *received, uint64_t *sent)
{
    pthread_mutex_lock(&s->write_lock);
    *received = resume_received();
    *sent = resume_sent_locked();
    pthread_mutex_unlock(&s->write_lock);
}

/* Parked: fd holds the newest copy, the one before it goes at the next
 * snapshot. */
static void parked_on(int fd, const char *to, uint32_t pid, uint64_t bytes)
{
    previous_fd = parked_fd;
    parked_fd = fd;
    snprintf(parked_to, sizeof parked_to, "%s", to);
    parked_pid = pid;
    session_stats_snapshot(bytes); /* `scuda ps`: its age and size */
}

/* The outcome of a snapshot, the same whether its memory went during the
 * hold or after it: the parked copy and the ranges it holds, with the
 * reply's fields; or, on a failure, the copy before stays the parked one
 * and nothing is kept from it next time. The log lines are the caller's. */
static void settle(int ok, int fd, const char *to, uint32_t pid, uint64_t bytes, struct migrate_range *v, long n,
                   uint64_t received, uint64_t sent, unsigned ahead, struct msg_scuda_snapshot_ahead_rep *rep)
{
    if (ok) {
        parked_on(fd, to, pid, bytes);
        remember_ranges(1, v, n);
        rep->parked = 1, rep->pid = pid, rep->images_ahead = ahead;
        rep->client_frames = received, rep->server_frames = sent;
        return;
    }
    snapshot_dirty_failed();
    remember_ranges(0, v, n);
    if (fd >= 0) io_close(fd);
}

/* ---- the memory after the hold ------------------------------------------------ */

struct stream_job {
    struct session *s;
    struct migrate_later *l;
    char to[256];
    uint32_t pid;
    unsigned ahead;
    uint16_t op; /* the request's, for the late reply */
    uint32_t seq;
};

/* The reply goes once the thread is no longer streaming: the client may
 * ask for the next snapshot the moment it has it. */
static void reply_late(struct stream_job *j, const struct msg_scuda_snapshot_ahead_rep *rep)
{
    wire_buf out;
    wb_init(&out);
    msg_scuda_snapshot_ahead_rep_put(&out, rep);
    struct stream_job mine = *j;
    free(j);
    atomic_store(&bg.streaming, 0);
    session_reply_late(mine.s, mine.op, mine.seq, &out);
    wb_free(&out);
}

static void *stream_main(void *arg)
{
    struct stream_job *j = arg;
    struct migrate_later *l = j->l;
    static char why[MIGRATE_WHY_MAX + 64];
    why[0] = '\0';
    struct msg_scuda_migrate_rep mig;
    struct msg_scuda_snapshot_ahead_rep rep = {0};
    uint64_t kept = 0, t0 = now_ms();
    int ok = migrate_later_finish(l, &bg.stop, &mig, &kept, why, sizeof why) == 0 &&
             park(l->fd, l->received, l->sent, why, sizeof why) == 0;
    struct migrate_range *v = NULL;
    long n = migrate_later_ranges(l, &v);
    const struct migrate_later at = *l; /* the numbers, for the reply and the log */
    migrate_later_free(l); /* the staging goes before the reply: the client may ask again at once */
    rep.hold_ns = at.hold_ns, rep.replay_ns = mig.replay_ns, rep.copy_ns = mig.copy_ns, rep.bytes = mig.bytes;
    settle(ok, at.fd, j->to, j->pid, mig.bytes + kept, v, n, at.received, at.sent, j->ahead, &rep);
    if (ok) {
        LOG_INFO("session %d: snapshot parked on %s (session %u there): the session was held %.1f ms (hold+sync %.1f "
                 "ms, %.1f MiB staged in %.1f ms); replay %.1f ms (%u images loaded ahead); %.1f MiB memory in %.1f "
                 "ms, %.1f MiB more kept from the copy parked there before; memory streamed after the hold (%llu ms)",
                 (int)getpid(), j->to, j->pid, at.held_ns / 1e6, at.hold_ns / 1e6, at.staged / 1048576.0,
                 at.stage_ns / 1e6, mig.replay_ns / 1e6, j->ahead, mig.bytes / 1048576.0, mig.copy_ns / 1e6,
                 kept / 1048576.0, (unsigned long long)(now_ms() - t0));
    } else {
        /* One that kept bytes is asked again soon, and copies in full. */
        rep.ahead = kept > 0 && !atomic_load(&bg.stop);
        if (rep.ahead)
            LOG_WARN("session %d: the snapshot that kept the parked copy's memory failed (%s); the next one, asked "
                     "for at once, copies in full", (int)getpid(), why);
        else
            LOG_WARN("session %d: no snapshot on %s: %s", (int)getpid(), j->to, why);
    }
    rep.why = why;
    reply_late(j, &rep);
    return NULL;
}

/* Start the streaming thread for l; the reply is its. On no thread, it
 * runs here. */
static void stream_after_hold(srv_call *c, struct migrate_later *l, const char *to, uint32_t pid, unsigned ahead)
{
    struct stream_job *j = calloc(1, sizeof *j);
    if (!j) { /* no memory for a job: the snapshot fails, the last one stands */
        io_close(l->fd);
        migrate_later_free(l);
        snapshot_dirty_failed();
        struct msg_scuda_snapshot_ahead_rep rep = {.why = "out of host memory for the snapshot"};
        msg_scuda_snapshot_ahead_rep_put(&c->out, &rep);
        return;
    }
    *j = (struct stream_job){.s = c->s, .l = l, .pid = pid, .ahead = ahead, .op = c->op, .seq = c->seq};
    snprintf(j->to, sizeof j->to, "%s", to);
    session_owe_late_reply();
    c->replied = 1;
    atomic_store(&bg.streaming, 1);
    if (pthread_create(&bg.thread, NULL, stream_main, j) == 0) bg.started = 1;
    else stream_main(j);
}

CUresult srv_scuda_snapshot_ahead(srv_call *c)
{
    struct msg_scuda_snapshot_ahead_req m;
    if (msg_scuda_snapshot_ahead_req_get(&c->in, &c->arena, &m) != 0 || !m.to || !m.to[0]) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_snapshot_ahead_rep rep = {0};
    if (snapshot_streaming()) { /* the client asked again before the reply: not this client, or a replay */
        rep.ahead = 1;
        rep.why = "a snapshot is under way";
        msg_scuda_snapshot_ahead_rep_put(&c->out, &rep);
        return CUDA_SUCCESS;
    }
    reap();
    struct migrate_preloaded pre;
    if (loading_ahead(m.to, m.now != 0, &pre)) {
        rep.ahead = 1;
        rep.why = "the standby loads the session's images first";
        msg_scuda_snapshot_ahead_rep_put(&c->out, &rep);
        return CUDA_SUCCESS;
    }
    /* The client has the last snapshot's reply (it asks for one at a time),
     * so the copy before that one is of no use to it any more. */
    discard(previous_fd);
    previous_fd = -1;
    static char why[MIGRATE_WHY_MAX + 64];
    why[0] = '\0';
    struct msg_scuda_migrate_rep mig;
    uint32_t pid = 0;
    uint64_t kept = 0, received = 0, sent = 0;
    unsigned ahead = 0;
    struct migrate_later *later = NULL;
    /* A request at the journal's bound waits for the copy anyway. */
    int fd = copy_out(c->s, m.to, &pre, &pid, &mig, &kept, &ahead, why, sizeof why, m.now ? NULL : &later);
    if (fd >= 0 && later) {
        stream_after_hold(c, later, m.to, pid, ahead);
        return CUDA_SUCCESS;
    }
    counts_now(c->s, &received, &sent);
    struct migrate_range *v = NULL;
    long n = migrate_out_ranges(&v);
    int ok = fd >= 0 && park(fd, received, sent, why, sizeof why) == 0;
    settle(ok, fd, m.to, pid, mig.bytes + kept, v, n, received, sent, ahead, &rep);
    if (ok)
        LOG_INFO("session %d: snapshot parked on %s (session %u there): hold+sync %.1f ms, replay %.1f ms (%u images "
                 "loaded ahead), %.1f MiB memory in %.1f ms, %.1f MiB more kept from the copy parked there before",
                 (int)getpid(), m.to, pid, mig.hold_ns / 1e6, mig.replay_ns / 1e6, ahead, mig.bytes / 1048576.0,
                 mig.copy_ns / 1e6, kept / 1048576.0);
    else
        LOG_WARN("session %d: no snapshot on %s: %s", (int)getpid(), m.to, why);
    rep.why = why;
    rep.hold_ns = mig.hold_ns, rep.replay_ns = mig.replay_ns, rep.copy_ns = mig.copy_ns, rep.bytes = mig.bytes;
    msg_scuda_snapshot_ahead_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* An older client's request (the first layout): its client cannot follow
 * a snapshot that loads ahead or streams, so it gets none, and says so. */
CUresult srv_scuda_snapshot(srv_call *c)
{
    (void)c;
    static int said;
    if (!said) LOG_WARN("session %d: the client asked for a snapshot in an older form; it gets none (upgrade the "
                        "client to the server's version for failover to a standby)", (int)getpid());
    said = 1;
    return CUDA_ERROR_NOT_SUPPORTED;
}
