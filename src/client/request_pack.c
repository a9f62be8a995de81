/* request_pack.c - see request_pack.h. */
#define _GNU_SOURCE
#include "request_pack.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "bulk.h"
#include "servers.h"
#include "stats.h"
#include "../common/compress.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

/* Smaller requests go plain: the probe and a second buffer cost more than
 * the few kilobytes could save. */
#define PACK_MIN (64u << 10)
/* A round trip this long or longer is a slow link (as alloc_ahead.c's). */
#define PACK_SLOW_RTT_US 2000u
/* What a slow link is taken to carry before a striped copy measured it:
 * a WAN's gigabit. Images go at the first step, often before any copy. */
#define PACK_ASSUMED_MBPS 1000.0

/* SCUDA_COMPRESS and SCUDA_LINK_MBPS, read once (they warn when invalid). */
static enum compress_mode pack_mode(double *link_set)
{
    static _Atomic int mode = -1;
    static _Atomic uint64_t set_kbps;
    int m = atomic_load(&mode);
    if (m < 0) {
        atomic_store(&set_kbps, (uint64_t)(compress_link_setting() * 1000));
        m = (int)compress_mode_setting();
        atomic_store(&mode, m);
    }
    *link_set = (double)atomic_load(&set_kbps) / 1000;
    return (enum compress_mode)m;
}

/* The link's rate to srv in Mbit/s, as best known; 0 for a fast link. */
static double link_mbps(struct server *srv, double link_set)
{
    if (link_set > 0) return link_set;
    double measured = bulk_link_mbps(srv);
    if (measured > 0) return measured;
    return atomic_load(&srv->c.greet_rtt_us) >= PACK_SLOW_RTT_US ? PACK_ASSUMED_MBPS : 0;
}

/* The CPU a whole request costs per plain byte, compressing here and
 * decompressing in the session, in picoseconds: learned from the requests
 * packed so far (each weighs half), PACK_COST_PS until the first. The
 * probe's own timing overstates it: four small pieces each pay zstd's
 * setup (3.6-11.5 ns a byte on a 13 KiB cubin, against 3.3 for whole
 * images on the GPU host), so only the probe's ratio is used. */
#define PACK_COST_PS 3500u
static _Atomic uint64_t cost_ps = PACK_COST_PS;

static void learn_cost(uint64_t ns, size_t total)
{
    /* Decompressing runs several times faster than compressing at level 1:
     * a quarter more stands in for it. */
    uint64_t ps = ns * 1250u / (total ? total : 1);
    uint64_t was = atomic_load(&cost_ps);
    atomic_store(&cost_ps, (was + ps) / 2);
}

int request_pack(rpc_call *c)
{
    size_t total = c->req.len + c->bulk_len;
    double link_set;
    enum compress_mode mode = pack_mode(&link_set);
    if (c->req.oom || c->bulk_owned || total < PACK_MIN || total > SCUDA_MAX_FRAME) return 0;
    unsigned policy = compress_policy(mode, link_mbps(c->srv, link_set));
    if (policy == 0) return 0;
    /* The image is the bulk part: the probe looks at it. */
    struct compress_probe probe;
    compress_probe(c->bulk ? c->bulk : c->req.data, c->bulk ? c->bulk_len : c->req.len, &probe);
    probe.ns_per_byte = (double)atomic_load(&cost_ps) / 1000;
    if (!compress_worth(policy, 1, &probe)) return 0;
    uint8_t *z = malloc(total);
    if (!z) return 0;
    struct iovec parts[2] = {{c->req.data, c->req.len}, {(void *)c->bulk, c->bulk_len}};
    uint64_t t0 = stats_now_ns();
    size_t zn = compress_parts(z, total, parts, c->bulk_len ? 2 : 1);
    uint64_t took = stats_now_ns() - t0;
    stats_time(STATS_IMAGE_PACK, took, total);
    learn_cost(took, total);
    if (zn == 0) {
        free(z);
        return 0;
    }
    /* The packed request: its own head, and the compressed bytes as its
     * bulk part. The call keeps its op for the stats and the reply. */
    struct msg_scuda_packed_req m = {.op = c->op, .frame = z, .frame_len = zn};
    wb_reset(&c->req);
    msg_scuda_packed_req_put(&c->req, &m);
    c->bulk = z;
    c->bulk_len = zn;
    c->bulk_owned = z;
    c->wire_op = OP_scuda_packed;
    stats_time(STATS_IMAGE_PACKED, 0, zn);
    LOG_DEBUG("op %s packed: %zu bytes as %zu", scuda_op_name(m.op), total, zn);
    return 1;
}
