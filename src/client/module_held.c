/* module_held.c - see module_held.h. */
#include "module_held.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "resume.h"
#include "rpc.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"

struct held_list {
    int asked;
    unsigned moves;              /* resume_moves when it was asked */
    struct msg_held_image *img;  /* sorted by digest */
    uint32_t n;
};

static struct held_list lists[SCUDA_MAX_SERVERS];
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

static int by_digest(const void *a, const void *b)
{
    return memcmp(((const struct msg_held_image *)a)->digest, ((const struct msg_held_image *)b)->digest,
                  AUTH_SHA256_LEN);
}

/* Under held_lock: the session's list, in place of what h held. A failed
 * ask leaves it empty: loads then go as without it. */
static void ask(struct server *srv, struct held_list *h)
{
    free(h->img);
    *h = (struct held_list){.asked = 1, .moves = resume_moves(srv)};
    rpc_call c;
    struct msg_scuda_module_held_req m = {.max = MODULE_HELD_MAX};
    struct msg_scuda_module_held_rep rep;
    rpc_begin_on(&c, OP_scuda_module_held, srv);
    msg_scuda_module_held_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_module_held_rep_get(&c.out, &c.arena, &rep) == 0 && rep.images_count &&
        (h->img = malloc(rep.images_count * sizeof *h->img))) {
        memcpy(h->img, rep.images, rep.images_count * sizeof *h->img);
        h->n = rep.images_count;
        qsort(h->img, h->n, sizeof *h->img, by_digest);
    }
    rpc_end(&c);
    LOG_DEBUG("the server holds %u module images for one-way loads by digest", h->n);
}

int module_held_has(struct server *srv, const uint8_t digest[AUTH_SHA256_LEN], uint64_t len)
{
    if (srv->index < 0 || srv->index >= SCUDA_MAX_SERVERS) return 0;
    struct held_list *h = &lists[srv->index];
    struct msg_held_image probe = {0};
    memcpy(probe.digest, digest, AUTH_SHA256_LEN);
    pthread_mutex_lock(&held_lock);
    if (!h->asked || h->moves != resume_moves(srv)) ask(srv, h);
    const struct msg_held_image *e = h->n ? bsearch(&probe, h->img, h->n, sizeof *h->img, by_digest) : NULL;
    int has = e && e->image_len == len;
    pthread_mutex_unlock(&held_lock);
    return has;
}
