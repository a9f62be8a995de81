/* loopback.h - shared by the loopback test of the generated code. */
#ifndef SCUDA_CODEGEN_LOOPBACK_H
#define SCUDA_CODEGEN_LOOPBACK_H

#include <cuda.h>
#include <stdint.h>

#include "client/rpc.h"
#include "client/shim.h"
#include "server/dispatch.h"

struct lb_counts {
    unsigned sync_calls, async_calls;
    unsigned last_op, last_blocking;
};
extern struct lb_counts lb;
extern uint32_t lb_ctx_id;
extern int lb_captures; /* capture_begun() minus capture_ended() */

#endif
