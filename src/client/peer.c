/* peer.c - see peer.h.
 *
 * The link of a pair of servers is cached, one for both directions (a
 * link carries copies either way; so a session needs one link per other
 * server, at most SCUDA_MAX_SERVERS - 1, within its PEER_LINKS_MAX): the
 * source of the pair's first copy grants it (scuda_peer_grant), the
 * other session dials the granting server at the address this client
 * uses for it and joins (scuda_peer_connect). A copy announces itself to
 * both sessions at once: scuda_peer_send to the source, from a helper
 * thread (a thread waits for one reply at a time, conn.c), and
 * scuda_peer_recv to the destination. Copies of one pair go one at a
 * time, so both sessions see them in the same order on the link. */
#define _GNU_SOURCE
#include "peer.h"

#include <pthread.h>
#include <string.h>

#include "conn.h"
#include "rpc.h"
#include "servers.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

struct pair {
    pthread_mutex_t lock;
    int up;
    uint32_t slot[SCUDA_MAX_SERVERS]; /* each end's slot for the link, by server index */
};

static struct pair pairs[SCUDA_MAX_SERVERS][SCUDA_MAX_SERVERS];
static pthread_once_t pairs_once = PTHREAD_ONCE_INIT;

static void pairs_init(void)
{
    for (int i = 0; i < SCUDA_MAX_SERVERS; i++)
        for (int j = 0; j < SCUDA_MAX_SERVERS; j++) pthread_mutex_init(&pairs[i][j].lock, NULL);
}

_Static_assert(sizeof ((struct msg_scuda_peer_connect_req *)0)->secret == PEER_SECRET_LEN,
               "scuda_peer_connect's secret is PEER_SECRET_LEN bytes");

/* Grant on the source, join from the destination. Locked (p->lock). */
static CUresult link_up(struct pair *p, const struct peer_end *from, const struct peer_end *to)
{
    struct msg_scuda_peer_grant_req greq = {0};
    struct msg_scuda_peer_grant_rep grant;
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_peer_grant, from->srv);
    c.ctx = from->ctx;
    msg_scuda_peer_grant_req_put(&c.req, &greq);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_peer_grant_rep_get(&c.out, &c.arena, &grant) != 0) r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS) {
        struct msg_scuda_peer_connect_req creq = {.addr = conn_addr(from->srv), .pid = grant.pid, .link = grant.link,
                                                  .fingerprint = grant.fingerprint ? grant.fingerprint : ""};
        memcpy(creq.secret, grant.secret, PEER_SECRET_LEN);
        struct msg_scuda_peer_connect_rep rep;
        rpc_call d;
        rpc_begin_on(&d, OP_scuda_peer_connect, to->srv);
        d.ctx = to->ctx;
        msg_scuda_peer_connect_req_put(&d.req, &creq);
        r = rpc_sync(&d);
        if (r == CUDA_SUCCESS && msg_scuda_peer_connect_rep_get(&d.out, &d.arena, &rep) != 0) r = CUDA_ERROR_UNKNOWN;
        if (r == CUDA_SUCCESS) {
            p->slot[from->srv->index] = grant.link;
            p->slot[to->srv->index] = rep.local;
            p->up = 1;
        }
        rpc_end(&d);
        memset(creq.secret, 0, sizeof creq.secret);
    }
    rpc_end(&c);
    if (r != CUDA_SUCCESS)
        LOG_WARN("no peer link from server %s to server %s (CUresult %d); see the servers' logs", conn_addr(from->srv),
                 conn_addr(to->srv), (int)r);
    return r;
}

/* One end's call: scuda_peer_send or scuda_peer_recv. */
struct end_call {
    const struct peer_end *e;
    uint16_t op;
    uint32_t link;
    uint64_t n;
    CUresult r;
};

static void *run_end(void *arg)
{
    struct end_call *x = arg;
    rpc_call c;
    rpc_begin_on(&c, x->op, x->e->srv);
    c.ctx = x->e->ctx; /* not the thread's: the helper thread has none */
    if (x->op == OP_scuda_peer_send) {
        struct msg_scuda_peer_send_req m = {.src = x->e->ptr, .n = x->n, .link = x->link, .stream = x->e->stream};
        msg_scuda_peer_send_req_put(&c.req, &m);
    } else {
        struct msg_scuda_peer_recv_req m = {.dst = x->e->ptr, .n = x->n, .link = x->link, .stream = x->e->stream};
        msg_scuda_peer_recv_req_put(&c.req, &m);
    }
    x->r = rpc_sync(&c);
    rpc_end(&c);
    return NULL;
}

CUresult peer_copy(const struct peer_end *from, const struct peer_end *to, size_t n)
{
    if (!from->srv || !to->srv || from->srv == to->srv) return CUDA_ERROR_INVALID_VALUE;
    if (n == 0) return CUDA_SUCCESS;
    pthread_once(&pairs_once, pairs_init);
    int lo = from->srv->index < to->srv->index ? from->srv->index : to->srv->index;
    int hi = from->srv->index ^ to->srv->index ^ lo;
    struct pair *p = &pairs[lo][hi];
    pthread_mutex_lock(&p->lock);
    CUresult r = p->up ? CUDA_SUCCESS : link_up(p, from, to);
    if (r == CUDA_SUCCESS) {
        struct end_call send = {from, OP_scuda_peer_send, p->slot[from->srv->index], n, CUDA_SUCCESS};
        struct end_call recv = {to, OP_scuda_peer_recv, p->slot[to->srv->index], n, CUDA_SUCCESS};
        pthread_t t;
        if (pthread_create(&t, NULL, run_end, &send) != 0) {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            run_end(&recv);
            pthread_join(t, NULL);
            r = send.r != CUDA_SUCCESS ? send.r : recv.r;
            /* A broken link is closed on both sessions: the next copy
             * sets up a new one. */
            if (send.r == CUDA_ERROR_DEVICE_UNAVAILABLE || recv.r == CUDA_ERROR_DEVICE_UNAVAILABLE ||
                send.r == CUDA_ERROR_INVALID_HANDLE || recv.r == CUDA_ERROR_INVALID_HANDLE)
                p->up = 0;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return r;
}
