/* snapshot.c - a snapshot for failover: the session's state exported to a
 * standby server, which parks it (docs/architecture.md, 9.24 Failover to a
 * standby; op scuda_snapshot).
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
 * normally: at most two per session, and two only while a snapshot runs. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The standby adopts a secret and two counts: it answers at once. */
#define READY_TIMEOUT_MS 10000

static int parked_fd = -1; /* the connection to the standby holding the newest copy */
static char parked_to[256];  /* that standby, as the client named it */
static uint32_t parked_pid;  /* the copy's session there */
static struct migrate_range *parked_ranges; /* the device memory it holds */
static long nparked_ranges;

static void discard(int fd)
{
    if (fd < 0) return;
    struct msg_migrate_verdict v = {.result = CUDA_SUCCESS, .why = "discard"};
    migrate_send_verdict(fd, &v);
    io_close(fd);
}

void snapshot_discard_all(void)
{
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
 * did change: the digests differ) is taken again in full. */
static int copy_out(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *pid,
                    struct msg_scuda_migrate_rep *mig, uint64_t *kept, unsigned *ahead, char *why, size_t wl)
{
    static struct snapshot_written written; /* large: not on the stack */
    snapshot_dirty_take(&written);
    migrate_out_keep_from(keepable(to), &written, parked_ranges, nparked_ranges);
    int fd = migrate_copy_out(s, to, pre, pid, mig, ahead, why, wl);
    *kept = migrate_out_kept();
    migrate_out_keep_from(0, NULL, NULL, 0);
    if (fd < 0 && *kept) {
        LOG_WARN("session %d: the snapshot that kept the parked copy's memory failed (%s); taking it in full",
                 (int)getpid(), why);
        *kept = 0;
        struct migrate_preloaded none = {.fd = -1};
        fd = migrate_copy_out(s, to, &none, pid, mig, ahead, why, wl);
    }
    return fd;
}

/* The ranges the last copy holds: the parked copy's now, or dropped. */
static void remember_ranges(int parked)
{
    struct migrate_range *v;
    long n = migrate_out_ranges(&v);
    if (!parked) {
        free(v);
        return;
    }
    free(parked_ranges);
    parked_ranges = v;
    nparked_ranges = n;
}

/* Hand the standby the connection state as it stands: the resume secret,
 * the client's frames run so far and ours numbered so far. The standby
 * needs none of our kept frames: the client, which has every one of them
 * when it gets this call's reply, resumes there claiming exactly `sent`.
 * Returns 0 when it said it parked the copy. */
static int park(struct session *s, int fd, uint64_t *received, uint64_t *sent, char *why, size_t wl)
{
    pthread_mutex_lock(&s->write_lock);
    *received = resume_received();
    *sent = resume_sent_locked();
    pthread_mutex_unlock(&s->write_lock);
    struct msg_migrate_item it = {.kind = MIG_PARK, .a = *received, .b = *sent, .data = resume_secret(),
                                  .data_len = RESUME_SECRET_LEN};
    return migrate_hand_over_item(fd, &it, 1u << 30, "parked", "the standby", "park the copy", why, wl);
}

CUresult srv_scuda_snapshot(srv_call *c)
{
    struct msg_scuda_snapshot_req m;
    if (msg_scuda_snapshot_req_get(&c->in, &c->arena, &m) != 0 || !m.to || !m.to[0]) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_snapshot_rep rep = {0};
    struct migrate_preloaded pre;
    if (loading_ahead(m.to, m.now != 0, &pre)) {
        rep.ahead = 1;
        rep.why = "the standby loads the session's images first";
        msg_scuda_snapshot_rep_put(&c->out, &rep);
        return CUDA_SUCCESS;
    }
    /* The client has the last snapshot's reply (it asks for one at a time),
     * so the copy before that one is of no use to it any more. */
    static int previous_fd = -1;
    discard(previous_fd);
    previous_fd = -1;
    static char why[MIGRATE_WHY_MAX + 64];
    why[0] = '\0';
    struct msg_scuda_migrate_rep mig;
    uint32_t pid = 0;
    uint64_t kept = 0;
    unsigned ahead = 0;
    int fd = copy_out(c->s, m.to, &pre, &pid, &mig, &kept, &ahead, why, sizeof why);
    if (fd >= 0 && park(c->s, fd, &rep.client_frames, &rep.server_frames, why, sizeof why) == 0) {
        previous_fd = parked_fd;
        parked_fd = fd;
        snprintf(parked_to, sizeof parked_to, "%s", m.to);
        parked_pid = pid;
        remember_ranges(1);
        rep.parked = 1;
        rep.pid = pid;
        rep.images_ahead = ahead;
        session_stats_snapshot(mig.bytes + kept); /* `scuda ps`: its age and size */
        LOG_INFO("session %d: snapshot parked on %s (session %u there): hold+sync %.1f ms, replay %.1f ms (%u images "
                 "loaded ahead), %.1f MiB memory in %.1f ms, %.1f MiB more kept from the copy parked there before",
                 (int)getpid(), m.to, pid, mig.hold_ns / 1e6, mig.replay_ns / 1e6, ahead, mig.bytes / 1048576.0,
                 mig.copy_ns / 1e6, kept / 1048576.0);
    } else {
        snapshot_dirty_failed(); /* the parked copy is still the older one */
        remember_ranges(0);
        if (fd >= 0) io_close(fd);
        LOG_WARN("session %d: no snapshot on %s: %s", (int)getpid(), m.to, why);
    }
    rep.why = why;
    rep.hold_ns = mig.hold_ns, rep.replay_ns = mig.replay_ns, rep.copy_ns = mig.copy_ns, rep.bytes = mig.bytes;
    msg_scuda_snapshot_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
