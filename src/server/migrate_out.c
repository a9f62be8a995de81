/* migrate_out.c - a session moving to another server: the exporting side
 * (docs/architecture.md, 9.17 Live migration; protocol.h, "Migration").
 *
 * scuda_migrate runs on the dispatch thread, so while it runs no further
 * call of the client is read: the session is held. It refuses at once,
 * with the reasons, when something cannot move (migrate_state.h); else it
 * waits for the workers, synchronizes every context, connects to the
 * other server as a HELLO_MIGRATE_IN client, sends every object and then
 * every byte of device memory, and compares the digest the other side
 * computed over what it rebuilt with its own. Whatever goes wrong there,
 * this session has changed nothing and goes on serving. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dispatch.h"
#include "handlers.gen.h"
#include "handles.h"
#include "migrate_images.h"
#include "migrate_links.h"
#include "migrate_memread.h"
#include "migrate_preload.h"
#include "migrate_stage.h"
#include "migrate_state.h"
#include "migrate_switch.h"
#include "resume.h"
#include "session.h"
#include "snapshot.h"
#include "../common/clock.h"
#include "../common/config.h"
#include "../common/dial.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"
#include "../common/session_info.h"
#include "../common/transport.h"

void session_forget_bound_ctx(void);

#define DIAL_TIMEOUT_MS 5000
#define DRAIN_TIMEOUT_MS 5000
/* The importer reads back every byte before it answers. */
#define VERDICT_TIMEOUT_MS 120000

/* ---- holding the session ---------------------------------------------------- */

/* Wait for the calls other client threads run on workers, then let the
 * GPU finish: afterwards nothing changes device memory. Returns 0, or -1
 * with why. */
static int hold(char *why, size_t whylen)
{
    uint64_t deadline = now_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000u;
    while (session_calls_running() > 0) {
        if (now_ns() > deadline) {
            snprintf(why, whylen, "another client thread's call still waits on the GPU after %d s; try again when "
                                  "it returned", DRAIN_TIMEOUT_MS / 1000);
            return -1;
        }
        usleep(1000);
    }
    struct handle_ref *h = NULL;
    long n = handle_list(&h);
    CUresult r = n < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    for (long i = 0; i < n && r == CUDA_SUCCESS; i++) {
        if (h[i].kind != HK_CONTEXT) continue;
        r = REAL(cuCtxSetCurrent, (CUcontext)h[i].real);
        if (r == CUDA_SUCCESS) r = REAL(cuCtxSynchronize, );
    }
    free(h);
    if (r != CUDA_SUCCESS)
        snprintf(why, whylen, "synchronizing the session's contexts failed with CUresult %d (a faulted context "
                              "cannot move)", (int)r);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* ---- the connection to the other server ------------------------------------- */

/* Connect to `to` as its client does, asking for a session that imports.
 * This server proves the token of its own environment (SCUDA_TOKEN,
 * SCUDA_TOKEN_FILE) and checks the other one as a client would (TLS,
 * known_hosts). Returns the fd, or -1 with why. */
int migrate_connect_peer(const char *to, uint32_t *pid, char *why, size_t whylen)
{
    char err[512];
    int fd = dial(to, DIAL_TIMEOUT_MS, PREFACE_SESSION, err, sizeof err);
    if (fd < 0) {
        snprintf(why, whylen, "cannot reach server %.200s: %.280s", to, err);
        return -1;
    }
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint32_t status = 0;
    static struct session_info si;
    if (hello_read_server(fd, DIAL_TIMEOUT_MS, nonce, err, sizeof err) != 0) {
        snprintf(why, whylen, "server %.200s: %.280s", to, err);
    } else if (hello_send_client(fd, HELLO_MIGRATE_IN, ~0ull, scuda_token(), nonce, NULL, 0) != 0) {
        snprintf(why, whylen, "server %.200s: connection lost in the handshake: %s", to, strerror(errno));
    } else if (hello_read_session_welcome(fd, DIAL_TIMEOUT_MS, &status, err, sizeof err, &si) != 0) {
        snprintf(why, whylen, "server %.200s sent no welcome: %.200s", to, err);
    } else if (status != WELCOME_OK) {
        snprintf(why, whylen, "server %.160s refused: %.200s (this server proves the token in its own environment: "
                              "SCUDA_TOKEN or SCUDA_TOKEN_FILE)", to, err);
    } else {
        *pid = si.session_pid;
        return fd;
    }
    io_close(fd);
    return -1;
}

int migrate_send_item(int fd, const struct msg_migrate_item *it, uint32_t seq)
{
    /* The data goes from where it lies, not through the wire buffer (a
     * chunk is 4 MiB: a copy and fresh pages each would hold back the
     * link): `data` is the item's last field, a u64 length and the bytes,
     * so the item is encoded without them and the length set after. */
    struct msg_migrate_item head = *it;
    head.data = NULL, head.data_len = 0;
    wire_buf b;
    wb_init(&b);
    msg_put_migrate_item(&b, &head);
    uint64_t n = it->data ? it->data_len : 0;
    if (!b.oom && b.len >= sizeof n) memcpy(b.data + b.len - sizeof n, &n, sizeof n);
    struct frame_header h = {.length = (uint32_t)(b.len + n), .op = OP_scuda_migrate, .seq = seq};
    uint8_t hdr[FRAME_HEADER_LEN];
    frame_header_encode(&h, hdr);
    struct iovec iov[3] = {{hdr, sizeof hdr}, {b.data, b.len}, {(void *)it->data, (size_t)n}};
    int rc = !b.oom && b.len + n <= SCUDA_MAX_FRAME ? io_writev_full(fd, iov, n ? 3 : 2) : -1;
    wb_free(&b);
    return rc;
}

/* The importer answers early when it gave up: stop sending then. */
static int peer_spoke(int fd) { return io_wait_input(fd, 0) != 0; }

/* A snapshot that may keep bytes the parked copy on the importer's
 * machine has (snapshot_keep.h). */
struct keep_state {
    uint32_t from;                          /* that copy's pid there; 0: every byte goes */
    const struct snapshot_written *written; /* what may have changed since it was taken */
    const struct migrate_range *had;        /* its ranges */
    long nhad;
    uint64_t kept;
    struct migrate_range *ranges; /* the last copy's, for the next one */
    long nranges;
};
static struct keep_state keep;

void migrate_out_keep_from(uint32_t pid, const struct snapshot_written *w, const struct migrate_range *had, long nhad)
{
    keep.from = pid;
    keep.written = w;
    keep.had = had;
    keep.nhad = nhad;
    keep.kept = 0;
}

uint64_t migrate_out_kept(void) { return keep.kept; }

long migrate_out_ranges(struct migrate_range **out)
{
    long n = keep.nranges;
    *out = keep.ranges;
    keep.ranges = NULL;
    keep.nranges = 0;
    return n;
}

/* 1 when the parked copy holds range r as it is now: the same range, and
 * nothing wrote it since. */
static int kept_there(const struct keep_state *k, const struct migrate_range *r)
{
    if (!k->from || snapshot_written_touches(k->written, r->addr, r->size)) return 0;
    for (long i = 0; i < k->nhad; i++)
        if (k->had[i].addr == r->addr && k->had[i].size == r->size) return 1;
    return 0;
}

/* Tell the importer to take range r from the parked copy. */
static int send_kept(int fd, const struct keep_state *k, const struct migrate_range *r, uint64_t index, uint32_t *seq)
{
    struct msg_migrate_item it = {.kind = MIG_BYTES_KEPT, .id = index, .a = r->addr, .b = r->size, .c = k->from,
                                  .data = (void *)resume_secret(), .data_len = RESUME_SECRET_LEN};
    return peer_spoke(fd) || migrate_send_item(fd, &it, (*seq)++) != 0;
}

/* Where the memory goes: the other server and its session, as the move
 * or snapshot connected (the memory's links dial it too). */
struct dest {
    char to[256];
    uint32_t pid;
};

/* What the exporter does with each chunk it read (migrate_memread.c). */
struct sending {
    int fd;
    const struct migrate_range *v; /* the session's ranges: where the bytes go on the importer */
    uint32_t *seq;
    struct keep_state *keep;
    int kept;                 /* the current range is the parked copy's: only digested */
    const _Atomic int *stop;  /* NULL, or set when the session ends under a streaming snapshot */
    struct migrate_links links;
    uint64_t lane_bytes[MIGRATE_LANES_MAX]; /* each lane's: its link's count */
};

/* On the reading thread, in order: a range the parked copy holds as it
 * is (kept_there) is named on the main connection and skipped. */
static int plan_chunk(void *arg, const struct migrate_chunk *c)
{
    struct sending *x = arg;
    const struct migrate_range *r = &x->v[c->range];
    if (x->stop && atomic_load(x->stop)) return 2;
    if (c->off == 0) {
        x->kept = kept_there(x->keep, r);
        x->keep->kept += x->kept ? r->size : 0; /* counted when tried: a refusal then falls back to a full copy */
        if (x->kept && send_kept(x->fd, x->keep, r, c->index, x->seq) != 0) return 2;
    }
    if (x->kept) return 1;
    return peer_spoke(x->fd) ? 2 : 0; /* the verdict says why */
}

/* On lane `lane`: the chunk on its link (or the main connection). */
static int send_chunk(void *arg, int lane, const struct migrate_chunk *c)
{
    struct sending *x = arg;
    struct msg_migrate_item it = {.kind = MIG_BYTES, .id = c->index, .a = x->v[c->range].addr + c->off,
                                  .data = (void *)c->bytes, .data_len = c->len};
    int fd = x->links.n ? x->links.fd[lane] : x->fd;
    uint32_t seq = x->links.n ? 0 : (*x->seq)++;
    if (migrate_send_item(fd, &it, seq) != 0) return 2; /* the verdict says why */
    x->lane_bytes[lane] += c->len;
    return 0;
}

/* Every range of device memory v[0..n) (read from `from`, the same
 * ranges or their staged copies), in chunks, each also fed to the
 * digest, over the memory's links when the importer grants them; a
 * range the parked copy holds unchanged (kept_there) is only digested:
 * the importer takes it from there, and the digests say whether it was
 * the same. *sent: the bytes sent. Returns as migrate_memory_read. */
static int send_ranges(struct sending *x, const struct dest *to, const struct migrate_range *from, long n,
                       struct migrate_digest *d, uint64_t *sent, char *why, size_t whylen)
{
    uint64_t bytes = 0;
    for (long i = 0; i < n; i++) bytes += from[i].size;
    if (migrate_links_open(x->fd, x->seq, to->to, to->pid, bytes, &x->links, why, whylen) != 0) return -1;
    int rc = migrate_memory_read(from, n, d, plan_chunk, send_chunk, x, x->links.n ? x->links.n : 1, why, whylen);
    for (int i = 0; i < MIGRATE_LANES_MAX; i++) *sent += x->lane_bytes[i];
    migrate_links_close(&x->links, rc == 0, x->lane_bytes);
    return rc;
}

static int send_memory(int fd, const struct dest *to, struct migrate_digest *d, uint32_t *seq, uint64_t *sent,
                       char *why, size_t whylen)
{
    struct migrate_range *v = NULL;
    long n = migrate_memory(&v);
    if (n < 0) {
        free(keep.ranges);
        keep.ranges = NULL, keep.nranges = 0;
        snprintf(why, whylen, "out of host memory for the copy");
        return -1;
    }
    struct sending x = {.fd = fd, .v = v, .seq = seq, .keep = &keep};
    int rc = send_ranges(&x, to, v, n, d, sent, why, whylen);
    free(keep.ranges);
    keep.ranges = v;
    keep.nranges = n;
    return rc;
}

/* Read the importer's verdict into *v (its strings in arena a). */
int migrate_read_verdict(int fd, int timeout_ms, struct msg_arena *a, struct msg_migrate_verdict *v, void **payload)
{
    uint8_t hdr[FRAME_HEADER_LEN];
    struct frame_header h;
    if (io_read_full_timeout(fd, hdr, sizeof hdr, timeout_ms) != 0) return -1;
    frame_header_decode(hdr, &h);
    if (h.op != OP_scuda_migrate || h.length > 4096 || !(*payload = malloc(h.length ? h.length : 1))) return -1;
    if (io_read_full_timeout(fd, *payload, h.length, timeout_ms) != 0) return -1;
    wire_reader r;
    wr_init(&r, *payload, h.length);
    msg_get_migrate_verdict(&r, a, v);
    return wr_ok_end(&r) ? 0 : -1;
}

/* ---- one migration ---------------------------------------------------------- */

struct outcome {
    char why[MIGRATE_WHY_MAX];
    uint64_t replay_ns, copy_ns, bytes;
    unsigned by_hash, images; /* images named by digest alone, and in all */
    unsigned ahead;           /* of them, loaded ahead of the hold */
};

/* What is left to send when B loaded ahead (pre->fd >= 0): MIG_HOLD,
 * then the items less what B replayed. Returns 0, -1 (why), or 2 when
 * the session no longer begins with what B holds (nothing sent). */
static int after_preload(int fd, const struct migrate_preloaded *pre, struct msg_migrate_item *items, long *n,
                         uint32_t *seq, char *why, size_t whylen)
{
    if (pre->fd < 0) return 0;
    long left = migrate_preload_filter(pre, items, *n);
    if (left < 0) return 2;
    *n = left, *seq = pre->seq;
    struct msg_migrate_item held = {.kind = MIG_HOLD};
    if (migrate_send_item(fd, &held, (*seq)++) == 0) return 0;
    snprintf(why, whylen, "the connection to the other server failed");
    return -1;
}

/* Send MIG_END after `bytes`, read the importer's verdict and judge it
 * against our digest d (ended here). rc: what the sending came to (0:
 * all sent; 1: stopped, the verdict says why; -1: failed, why set).
 * Returns 0 when the importer holds a checked copy. */
static int judge(int fd, int rc, struct migrate_digest *d, uint32_t seq, struct outcome *o)
{
    struct msg_migrate_item end = {.kind = MIG_END, .b = o->bytes};
    if (rc == 0 && migrate_send_item(fd, &end, seq) != 0) rc = 1;
    uint8_t mine[32] = {0};
    if (d) migrate_digest_end(d, mine);
    if (rc < 0) return -1;
    struct msg_arena a;
    msg_arena_init(&a);
    struct msg_migrate_verdict v;
    void *payload = NULL;
    if (migrate_read_verdict(fd, VERDICT_TIMEOUT_MS, &a, &v, &payload) != 0) {
        snprintf(o->why, sizeof o->why, "the other server sent no verdict (it went away, or took longer than %d s)",
                 VERDICT_TIMEOUT_MS / 1000);
        rc = -1;
    } else if (v.result != CUDA_SUCCESS) {
        snprintf(o->why, sizeof o->why, "the other server could not rebuild the session: %s",
                 v.why ? v.why : "(no reason)");
        rc = -1;
    } else if (rc != 0 || memcmp(v.digest, mine, sizeof mine) != 0) {
        snprintf(o->why, sizeof o->why, "the other server's copy differs from this session (objects, addresses or "
                                        "bytes): discarded");
        rc = -1;
    } else {
        o->replay_ns = v.replay_ns, o->copy_ns = v.copy_ns;
    }
    free(payload);
    msg_arena_free(&a);
    return rc;
}

/* ---- a snapshot's memory after the hold ------------------------------------- */

/* What the background thread needs once the session runs on: nothing in
 * it points into the session's notes. */
struct migrate_later_state {
    struct migrate_digest *d;
    struct migrate_range *v; /* the session's ranges at the hold */
    long n;
    struct migrate_stage st; /* their bytes at the hold */
    uint32_t seq;
    struct keep_state keep;
    struct outcome o;
    struct dest to;
};

/* Under the hold, once the items are sent: the memory staged on the GPU
 * and everything the stream needs handed to *later. Returns 0, or -1
 * (logged) when staging was refused: the caller sends the memory now. */
static int stage_for_later(struct session *s, int fd, const struct dest *to, struct migrate_digest *d, uint32_t seq,
                           struct migrate_later **later)
{
    uint64_t t0 = now_ns();
    struct migrate_later *l = calloc(1, sizeof *l);
    struct migrate_later_state *in = calloc(1, sizeof *in);
    char why[MIGRATE_WHY_MAX] = "out of host memory";
    if (!l || !in || (in->n = migrate_memory(&in->v)) < 0 || migrate_stage(in->v, in->n, &in->st, why, sizeof why)) {
        LOG_INFO("session %d: the snapshot's memory goes during the hold: %s", (int)getpid(), why);
        if (in && in->n >= 0) free(in->v);
        free(in);
        free(l);
        return -1;
    }
    in->d = d, in->seq = seq, in->keep = keep, in->to = *to;
    in->keep.ranges = NULL, in->keep.nranges = 0;
    l->fd = fd;
    l->stage_ns = now_ns() - t0;
    l->staged = in->st.bytes;
    pthread_mutex_lock(&s->write_lock); /* as park() reads them: the frames of this very moment */
    l->received = resume_received();
    l->sent = resume_sent_locked();
    pthread_mutex_unlock(&s->write_lock);
    l->in = in;
    *later = l;
    return 0;
}

int migrate_later_finish(struct migrate_later *l, const _Atomic int *stop, struct msg_scuda_migrate_rep *rep,
                         uint64_t *kept, char *why, size_t whylen)
{
    struct migrate_later_state *in = l->in;
    /* On the legacy stream: a stream of our own would be faster beside the
     * application's work, but the driver takes memory for a stream, and
     * what it places for the session meanwhile (globals, managed memory)
     * would land elsewhere than a replay puts it. */
    REAL(cuCtxSetCurrent, in->st.ctx);
    struct sending x = {.fd = l->fd, .v = in->v, .seq = &in->seq, .keep = &in->keep, .stop = stop};
    int rc = send_ranges(&x, &in->to, in->st.v, in->st.n, in->d, &in->o.bytes, in->o.why, sizeof in->o.why);
    if (rc > 0 && atomic_load(stop)) {
        snprintf(in->o.why, sizeof in->o.why, "the session ended while the snapshot streamed");
        rc = -1;
    }
    rc = judge(l->fd, rc, in->d, in->seq, &in->o);
    in->d = NULL;
    *rep = (struct msg_scuda_migrate_rep){.hold_ns = l->hold_ns, .replay_ns = in->o.replay_ns,
                                          .copy_ns = in->o.copy_ns, .bytes = in->o.bytes};
    *kept = in->keep.kept;
    snprintf(why, whylen, "%s", rc == 0 ? "" : in->o.why);
    return rc;
}

long migrate_later_ranges(struct migrate_later *l, struct migrate_range **out)
{
    *out = l->in->v;
    l->in->v = NULL;
    return l->in->n;
}

void migrate_later_free(struct migrate_later *l)
{
    if (!l) return;
    if (l->in) {
        migrate_unstage(&l->in->st);
        if (l->in->d) {
            uint8_t unused[32];
            migrate_digest_end(l->in->d, unused);
        }
        free(l->in->v);
        free(l->in);
    }
    free(l);
}

/* Send everything to `to` on fd and judge the answer. Returns 0 when the
 * other server holds a checked copy of the session; 2 when what B loaded
 * ahead (pre) no longer fits, before anything was sent; 3 when the items
 * went and the memory is staged to follow after the hold (*later: `later`
 * non-NULL asks for that). */
static int transfer(struct session *s, int fd, const struct dest *to, struct outcome *o,
                    const struct migrate_preloaded *pre, struct migrate_later **later)
{
    struct msg_migrate_item *items = NULL;
    CUresult deferred = s->deferred_error;
    long n = migrate_items(&items, (uint64_t)deferred, o->why, sizeof o->why);
    if (n < 0) return -1;
    uint32_t seq = 0;
    int rc = after_preload(fd, pre, items, &n, &seq, o->why, sizeof o->why);
    if (rc != 0) {
        free(items);
        return rc;
    }
    struct migrate_digest *d = migrate_digest_begin();
    uint8_t *keys = NULL;
    rc = d ? 0 : -1;
    if (rc == 0 && migrate_images_offer(fd, items, n, &seq, &keys, &o->by_hash, &o->images, o->why, sizeof o->why))
        rc = -1;
    for (long i = 0; i < n && rc == 0; i++)
        if (peer_spoke(fd) || migrate_send_item(fd, &items[i], seq++) != 0) rc = 1;
    free(items);
    free(keys);
    if (rc == 0 && later && stage_for_later(s, fd, to, d, seq, later) == 0) return 3;
    if (rc == 0) rc = send_memory(fd, to, d, &seq, &o->bytes, o->why, sizeof o->why);
    return judge(fd, rc, d, seq, o);
}

static void log_copied(const char *to, const struct msg_scuda_migrate_rep *rep, const struct outcome *o,
                       uint64_t total_ns)
{
    LOG_INFO("migrated session %d to %s in %.0f ms: hold+sync %.1f ms, replay %.1f ms, %.1f MiB memory in %.1f ms; "
             "%u of %u images sent by digest alone, %u loaded ahead of the hold", (int)getpid(), to, total_ns / 1e6,
             rep->hold_ns / 1e6, rep->replay_ns / 1e6, rep->bytes / 1048576.0, rep->copy_ns / 1e6, o->by_hash,
             o->images, o->ahead);
}

/* Why the client could not follow a move, or "". */
static void follow_blockers(struct session *s, char *why, size_t whylen)
{
    if (s->opt->resume_within_s <= 0)
        snprintf(why, whylen, "this server takes no resumes (--resume-within 0), so its client cannot follow a move");
    else if (!resume_can_follow())
        snprintf(why, whylen, "the client cannot resume a connection (it never asked for the resume secret, or it "
                              "is leaving)");
}

static int failed_at_peer;
int migrate_failed_at_peer(void) { return failed_at_peer; }

static struct dest dest_of(const char *to, uint32_t pid)
{
    struct dest d = {.pid = pid};
    snprintf(d.to, sizeof d.to, "%s", to);
    return d;
}

/* At the hold: everything to B, on the connection B loaded ahead on when
 * it still fits, else on a fresh one. Returns the connection (-1: none),
 * *ok set when B's copy checked out. */
static int copy_to_peer(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *b_pid,
                        struct outcome *o, int *ok, struct migrate_later **later)
{
    int fd = pre->fd, rc = 2;
    if (fd >= 0) {
        *b_pid = pre->pid;
        struct dest b = dest_of(to, *b_pid);
        rc = transfer(s, fd, &b, o, pre, later);
        pre->fd = -1; /* fd's now */
        if (rc == 2) {
            LOG_INFO("session %d: an image or context changed while %s loaded ahead; the move sends everything now",
                     (int)getpid(), to);
            io_close(fd);
        } else {
            o->by_hash += pre->by_hash, o->images += pre->images, o->ahead = pre->images;
        }
    }
    if (rc == 2) {
        struct migrate_preloaded none = {.fd = -1};
        fd = migrate_connect_peer(to, b_pid, o->why, sizeof o->why);
        struct dest b = dest_of(to, fd >= 0 ? *b_pid : 0);
        rc = fd >= 0 ? transfer(s, fd, &b, o, &none, later) : -1;
    }
    *ok = rc == 0 || rc == 3; /* 3: so far; the memory follows (*later) */
    return fd;
}

int migrate_session(struct session *s, const char *to, struct srv_call *c, struct msg_scuda_migrate_rep *rep)
{
    failed_at_peer = 0;
    uint64_t t0 = now_ns();
    struct outcome o = {.why = ""};
    *rep = (struct msg_scuda_migrate_rep){0};
    migrate_blockers_explain(o.why, sizeof o.why);
    if (!o.why[0]) follow_blockers(s, o.why, sizeof o.why);
    int fd = -1, switched = 0, ok = 0;
    uint32_t b_pid = 0;
    struct migrate_preloaded pre = {.fd = -1};
    if (c && migrate_preload_busy() && migrate_preload_purpose() == PRELOAD_FOR_MOVE)
        snprintf(o.why, sizeof o.why, "another move of this session is under way; try again when it ended");
    else if (snapshot_streaming())
        snprintf(o.why, sizeof o.why, "a snapshot's memory still streams to its standby; try again when it is parked");
    else
        migrate_preload_take(to, &pre);
    if (!o.why[0] && hold(o.why, sizeof o.why) == 0 && migrate_note_all_globals(s, o.why, sizeof o.why) == 0) {
        rep->hold_ns = now_ns() - t0;
        /* operators (and the GPU move checks) see where the app's pause begins */
        LOG_INFO("session %d: held for the move to %s", (int)getpid(), to);
        failed_at_peer = 1;
        if ((fd = copy_to_peer(s, to, &pre, &b_pid, &o, &ok, NULL)) >= 0 && ok) {
            rep->replay_ns = o.replay_ns, rep->copy_ns = o.copy_ns, rep->bytes = o.bytes;
            log_copied(to, rep, &o, now_ns() - t0);
            switched = migrate_switch_out(s, fd, to, b_pid, c, rep, t0, o.why, sizeof o.why) == 0;
        }
    }
    if (fd >= 0 && !switched) io_close(fd);
    if (pre.fd >= 0) io_close(pre.fd); /* refused before it was used */
    migrate_preloaded_free(&pre);
    session_forget_bound_ctx(); /* holding and describing made other contexts current */
    rep->replay_ns = o.replay_ns, rep->copy_ns = o.copy_ns, rep->bytes = o.bytes;
    rep->moved = (uint32_t)switched;
    if (!switched) LOG_WARN("session %d cannot move to %s: %s; it goes on here", (int)getpid(), to, o.why);
    static char why_kept[MIGRATE_WHY_MAX];
    snprintf(why_kept, sizeof why_kept, "%s", switched ? "" : o.why);
    rep->why = why_kept;
    return switched;
}

CUresult srv_scuda_migrate(srv_call *c)
{
    struct msg_scuda_migrate_req m;
    if (msg_scuda_migrate_req_get(&c->in, &c->arena, &m) != 0 || !m.to || !m.to[0]) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_migrate_rep rep;
    /* After a switch the reply is already numbered and kept: it reaches
     * the client from whichever server it resumes on (migrate_switch.c). */
    if (migrate_session(c->s, m.to, c, &rep)) c->replied = 1;
    else msg_scuda_migrate_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}

/* A snapshot (snapshot.c): what a move sends, checked the same way, but
 * no switch: the client stays here. `pre` is what the standby loaded
 * ahead for it (fd -1: nothing; taken either way). Returns the connection
 * to the importer, whose copy checked out, or -1 with why; *ahead: the
 * images the copy loaded before the hold. With `later`, the memory may
 * be staged to follow after the hold: then *later is set (else NULL) and
 * the copy is not checked yet (migrate_later_finish). */
int migrate_copy_out(struct session *s, const char *to, struct migrate_preloaded *pre, uint32_t *b_pid,
                     struct msg_scuda_migrate_rep *rep, unsigned *ahead, char *why, size_t whylen,
                     struct migrate_later **later)
{
    if (later) *later = NULL;
    uint64_t t0 = now_ns();
    struct outcome o = {.why = ""};
    *rep = (struct msg_scuda_migrate_rep){0};
    migrate_blockers_explain(o.why, sizeof o.why);
    if (!o.why[0]) follow_blockers(s, o.why, sizeof o.why);
    if (!o.why[0] && migrate_preload_busy())
        snprintf(o.why, sizeof o.why, "a move of this session is under way; the snapshot waits for the next turn");
    if (!o.why[0] && snapshot_streaming())
        snprintf(o.why, sizeof o.why, "the last snapshot's memory still streams to its standby");
    int fd = -1, ok = 0;
    if (!o.why[0] && hold(o.why, sizeof o.why) == 0 && migrate_note_all_globals(s, o.why, sizeof o.why) == 0) {
        rep->hold_ns = now_ns() - t0;
        fd = copy_to_peer(s, to, pre, b_pid, &o, &ok, later);
        if (later && *later) (*later)->hold_ns = rep->hold_ns;
        if (fd >= 0 && !ok) {
            io_close(fd);
            fd = -1;
        }
    }
    if (pre->fd >= 0) io_close(pre->fd); /* refused before it was used */
    migrate_preloaded_free(pre);
    session_forget_bound_ctx(); /* holding and describing made other contexts current */
    rep->replay_ns = o.replay_ns, rep->copy_ns = o.copy_ns, rep->bytes = o.bytes;
    *ahead = o.ahead;
    snprintf(why, whylen, "%s", o.why);
    if (later && *later) (*later)->held_ns = now_ns() - t0;
    return fd;
}
