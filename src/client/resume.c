/* resume.c - see resume.h.
 *
 * A connection that breaks while both ends live (a Wi-Fi change, a NAT
 * timeout, a relay restart) is replaced: the resumer thread connects
 * again, proves the session's resume secret, and both ends send again
 * what the other lacks. Calls wait meanwhile (conn_send, conn_wait); when
 * SCUDA_RESUME_WITHIN runs out, they fail as for a lost connection.
 *
 * Lock order: conn.c's lock before res.lock; nothing here calls into
 * conn.c while it holds res.lock. */
#define _GNU_SOURCE
#include "resume.h"
#include "conn.h"
#include "send_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/config.h"
#include "../common/dial.h"
#include "../common/hello.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/tls.h"
#include "../common/transport.h"

#define CONNECT_TIMEOUT_MS 5000 /* as conn.c's */
#define DEAD_PEER_S 10          /* as conn.c's */
#define RESUME_FIRST_DELAY_MS 50
#define RESUME_MAX_DELAY_MS 1000

static struct {
    pthread_mutex_t lock; /* guards the move fields and session_pid */
    uint32_t session_pid;
    uint8_t secret[RESUME_SECRET_LEN];
    uint32_t within_ms; /* the shorter of ours and the session's; 0 = no resume */
    /* This break's (written before the resumer starts, read by it). */
    uint32_t window_ms; /* within_ms, or less after silence */
    uint64_t broke_ms;
    char broke_why[160];
    /* A move (docs/architecture.md 9.17, "The switch"): the session said
     * it now lives on another server; the resumer goes there. */
    int moving;
    char move_to[256];
    uint32_t move_pid;
    struct msg_scuda_moved_req move; /* its timings, for the log */
    _Atomic unsigned moves;          /* completed moves (bulk.c opens its connections again) */
    _Atomic unsigned resumes;        /* completed resumes, moves included */
} res = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

void resume_setup(uint32_t session_pid, const uint8_t secret[RESUME_SECRET_LEN], uint32_t session_within_ms)
{
    long mine = scuda_resume_within_ms();
    if (mine < 0) {
        LOG_WARN("SCUDA_RESUME_WITHIN='%s' is not a number of seconds from 0 (never) to 3600; using %d",
                 getenv("SCUDA_RESUME_WITHIN"), SCUDA_RESUME_WITHIN_DEFAULT_S);
        mine = SCUDA_RESUME_WITHIN_DEFAULT_S * 1000L;
    }
    pthread_mutex_lock(&res.lock);
    res.session_pid = session_pid;
    pthread_mutex_unlock(&res.lock);
    memcpy(res.secret, secret, RESUME_SECRET_LEN);
    res.within_ms = (uint32_t)mine < session_within_ms ? (uint32_t)mine : session_within_ms;
}

uint32_t resume_within_ms(void) { return res.within_ms; }
unsigned resume_moves(void) { return atomic_load(&res.moves); }
unsigned resume_count(void) { return atomic_load(&res.resumes); }

int resume_moving(void)
{
    pthread_mutex_lock(&res.lock);
    int m = res.moving;
    pthread_mutex_unlock(&res.lock);
    return m;
}

int resume_note_move(const uint8_t *buf, uint32_t len)
{
    wire_reader r;
    wr_init(&r, buf, len);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_moved_req m;
    int ok = msg_scuda_moved_req_get(&r, &arena, &m) == 0 && r.left == 0 && m.to && m.to[0] &&
             strlen(m.to) < sizeof res.move_to && m.pid != 0;
    if (ok) {
        pthread_mutex_lock(&res.lock);
        snprintf(res.move_to, sizeof res.move_to, "%s", m.to);
        res.move_pid = m.pid;
        res.move = m;
        res.move.to = NULL;
        res.moving = 1;
        pthread_mutex_unlock(&res.lock);
    }
    msg_arena_free(&arena);
    return ok ? 0 : -1;
}

/* ---- one try ---------------------------------------------------------------------- */

/* Connect, prove the secret, learn what the session has. Returns the fd;
 * -1 to try again; -2 when the session refused (it is gone, or never was
 * ours: trying again cannot help); -3 when a move's server refused or is
 * not trusted. why says what. */
static int resume_connect(const char *addr, uint32_t pid, int moving, int timeout_ms, uint64_t *server_has,
                          char *why, size_t whylen)
{
    /* Whatever dial says (unreachable, closed at its first bytes, a TLS
     * handshake that failed), a relay that restarts can say it for a
     * while: only the session's own refusal ends the retries early. */
    int fd = dial(addr, timeout_ms, PREFACE_JOIN, why, whylen);
    if (fd == -2 && moving) return -3; /* reached, but refused or not trusted: only a move gives up */
    if (fd < 0) return -1;
    uint8_t nonce[SCUDA_NONCE_LEN], req[RESUME_REQ_LEN];
    uint32_t status;
    char msg[256];
    int rc = -1;
    if (hello_read_server(fd, timeout_ms, nonce, why, whylen) != 0) goto out;
    hello_resume_request(req, pid, res.secret, nonce, conn_frames_received());
    if (hello_send_client(fd, HELLO_RESUME, 0, scuda_token(), nonce, req, sizeof req) != 0) {
        snprintf(why, whylen, "the connection closed during the handshake");
        goto out;
    }
    /* Over TLS the session runs a TLS session of its own, in which the
     * request is repeated, as for a bulk join (bulk_join.c). */
    int second = dial_second_tls(fd, addr, timeout_ms, why, whylen);
    if (second < 0) goto out;
    if (tls_of(fd) && second == 0 && io_write_full(fd, req, BULK_JOIN_LEN) != 0) {
        snprintf(why, whylen, "the connection closed during the second TLS session");
        goto out;
    }
    if (hello_read_welcome(fd, timeout_ms, &status, msg, sizeof msg) != 0) {
        snprintf(why, whylen, "%s", msg[0] ? msg : "no answer");
        goto out;
    }
    if (status != WELCOME_OK || strcmp(msg, "resumed") != 0) {
        snprintf(why, whylen, "refused: %.200s", msg);
        rc = -2;
        goto out;
    }
    if (io_read_full_timeout(fd, server_has, sizeof *server_has, timeout_ms) != 0) {
        snprintf(why, whylen, "no count after the welcome");
        goto out;
    }
    tcp_tune(fd, DEAD_PEER_S);
    return fd;
out:
    io_close(fd);
    return rc;
}

/* Make fd the connection: send again what the session lacks, then let
 * everyone go on. Returns 0, or -1 when fd broke already. */
static int resume_install(int fd, uint64_t server_has)
{
    int old = conn_swap_fd(fd);
    long again = sendq_resume(fd, server_has);
    io_close(old);
    conn_note_acked(server_has);
    return again < 0 ? -1 : 0;
}

/* ---- moves ---------------------------------------------------------------------- */

/* A move succeeded: the session is on the other server from now on. */
static void moved_there(void)
{
    char from[256], to[256];
    snprintf(from, sizeof from, "%s", conn_addr());
    pthread_mutex_lock(&res.lock);
    snprintf(to, sizeof to, "%s", res.move_to);
    res.session_pid = res.move_pid;
    res.moving = 0;
    struct msg_scuda_moved_req m = res.move;
    pthread_mutex_unlock(&res.lock);
    conn_set_addr(to);
    atomic_fetch_add(&res.moves, 1);
    double gib = (double)m.bytes / (1u << 30);
    LOG_WARN("session moved from %s to %s in %.0f ms (hold %.1f ms, replay %.1f ms, memory %.1f %s in %.0f ms)",
             from, to, m.total_ns / 1e6 + (double)(mono_ms() - res.broke_ms), m.hold_ns / 1e6, m.replay_ns / 1e6,
             gib >= 0.1 ? gib : (double)m.bytes / (1u << 20), gib >= 0.1 ? "GiB" : "MiB", m.copy_ns / 1e6);
}

/* A move that cannot reach the other server goes back to the one it came
 * from, which keeps the session until --resume-within runs out. */
static void move_abandoned(const char *why)
{
    char to[256];
    pthread_mutex_lock(&res.lock);
    res.moving = 0;
    snprintf(to, sizeof to, "%s", res.move_to);
    pthread_mutex_unlock(&res.lock);
    LOG_WARN("cannot resume the session on %s (%s): resuming it on %s, where it came from%s", to, why,
             conn_addr(), strstr(why, "trust") || strstr(why, "certificate") || strstr(why, "fingerprint")
                              ? "; to follow moves over TLS, trust every server the session may move to "
                                "(SCUDA_TLS_CA, or a known_hosts entry for each; docs/operate.md, Moving a session)"
                              : "");
}

/* ---- the resumer thread ------------------------------------------------------------ */

static void *resume_main(void *arg)
{
    (void)arg;
    uint64_t deadline = res.broke_ms + res.window_ms, delay = RESUME_FIRST_DELAY_MS;
    /* A move tries the new server for half the time, then the old one. */
    uint64_t move_deadline = res.broke_ms + res.within_ms / 2;
    char why[512] = "", final[768], where[256];
    for (int attempt = 1;; attempt++) {
        uint64_t now = mono_ms();
        if (now >= deadline) break;
        int moving = resume_moving();
        if (moving && now >= move_deadline) {
            move_abandoned(why[0] ? why : "no answer");
            moving = 0;
        }
        pthread_mutex_lock(&res.lock);
        uint32_t pid = moving ? res.move_pid : res.session_pid;
        snprintf(where, sizeof where, "%s", moving ? res.move_to : conn_addr());
        pthread_mutex_unlock(&res.lock);
        uint64_t left = (moving ? move_deadline : deadline) - now;
        uint64_t server_has = 0;
        int fd = resume_connect(where, pid, moving, left < CONNECT_TIMEOUT_MS ? (int)left : CONNECT_TIMEOUT_MS,
                                &server_has, why, sizeof why);
        if (fd >= 0 && resume_install(fd, server_has) == 0) {
            if (moving) moved_there();
            else LOG_WARN("resumed session on %s after %llu ms", where,
                          (unsigned long long)(mono_ms() - res.broke_ms));
            atomic_fetch_add(&res.resumes, 1);
            conn_resume_over(1, NULL);
            return NULL;
        }
        if (moving && (fd == -2 || fd == -3)) {
            move_abandoned(why);
            delay = RESUME_FIRST_DELAY_MS;
            continue;
        }
        if (fd == -2) {
            snprintf(final, sizeof final, "%s, and the session cannot be resumed (%s): it ended, or the server "
                     "restarted", res.broke_why, why);
            conn_resume_over(0, final);
            return NULL;
        }
        if (fd >= 0) snprintf(why, sizeof why, "the new connection broke at once");
        LOG_INFO("server %s: resume attempt %d failed: %s; retrying", where, attempt, why);
        now = mono_ms();
        uint64_t nap = now + delay < deadline ? delay : (deadline > now ? deadline - now : 0);
        nanosleep(&(struct timespec){(time_t)(nap / 1000), (long)(nap % 1000) * 1000000L}, NULL);
        delay = delay * 2 < RESUME_MAX_DELAY_MS ? delay * 2 : RESUME_MAX_DELAY_MS;
    }
    snprintf(final, sizeof final, "%s, and no resume within %g s (SCUDA_RESUME_WITHIN; last try: %s)",
             res.broke_why, (double)res.window_ms / 1000, why[0] ? why : "none");
    conn_resume_over(0, final);
    return NULL;
}

int resume_start(const char *addr, const char *why, uint32_t window_ms)
{
    res.broke_ms = mono_ms();
    res.window_ms = window_ms;
    snprintf(res.broke_why, sizeof res.broke_why, "%s", why);
    pthread_mutex_lock(&res.lock);
    int moving = res.moving;
    char to[256];
    snprintf(to, sizeof to, "%s", res.move_to);
    uint32_t pid = res.move_pid;
    pthread_mutex_unlock(&res.lock);
    if (moving)
        LOG_INFO("server %s: the session moves to %s (session %u there); resuming it there", addr, to, pid);
    else
        LOG_WARN("lost the connection to server %s: %s; resuming the session, retrying for up to %g s "
                 "(SCUDA_RESUME_WITHIN%s)", addr, why, (double)window_ms / 1000,
                 window_ms < res.within_ms ? "; a silent server gets 0.25 s" : "");
    pthread_t t;
    if (pthread_create(&t, NULL, resume_main, NULL) != 0) return -1;
    pthread_detach(t);
    return 0;
}
