/* migrate_switch.c - the switch of a live migration: after B holds a
 * checked copy, the client leaves A for B (docs/architecture.md, 9.17,
 * "The switch"; protocol.h, "Migration").
 *
 * A hands B, over the migration connection, what a resume needs: every
 * frame it sent that the client has not acknowledged (the reply of a
 * client's scuda_migrate among them: it is numbered and kept, never
 * written here), the resume secret, and both frame counts. B adopts
 * them, answers "ready" and waits for the client as after a broken
 * connection. A then sends the client a scuda_moved notice, unnumbered,
 * as its last frame, and reads nothing more from it: what the client sent
 * after the call A last read, it sends again to B, which runs it once.
 * A exits when B says the client resumed there. A client that cannot
 * reach B comes back to A with the same resume, and A takes the session
 * back (B's process ends when A closes the migration connection). */
#define _GNU_SOURCE
#include "migrate_switch.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "migrate_preload.h"
#include "migrate_state.h"
#include "bulk.h"
#include "resume.h"
#include "session.h"
#include "snapshot_keep.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/transport.h"

/* B adopts a few frames and a secret: it answers at once. */
#define READY_TIMEOUT_MS 10000
/* How often the waiting side looks at the other connection. */
#define WAIT_SLICE_MS 50
/* A parked copy also lends its memory to the next snapshot between its
 * waits (snapshot_keep.h), while the application is paused: shorter. */
#define PARK_SLICE_MS 5

/* ---- on A ------------------------------------------------------------------- */

static struct {
    int pending;
    int fd;             /* the migration connection to B */
    char to[256];
    uint32_t b_pid;
    uint64_t reply_no;  /* the kept reply of a client's scuda_migrate; 0: an operator's move */
    uint32_t reply_seq;
    uint64_t t0_ns, notice_ns;
    struct msg_scuda_migrate_rep rep;
    char outcome[MIGRATE_WHY_MAX + 256];
} sw = {.fd = -1};

int migrate_switch_pending(void) { return sw.pending; }
const char *migrate_switch_outcome(void) { return sw.outcome; }

/* The reply frame of a client's scuda_migrate, into b. */
static void reply_frame(wire_buf *b, uint32_t seq, const struct msg_scuda_migrate_rep *rep)
{
    wire_buf out;
    wb_init(&out);
    msg_scuda_migrate_rep_put(&out, rep);
    struct frame_header h = {.length = (uint32_t)(4 + out.len), .op = OP_scuda_migrate, .flags = FRAME_REPLY,
                             .seq = seq};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    wb_init(b);
    wb_put_raw(b, hdr, sizeof hdr);
    wb_put_u32(b, CUDA_SUCCESS);
    wb_put_raw(b, out.data, out.len);
    wb_free(&out);
}

struct send_ctx {
    int fd;
    uint32_t seq;
};

static int send_kept(void *arg, uint64_t no, const void *bytes, size_t len)
{
    struct send_ctx *x = arg;
    struct msg_migrate_item it = {.kind = MIG_KEPT, .a = no, .data = bytes, .data_len = len};
    return migrate_send_item(x->fd, &it, x->seq++);
}

int migrate_hand_over_item(int fd, const struct msg_migrate_item *it, uint32_t seq, const char *word,
                           const char *peer, const char *to_do, char *why, size_t wl)
{
    if (migrate_send_item(fd, it, seq) != 0) {
        snprintf(why, wl, "%s went away before it took the session's connection state", peer);
        return -1;
    }
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_verdict v;
    void *payload = NULL;
    int rc = -1;
    if (migrate_read_verdict(fd, READY_TIMEOUT_MS, &a, &v, &payload) != 0)
        snprintf(why, wl, "%s did not say it would %s (within %d s)", peer, to_do, READY_TIMEOUT_MS / 1000);
    else if (v.result != CUDA_SUCCESS || !v.why || strcmp(v.why, word) != 0)
        snprintf(why, wl, "%s cannot %s: %.300s", peer, to_do, v.why ? v.why : "(no reason)");
    else
        rc = 0;
    free(payload);
    msg_arena_free(&a);
    return rc;
}

/* Send B the resume state and read its "ready". write_lock held. */
static int hand_over_locked(int fd, char *why, size_t wl)
{
    struct send_ctx x = {.fd = fd, .seq = 1u << 30};
    struct msg_migrate_item sw_item = {.kind = MIG_SWITCH, .a = resume_received(), .b = resume_sent_locked(),
                                       .data = resume_secret(), .data_len = RESUME_SECRET_LEN};
    if (resume_each_kept(send_kept, &x) != 0) {
        snprintf(why, wl, "the other server went away before it took the session's connection state");
        return -1;
    }
    return migrate_hand_over_item(fd, &sw_item, x.seq, "ready", "the other server", "take the client", why, wl);
}

static int send_notice(struct session *s)
{
    wire_buf b;
    wb_init(&b);
    struct msg_scuda_moved_req m = {.to = sw.to, .pid = sw.b_pid, .hold_ns = sw.rep.hold_ns,
                                    .replay_ns = sw.rep.replay_ns, .copy_ns = sw.rep.copy_ns,
                                    .bytes = sw.rep.bytes, .total_ns = now_ns() - sw.t0_ns};
    msg_scuda_moved_req_put(&b, &m);
    struct frame_header h = {.length = (uint32_t)b.len, .op = OP_scuda_moved};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[2] = {{hdr, sizeof hdr}, {b.data, b.len}};
    int rc = io_writev_full(s->fd, iov, 2); /* not numbered: B numbers on from our count */
    wb_free(&b);
    return rc;
}

int migrate_switch_out(struct session *s, int fd, const char *to, uint32_t b_pid, struct srv_call *c,
                       struct msg_scuda_migrate_rep *rep, uint64_t t0_ns, char *why, size_t wl)
{
    snprintf(sw.to, sizeof sw.to, "%s", to);
    sw.b_pid = b_pid;
    sw.t0_ns = t0_ns;
    sw.rep = *rep;
    sw.rep.moved = 1;
    sw.rep.why = "";
    sw.reply_no = 0;
    /* Nothing numbered goes out while the state is handed over: B numbers
     * on from our count. */
    pthread_mutex_lock(&s->write_lock);
    if (c) {
        wire_buf frame;
        reply_frame(&frame, c->seq, &sw.rep);
        resume_keep_locked(frame.data, frame.len);
        sw.reply_no = resume_sent_locked();
        sw.reply_seq = c->seq;
        wb_free(&frame);
    }
    int rc = hand_over_locked(fd, why, wl);
    if (rc == 0 && send_notice(s) != 0) {
        snprintf(why, wl, "the client's connection failed as the notice went out");
        rc = -1;
    }
    if (rc != 0 && sw.reply_no) resume_drop_newest_locked(sw.reply_no); /* the call answers here, as before */
    pthread_mutex_unlock(&s->write_lock);
    if (rc != 0) return -1;
    /* A copy announced after the hold waits on its bulk connections and
     * would never read the notice: its connections end, and the client
     * copies again over the main connection, on B. */
    char bulk_why[200];
    snprintf(bulk_why, sizeof bulk_why, "the session moved to %.100s", to);
    bulk_end(bulk_why);
    sw.fd = fd;
    sw.pending = 1;
    sw.notice_ns = now_ns();
    LOG_INFO("session %d: told the client to resume on %s (session %u there); reading nothing more from it",
             (int)getpid(), to, b_pid);
    return 0;
}

/* The client came back here: the session stays. A client's scuda_migrate
 * then says it did not move (its kept reply is replaced: it was never
 * written here; B, which had it too, goes away). */
static void take_back(struct session *s)
{
    if (!sw.reply_no) return;
    pthread_mutex_lock(&s->write_lock);
    if (resume_drop_newest_locked(sw.reply_no) == 0) {
        struct msg_scuda_migrate_rep rep = sw.rep;
        rep.moved = 0;
        rep.why = "the client did not resume on the other server; the session stayed where it was";
        wire_buf frame;
        reply_frame(&frame, sw.reply_seq, &rep);
        resume_keep_locked(frame.data, frame.len);
        wb_free(&frame);
    }
    pthread_mutex_unlock(&s->write_lock);
}

/* B's word on the migration connection: 1 the client resumed there, 0 B
 * gave up (closed, or said why). */
static int b_word(void)
{
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_verdict v;
    void *payload = NULL;
    int resumed = migrate_read_verdict(sw.fd, READY_TIMEOUT_MS, &a, &v, &payload) == 0 &&
                  v.result == CUDA_SUCCESS && v.why && strcmp(v.why, "resumed") == 0;
    free(payload);
    msg_arena_free(&a);
    return resumed;
}

int migrate_switch_wait(struct session *s)
{
    sw.pending = 0;
    uint64_t deadline = sw.notice_ns + (uint64_t)s->opt->resume_within_s * 1000000000u;
    for (;;) {
        uint64_t client_has;
        int fd = resume_take(s, WAIT_SLICE_MS, &client_has);
        if (fd >= 0) {
            LOG_WARN("session %d: the client came back instead of resuming on %s: the session goes on here",
                     (int)getpid(), sw.to);
            if (sw.fd >= 0) io_close(sw.fd); /* B's copy goes */
            sw.fd = -1;
            take_back(s);
            snprintf(sw.outcome, sizeof sw.outcome, "not moved: the client did not resume on %s and came back; "
                     "the session goes on here", sw.to);
            return resume_install(s, fd, client_has);
        }
        if (sw.fd >= 0 && io_wait_input(sw.fd, 0) != 0) {
            if (b_word()) {
                uint64_t ms = (now_ns() - sw.t0_ns) / 1000000u;
                LOG_INFO("session %d moved to %s (session %u there) in %llu ms: hold %.1f ms, replay %.1f ms, "
                         "%.1f MiB memory in %.1f ms; the client resumed there, this process ends",
                         (int)getpid(), sw.to, sw.b_pid, (unsigned long long)ms, sw.rep.hold_ns / 1e6,
                         sw.rep.replay_ns / 1e6, sw.rep.bytes / 1048576.0, sw.rep.copy_ns / 1e6);
                snprintf(sw.outcome, sizeof sw.outcome, "moved to %s (session %u) in %llu ms: hold %.1f ms, "
                         "replay %.1f ms, %.1f MiB memory in %.1f ms", sw.to, sw.b_pid, (unsigned long long)ms,
                         sw.rep.hold_ns / 1e6, sw.rep.replay_ns / 1e6, sw.rep.bytes / 1048576.0,
                         sw.rep.copy_ns / 1e6);
                io_close(sw.fd);
                return -1;
            }
            LOG_WARN("session %d: %s gave the session up before the client resumed there; waiting for the "
                     "client to come back", (int)getpid(), sw.to);
            io_close(sw.fd);
            sw.fd = -1;
        }
        if (now_ns() >= deadline) {
            LOG_WARN("session %d: the client resumed neither on %s nor here within %d s (--resume-within): "
                     "ending the session", (int)getpid(), sw.to, s->opt->resume_within_s);
            snprintf(sw.outcome, sizeof sw.outcome, "lost: the client resumed neither on %s nor here", sw.to);
            if (sw.fd >= 0) io_close(sw.fd);
            return -1;
        }
    }
}

/* ---- on B ------------------------------------------------------------------- */

static int from_a = -1; /* the migration connection, while the client is awaited */
static int parked;      /* a snapshot (MIG_PARK): wait for a failover, not a switch */

int migrate_switch_in(struct session *s, char *why, size_t wl)
{
    int rc = 0;
    for (;;) {
        void *payload = NULL;
        struct msg_arena a;
        msg_arena_init(&a);
        struct msg_migrate_item it;
        int done = 0;
        if (migrate_read_item(s->fd, READY_TIMEOUT_MS, &payload, &a, &it, why, wl) != 0) {
            rc = -1;
        } else if (it.kind == MIG_KEPT && it.data && it.data_len >= FRAME_HEADER_LEN) {
            if (resume_adopt_kept(it.a, it.data, (size_t)it.data_len) != 0) {
                snprintf(why, wl, "kept frame %llu is out of order or memory ran out", (unsigned long long)it.a);
                rc = -1;
            }
        } else if ((it.kind == MIG_SWITCH || it.kind == MIG_PARK) && it.data && it.data_len == RESUME_SECRET_LEN) {
            parked = it.kind == MIG_PARK;
            if (resume_adopt(it.data, it.a, it.b) != 0) {
                snprintf(why, wl, "the frame counts disagree with the kept frames");
                rc = -1;
            }
            done = 1;
        } else {
            snprintf(why, wl, "an item of kind %u where the connection state was expected", it.kind);
            rc = -1;
        }
        free(payload);
        msg_arena_free(&a);
        if (rc != 0 || done) break;
    }
    if (rc == 0 && s->opt->resume_within_s <= 0) {
        snprintf(why, wl, "this server takes no resumes (--resume-within 0)");
        rc = -1;
    }
    struct msg_migrate_verdict v = {.result = rc == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE,
                                    .why = rc == 0 ? (parked ? "parked" : "ready") : why};
    migrate_send_verdict(s->fd, &v);
    if (rc != 0) return -1;
    from_a = s->fd;
    if (parked) snapshot_keep_listen(); /* the next snapshot may keep our bytes */
    /* Until the client resumes, no connection is the client's: writes
     * (a pong) go nowhere. */
    s->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    return 0;
}

/* The exporter's word on a parked copy: "discard" (it took a newer one,
 * or its session ended) ends this process; its end without a word means
 * it died, and the copy waits --resume-within for the client from then. */
static void park_heard_from_a(struct session *s, uint64_t *deadline)
{
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_verdict v;
    void *payload = NULL;
    int word = migrate_read_verdict(from_a, 1000, &a, &v, &payload) == 0;
    free(payload);
    msg_arena_free(&a);
    if (word) {
        LOG_INFO("session %d: the exporting session discarded this snapshot", (int)getpid());
        _exit(0);
    }
    io_close(from_a);
    from_a = -1;
    *deadline = now_ns() + (uint64_t)s->opt->resume_within_s * 1000000000u;
    LOG_WARN("session %d: the exporting server went away: the parked snapshot waits up to %d s for its client to "
             "fail over here (--resume-within)", (int)getpid(), s->opt->resume_within_s);
}

/* A snapshot's copy: parked until the client fails over here (a resume),
 * the exporter discards it, or the exporter died and --resume-within ran out. */
static void park_await(struct session *s)
{
    uint64_t t0 = now_ns(), deadline = UINT64_MAX;
    LOG_INFO("session %d: snapshot parked; waiting for its client to fail over here", (int)getpid());
    for (;;) {
        uint64_t client_has;
        int fd = resume_take(s, PARK_SLICE_MS, &client_has);
        if (fd >= 0) {
            snapshot_keep_close();
            if (resume_install(s, fd, client_has) != 0) _exit(1);
            if (from_a >= 0) io_close(from_a);
            from_a = -1;
            LOG_WARN("session %d: the client failed over to this standby %.0f ms after the snapshot; it replays "
                     "what it sent since", (int)getpid(), (now_ns() - t0) / 1e6);
            return;
        }
        if (from_a >= 0 && io_wait_input(from_a, 0) != 0) park_heard_from_a(s, &deadline);
        snapshot_keep_serve();
        if (now_ns() >= deadline) {
            LOG_WARN("session %d: no client failed over here within %d s (--resume-within): discarding the parked "
                     "snapshot", (int)getpid(), s->opt->resume_within_s);
            _exit(0);
        }
    }
}

void migrate_switch_in_await(struct session *s)
{
    if (parked) {
        park_await(s);
        return;
    }
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)s->opt->resume_within_s * 1000000000u;
    LOG_INFO("session %d: waiting up to %d s for the client to resume here (--resume-within)", (int)getpid(),
             s->opt->resume_within_s);
    for (;;) {
        uint64_t client_has;
        int fd = resume_take(s, WAIT_SLICE_MS, &client_has);
        if (fd >= 0) {
            if (resume_install(s, fd, client_has) != 0) _exit(1);
            struct msg_migrate_verdict v = {.result = CUDA_SUCCESS, .why = "resumed"};
            migrate_send_verdict(from_a, &v);
            io_close(from_a);
            from_a = -1;
            LOG_INFO("session %d: the client resumed here %.0f ms after the switch: the session moved here",
                     (int)getpid(), (now_ns() - t0) / 1e6);
            return;
        }
        if (io_wait_input(from_a, 0) != 0) {
            LOG_WARN("session %d: the exporting server took the session back (the client resumed there); "
                     "discarding this copy", (int)getpid());
            _exit(0);
        }
        if (now_ns() >= deadline) {
            LOG_WARN("session %d: the client did not resume here within %d s (--resume-within): discarding this "
                     "copy", (int)getpid(), s->opt->resume_within_s);
            _exit(0);
        }
    }
}

/* ---- an operator's request (control.c, bulk_join.c) ------------------------------ */

static struct {
    pthread_mutex_t lock;
    _Atomic int waiting;
    char to[256];
    int fd; /* where the outcome goes; -1: none */
} req = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

static void answer(int fd, const char *line)
{
    if (fd < 0) return;
    dprintf(fd, "%s\n", line);
    close(fd);
}

void migrate_request_post(const char *to, int reply_fd)
{
    pthread_mutex_lock(&req.lock);
    int busy = atomic_load(&req.waiting) || req.fd >= 0;
    if (!busy) {
        snprintf(req.to, sizeof req.to, "%s", to);
        req.fd = reply_fd;
        atomic_store(&req.waiting, 1);
    }
    pthread_mutex_unlock(&req.lock);
    if (busy) answer(reply_fd, "not moved: another move of this session is under way; try again when it ended");
}

int migrate_request_waiting(void) { return atomic_load(&req.waiting); }

void migrate_request_repost(void) { atomic_store(&req.waiting, 1); }

/* The first turn of a move that can go: B loads the session's images
 * while it runs on (migrate_preload.h). 1 when that started; the second
 * turn (migrate_request_repost) holds. */
static int load_ahead_first(const char *to)
{
    char why[MIGRATE_WHY_MAX] = "";
    if (migrate_preload_busy()) return 0;
    migrate_blockers_explain(why, sizeof why);
    if (why[0] || migrate_preload_start(to, PRELOAD_FOR_MOVE) != 0) return 0; /* refused at once, or no thread: as before */
    LOG_INFO("session %d: preparing to move to %s (scuda migrate): it loads the session's images while the "
             "session runs on", (int)getpid(), to);
    return 1;
}

int migrate_request_run(struct session *s)
{
    char to[256];
    pthread_mutex_lock(&req.lock);
    atomic_store(&req.waiting, 0);
    snprintf(to, sizeof to, "%s", req.to);
    pthread_mutex_unlock(&req.lock);
    if (load_ahead_first(to)) return 0; /* the request comes back when B loaded the images */
    LOG_INFO("session %d: asked to move to %s (scuda migrate)", (int)getpid(), to);
    struct msg_scuda_migrate_rep rep;
    if (migrate_session(s, to, NULL, &rep)) return 1; /* answered when the client has moved, or not */
    char line[MIGRATE_WHY_MAX + 320];
    /* "refused by": another server might take it (a drain tries the next
     * peer); "cannot move": no server can, now. */
    if (migrate_failed_at_peer()) snprintf(line, sizeof line, "refused by %s: %s", to, rep.why ? rep.why : "");
    else snprintf(line, sizeof line, "cannot move: %s", rep.why ? rep.why : "(no reason)");
    migrate_request_answer(line);
    return 0;
}

void migrate_request_answer(const char *line)
{
    pthread_mutex_lock(&req.lock);
    int fd = req.fd;
    req.fd = -1;
    pthread_mutex_unlock(&req.lock);
    answer(fd, line);
}
