/* resume.c - see resume.h.
 *
 * A connection that breaks while both ends live (a Wi-Fi change, a NAT
 * timeout, a relay restart) is replaced: the resumer thread connects
 * again, proves the session's resume secret, and both ends send again
 * what the other lacks. Calls wait meanwhile (conn_send, conn_wait); when
 * SCUDA_RESUME_WITHIN runs out, they fail as for a lost connection.
 *
 * Lock order: conn.c's lock before the resume state's lock; nothing here calls into
 * conn.c while it holds the resume state's lock. */
#define _GNU_SOURCE
#include "resume.h"
#include "conn.h"
#include "failover.h"
#include "send_queue.h"
#include "servers.h"

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
#include "../common/clock.h"

#define CONNECT_TIMEOUT_MS 5000 /* as conn.c's */
#define DEAD_PEER_S 10          /* as conn.c's */
#define RESUME_FIRST_DELAY_MS 50
#define RESUME_MAX_DELAY_MS 1000
/* The least a failover to a standby gets after silence (3.10's 250 ms
 * is for one reconnect to the same server). */
#define FAILOVER_MIN_MS 750



void resume_setup(struct server *s, uint32_t session_pid, const uint8_t secret[RESUME_SECRET_LEN],
                  uint32_t session_within_ms)
{
    long mine = scuda_resume_within_ms();
    if (mine < 0) {
        LOG_WARN("SCUDA_RESUME_WITHIN='%s' is not a number of seconds from 0 (never) to 3600; using %d",
                 getenv("SCUDA_RESUME_WITHIN"), SCUDA_RESUME_WITHIN_DEFAULT_S);
        mine = SCUDA_RESUME_WITHIN_DEFAULT_S * 1000L;
    }
    pthread_mutex_lock(&s->r.lock);
    s->r.session_pid = session_pid;
    pthread_mutex_unlock(&s->r.lock);
    memcpy(s->r.secret, secret, RESUME_SECRET_LEN);
    s->r.within_ms = (uint32_t)mine < session_within_ms ? (uint32_t)mine : session_within_ms;
}

uint32_t resume_within_ms(struct server *s) { return s->r.within_ms; }
unsigned resume_moves(struct server *s) { return atomic_load(&s->r.moves); }
unsigned resume_count(struct server *s) { return atomic_load(&s->r.resumes); }

int resume_moving(struct server *s)
{
    pthread_mutex_lock(&s->r.lock);
    int m = s->r.moving;
    pthread_mutex_unlock(&s->r.lock);
    return m;
}

int resume_note_move(struct server *s, const uint8_t *buf, uint32_t len)
{
    wire_reader r;
    wr_init(&r, buf, len);
    struct msg_arena arena;
    msg_arena_init(&arena);
    struct msg_scuda_moved_req m;
    int ok = msg_scuda_moved_req_get(&r, &arena, &m) == 0 && r.left == 0 && m.to && m.to[0] &&
             strlen(m.to) < sizeof s->r.move_to && m.pid != 0;
    if (ok) {
        pthread_mutex_lock(&s->r.lock);
        snprintf(s->r.move_to, sizeof s->r.move_to, "%s", m.to);
        s->r.move_pid = m.pid;
        s->r.move = m;
        s->r.move.to = NULL;
        s->r.moving = 1;
        pthread_mutex_unlock(&s->r.lock);
    }
    msg_arena_free(&arena);
    return ok ? 0 : -1;
}

/* ---- one try ---------------------------------------------------------------------- */

/* Connect, prove the secret, learn what the session has. Returns the fd;
 * -1 to try again; -2 when the session refused (it is gone, or never was
 * ours: trying again cannot help); -3 when a move's server refused or is
 * not trusted. why says what. */
static int resume_connect(struct server *s, const char *addr, uint32_t pid, int moving, int timeout_ms, uint64_t have,
                          uint64_t *server_has, char *why, size_t whylen)
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
    hello_resume_request(req, pid, s->r.secret, nonce, have);
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
static int resume_install(struct server *s, int fd, uint64_t server_has)
{
    int old = conn_swap_fd(s, fd);
    long again = sendq_resume(&s->q, fd, server_has, 0);
    io_close(old);
    conn_note_acked(s, server_has);
    return again < 0 ? -1 : 0;
}

/* ---- moves ---------------------------------------------------------------------- */

/* A move succeeded: the session is on the other server from now on. */
static void moved_there(struct server *s)
{
    char from[256], to[256];
    snprintf(from, sizeof from, "%s", conn_addr(s));
    pthread_mutex_lock(&s->r.lock);
    snprintf(to, sizeof to, "%s", s->r.move_to);
    s->r.session_pid = s->r.move_pid;
    s->r.moving = 0;
    struct msg_scuda_moved_req m = s->r.move;
    pthread_mutex_unlock(&s->r.lock);
    conn_set_addr(s, to);
    atomic_fetch_add(&s->r.moves, 1);
    double gib = (double)m.bytes / (1u << 30);
    LOG_WARN("session moved from %s to %s in %.0f ms (hold %.1f ms, replay %.1f ms, memory %.1f %s in %.0f ms)",
             from, to, m.total_ns / 1e6 + (double)(now_ms() - s->r.broke_ms), m.hold_ns / 1e6, m.replay_ns / 1e6,
             gib >= 0.1 ? gib : (double)m.bytes / (1u << 20), gib >= 0.1 ? "GiB" : "MiB", m.copy_ns / 1e6);
}

/* A move that cannot reach the other server goes back to the one it came
 * from, which keeps the session until --resume-within runs out. */
static void move_abandoned(struct server *s, const char *why)
{
    char to[256];
    pthread_mutex_lock(&s->r.lock);
    s->r.moving = 0;
    snprintf(to, sizeof to, "%s", s->r.move_to);
    pthread_mutex_unlock(&s->r.lock);
    LOG_WARN("cannot resume the session on %s (%s): resuming it on %s, where it came from%s", to, why,
             conn_addr(s), strstr(why, "trust") || strstr(why, "certificate") || strstr(why, "fingerprint")
                              ? "; to follow moves over TLS, trust every server the session may move to "
                                "(SCUDA_TLS_CA, or a known_hosts entry for each; docs/operate.md, Moving a session)"
                              : "");
}

/* ---- failover (failover.h) -------------------------------------------------------- */

void resume_failed_over(struct server *s, uint32_t pid, const char *addr)
{
    pthread_mutex_lock(&s->r.lock);
    s->r.session_pid = pid;
    pthread_mutex_unlock(&s->r.lock);
    conn_set_addr(s, addr);
    atomic_fetch_add(&s->r.moves, 1); /* bulk.c: connections to the new server */
}

/* One try on the standby's parked copy: 1 when the session lives there
 * now, 0 to try again, -1 when the standby cannot take it. */
static int try_failover(struct server *s, uint64_t deadline, char *why, size_t whylen)
{
    char addr[256];
    uint32_t pid;
    uint64_t have, server_has = 0, now = now_ms();
    if (!failover_target(s, addr, sizeof addr, &pid, &have)) return -1;
    uint64_t left = deadline > now ? deadline - now : 1;
    int fd = resume_connect(s, addr, pid, 1, left < CONNECT_TIMEOUT_MS ? (int)left : CONNECT_TIMEOUT_MS, have,
                            &server_has, why, whylen);
    if (fd >= 0 && failover_install(s, fd, server_has) == 0) {
        LOG_WARN("the session failed over to standby %s %llu ms after the break", addr,
                 (unsigned long long)(now_ms() - s->r.broke_ms));
        return 1;
    }
    if (fd >= 0) snprintf(why, whylen, "the standby's connection broke at once");
    if (fd == -2 || fd == -3 || fd >= 0) {
        failover_abandon(s, why);
        return -1;
    }
    return 0;
}

/* ---- the resumer thread ------------------------------------------------------------ */

static void *resume_main(void *server)
{
    struct server *s = server;
    uint64_t deadline = s->r.broke_ms + s->r.window_ms, delay = RESUME_FIRST_DELAY_MS;
    /* A parked copy on a standby (failover.h) is tried once the server did
     * not take the session back at once, or at once after silence; on
     * loopback or a LAN the standby answers well within FAILOVER_MIN_MS. */
    int standby = failover_target && failover_target(s, (char[256]){0}, 256, &(uint32_t){0}, &(uint64_t){0});
    int silence = s->r.window_ms < s->r.within_ms;
    if (standby && deadline < s->r.broke_ms + FAILOVER_MIN_MS) deadline = s->r.broke_ms + FAILOVER_MIN_MS;
    /* A move tries the new server for half the time, then the old one. */
    uint64_t move_deadline = s->r.broke_ms + s->r.within_ms / 2;
    char why[512] = "", final[768], where[256];
    for (int attempt = 1;; attempt++) {
        uint64_t now = now_ms();
        if (now >= deadline) break;
        int moving = resume_moving(s);
        if (standby && !moving && (attempt > 1 || silence)) {
            int rc = try_failover(s, deadline, why, sizeof why);
            if (rc > 0) {
                atomic_fetch_add(&s->r.resumes, 1);
                conn_resume_over(s, 1, NULL);
                return NULL;
            }
            if (rc < 0) {
                snprintf(final, sizeof final, "%s, and the standby could not take the session (%s)",
                         s->r.broke_why, why);
                conn_resume_over(s, 0, final);
                return NULL;
            }
            LOG_INFO("standby: failover attempt %d failed: %s; retrying", attempt, why);
            nanosleep(&(struct timespec){0, RESUME_FIRST_DELAY_MS * 1000000L}, NULL);
            continue;
        }
        if (moving && now >= move_deadline) {
            move_abandoned(s, why[0] ? why : "no answer");
            moving = 0;
        }
        pthread_mutex_lock(&s->r.lock);
        uint32_t pid = moving ? s->r.move_pid : s->r.session_pid;
        snprintf(where, sizeof where, "%s", moving ? s->r.move_to : conn_addr(s));
        pthread_mutex_unlock(&s->r.lock);
        uint64_t left = (moving ? move_deadline : deadline) - now;
        uint64_t server_has = 0;
        int fd = resume_connect(s, where, pid, moving, left < CONNECT_TIMEOUT_MS ? (int)left : CONNECT_TIMEOUT_MS,
                                conn_frames_received(s), &server_has, why, sizeof why);
        if (fd >= 0 && resume_install(s, fd, server_has) == 0) {
            if (moving) moved_there(s);
            else LOG_WARN("resumed session on %s after %llu ms", where,
                          (unsigned long long)(now_ms() - s->r.broke_ms));
            atomic_fetch_add(&s->r.resumes, 1);
            conn_resume_over(s, 1, NULL);
            return NULL;
        }
        if (moving && (fd == -2 || fd == -3)) {
            move_abandoned(s, why);
            delay = RESUME_FIRST_DELAY_MS;
            continue;
        }
        if (fd == -2 && standby) continue; /* the server is up, its session gone: the standby has it */
        if (fd == -2) {
            snprintf(final, sizeof final, "%s, and the session cannot be resumed (%s): it ended, or the server "
                     "restarted", s->r.broke_why, why);
            conn_resume_over(s, 0, final);
            return NULL;
        }
        if (fd >= 0) snprintf(why, sizeof why, "the new connection broke at once");
        LOG_INFO("server %s: resume attempt %d failed: %s; retrying", where, attempt, why);
        now = now_ms();
        uint64_t nap = now + delay < deadline ? delay : (deadline > now ? deadline - now : 0);
        nanosleep(&(struct timespec){(time_t)(nap / 1000), (long)(nap % 1000) * 1000000L}, NULL);
        delay = delay * 2 < RESUME_MAX_DELAY_MS ? delay * 2 : RESUME_MAX_DELAY_MS;
    }
    snprintf(final, sizeof final, "%s, and no resume within %g s (SCUDA_RESUME_WITHIN; last try: %s)",
             s->r.broke_why, (double)s->r.window_ms / 1000, why[0] ? why : "none");
    conn_resume_over(s, 0, final);
    return NULL;
}

int resume_start(struct server *s, const char *why, uint32_t window_ms)
{
    const char *addr = conn_addr(s);
    s->r.broke_ms = now_ms();
    s->r.window_ms = window_ms;
    snprintf(s->r.broke_why, sizeof s->r.broke_why, "%s", why);
    pthread_mutex_lock(&s->r.lock);
    int moving = s->r.moving;
    char to[256];
    snprintf(to, sizeof to, "%s", s->r.move_to);
    uint32_t pid = s->r.move_pid;
    pthread_mutex_unlock(&s->r.lock);
    if (moving)
        LOG_INFO("server %s: the session moves to %s (session %u there); resuming it there", addr, to, pid);
    else
        LOG_WARN("lost the connection to server %s: %s; resuming the session, retrying for up to %g s "
                 "(SCUDA_RESUME_WITHIN%s)", addr, why, (double)window_ms / 1000,
                 window_ms < s->r.within_ms ? "; a silent server gets 0.25 s" : "");
    pthread_t t;
    if (pthread_create(&t, NULL, resume_main, s) != 0) return -1;
    pthread_detach(t);
    return 0;
}
