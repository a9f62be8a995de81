/* srv_alloc_ahead.c - scuda_mem_alloc_ahead: a client over a slow link asks
 * for several allocations of one size in one round trip and keeps the
 * extra ones as spares (src/client/alloc_ahead.c, docs/architecture.md
 * 3.8.5). Each is made through the session's own cuMemAlloc (its device
 * window, quota and the notes a move replays), so a spare is an
 * allocation like any other. */
#include "dispatch.h"
#include "handlers.gen.h"
#include "../common/messages.gen.h"

CUresult srv_scuda_mem_alloc_ahead(srv_call *c)
{
    struct msg_scuda_mem_alloc_ahead_req m;
    if (msg_scuda_mem_alloc_ahead_req_get(&c->in, &c->arena, &m) != 0 || m.count == 0 ||
        m.count > ALLOC_AHEAD_MAX || m.bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t ptrs[ALLOC_AHEAD_MAX];
    uint32_t n = 0;
    CUresult r = CUDA_SUCCESS;
    while (n < m.count) {
        CUdeviceptr p = 0;
        r = REAL(cuMemAlloc_v2, &p, (size_t)m.bytesize);
        if (r != CUDA_SUCCESS) break; /* the first one's error is the call's; a spare's ends the list */
        ptrs[n++] = (uint64_t)p;
    }
    if (n == 0) return r;
    struct msg_scuda_mem_alloc_ahead_rep rep = {.ptrs = ptrs, .ptrs_count = n};
    msg_scuda_mem_alloc_ahead_rep_put(&c->out, &rep);
    return CUDA_SUCCESS;
}
