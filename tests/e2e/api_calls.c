/* api_calls.c - driver calls that once were NOT_SUPPORTED and are now
 * forwarded or built on the client (docs/architecture.md, 9.19):
 *   - cuCtxSetFlags reaches the session's driver (which refuses a bad
 *     flag) and cuCtxGetFlags, answered by the client, follows it in
 *     created and primary contexts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void ctx_flags(void)
{
    CUcontext primary = h_cuda_setup();
    unsigned flags = 0;
    CU(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "primary flags %#x", flags);
    /* the session's driver checks the value: a bad one comes back refused
     * and the client's answer does not change */
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuCtxSetFlags(0x40000000u));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "flags after a refused set %#x", flags);

    CUdevice dev;
    CU(cuDeviceGet(&dev, 0));
    CUcontext mine;
    CU(cuCtxCreate_v2(&mine, CU_CTX_SCHED_SPIN, dev));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN, "created context's flags %#x", flags);
    CU(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_YIELD, "created context's flags after set %#x", flags);
    CU(cuCtxDestroy_v2(mine));
    CU(cuCtxSetCurrent(primary));
    CU(cuCtxGetFlags(&flags));
    CHECK((flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC, "the primary's flags changed: %#x", flags);
    h_copy_round_trip(7);
}

static void client(void)
{
    ctx_flags();
}

int main(void)
{
    h_run_client_test("api_calls", 60, NULL, client);
    return 0;
}
