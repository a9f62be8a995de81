/* servers.c - see servers.h. */
#include "servers.h"

/* Statically initialized, locks included: a shim's first call, a fork
 * handler or an atexit handler may touch a server before (or without)
 * anything having set it up. */
#define SERVER_INIT(i)                                                                                       \
    [i] = {                                                                                                  \
        .index = i, .c = CONN_STATE_INIT, .q = SENDQ_INIT, .r = RESUME_STATE_INIT, .b = BULK_STATE_INIT,      \
    }

struct server servers[SCUDA_MAX_SERVERS] = {
    SERVER_INIT(0), SERVER_INIT(1), SERVER_INIT(2), SERVER_INIT(3),
    SERVER_INIT(4), SERVER_INIT(5), SERVER_INIT(6), SERVER_INIT(7),
};

_Static_assert(SCUDA_MAX_SERVERS == 8, "SERVER_INIT lists one entry per server");
