/* graph_launch.c - cuGraphLaunch: the bytes of host-to-device nodes travel
 * with the launch.
 *
 * A graph replays on the server. A copy from client memory in it (a
 * memcpy node with a host source, or a captured cuMemcpyHtoDAsync) copies
 * from a staging buffer of the session instead: an upload record
 * (src/server/graph_host.c). At each cuGraphLaunch this file reads every
 * upload record's bytes from client memory and sends them
 * (scuda_graph_stage), then the launch. The driver reads the source when
 * the node runs, which is after cuGraphLaunch returns and before the
 * graph completes; a correct program neither writes the source in that
 * window (a race with the copy) nor relies on a write it makes after the
 * launch, so reading it at the launch is indistinguishable. The one order
 * this cannot keep is a host node of the same graph that writes a source
 * a later node of that graph copies (docs/architecture.md, 9.6).
 *
 * Which records an executable graph has is asked of the session at its
 * first launch and kept; only while this process has made upload records
 * at all (nearly never), so other launches cost nothing extra. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "coherence.h"
#include "graph_launch.h"
#include "rpc.h"
#include "servers.h"
#include "shim.h"
#include "../common/idmap.h"
#include "../common/log.h"
#include "../common/ops.gen.h"
#include "../common/protocol.h"

/* An executable graph's upload records, as the session listed them. */
struct uploads {
    size_t n;
    uint64_t ids[];
};

static struct idmap exec_uploads = IDMAP_INIT; /* exec id -> struct uploads */

void graph_launch_forget(CUgraphExec exec) { free(idmap_del(&exec_uploads, handle_wire_id(exec))); }

static CUresult ask_uploads(uint64_t exec, struct uploads **out)
{
    struct msg_scuda_graph_uploads_req m = {exec};
    struct msg_scuda_graph_uploads_rep rep;
    rpc_call c;
    rpc_begin(&c, OP_scuda_graph_uploads);
    msg_scuda_graph_uploads_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    if (r == CUDA_SUCCESS && msg_scuda_graph_uploads_rep_get(&c.out, &c.arena, &rep) != 0) {
        LOG_ERROR("cuGraphLaunch: malformed list of host-to-device copies from the server");
        r = CUDA_ERROR_UNKNOWN;
    }
    struct uploads *u = NULL;
    if (r == CUDA_SUCCESS && !(u = malloc(sizeof *u + rep.records_count * sizeof *u->ids))) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        u->n = rep.records_count;
        memcpy(u->ids, rep.records, u->n * sizeof *u->ids);
    }
    rpc_end(&c);
    *out = u;
    return r;
}

/* The upload records of exec (NULL: none), asked of the session once. */
static CUresult exec_records(uint64_t exec, struct uploads **out)
{
    void *v = NULL;
    if (idmap_get(&exec_uploads, exec, NULL, &v)) {
        *out = v;
        return CUDA_SUCCESS;
    }
    struct uploads *u;
    CUresult r = ask_uploads(exec, &u);
    if (r != CUDA_SUCCESS) return r;
    /* another thread may have asked too: its list is as good */
    if (idmap_put(&exec_uploads, exec, 0, u) != 0) {
        free(u);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = u;
    return CUDA_SUCCESS;
}

/* Send one record's bytes, read now from client memory (one-way: they
 * leave from the source before this returns). */
static CUresult stage(uint64_t id)
{
    const void *src;
    size_t n;
    if (capture_upload_source(id, &src, &n) != 0) {
        LOG_ERROR("cuGraphLaunch: the server lists host-to-device copy %llu, which this process does not know",
                  (unsigned long long)id);
        return CUDA_ERROR_UNKNOWN;
    }
    CUresult r;
    const void *from = coherence_host_view(src, n, 0, &r);
    if (!from) return r;
    struct msg_scuda_graph_stage_req m = {.record = id, .data = from, .data_len = n};
    rpc_call c;
    rpc_begin(&c, OP_scuda_graph_stage);
    msg_scuda_graph_stage_req_put(&c.req, &m);
    c.bulk = from;
    c.bulk_len = n;
    return rpc_async(&c);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    SHIM_ENTER(cuGraphLaunch, (hGraphExec, hStream));
    uint64_t exec = handle_wire_id(hGraphExec);
    if (exec && capture_uploads_made()) {
        struct uploads *u;
        CUresult r = exec_records(exec, &u);
        for (size_t i = 0; r == CUDA_SUCCESS && i < u->n; i++) r = stage(u->ids[i]);
        if (r != CUDA_SUCCESS) return r;
    }
    struct msg_cuGraphLaunch_req m = {exec, handle_wire_id(hStream)};
    rpc_call c;
    rpc_begin_on(&c, OP_cuGraphLaunch, server_of_handle(hGraphExec));
    msg_cuGraphLaunch_req_put(&c.req, &m);
    return rpc_async(&c);
}
