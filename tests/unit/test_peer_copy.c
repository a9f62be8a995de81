/* test_peer_copy.c - the client's half of copies between servers
 * (src/client/peer.c) against fake sessions: a link is set up at a
 * pair's first copy (a grant from the source, a join from the other end,
 * at the source's address) and then kept, and used both ways; each end's
 * call carries its own slot, stream and context; a broken link is set up
 * again at the next copy; the caller's context is left as it was. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "client/conn.h"
#include "client/peer.h"
#include "client/rpc.h"
#include "client/servers.h"
#include "common/ops.gen.h"

/* ---- fake sessions ---- */

#define LOG_MAX 64
struct event {
    int srv;
    uint16_t op;
    uint32_t link, ctx;
    uint64_t ptr, n, stream;
    char addr[64];
};
static struct event events[LOG_MAX];
static int nevents;
static uint32_t next_slot[SCUDA_MAX_SERVERS]; /* each fake session's next free slot */
static CUresult recv_result = CUDA_SUCCESS;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread uint32_t thread_ctx;
static __thread wire_buf reply; /* each thread's fake reply */
static __thread int reply_ready;
static const char *addrs[] = {"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"};

uint32_t conn_thread_ctx(void) { return thread_ctx; }
void conn_set_thread_ctx(uint32_t ctx) { thread_ctx = ctx; }
const char *conn_addr(const struct server *s) { return addrs[s->index]; }

void rpc_begin_on(rpc_call *c, uint16_t op, struct server *srv)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->srv = srv;
    wb_init(&c->req);
    msg_arena_init(&c->arena);
}

void rpc_end(rpc_call *c)
{
    wb_free(&c->req);
    msg_arena_free(&c->arena);
    if (reply_ready) wb_free(&reply); /* the call's reply was read: no thread leaks its buffer */
    reply_ready = 0;
}

static CUresult serve(rpc_call *c, struct event *e)
{
    wire_reader r;
    struct msg_arena a;
    msg_arena_init(&a);
    wr_init(&r, c->req.data, c->req.len);
    CUresult res = CUDA_SUCCESS;
    if (!reply_ready) wb_init(&reply);
    reply_ready = 1;
    wb_reset(&reply);
    if (c->op == OP_scuda_peer_grant) {
        struct msg_scuda_peer_grant_rep g = {.pid = 100u + (uint32_t)e->srv, .link = next_slot[e->srv]++,
                                             .fingerprint = ""};
        memset(g.secret, 0x40 + e->srv, sizeof g.secret);
        e->link = g.link;
        msg_scuda_peer_grant_rep_put(&reply, &g);
    } else if (c->op == OP_scuda_peer_connect) {
        struct msg_scuda_peer_connect_req m;
        CHECK(msg_scuda_peer_connect_req_get(&r, &a, &m) == 0);
        snprintf(e->addr, sizeof e->addr, "%s", m.addr);
        e->ptr = m.pid;
        CHECK(m.secret[0] == 0x40 + (int)m.pid - 100); /* the granting session's secret */
        struct msg_scuda_peer_connect_rep rep = {.local = next_slot[e->srv]++};
        e->link = rep.local;
        msg_scuda_peer_connect_rep_put(&reply, &rep);
    } else if (c->op == OP_scuda_peer_send) {
        struct msg_scuda_peer_send_req m;
        CHECK(msg_scuda_peer_send_req_get(&r, &a, &m) == 0);
        e->link = m.link, e->ptr = m.src, e->n = m.n, e->stream = m.stream;
    } else if (c->op == OP_scuda_peer_recv) {
        struct msg_scuda_peer_recv_req m;
        CHECK(msg_scuda_peer_recv_req_get(&r, &a, &m) == 0);
        e->link = m.link, e->ptr = m.dst, e->n = m.n, e->stream = m.stream;
        res = recv_result;
    }
    msg_arena_free(&a);
    wr_init(&c->out, reply.data, reply.len);
    return res;
}

CUresult rpc_sync(rpc_call *c)
{
    pthread_mutex_lock(&fake_lock);
    CHECK(nevents < LOG_MAX);
    struct event *e = &events[nevents++ % LOG_MAX];
    memset(e, 0, sizeof *e);
    e->srv = c->srv->index;
    e->op = c->op;
    e->ctx = c->ctx; /* the context the frame carries */
    CUresult r = serve(c, e);
    pthread_mutex_unlock(&fake_lock);
    return r;
}

/* ---- helpers ---- */

static int count_op(int from, uint16_t op)
{
    int n = 0;
    for (int i = from; i < nevents; i++) n += events[i].op == op;
    return n;
}

static const struct event *find(int from, int srv, uint16_t op)
{
    for (int i = from; i < nevents; i++)
        if (events[i].srv == srv && events[i].op == op) return &events[i];
    return NULL;
}

int main(void)
{
    static struct server s[3];
    for (int i = 0; i < 3; i++) s[i].index = i;
    struct peer_end e0 = {&s[0], 0x1000, 0x51, 7}, e1 = {&s[1], 0x2000, 0x52, 8}, e2 = {&s[2], 0x3000, 0, 9};
    conn_set_thread_ctx(42);

    /* First copy 0 -> 1: grant on 0, join from 1 at 0's address, then both ends. */
    CHECK(peer_copy(&e0, &e1, 5000) == CUDA_SUCCESS);
    CHECK(nevents == 4);
    const struct event *g = find(0, 0, OP_scuda_peer_grant), *j = find(0, 1, OP_scuda_peer_connect);
    const struct event *snd = find(0, 0, OP_scuda_peer_send), *rcv = find(0, 1, OP_scuda_peer_recv);
    CHECK(g && j && snd && rcv);
    if (g && j && snd && rcv) {
        CHECK(strcmp(j->addr, addrs[0]) == 0 && j->ptr == 100);
        CHECK(g->ctx == 7 && j->ctx == 8);
        CHECK(snd->link == g->link && rcv->link == j->link);
        CHECK(snd->ptr == 0x1000 && snd->n == 5000 && snd->stream == 0x51 && snd->ctx == 7);
        CHECK(rcv->ptr == 0x2000 && rcv->n == 5000 && rcv->stream == 0x52 && rcv->ctx == 8);
    }
    CHECK(conn_thread_ctx() == 42);
    uint32_t l0 = g ? g->link : 99, l1 = j ? j->link : 99;

    /* Again, and the other way: the same link, no new grant. */
    int mark = nevents;
    CHECK(peer_copy(&e0, &e1, 10) == CUDA_SUCCESS);
    CHECK(peer_copy(&e1, &e0, 20) == CUDA_SUCCESS);
    CHECK(count_op(mark, OP_scuda_peer_grant) == 0 && count_op(mark, OP_scuda_peer_connect) == 0);
    const struct event *back_send = NULL, *back_recv = NULL;
    for (int i = mark; i < nevents; i++) {
        if (events[i].n != 20) continue;
        if (events[i].op == OP_scuda_peer_send) back_send = &events[i];
        if (events[i].op == OP_scuda_peer_recv) back_recv = &events[i];
    }
    CHECK(back_send && back_send->srv == 1 && back_send->link == l1 && back_send->ptr == 0x2000);
    CHECK(back_recv && back_recv->srv == 0 && back_recv->link == l0 && back_recv->ptr == 0x1000);

    /* Another pair gets a link of its own. */
    mark = nevents;
    CHECK(peer_copy(&e2, &e0, 30) == CUDA_SUCCESS);
    CHECK(count_op(mark, OP_scuda_peer_grant) == 1 && find(mark, 2, OP_scuda_peer_grant));

    /* A broken link fails the copy, and the next copy sets one up again. */
    recv_result = CUDA_ERROR_DEVICE_UNAVAILABLE;
    CHECK(peer_copy(&e0, &e1, 40) == CUDA_ERROR_DEVICE_UNAVAILABLE);
    recv_result = CUDA_SUCCESS;
    mark = nevents;
    CHECK(peer_copy(&e0, &e1, 50) == CUDA_SUCCESS);
    CHECK(count_op(mark, OP_scuda_peer_grant) == 1 && count_op(mark, OP_scuda_peer_connect) == 1);

    /* Nothing to do: no call. The same server: not a peer copy. */
    mark = nevents;
    CHECK(peer_copy(&e0, &e1, 0) == CUDA_SUCCESS && nevents == mark);
    CHECK(peer_copy(&e0, &e0, 10) == CUDA_ERROR_INVALID_VALUE && nevents == mark);
    CHECK(conn_thread_ctx() == 42);

    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
