/* srv_window.c - scuda_window_first: a client of several servers tells
 * each session, right after connecting, the window index of the session's
 * first device in the client's device list (docs/architecture.md, 9.13),
 * so that no two of the client's devices are given the same addresses. */
#include "device_window.h"
#include "dispatch.h"
#include "../common/log.h"
#include "../common/messages.gen.h"

CUresult srv_scuda_window_first(srv_call *c)
{
    struct msg_scuda_window_first_req m;
    if (msg_scuda_window_first_req_get(&c->in, &c->arena, &m) != 0) return CUDA_ERROR_INVALID_VALUE;
    int rc = window_set_first(m.first);
    struct msg_scuda_window_first_rep rep = {0};
    if (rc == 0 && window_range(0, &rep.base, &rep.size)) {
        msg_scuda_window_first_rep_put(&c->out, &rep);
        return CUDA_SUCCESS;
    }
    LOG_WARN("client of several servers: cannot start this session's memory windows at index %u (%s)", m.first,
             rc == -1   ? "the windows are off: --driver-placed-memory, or the driver lacks virtual memory calls"
             : rc == -2 ? "beyond 2^47 with this --window-base and --window-size"
                        : "memory is placed already");
    return rc == -1 ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}
