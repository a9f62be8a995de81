/* occupancy.c - cuOccupancyMaxActiveClusters for a row of cluster widths
 * in one round trip (docs/architecture.md, 3.8.4).
 *
 * cuBLAS learns how the GPU's SMs group into clusters when it starts: for
 * a kernel that fills an SM, it asks how many clusters of each width from
 * 1 to 32 fit at once, thirty-odd calls that differ only in the width and
 * the grid (a whole number of clusters). The answers never change for a
 * function whose attributes stay as they are, and the memo keeps them
 * (memo.h), but each first one costs a round trip: 47 of them in a small
 * transformer's first training step, a second on a 20 ms link.
 *
 * So when a function misses the memo a second time with a configuration
 * of one cluster dimension (x), the client asks for every width from 1
 * to CLUSTER_WIDTH_MAX at once, the grid kept at the same number of
 * clusters, in one scuda_memo_batch: each request encoded by the
 * generated call's own encoder (memo_key_cuOccupancyMaxActiveClusters,
 * spec flag memo_miss), which is also its memo key, and each answer
 * memoized under it. A function asked once pays nothing more. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks.h"
#include "memo.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

#define CLUSTER_WIDTH_MAX 32
#define MISSED_SLOTS 64

_Static_assert(CLUSTER_WIDTH_MAX <= MEMO_BATCH_MAX, "a row of widths is one batch");

/* The last function that missed, per slot: a second miss batches. */
static _Atomic uint64_t missed[MISSED_SLOTS];

/* The index of the configuration's one cluster attribute, when its
 * clusters are x wide only and the grid holds a whole number of them in
 * x: a row of widths can be asked for. -1 otherwise. */
static int cluster_row(const CUlaunchConfig *config)
{
    if (!config || config->numAttrs > LAUNCH_MAX_ATTRS || (config->numAttrs && !config->attrs)) return -1;
    int at = -1;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
        if (at >= 0) return -1;
        at = (int)i;
    }
    if (at < 0) return -1;
    const CUlaunchAttributeValue *v = &config->attrs[at].value;
    if (v->clusterDim.x == 0 || v->clusterDim.x > CLUSTER_WIDTH_MAX || v->clusterDim.y != 1 || v->clusterDim.z != 1 ||
        config->gridDimX % v->clusterDim.x != 0)
        return -1;
    return at;
}

/* Every width 1..CLUSTER_WIDTH_MAX of config's cluster (attribute `at`),
 * the grid at the same number of clusters: the requests, in keys[]. */
static uint32_t row_requests(CUfunction func, const CUlaunchConfig *config, int at, wire_buf keys[CLUSTER_WIDTH_MAX])
{
    CUlaunchAttribute attrs[LAUNCH_MAX_ATTRS];
    memcpy(attrs, config->attrs, config->numAttrs * sizeof *attrs);
    CUlaunchConfig v = *config;
    v.attrs = attrs;
    unsigned width = config->attrs[at].value.clusterDim.x, clusters = config->gridDimX / width;
    uint32_t n = 0;
    for (unsigned w = 1; w <= CLUSTER_WIDTH_MAX; w++) {
        if ((unsigned long long)clusters * w > UINT32_MAX) break;
        v.gridDimX = clusters * w;
        attrs[at].value.clusterDim.x = w;
        wb_init(&keys[n]);
        memo_key_cuOccupancyMaxActiveClusters(&keys[n++], &(int){0}, func, &v);
    }
    return n;
}

/* Ask for the row in one round trip, memoize every answer, and give this
 * call's (its request: key). 0 when the batch itself failed, or did not
 * hold this call: the caller asks alone. */
static int ask_row(CUresult *r, int *numClusters, const wire_buf *key, CUfunction func, const CUlaunchConfig *config,
                   int at)
{
    wire_buf keys[CLUSTER_WIDTH_MAX];
    struct msg_memo_request calls[CLUSTER_WIDTH_MAX];
    uint32_t mine = UINT32_MAX, n = row_requests(func, config, at, keys);
    int oom = 0;
    for (uint32_t i = 0; i < n; i++) {
        oom |= keys[i].oom;
        if (keys[i].len == key->len && memcmp(keys[i].data, key->data, key->len) == 0) mine = i;
        calls[i] = (struct msg_memo_request){.args = keys[i].data, .args_len = keys[i].len};
    }
    int answered = 0;
    uint64_t gen = memo_generation();
    uint32_t ctx = shim_current_ctx_id();
    struct msg_scuda_memo_batch_rep rep = {0};
    rpc_call c;
    rpc_begin_on(&c, OP_scuda_memo_batch, server_of_handle(func));
    struct msg_scuda_memo_batch_req m = {.op = OP_cuOccupancyMaxActiveClusters, .calls = calls, .calls_count = n};
    msg_scuda_memo_batch_req_put(&c.req, &m);
    if (!oom && mine < n && rpc_sync(&c) == CUDA_SUCCESS) {
        if (msg_scuda_memo_batch_rep_get(&c.out, &c.arena, &rep) != 0 || rep.answers_count != n)
            LOG_ERROR("scuda_memo_batch: malformed reply from the server");
        else
            answered = 1;
    }
    for (uint32_t i = 0; answered && i < n; i++) {
        const struct msg_memo_answer *a = &rep.answers[i];
        wire_reader o;
        wr_init(&o, a->outs, a->outs_len);
        int v = (int)wr_i32(&o);
        int well_formed = wr_ok_end(&o);
        if (a->result == CUDA_SUCCESS && well_formed)
            memo_insert(OP_cuOccupancyMaxActiveClusters, ctx, keys[i].data, keys[i].len, a->outs, a->outs_len, gen);
        if (i != mine) continue;
        *r = (CUresult)a->result;
        if (*r == CUDA_SUCCESS && !well_formed) *r = CUDA_ERROR_UNKNOWN;
        if (*r == CUDA_SUCCESS) *numClusters = v;
    }
    rpc_end(&c);
    for (uint32_t i = 0; i < n; i++) wb_free(&keys[i]);
    return answered;
}

int hook_memo_miss_cuOccupancyMaxActiveClusters(CUresult *r, const wire_buf *key, int *numClusters, CUfunction func,
                                                const CUlaunchConfig *config)
{
    int at = numClusters ? cluster_row(config) : -1;
    if (at < 0) return 0;
    uint64_t id = handle_wire_id(func);
    uint64_t slot = (id * 0x9e3779b97f4a7c15ull) >> 58;
    if (atomic_exchange(&missed[slot % MISSED_SLOTS], id) != id) return 0; /* the first miss asks alone */
    return ask_row(r, numClusters, key, func, config, at);
}
