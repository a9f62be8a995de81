/* peer_link.c - see peer_link.h: the slots, the grants, the joins, and
 * the handlers that set a link up (scuda_peer_grant, scuda_peer_connect). */
#define _GNU_SOURCE
#include "peer_link.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bulk_join.h"
#include "dispatch.h"
#include "handlers.gen.h"
#include "session.h"
#include "staging.h"
#include "../common/auth.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/tls.h"
#include "../common/transport.h"
#include "../common/why.h"
#include "../common/clock.h"

/* SLOT_JOINING: admitted, its welcome not yet sent by the join thread;
 * the link is used only once it is SLOT_LINKED. */
enum slot_state { SLOT_FREE, SLOT_GRANTED, SLOT_DIALING, SLOT_JOINING, SLOT_LINKED };
/* How long a user of a link waits for the join thread to finish its
 * welcome (microseconds, unless that thread is starved). */
#define JOINING_WAIT_MS 5000

struct slot {
    enum slot_state state;
    uint8_t secret[PEER_SECRET_LEN]; /* SLOT_GRANTED: the grant's */
    uint64_t expires_ms;             /* SLOT_GRANTED */
    int fd;                          /* SLOT_LINKED */
    pthread_mutex_t copy;            /* held by the copy on the link */
    struct staging_pool *pool;       /* kept for the slot's next link too */
    struct staging *buf[2];
};

static struct {
    pthread_mutex_t lock; /* the slots' states; never held across I/O */
    pthread_cond_t joined; /* a slot left SLOT_JOINING */
    struct slot slots[PEER_LINKS_MAX];
} peer = {.lock = PTHREAD_MUTEX_INITIALIZER, .joined = PTHREAD_COND_INITIALIZER};

static pthread_once_t peer_once = PTHREAD_ONCE_INIT;

static void peer_init(void)
{
    for (int i = 0; i < PEER_LINKS_MAX; i++) {
        pthread_mutex_init(&peer.slots[i].copy, NULL);
        peer.slots[i].fd = -1;
    }
}


/* A slot for a new grant or link: a free one, or one whose grant expired.
 * Locked. Returns its index, or -1. */
static int take_slot_locked(enum slot_state as)
{
    uint64_t now = now_ms();
    for (int i = 0; i < PEER_LINKS_MAX; i++) {
        struct slot *sl = &peer.slots[i];
        if (sl->state == SLOT_FREE || (sl->state == SLOT_GRANTED && now >= sl->expires_ms)) {
            memset(sl->secret, 0, sizeof sl->secret);
            sl->state = as;
            return i;
        }
    }
    return -1;
}

/* ---- joins (bulk_join.c) ------------------------------------------------ */

static int check_locked(const struct join_note *note, char *why, size_t whylen)
{
    if (note->index >= PEER_LINKS_MAX) return why_fail(why, whylen, "no link slot %u", note->index);
    struct slot *sl = &peer.slots[note->index];
    if (sl->state != SLOT_GRANTED) return why_fail(why, whylen, "slot %u holds no grant", note->index);
    if (now_ms() >= sl->expires_ms) return why_fail(why, whylen, "the grant of slot %u expired", note->index);
    uint8_t want[SCUDA_PROOF_LEN];
    auth_join_proof(sl->secret, note->nonce, note->pid, note->index, want);
    if (!auth_equal(want, note->proof, sizeof want))
        return why_fail(why, whylen, "a wrong proof for the grant of slot %u", note->index);
    return 0;
}

int peer_join_check(const struct join_note *note, char *why, size_t whylen)
{
    pthread_once(&peer_once, peer_init);
    pthread_mutex_lock(&peer.lock);
    int rc = check_locked(note, why, whylen);
    pthread_mutex_unlock(&peer.lock);
    return rc;
}

int peer_join_admit(const struct join_note *note, int fd, char *why, size_t whylen)
{
    pthread_once(&peer_once, peer_init);
    pthread_mutex_lock(&peer.lock);
    int rc = check_locked(note, why, whylen);
    if (rc == 0) {
        struct slot *sl = &peer.slots[note->index];
        memset(sl->secret, 0, sizeof sl->secret); /* one join per grant */
        sl->state = SLOT_JOINING;
        sl->fd = fd;
        io_set_timeout(fd, PEER_IO_TIMEOUT_MS);
    }
    pthread_mutex_unlock(&peer.lock);
    if (rc == 0) LOG_INFO("peer link %u: joined", note->index);
    return rc;
}

void peer_join_welcomed(uint32_t slot)
{
    pthread_mutex_lock(&peer.lock);
    if (slot < PEER_LINKS_MAX && peer.slots[slot].state == SLOT_JOINING) peer.slots[slot].state = SLOT_LINKED;
    pthread_cond_broadcast(&peer.joined);
    pthread_mutex_unlock(&peer.lock);
}

/* Locked: 1 when slot sl holds a link, after its welcome went (waiting
 * for that, bounded). */
static int linked_locked(struct slot *sl)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += JOINING_WAIT_MS / 1000;
    while (sl->state == SLOT_JOINING && pthread_cond_timedwait(&peer.joined, &peer.lock, &until) == 0) {
    }
    return sl->state == SLOT_LINKED;
}

/* ---- copies' holds (peer_copy.c) ---------------------------------------- */

/* The slot's buffers, made at its first copy (a current context is needed
 * to pin them). Returns 0, or -1. */
static int ensure_buffers(struct slot *sl)
{
    if (sl->buf[0]) return 0;
    if (!sl->pool && !(sl->pool = staging_pool_new(2, PEER_CHUNK))) return -1;
    if (staging_pool_fill(sl->pool) != 0) return -1;
    sl->buf[0] = staging_pool_take(sl->pool);
    sl->buf[1] = staging_pool_take(sl->pool);
    return sl->buf[0] && sl->buf[1] ? 0 : -1;
}

int peer_link_acquire(uint32_t slot, struct peer_hold *h)
{
    pthread_once(&peer_once, peer_init);
    if (slot >= PEER_LINKS_MAX) return -1;
    struct slot *sl = &peer.slots[slot];
    pthread_mutex_lock(&sl->copy);
    pthread_mutex_lock(&peer.lock);
    int linked = linked_locked(sl);
    pthread_mutex_unlock(&peer.lock);
    if (!linked || ensure_buffers(sl) != 0) {
        if (linked) LOG_WARN("peer link %u: no staging buffers", slot);
        pthread_mutex_unlock(&sl->copy);
        return -1;
    }
    h->slot = slot;
    h->fd = sl->fd;
    h->buf[0] = sl->buf[0];
    h->buf[1] = sl->buf[1];
    return 0;
}

void peer_link_release(struct peer_hold *h, int broken)
{
    struct slot *sl = &peer.slots[h->slot];
    if (broken) {
        LOG_WARN("peer link %u: closed (out of step or dead)", h->slot);
        pthread_mutex_lock(&peer.lock);
        io_close(sl->fd);
        sl->fd = -1;
        sl->state = SLOT_FREE;
        pthread_mutex_unlock(&peer.lock);
    }
    pthread_mutex_unlock(&sl->copy);
}

void peer_link_forget_all(void)
{
    pthread_once(&peer_once, peer_init);
    pthread_mutex_lock(&peer.lock);
    for (int i = 0; i < PEER_LINKS_MAX; i++) {
        struct slot *sl = &peer.slots[i];
        if (sl->state == SLOT_LINKED || sl->state == SLOT_JOINING) io_close(sl->fd);
        memset(sl->secret, 0, sizeof sl->secret);
        sl->state = SLOT_FREE;
        sl->fd = -1;
        sl->pool = NULL;
        sl->buf[0] = sl->buf[1] = NULL;
    }
    pthread_mutex_unlock(&peer.lock);
}

/* ---- the handlers ------------------------------------------------------- */

_Static_assert(sizeof ((struct msg_scuda_peer_grant_rep *)0)->secret == PEER_SECRET_LEN,
               "scuda_peer_grant's secret is PEER_SECRET_LEN bytes");

int peer_grant(uint8_t secret[PEER_SECRET_LEN])
{
    pthread_once(&peer_once, peer_init);
    pthread_mutex_lock(&peer.lock);
    int i = take_slot_locked(SLOT_GRANTED);
    if (i >= 0) {
        struct slot *sl = &peer.slots[i];
        auth_nonce(sl->secret, sizeof sl->secret);
        sl->expires_ms = now_ms() + PEER_GRANT_TTL_MS;
        memcpy(secret, sl->secret, PEER_SECRET_LEN);
    }
    pthread_mutex_unlock(&peer.lock);
    return i;
}

int peer_link_take(uint32_t slot)
{
    pthread_once(&peer_once, peer_init);
    if (slot >= PEER_LINKS_MAX) return -1;
    int fd = -1;
    pthread_mutex_lock(&peer.lock);
    struct slot *sl = &peer.slots[slot];
    if (linked_locked(sl)) {
        fd = sl->fd;
        sl->fd = -1;
        sl->state = SLOT_FREE;
    }
    pthread_mutex_unlock(&peer.lock);
    return fd;
}

CUresult srv_scuda_peer_grant(srv_call *c)
{
    struct msg_scuda_peer_grant_req m;
    if (msg_scuda_peer_grant_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    struct msg_scuda_peer_grant_rep rep = {.pid = (uint32_t)getpid()};
    int i = peer_grant(rep.secret);
    if (i < 0) {
        LOG_WARN("peer grant refused: all %d link slots are in use", PEER_LINKS_MAX);
        return CUDA_ERROR_TOO_MANY_PEERS;
    }
    rep.link = (uint32_t)i;
    rep.fingerprint = c->s->opt->tls ? tls_server_fingerprint(c->s->opt->tls) : "";
    msg_scuda_peer_grant_rep_put(&c->out, &rep);
    memset(rep.secret, 0, sizeof rep.secret);
    return CUDA_SUCCESS;
}

/* Strings from the network: present, and short enough to be what they say. */
static int str_ok(const char *s, size_t max) { return s && strnlen(s, max) < max; }

CUresult srv_scuda_peer_connect(srv_call *c)
{
    struct msg_scuda_peer_connect_req m;
    if (msg_scuda_peer_connect_req_get(&c->in, &c->arena, &m) != 0 || !str_ok(m.addr, 256) ||
        !str_ok(m.fingerprint, TLS_FP_LEN))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&peer_once, peer_init);
    pthread_mutex_lock(&peer.lock);
    int i = take_slot_locked(SLOT_DIALING);
    pthread_mutex_unlock(&peer.lock);
    if (i < 0) {
        LOG_WARN("peer connect refused: all %d link slots are in use", PEER_LINKS_MAX);
        return CUDA_ERROR_TOO_MANY_PEERS;
    }
    char err[300];
    int fd = peer_dial(m.addr, m.pid, m.link, m.secret, m.fingerprint, err, sizeof err);
    pthread_mutex_lock(&peer.lock);
    struct slot *sl = &peer.slots[i];
    sl->state = fd >= 0 ? SLOT_LINKED : SLOT_FREE;
    sl->fd = fd;
    pthread_mutex_unlock(&peer.lock);
    if (fd < 0) {
        LOG_WARN("peer link to %s: %s", m.addr, err);
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    }
    io_set_timeout(fd, PEER_IO_TIMEOUT_MS);
    LOG_INFO("peer link %d: joined session %u of %s", i, m.pid, m.addr);
    struct msg_scuda_peer_connect_rep rep = {.local = (uint32_t)i};
    msg_scuda_peer_connect_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
