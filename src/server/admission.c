/* admission.c - see admission.h.
 *
 * Why in the parent: forking before the handshake let anyone who could
 * connect make processes and hold --max-sessions places without a token.
 * Here a pending handshake costs a socket and one slot of a fixed table,
 * and only a client that proved a token gets a process. */
#define _GNU_SOURCE
#include "admission.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bulk_join.h"
#include "children.h"
#include "fd_pass.h"
#include "gpu_pool.h"
#include "transport_phase.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/protocol.h"
#include "../common/tls.h"
#include "../common/transport.h"
#include "../common/clock.h"

enum adm_state {
    ADM_FREE = 0,
    ADM_TRANSPORT,         /* the preface, then TLS when the client asked (transport_phase.c) */
    ADM_SEND_SERVER_HELLO,
    ADM_READ_CLIENT_HELLO,
    ADM_READ_JOIN_REQUEST, /* HELLO_BULK_JOIN or HELLO_RESUME: the join or resume request follows */
    ADM_READ_VISIBLE,      /* HELLO_VISIBLE_DEVICES: the visible request follows */
    ADM_DECIDE,
    ADM_JOIN_WAIT,         /* handed to its session; waiting for the verdict */
    ADM_SEND_REFUSAL,      /* a welcome that refuses, then close */
};

#define PEER_LEN 96
#define IO_LEN VISIBLE_REQ_LEN /* the largest of: server_hello, client_hello, join, visible request, a refusal */

struct pending {
    int fd;
    enum adm_state state;
    uint64_t serial;       /* accept order: lower is older */
    uint64_t accepted_ms;
    uint64_t deadline_ms;  /* from accept; nothing extends it */
    uint64_t refuse_at_ms; /* ADM_SEND_REFUSAL: not before this */
    short transport_wants; /* ADM_TRANSPORT: POLLIN or POLLOUT */
    struct transport_phase tp;
    char peer[PEER_LEN];
    char source[INET6_ADDRSTRLEN];
    uint8_t nonce[SCUDA_NONCE_LEN];
    uint8_t io[IO_LEN]; /* what is being sent or received */
    size_t io_len, io_done;
    struct client_hello ch;
    struct join_request jr;
    uint64_t resume_received; /* HELLO_RESUME: the session's frames the client has */
    int visible_bad;          /* HELLO_VISIBLE_DEVICES: the request was malformed */
    char visible[VISIBLE_MAX + 1];
    char user[TOKEN_NAME_MAX];
};

static struct admission_config cfg;
static struct pending *slots;
static uint64_t next_serial;
static uint64_t evicted, last_evict_log_ms;


int admission_init(const struct admission_config *c)
{
    cfg = *c;
    slots = calloc((size_t)cfg.max_pending, sizeof *slots);
    if (!slots) return -1;
    for (int i = 0; i < cfg.max_pending; i++) slots[i].fd = -1;
    return 0;
}

/* ---- the transport: the only reads and writes on a pending connection ---- */

/* Both return the bytes moved, 0 when the socket is not ready, or -1 when
 * the connection failed or the peer closed it. Once the transport phase
 * is done, a TLS connection has its link attached to the fd, and these go
 * through it; nothing else in the parent touches a pending socket. */
static long pending_read(struct pending *p, void *buf, size_t n)
{
    struct tls_link *l = tls_of(p->fd);
    if (l) {
        ssize_t r = tls_read_some(l, buf, n, 0);
        return r > 0 ? r : errno == EAGAIN ? 0 : -1;
    }
    ssize_t r = recv(p->fd, buf, n, MSG_DONTWAIT);
    if (r > 0) return r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    return -1;
}

static long pending_write(struct pending *p, const void *buf, size_t n)
{
    struct tls_link *l = tls_of(p->fd);
    if (l) {
        ssize_t w = tls_write_some(l, buf, n);
        return w >= 0 ? w : errno == EAGAIN ? 0 : -1;
    }
    ssize_t w = send(p->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0) return w;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    return -1;
}

/* ---- slots ---------------------------------------------------------------- */

/* Close the parent's copy: its TLS state is freed without a close_notify,
 * which would end the connection for a session that holds it too. */
static void drop(struct pending *p)
{
    transport_phase_abort(&p->tp);
    if (p->fd >= 0) io_close(p->fd);
    memset(p, 0, sizeof *p);
    p->fd = -1;
}

static void expect_bytes(struct pending *p, enum adm_state st, size_t n)
{
    p->state = st;
    p->io_len = n;
    p->io_done = 0;
}

/* Handshakes refused, by the welcome status sent (the server's /metrics). */
static uint64_t refused_by[ADMISSION_REFUSAL_KINDS], timed_out;

uint64_t admission_refused(unsigned status) { return status < ADMISSION_REFUSAL_KINDS ? refused_by[status] : 0; }
uint64_t admission_dropped(uint64_t *evicted_out)
{
    *evicted_out = evicted;
    return timed_out;
}

static void refuse(struct pending *p, uint32_t status, const char *msg, uint64_t not_before_ms)
{
    if (status < ADMISSION_REFUSAL_KINDS) refused_by[status]++;
    long n = hello_encode_welcome(status, msg, p->io, sizeof p->io);
    if (n < 0) {
        drop(p);
        return;
    }
    expect_bytes(p, ADM_SEND_REFUSAL, (size_t)n);
    p->refuse_at_ms = not_before_ms;
}

/* "ADDR:PORT" for the log, and ADDR alone: the key of the per-source bound. */
static void name_peer(int fd, char *peer, size_t peerlen, char *source, size_t srclen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    snprintf(source, srclen, "?");
    int port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, source, (socklen_t)srclen);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, source, (socklen_t)srclen);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(peer, peerlen, "%s:%d", source, port);
}

static int pending_from(const char *source)
{
    int n = 0;
    for (int i = 0; i < cfg.max_pending; i++) n += slots[i].fd >= 0 && strcmp(slots[i].source, source) == 0;
    return n;
}

static struct pending *oldest_from(const char *source)
{
    struct pending *best = NULL;
    for (int i = 0; i < cfg.max_pending; i++) {
        struct pending *p = &slots[i];
        if (p->fd >= 0 && strcmp(p->source, source) == 0 && (!best || p->serial < best->serial)) best = p;
    }
    return best;
}

/* The pending handshake to drop: the oldest of the source that holds the
 * most (ties: the source whose oldest is older). */
static struct pending *victim(void)
{
    struct pending *best = NULL;
    int best_n = 0;
    for (int i = 0; i < cfg.max_pending; i++) {
        struct pending *p = &slots[i];
        if (p->fd < 0) continue;
        struct pending *o = oldest_from(p->source);
        if (o != p) continue; /* each source once: at its oldest */
        int n = pending_from(p->source);
        if (n > best_n || (n == best_n && p->serial < best->serial)) best = p, best_n = n;
    }
    return best;
}

static void evict(struct pending *p, const char *why)
{
    evicted++;
    LOG_DEBUG("%s: pending handshake dropped: %s", p->peer, why);
    uint64_t now = now_ms();
    if (now - last_evict_log_ms >= 1000) {
        LOG_WARN("handshakes: dropped %llu pending handshake(s) so far, the last from %s (%s); "
                 "a source that opens many connections loses its oldest first",
                 (unsigned long long)evicted, p->source, why);
        last_evict_log_ms = now;
    }
    drop(p);
}

/* Room for one more handshake from `source`: a free slot, after dropping
 * what the bounds say must go. */
static struct pending *make_room(const char *source)
{
    /* Only a handshake that had its grace can go for this bound: many
     * honest clients behind one address (a node starting 32 processes,
     * each with bulk connections) connect at once and finish in a round
     * trip; a flood's connections are the ones that stay. */
    struct pending *old = pending_from(source) >= cfg.per_source ? oldest_from(source) : NULL;
    if (old && now_ms() - old->accepted_ms >= ADMISSION_GRACE_MS)
        evict(old, "--max-handshakes-per-source reached");
    struct pending *freeslot = NULL;
    for (int i = 0; i < cfg.max_pending && !freeslot; i++)
        if (slots[i].fd < 0) freeslot = &slots[i];
    if (freeslot) return freeslot;
    struct pending *v = victim();
    evict(v, "--max-handshakes reached");
    return v;
}

static void take(int fd)
{
    char peer[PEER_LEN], source[INET6_ADDRSTRLEN];
    name_peer(fd, peer, sizeof peer, source, sizeof source);
    struct pending *p = make_room(source);
    memset(p, 0, sizeof *p);
    p->fd = fd;
    p->serial = ++next_serial;
    p->accepted_ms = now_ms();
    p->deadline_ms = p->accepted_ms + ADMISSION_DEADLINE_MS;
    snprintf(p->peer, sizeof p->peer, "%s", peer);
    snprintf(p->source, sizeof p->source, "%s", source);
    p->state = ADM_TRANSPORT;
    transport_phase_init(&p->tp, fd, cfg.tls);
    p->transport_wants = POLLIN; /* the client speaks first: its preface */
    LOG_DEBUG("%s: connected", peer);
}

void admission_accept(int lfd)
{
    /* A bounded batch: the loop also has handshakes and children to serve. */
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                LOG_WARN("accept: %s", strerror(errno));
            return;
        }
        tcp_tune(fd, 10);
        take(fd);
    }
}

/* ---- the decision ---------------------------------------------------------- */

static int known_flags(uint16_t f)
{
    return hello_wants_cuda_session(f) || f == HELLO_RAW_ECHO || f == HELLO_RAW_SINK || f == HELLO_BULK_JOIN || f == HELLO_MIGRATE_IN ||
           f == HELLO_RESUME || f == (HELLO_BULK_JOIN | HELLO_JOIN_ZSTD);
}

/* A connection for an existing session: a bulk join or a resume. The
 * parent routes both the same way (bulk_join.h): a resume is a join of
 * slot RESUME_INDEX, proved with the session's resume secret. */
static int joins_session(uint16_t f)
{
    return f == HELLO_BULK_JOIN || f == (HELLO_BULK_JOIN | HELLO_JOIN_ZSTD) || f == HELLO_RESUME ||
           f == HELLO_PEER_JOIN;
}

static int tokens_needed(void) { return *cfg.tokens && (*cfg.tokens)->count > 0; }

/* A client certificate that verified against --tls-client-ca names the
 * user by its subject CN, instead of a token; one that does not verify
 * counts for nothing (the token may still admit the client). 1 when it
 * named the user into p->user. */
static int certificate_user(struct pending *p)
{
    struct tls_link *l = tls_of(p->fd);
    char why[300];
    int rc = l ? tls_peer_user(l, p->user, sizeof p->user, why, sizeof why) : 0;
    if (rc < 0) LOG_WARN("%s: client certificate ignored: %s", p->peer, why);
    return rc == 1;
}

/* The user the certificate or else the proof names, into p->user.
 * Returns 0, or -1. */
static int authenticate(struct pending *p)
{
    if (certificate_user(p)) return 0;
    const struct token_set *t = *cfg.tokens;
    int i = hello_find_user(&p->ch, t, p->nonce);
    if (i < 0) return -1;
    snprintf(p->user, sizeof p->user, "%s", tokens_needed() ? t->entries[i].name : "anonymous");
    return 0;
}

/* The one refusal of every bad join, and of every bad resume. */
static const char *refusal_of(const struct pending *p)
{
    return p->ch.flags == HELLO_RESUME ? RESUME_REFUSAL : p->ch.flags == HELLO_PEER_JOIN ? PEER_REFUSAL : JOIN_REFUSAL;
}

/* Hand a join to its session; the session answers with a verdict. */
static void route_join(struct pending *p)
{
    int resume = p->ch.flags == HELLO_RESUME, peer = p->ch.flags == HELLO_PEER_JOIN;
    /* A peer join names no user: any session may hold the grant, which
     * only that session can check. */
    int ctl = peer ? children_ctl_any((pid_t)p->jr.pid) : children_ctl_of((pid_t)p->jr.pid, p->user);
    const char *what = resume ? "resume" : peer ? "peer join" : "bulk join";
    uint64_t refuse_at = now_ms() + JOIN_REFUSAL_DELAY_MS;
    if (ctl >= 0) {
        struct join_note note = {.magic = JOIN_NOTE_MAGIC, .pid = p->jr.pid, .index = p->jr.index,
                                 .kind = resume ? JOIN_RESUME : peer ? JOIN_PEER : JOIN_BULK,
                                 .received = p->resume_received, .zstd = (p->ch.flags & HELLO_JOIN_ZSTD) != 0};
        memcpy(note.nonce, p->nonce, SCUDA_NONCE_LEN);
        memcpy(note.proof, p->jr.proof, SCUDA_PROOF_LEN);
        /* A plain join: the session gets a blocking socket; the parent
         * keeps its copy, only to refuse, and writes to it with
         * MSG_DONTWAIT. A TLS join stays non-blocking: the parent may
         * still refuse inside its TLS session, and the session's own TLS
         * session runs on a non-blocking socket anyway (tls.h). */
        if (!tls_of(p->fd)) fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) & ~O_NONBLOCK);
        if (fd_send(ctl, &note, sizeof note, p->fd, MSG_DONTWAIT) == 0) {
            p->state = ADM_JOIN_WAIT;
            p->refuse_at_ms = refuse_at;
            return;
        }
        LOG_WARN("%s: %s for session %u: cannot pass the connection on: %s", p->peer, what, p->jr.pid,
                 strerror(errno));
    } else {
        LOG_WARN("%s: %s refused: user %s has no session %u", p->peer, what, p->user, p->jr.pid);
    }
    refuse(p, WELCOME_BAD_JOIN, refusal_of(p), refuse_at);
}

static void admit(struct pending *p)
{
    /* A TLS link waits in poll() itself and needs a non-blocking socket. */
    if (!tls_of(p->fd)) fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) & ~O_NONBLOCK);
    struct admitted a = {.fd = p->fd, .flags = p->ch.flags, .build = p->ch.build, .user = p->user, .peer = p->peer,
                         .visible = p->ch.flags == HELLO_VISIBLE_DEVICES ? p->visible : NULL};
    p->fd = -1; /* the callee's now */
    cfg.admit(&a);
    drop(p);
}

/* A CUDA session, or one moving here: it runs on a GPU (gpu_pool.h). */
static int uses_gpu(uint16_t flags) { return hello_wants_cuda_session(flags) || flags == HELLO_MIGRATE_IN; }

/* A peer join (protocol.h, HELLO_PEER_JOIN): no token, the grant is the
 * credential, which only the granting session can check. So it is routed
 * by pid alone and refused, when bad, with the one refusal after the same
 * delay as any bad join (bulk_join.h). */
static void decide_peer(struct pending *p)
{
    snprintf(p->user, sizeof p->user, "peer");
    if (tls_of(p->fd) && p->tp.kind != PREFACE_JOIN) {
        LOG_WARN("%s refused: a peer join whose preface did not say so", p->peer);
        refuse(p, WELCOME_BAD_JOIN, PEER_REFUSAL, now_ms() + JOIN_REFUSAL_DELAY_MS);
        return;
    }
    route_join(p);
}

static void decide(struct pending *p)
{
    char msg[400];
    const struct client_hello *ch = &p->ch;
    if (ch->magic != SCUDA_MAGIC) {
        LOG_INFO("%s: not a SCUDA client; closed", p->peer);
        drop(p);
    } else if (ch->version != SCUDA_PROTOCOL_VERSION) {
        snprintf(msg, sizeof msg, "client speaks protocol v%u, server v%u; use a client and server of the same SCUDA version",
                 ch->version, (unsigned)SCUDA_PROTOCOL_VERSION);
        LOG_WARN("%s refused: %s", p->peer, msg);
        refuse(p, WELCOME_BAD_VERSION, msg, 0);
    } else if (hello_check_client_ops(ch, msg, sizeof msg) != 0) {
        LOG_WARN("%s refused: %s", p->peer, msg);
        refuse(p, WELCOME_BAD_VERSION, msg, 0);
    } else if (ch->flags == HELLO_PEER_JOIN) {
        decide_peer(p);
    } else if (authenticate(p) != 0) {
        LOG_WARN("%s refused: bad token", p->peer);
        refuse(p, WELCOME_BAD_TOKEN,
               "bad token; set SCUDA_TOKEN or SCUDA_TOKEN_FILE to a token in the server's token file", 0);
    } else if (!known_flags(ch->flags)) {
        snprintf(msg, sizeof msg, "unknown hello flags 0x%x; use a client and server of the same SCUDA version",
                 ch->flags);
        LOG_WARN("%s (user %s) refused: %s", p->peer, p->user, msg);
        refuse(p, WELCOME_BAD_VERSION, msg, 0);
    } else if (p->visible_bad) {
        LOG_WARN("%s (user %s) refused: a malformed CUDA_VISIBLE_DEVICES request", p->peer, p->user);
        refuse(p, WELCOME_BAD_VERSION, "a malformed CUDA_VISIBLE_DEVICES request (printable ASCII, at most 1022 "
                                       "bytes); use a client and server of the same SCUDA version", 0);
    } else if (joins_session(ch->flags) && tls_of(p->fd) && p->tp.kind != PREFACE_JOIN) {
        /* Its TLS keys may be in the kernel: the session could not run
         * the join's second TLS session on this socket. */
        LOG_WARN("%s (user %s) refused: a bulk join whose preface did not say so", p->peer, p->user);
        refuse(p, WELCOME_BAD_JOIN, "a bulk join must say so in its preface; use a client and server of the same "
                                    "SCUDA version", 0);
    } else if (joins_session(ch->flags)) {
        route_join(p); /* a join or a resume makes no session: no session limit */
    } else if (uses_gpu(ch->flags) && gpu_pool_place() == GPU_POOL_FULL) {
        snprintf(msg, sizeof msg, "server full: each of its %d GPUs has %d sessions; wait for one to end, or "
                 "raise --max-sessions-per-gpu", gpu_pool_size(), gpu_pool_max_per_gpu());
        LOG_WARN("%s (user %s) refused: %s", p->peer, p->user, msg);
        refuse(p, WELCOME_SERVER_FULL, msg, 0);
    } else if (children_sessions() >= cfg.max_sessions) {
        snprintf(msg, sizeof msg, "server full: %d sessions; wait for one to end, or raise --max-sessions",
                 cfg.max_sessions);
        LOG_WARN("%s (user %s) refused: %s", p->peer, p->user, msg);
        refuse(p, WELCOME_SERVER_FULL, msg, 0);
    } else {
        LOG_INFO("%s: user %s, client build %u.%u.%u, accepted", p->peer, p->user, ch->build >> 16, (ch->build >> 8) & 0xffu,
                 ch->build & 0xffu);
        admit(p);
    }
}

/* ---- the state machine -------------------------------------------------- */

/* Move bytes between p->io and the socket. Returns 1 when the transfer is
 * complete, 0 when it waits for the socket, -1 when the connection is
 * gone. */
static int transfer(struct pending *p, int writing)
{
    while (p->io_done < p->io_len) {
        long n = writing ? pending_write(p, p->io + p->io_done, p->io_len - p->io_done)
                         : pending_read(p, p->io + p->io_done, p->io_len - p->io_done);
        if (n < 0) return -1;
        if (n == 0) return 0;
        p->io_done += (size_t)n;
    }
    return 1;
}

/* The preface and, when the client asked for it, the TLS handshake: one
 * non-blocking step. Returns 1 when done (a TLS link is then attached to
 * the fd), 0 when it waits for the socket (p->transport_wants says what
 * for) or p was dropped. */
static int transport_done(struct pending *p)
{
    char err[256];
    int st = transport_phase_step(&p->tp, err, sizeof err);
    if (st == TLS_STEP_DONE) return 1;
    if (st == TLS_STEP_WANT_READ || st == TLS_STEP_WANT_WRITE) {
        p->transport_wants = st == TLS_STEP_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    /* A client refused at the preface was told why in its answer. */
    if (p->tp.refusal[0]) LOG_WARN("%s %s", p->peer, err);
    else LOG_INFO("%s: %s", p->peer, err);
    drop(p);
    return 0;
}

/* One step of p's handshake. Returns 1 when it moved on (step again), 0
 * when it waits, and drops p when it is over. */
static int step(struct pending *p)
{
    int rc;
    switch (p->state) {
    case ADM_TRANSPORT:
        if (!transport_done(p)) return 0;
        hello_encode_server((tokens_needed() ? HELLO_SERVER_TOKEN : 0) | HELLO_SERVER_VISIBLE | HELLO_SERVER_ZSTD,
                            p->nonce, p->io);
        expect_bytes(p, ADM_SEND_SERVER_HELLO, SERVER_HELLO_LEN);
        return 1;
    case ADM_SEND_SERVER_HELLO:
        if ((rc = transfer(p, 1)) <= 0) break;
        expect_bytes(p, ADM_READ_CLIENT_HELLO, CLIENT_HELLO_LEN);
        return 1;
    case ADM_READ_CLIENT_HELLO:
        if ((rc = transfer(p, 0)) <= 0) break;
        hello_decode_client(p->io, &p->ch);
        if (p->ch.magic == SCUDA_MAGIC && joins_session(p->ch.flags))
            expect_bytes(p, ADM_READ_JOIN_REQUEST, p->ch.flags == HELLO_RESUME ? RESUME_REQ_LEN : BULK_JOIN_LEN);
        else if (p->ch.magic == SCUDA_MAGIC && p->ch.flags == HELLO_VISIBLE_DEVICES)
            expect_bytes(p, ADM_READ_VISIBLE, VISIBLE_REQ_LEN);
        else
            p->state = ADM_DECIDE;
        return 1;
    case ADM_READ_JOIN_REQUEST:
        if ((rc = transfer(p, 0)) <= 0) break;
        if (p->ch.flags == HELLO_RESUME) hello_decode_resume_request(p->io, &p->jr, &p->resume_received);
        else hello_decode_join_request(p->io, &p->jr);
        if (tls_of(p->fd) && !tls_drained(tls_of(p->fd))) {
            /* Our client sends nothing more in this TLS session: the
             * session takes the socket over with a TLS session of its own
             * (bulk_join.c). Whatever came is not from our client. */
            LOG_WARN("%s: bulk join refused: data after the join request", p->peer);
            drop(p);
            return 0;
        }
        p->state = ADM_DECIDE;
        return 1;
    case ADM_READ_VISIBLE:
        if ((rc = transfer(p, 0)) <= 0) break;
        p->visible_bad = hello_decode_visible_request(p->io, p->visible) != 0;
        p->state = ADM_DECIDE;
        return 1;
    case ADM_DECIDE:
        decide(p);
        return p->fd >= 0 && p->state != ADM_JOIN_WAIT;
    case ADM_SEND_REFUSAL:
        if (now_ms() < p->refuse_at_ms) return 0;
        if ((rc = transfer(p, 1)) == 0) return 0;
        drop(p); /* sent, or the client is gone: either way, done */
        return 0;
    default:
        return 0;
    }
    if (rc < 0) {
        LOG_INFO("%s: the connection closed during the handshake", p->peer);
        drop(p);
    }
    return 0;
}

static short wanted_events(const struct pending *p)
{
    switch (p->state) {
    case ADM_TRANSPORT: return p->transport_wants;
    case ADM_SEND_SERVER_HELLO: return POLLOUT;
    case ADM_READ_CLIENT_HELLO:
    case ADM_READ_JOIN_REQUEST:
    case ADM_READ_VISIBLE: return POLLIN;
    case ADM_SEND_REFUSAL: return now_ms() >= p->refuse_at_ms ? POLLOUT : 0;
    default: return 0;
    }
}

/* Bytes TLS already took off the socket and holds for a read: poll()
 * would not say so. */
static int buffered_input(const struct pending *p)
{
    int reading = p->state == ADM_READ_CLIENT_HELLO || p->state == ADM_READ_JOIN_REQUEST ||
                  p->state == ADM_READ_VISIBLE;
    struct tls_link *l = reading ? tls_of(p->fd) : NULL;
    return l && !tls_drained(l);
}

int admission_poll_count(void) { return cfg.max_pending; }

void admission_poll_fill(struct pollfd *pf)
{
    for (int i = 0; i < cfg.max_pending; i++) {
        short ev = slots[i].fd >= 0 ? wanted_events(&slots[i]) : 0;
        pf[i] = (struct pollfd){.fd = ev ? slots[i].fd : -1, .events = ev};
    }
}

void admission_poll_done(const struct pollfd *pf, int n)
{
    uint64_t now = now_ms();
    for (int i = 0; i < cfg.max_pending; i++) {
        struct pending *p = &slots[i];
        if (p->fd < 0) continue;
        if (now >= p->deadline_ms) {
            /* A join in its session's hands may be welcomed there: the
             * parent closes its copy without a word. */
            if (p->state != ADM_JOIN_WAIT && p->state != ADM_SEND_REFUSAL)
                LOG_INFO("%s: no handshake within %d ms of connecting; closed", p->peer, ADMISSION_DEADLINE_MS);
            if (p->state != ADM_JOIN_WAIT && p->state != ADM_SEND_REFUSAL) timed_out++;
            drop(p);
            continue;
        }
        int ready = i < n && pf[i].fd == p->fd && pf[i].revents;
        int due = p->state == ADM_DECIDE || buffered_input(p) ||
                  (p->state == ADM_SEND_REFUSAL && now >= p->refuse_at_ms);
        if (ready || due)
            while (step(p)) {
            }
    }
}

int admission_timeout_ms(int cap_ms)
{
    uint64_t now = now_ms(), next = now + (uint64_t)cap_ms;
    for (int i = 0; i < cfg.max_pending; i++) {
        const struct pending *p = &slots[i];
        if (p->fd < 0) continue;
        if (p->state == ADM_DECIDE || buffered_input(p)) return 0;
        if (p->deadline_ms < next) next = p->deadline_ms;
        if (p->state == ADM_SEND_REFUSAL && p->refuse_at_ms < next) next = p->refuse_at_ms;
    }
    return next > now ? (int)(next - now) : 0;
}

void admission_join_verdict(const uint8_t nonce[16], int ok)
{
    for (int i = 0; i < cfg.max_pending; i++) {
        struct pending *p = &slots[i];
        if (p->fd < 0 || p->state != ADM_JOIN_WAIT || memcmp(p->nonce, nonce, SCUDA_NONCE_LEN) != 0) continue;
        if (ok) {
            LOG_DEBUG("%s: bulk connection %u joined session %u", p->peer, p->jr.index, p->jr.pid);
            drop(p); /* the session holds the connection; this was the parent's copy */
        } else {
            refuse(p, WELCOME_BAD_JOIN, refusal_of(p), p->refuse_at_ms);
        }
        return;
    }
}

void admission_forget_in_child(void)
{
    /* The parent is one thread: its TLS links are whole here, and freeing
     * them sends nothing. */
    for (int i = 0; i < cfg.max_pending; i++) {
        transport_phase_abort(&slots[i].tp);
        if (slots[i].fd >= 0) io_close(slots[i].fd);
    }
}
