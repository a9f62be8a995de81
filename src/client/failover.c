/* failover.c - see failover.h.
 *
 * Snapshots: at a synchronizing call, once SCUDA_SNAPSHOT_EVERY passed
 * since the last one (and at the first), a thread of ours asks the
 * session for scuda_snapshot_ahead and waits for the reply; the thread that
 * synchronized returns once the request is sent: the session holds
 * itself only for the objects and a copy of the memory on the GPU, and
 * streams the memory while it serves on (SCUDA_SNAPSHOT_WAIT=1: the
 * synchronizing thread waits, as at the journal's bound, where it must).
 * Before the request goes out the send queue starts (or goes on) keeping
 * every frame; the reply says which of our frames the parked copy has
 * run, and the journal is what follows.
 * A failed snapshot keeps the last one and its journal, unless the journal
 * is past SCUDA_JOURNAL_MAX: then there is no standby until the next
 * snapshot that works (logged).
 *
 * Failover: resume.c resumes the parked copy claiming the session frames
 * the copy had numbered, so its replies to the journal number on from
 * there; conn.c hands every reply that no caller waits for (the calls the
 * application already saw) to failover_check_result.
 *
 * The pool: SCUDA_STANDBY may name several standbys (a comma list). The
 * first covers the session; a failover to it makes the next one the
 * standby, and the next synchronizing call takes a fresh snapshot there,
 * so each server of the pool can die in turn. */
#define _GNU_SOURCE
#include "failover.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"
#include "resume.h"
#include "rpc.h"
#include "send_queue.h"
#include "servers.h"
#include "shim.h"
#include "../common/config.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/transport.h"
#include "../common/clock.h"

#define SNAPSHOT_EVERY_DEFAULT_S 10.0
/* While the standby loads the session's images ahead, ask again at a
 * synchronizing call no sooner than this: a round trip, not a wait. */
#define AHEAD_POLL_MS 20
#define JOURNAL_MAX_DEFAULT (256ull << 20)
/* Results kept to check a replay: beyond this, replies go unchecked. */
#define RESULTS_MAX (1u << 20)
/* Standbys in SCUDA_STANDBY's list, and the length of one address. */
#define POOL_MAX 8
#define ADDR_MAX 256

struct result {
    uint32_t seq;
    uint16_t op;
    uint32_t result;
};

static struct {
    pthread_once_t once;
    _Atomic int on;
    char pool[POOL_MAX][ADDR_MAX];
    int npool;
    uint64_t every_ms;
    uint64_t journal_max;
    int wait;         /* SCUDA_SNAPSHOT_WAIT: the synchronizing thread takes the snapshot itself */
    _Atomic int busy; /* a thread takes a snapshot */
    pthread_mutex_t lock;
    /* under lock: */
    int next;        /* pool[next] is the standby; npool when none is left */
    char standby[ADDR_MAX]; /* pool[next], or the last one used */
    char serving[ADDR_MAX]; /* the standby the last failover went to */
    int parked;      /* the standby holds a copy, and our journal follows it */
    uint32_t failovers; /* how many happened: each made its standby the server */
    uint32_t pid;
    uint64_t server_frames;
    uint64_t last_ms;
    uint64_t ahead_until_ms; /* the standby loads ahead: no request before then */
    struct result *results;
    size_t nresults, cap, cursor;
    int results_full;
    uint64_t checked, mismatches, replayed_frames;
    uint32_t reported; /* failovers summed up in the log */
} fo = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static __thread int in_snapshot;


/* A byte count with an optional K, M or G; 0 when malformed. */
static uint64_t parse_bytes(const char *e)
{
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    uint64_t unit = *end == 'K' ? 1u << 10 : *end == 'M' ? 1u << 20 : *end == 'G' ? 1u << 30 : 1;
    if (unit > 1) end++;
    if (end == e || *end != '\0' || v == 0 || v > (1ull << 40) / unit) return 0;
    return v * unit;
}

/* SCUDA_STANDBY: HOST:PORT, or a comma list of them (the pool, in the
 * order they take over). 0, or -1 (logged) when malformed. */
static int parse_pool(const char *list)
{
    const char *p = list;
    do {
        p += strspn(p, " \t"); /* "a:1, b:2" reads as the user meant */
        size_t len = strcspn(p, ", \t");
        const char *after = p + len + strspn(p + len, " \t");
        if (len == 0 || len >= ADDR_MAX || fo.npool == POOL_MAX || (*after && *after != ',')) {
            LOG_WARN("SCUDA_STANDBY='%s' is not a comma list of at most %d HOST:PORT (each shorter than %d "
                     "characters): no standby", list, POOL_MAX, ADDR_MAX);
            fo.npool = 0;
            return -1;
        }
        snprintf(fo.pool[fo.npool++], ADDR_MAX, "%.*s", (int)len, p);
        p = *after ? after + 1 : after;
    } while (*p);
    snprintf(fo.standby, sizeof fo.standby, "%s", fo.pool[0]);
    return 0;
}

static void read_settings(void)
{
    const char *sb = getenv("SCUDA_STANDBY");
    if (!sb || !sb[0] || !shim_remote()) return;
    if (parse_pool(sb) != 0) return;
    double every = SNAPSHOT_EVERY_DEFAULT_S;
    const char *e = getenv("SCUDA_SNAPSHOT_EVERY");
    if (e && e[0]) {
        char *end;
        double v = strtod(e, &end);
        if (end == e || *end != '\0' || !(v >= 0 && v <= 86400))
            LOG_WARN("SCUDA_SNAPSHOT_EVERY='%s' is not a number of seconds from 0 to 86400; using %g", e, every);
        else
            every = v;
    }
    fo.every_ms = (uint64_t)(every * 1000);
    fo.journal_max = JOURNAL_MAX_DEFAULT;
    const char *j = getenv("SCUDA_JOURNAL_MAX");
    if (j && j[0]) {
        uint64_t v = parse_bytes(j);
        if (v) fo.journal_max = v;
        else LOG_WARN("SCUDA_JOURNAL_MAX='%s' is not a byte count (a number, K, M or G after it); using %llu", j,
                      (unsigned long long)fo.journal_max);
    }
    fo.wait = scuda_env_on("SCUDA_SNAPSHOT_WAIT");
    fo.on = 1;
    LOG_INFO("standby %s%s: a snapshot every %g s%s, journal up to %llu bytes; striped copies are off", fo.standby,
             fo.npool > 1 ? " (the first of the pool)" : "", every,
             fo.wait ? " (the application waits for each)" : "", (unsigned long long)fo.journal_max);
}

static int configured(void)
{
    pthread_once(&fo.once, read_settings);
    return fo.on;
}

int failover_standby(void)
{
    if (!configured()) return 0;
    pthread_mutex_lock(&fo.lock);
    int yes = fo.next < fo.npool;
    pthread_mutex_unlock(&fo.lock);
    return yes;
}

/* ---- snapshots ------------------------------------------------------------------ */

/* `took_ms`: from the request to the reply; `waited`: whether the
 * application's thread waited for it all. */
static void snapshot_taken(struct server *s, const struct msg_scuda_snapshot_ahead_rep *rep, uint64_t journal,
                           uint64_t took_ms, int waited, uint32_t failovers, size_t results_before)
{
    pthread_mutex_lock(&fo.lock);
    if (fo.failovers != failovers || fo.next >= fo.npool) {
        /* A failover came between the request and its reply: the request
         * was replayed on the standby, which copied itself to itself. */
        pthread_mutex_unlock(&fo.lock);
        return;
    }
    fo.parked = 1;
    fo.pid = rep->pid;
    fo.server_frames = rep->server_frames;
    /* Replies to the calls before it are not replayed; those that came
     * while it streamed may be. */
    size_t drop = results_before < fo.nresults ? results_before : fo.nresults;
    if (drop) memmove(fo.results, fo.results + drop, (fo.nresults - drop) * sizeof *fo.results);
    fo.nresults -= drop;
    fo.cursor = 0;
    fo.results_full = 0;
    char standby[ADDR_MAX];
    snprintf(standby, sizeof standby, "%s", fo.standby);
    pthread_mutex_unlock(&fo.lock);
    sendq_journal_floor(&s->q, rep->client_frames);
    LOG_INFO("snapshot on standby %s (session %u there): the application paused %llu ms (hold+sync %.1f ms, replay "
             "%.1f ms, %u images loaded ahead, %.1f MiB memory in %.1f ms), the copy took %llu ms in the background; "
             "the journal restarts, it held %llu bytes",
             standby, rep->pid, (unsigned long long)(waited ? took_ms : 0), rep->hold_ns / 1e6, rep->replay_ns / 1e6,
             rep->images_ahead, rep->bytes / 1048576.0, rep->copy_ns / 1e6,
             (unsigned long long)(waited ? 0 : took_ms), (unsigned long long)journal);
}

/* No snapshot this time: the last one stands, unless its journal is past
 * the bound, which ends the standby's cover until a snapshot works.
 * `ahead`: not a failure, the standby loads the images first. */
static void snapshot_failed(struct server *s, const char *to, const char *why, int ahead)
{
    uint64_t kept = sendq_kept_bytes(&s->q);
    pthread_mutex_lock(&fo.lock);
    int drop = !fo.parked || kept > fo.journal_max;
    int had = fo.parked;
    if (drop) fo.parked = 0;
    pthread_mutex_unlock(&fo.lock);
    if (drop) sendq_journal_end(&s->q, atomic_load(&s->c.acked));
    if (ahead && !(had && drop)) {
        LOG_DEBUG("standby %s loads the session's images ahead; the snapshot follows at a later synchronizing call",
                  to);
        return;
    }
    if (had && drop)
        LOG_WARN("no snapshot on standby %s (%s), and the journal is past SCUDA_JOURNAL_MAX: no failover until a "
                 "snapshot works", to, why);
    else
        LOG_WARN("no snapshot on standby %s: %s%s", to, why, had ? "; the last one stands" : "");
}

/* A snapshot on a thread of ours still goes out at the synchronizing
 * call that asked for it: that call returns once the request is sent, so
 * the copy is of the session as the application left it there, not of
 * whatever it did next. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int sent;
} handoff = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void handoff_sent(void)
{
    pthread_mutex_lock(&handoff.lock);
    handoff.sent = 1;
    pthread_cond_broadcast(&handoff.cv);
    pthread_mutex_unlock(&handoff.lock);
}

static void handoff_wait(void)
{
    pthread_mutex_lock(&handoff.lock);
    while (!handoff.sent) pthread_cond_wait(&handoff.cv, &handoff.lock);
    handoff.sent = 0;
    pthread_mutex_unlock(&handoff.lock);
}

/* `now`: at the journal's bound, copy at once (no loading ahead).
 * `waited`: the application's thread runs it (else a thread of ours). */
static void snapshot(struct server *s, int now, int waited)
{
    in_snapshot = 1;
    uint64_t t0 = now_ms(), journal = sendq_kept_bytes(&s->q);
    char to[ADDR_MAX];
    pthread_mutex_lock(&fo.lock);
    uint32_t failovers = fo.failovers;
    size_t results_before = fo.nresults;
    snprintf(to, sizeof to, "%s", fo.standby);
    pthread_mutex_unlock(&fo.lock);
    sendq_journal_begin(&s->q); /* from this request on: the copy may have run it or not */
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_snapshot_ahead, s);
    c.pushed = 1; /* callers may hold the mirrors' lock (failover_before_send); the copy takes device bytes */
    struct msg_scuda_snapshot_ahead_req m = {.to = to, .now = (uint32_t)now};
    msg_scuda_snapshot_ahead_req_put(&c.req, &m);
    CUresult r = rpc_start(&c);
    if (!waited) handoff_sent(); /* the application may go on: its next call follows the request */
    if (r == CUDA_SUCCESS) r = rpc_finish(&c);
    struct msg_scuda_snapshot_ahead_rep rep = {0};
    char why[600];
    int got = r == CUDA_SUCCESS && msg_scuda_snapshot_ahead_rep_get(&c.out, &c.arena, &rep) == 0;
    if (got && rep.parked)
        snapshot_taken(s, &rep, journal, now_ms() - t0, waited, failovers, results_before);
    else {
        snprintf(why, sizeof why, "%s", r != CUDA_SUCCESS ? "the session could not be asked"
                                        : rep.why && rep.why[0] ? rep.why : "(no reason)");
        snapshot_failed(s, to, why, got && rep.ahead);
    }
    rpc_end(&c);
    pthread_mutex_lock(&fo.lock);
    if (got && rep.ahead) fo.ahead_until_ms = now_ms() + AHEAD_POLL_MS; /* still due: ask again soon */
    else if (fo.failovers == failovers) fo.last_ms = now_ms(); /* else the new standby wants one at once */
    pthread_mutex_unlock(&fo.lock);
    in_snapshot = 0;
}

/* 1 when the journal would pass its bound with `extra` more bytes. */
static int at_bound(struct server *s, uint64_t extra, uint64_t max) { return sendq_kept_bytes(&s->q) + extra > max; }

/* 1 when a snapshot is due now on s. */
static int due(struct server *s, uint64_t extra)
{
    pthread_mutex_lock(&fo.lock);
    uint64_t now = now_ms();
    int yes = fo.next < fo.npool && (fo.last_ms == 0 || now - fo.last_ms >= fo.every_ms) && now >= fo.ahead_until_ms;
    uint64_t max = fo.journal_max;
    int parked = fo.parked;
    pthread_mutex_unlock(&fo.lock);
    return yes || (parked && at_bound(s, extra, max));
}

static void report_failover(void)
{
    pthread_mutex_lock(&fo.lock);
    int now = fo.failovers != fo.reported;
    fo.reported = fo.failovers;
    uint64_t checked = fo.checked, bad = fo.mismatches, frames = fo.replayed_frames;
    char server[ADDR_MAX];
    snprintf(server, sizeof server, "%s", fo.serving);
    pthread_mutex_unlock(&fo.lock);
    if (now)
        LOG_WARN("failover to standby %s: %llu journaled frames replayed, %llu replies checked, %llu differed",
                 server, (unsigned long long)frames, (unsigned long long)checked, (unsigned long long)bad);
}

static void *snapshot_main(void *arg)
{
    snapshot(arg, 0, 0);
    atomic_store(&fo.busy, 0);
    return NULL;
}

/* A snapshot on a detached thread of ours: 0, or -1 when none started. */
static int snapshot_behind(struct server *s)
{
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0) return -1;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, snapshot_main, s) == 0 ? 0 : -1;
    pthread_attr_destroy(&a);
    return rc;
}

/* Take fo.busy: 1, or 0 when another thread takes a snapshot. At the
 * journal's bound (extra > 0) wait for that one instead: it may stream
 * for a while, and the frame must not pass the bound meanwhile. */
static int take_busy(struct server *s, uint64_t extra)
{
    for (;;) {
        int idle = 0;
        if (atomic_compare_exchange_strong(&fo.busy, &idle, 1)) return 1;
        if (!extra || atomic_load(&s->c.resuming) || s->c.dead) return 0;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static void maybe_snapshot(struct server *s, uint64_t extra)
{
    if (in_snapshot || atomic_load(&s->c.resuming) || s->c.dead || !due(s, extra)) return;
    if (!take_busy(s, extra)) return; /* another thread takes it */
    if (!due(s, extra)) {
        atomic_store(&fo.busy, 0);
        return;
    }
    /* At the journal's bound the copy goes at once, on the thread that is
     * about to pass the bound; otherwise the standby may load the images
     * first (answered `ahead`: asked again later), and the application
     * waits for none of it. */
    int now = extra > 0 && at_bound(s, extra, fo.journal_max);
    if (!now && !fo.wait && snapshot_behind(s) == 0) {
        handoff_wait(); /* busy until that thread ends */
        return;
    }
    snapshot(s, now, 1);
    atomic_store(&fo.busy, 0);
}

void failover_at_sync(void)
{
    if (!configured()) return;
    report_failover();
    maybe_snapshot(&servers[0], 0);
}

void failover_before_send(struct server *s, size_t len)
{
    if (!fo.on || s != &servers[0] || in_snapshot || !sendq_journaling(&s->q)) return;
    if (sendq_kept_bytes(&s->q) + FRAME_HEADER_LEN + len > fo.journal_max) maybe_snapshot(s, FRAME_HEADER_LEN + len);
}

/* ---- checking a replay ------------------------------------------------------------ */

void failover_note_result(struct server *s, uint32_t seq, uint16_t op, uint32_t result)
{
    if (!fo.on || s != &servers[0] || !sendq_journaling(&s->q)) return;
    pthread_mutex_lock(&fo.lock);
    if (fo.nresults == fo.cap && fo.cap < RESULTS_MAX) {
        size_t cap = fo.cap ? fo.cap * 2 : 1024;
        struct result *r = realloc(fo.results, cap * sizeof *r);
        if (r) fo.results = r, fo.cap = cap;
    }
    if (fo.nresults < fo.cap) fo.results[fo.nresults++] = (struct result){seq, op, result};
    else fo.results_full = 1;
    pthread_mutex_unlock(&fo.lock);
}

int failover_replaying(struct server *s)
{
    if (!fo.on || s != &servers[0]) return 0;
    pthread_mutex_lock(&fo.lock);
    int yes = fo.failovers > 0;
    pthread_mutex_unlock(&fo.lock);
    return yes;
}

/* Replies come back in the order they first came: look from where the
 * last one was found. */
static struct result *find_result_locked(uint32_t seq)
{
    for (size_t k = 0; k < fo.nresults; k++) {
        size_t i = (fo.cursor + k) % fo.nresults;
        if (fo.results[i].seq == seq) {
            fo.cursor = i + 1;
            return &fo.results[i];
        }
    }
    return NULL;
}

void failover_check_result(uint32_t seq, uint16_t op, uint32_t result)
{
    pthread_mutex_lock(&fo.lock);
    struct result *r = find_result_locked(seq);
    int bad = r && (r->op != op || r->result != result);
    if (r) fo.checked++;
    if (bad) fo.mismatches++;
    uint16_t op0 = r ? r->op : 0;
    uint32_t result0 = r ? r->result : 0;
    pthread_mutex_unlock(&fo.lock);
    if (bad)
        fprintf(stderr, "scuda: FAILOVER REPLAY MISMATCH: call %u (op %s) returned %u on the standby, but %u (op %s) "
                "the first time: the application's state may differ from the run before the failover\n", seq,
                scuda_op_name(op), result, result0, scuda_op_name(op0));
}

/* ---- the failover itself ------------------------------------------------------------- */

int failover_target(struct server *s, char *addr, size_t addrlen, uint32_t *pid, uint64_t *have)
{
    if (!configured() || s != &servers[0]) return 0;
    pthread_mutex_lock(&fo.lock);
    int yes = fo.parked && fo.next < fo.npool;
    if (yes) {
        snprintf(addr, addrlen, "%s", fo.standby);
        *pid = fo.pid;
        *have = fo.server_frames;
    }
    pthread_mutex_unlock(&fo.lock);
    return yes;
}

/* The failover to pool[next] worked: the one after it (if any) becomes
 * the standby, and wants a snapshot at the next synchronizing call. */
static void next_standby_locked(void)
{
    snprintf(fo.serving, sizeof fo.serving, "%s", fo.standby);
    fo.failovers++; /* from here replies nobody waits for are checked */
    fo.parked = 0;
    fo.cursor = 0;
    fo.last_ms = 0, fo.ahead_until_ms = 0;
    fo.next++;
    if (fo.next < fo.npool) snprintf(fo.standby, sizeof fo.standby, "%s", fo.pool[fo.next]);
}

int failover_install(struct server *s, int fd, uint64_t server_has)
{
    uint64_t journal = sendq_kept_bytes(&s->q);
    int old = conn_swap_fd(s, fd);
    pthread_mutex_lock(&fo.lock);
    next_standby_locked();
    uint64_t frames = fo.server_frames;
    uint32_t pid = fo.pid;
    char serving[ADDR_MAX], next[ADDR_MAX] = "";
    snprintf(serving, sizeof serving, "%s", fo.serving);
    if (fo.next < fo.npool) snprintf(next, sizeof next, "%s", fo.standby);
    pthread_mutex_unlock(&fo.lock);
    conn_failover_counts(s, frames, server_has);
    long again = sendq_resume(&s->q, fd, server_has, 1);
    io_close(old);
    /* The journal is sent: from now on frames go once acknowledged, until
     * the next standby's first snapshot starts a journal again. */
    sendq_journal_end(&s->q, server_has);
    resume_failed_over(s, pid, serving);
    pthread_mutex_lock(&fo.lock);
    fo.replayed_frames = again > 0 ? (uint64_t)again : 0;
    pthread_mutex_unlock(&fo.lock);
    LOG_WARN("failed over to standby %s (session %u): replaying %ld journaled frames (%llu bytes)", serving, pid,
             again, (unsigned long long)journal);
    if (next[0]) LOG_WARN("the next standby of the pool is %s: a snapshot there at the next synchronizing call", next);
    return again < 0 ? -1 : 0;
}

/* Later standbys of the pool hold no copy of this session: none can take
 * over from here. */
void failover_abandon(struct server *s, const char *why)
{
    (void)s;
    pthread_mutex_lock(&fo.lock);
    int was = fo.parked;
    fo.parked = 0;
    fo.next = fo.npool;
    char standby[ADDR_MAX];
    snprintf(standby, sizeof standby, "%s", fo.standby);
    pthread_mutex_unlock(&fo.lock);
    if (was) LOG_ERROR("the standby %s cannot take the session: %s", standby, why);
}
