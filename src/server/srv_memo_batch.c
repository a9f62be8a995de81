/* srv_memo_batch.c - scuda_memo_batch: several calls of one query in one
 * round trip (docs/architecture.md, 3.8.4).
 *
 * Each request is encoded as the query's own, and runs through the
 * query's own handler, so a batched call is decoded, checked and answered
 * exactly as it would be alone. Only queries that change nothing are
 * taken: a batch is the client guessing what it will ask next, and a
 * guess must not act. */
#include <stdlib.h>

#include "dispatch.h"
#include "../common/log.h"
#include "../common/messages.gen.h"
#include "../common/ops.gen.h"

/* The queries a client may batch: cuOccupancyMaxActiveClusters over a row
 * of cluster widths (src/client/occupancy.c). */
static int batchable(uint16_t op) { return op == OP_cuOccupancyMaxActiveClusters; }

CUresult srv_scuda_memo_batch(srv_call *c)
{
    struct msg_scuda_memo_batch_req m;
    if (msg_scuda_memo_batch_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!batchable(m.op) || m.op >= op_table_len || !op_table[m.op].handler) {
        /* Once a session (a process): our client never sends one, so a
         * second is the same misbehaving client, not news. */
        static int warned;
        if (!warned) LOG_WARN("scuda_memo_batch: op %u cannot be batched; refused (said once)", (unsigned)m.op);
        warned = 1;
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct msg_memo_answer *answers = calloc(m.calls_count ? m.calls_count : 1, sizeof *answers);
    wire_buf *outs = calloc(m.calls_count ? m.calls_count : 1, sizeof *outs);
    CUresult r = answers && outs ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < m.calls_count; i++) {
        srv_call one = {.s = c->s, .op = m.op, .seq = c->seq};
        wr_init(&one.in, m.calls[i].args, m.calls[i].args_len);
        wb_init(&one.out);
        msg_arena_init(&one.arena);
        CUresult cr = op_table[m.op].handler(&one);
        msg_arena_free(&one.arena);
        free(one.bulk_free); /* a query sends no bulk bytes; free whatever a handler left */
        /* Copied, not moved: a wire_buf may hold its bytes inside itself. */
        wb_init(&outs[i]);
        wb_put_raw(&outs[i], one.out.data, one.out.len);
        if (one.out.oom || outs[i].oom) r = CUDA_ERROR_OUT_OF_MEMORY;
        wb_free(&one.out);
        answers[i] = (struct msg_memo_answer){.result = (int32_t)cr, .outs = outs[i].data, .outs_len = outs[i].len};
    }
    if (r == CUDA_SUCCESS) {
        struct msg_scuda_memo_batch_rep rep = {.answers = answers, .answers_count = m.calls_count};
        msg_scuda_memo_batch_rep_put(&c->out, &rep);
    }
    for (uint32_t i = 0; outs && i < m.calls_count; i++)
        if (outs[i].data) wb_free(&outs[i]);
    free(outs);
    free(answers);
    return r;
}
