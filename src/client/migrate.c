/* migrate.c - the application's way to ask its session to move to another
 * server (docs/architecture.md, 9.17 Live migration). The session does
 * the work; while it does, it reads no other call of this process, so
 * the application only sees this call (and any other thread's) take
 * longer. */
#include <stdio.h>

#include "rpc.h"
#include "shim.h"
#include "../common/log.h"
#include "../common/ops.gen.h"

void shim_ensure_init(void); /* init.c */

/* Ask the session to move to `to` (HOST:PORT). Returns 1 when the other
 * server holds a checked copy of the session, 0 when the session refused
 * or the other server did (the reason in why, when not NULL), -1 when
 * there is no session to ask. */
EXPORT int scuda_migrate(const char *to, char *why, size_t whylen)
{
    shim_ensure_init();
    if (why && whylen) why[0] = '\0';
    if (!shim_remote() || !to) return -1;
    rpc_call c;
    struct msg_scuda_migrate_req m = {.to = to};
    rpc_begin(&c, OP_scuda_migrate);
    msg_scuda_migrate_req_put(&c.req, &m);
    CUresult r = rpc_sync(&c);
    struct msg_scuda_migrate_rep rep = {0};
    int rc = -1;
    if (r == CUDA_SUCCESS && msg_scuda_migrate_rep_get(&c.out, &c.arena, &rep) == 0) {
        rc = rep.moved ? 1 : 0;
        if (why && whylen) snprintf(why, whylen, "%s", rep.why ? rep.why : "");
        if (!rep.moved) LOG_WARN("the session did not move to %s: %s", to, rep.why ? rep.why : "");
    } else if (why && whylen) {
        snprintf(why, whylen, "the session could not be asked (CUresult %d)", (int)r);
    }
    rpc_end(&c);
    return rc;
}
