/* servers.c - see servers.h. */
#include "servers.h"

#include "common/log.h"

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

struct gdev_table gdevs;

int servers_build_devices(int n)
{
    static struct gdev_table t; /* built aside, so a refusal leaves gdevs as it was */
    t.count = 0;
    for (int k = 0; k < n; k++) {
        int g0;
        if (gdev_append(&t, &servers[k], conn_info(&servers[k]), &g0) != 0) {
            LOG_ERROR("the servers have more than %d devices together (the %d of %s did not fit); "
                      "list fewer servers in SCUDA_SERVER, or fewer GPUs with their --gpus",
                      SCUDA_MAX_GLOBAL_DEVICES, (int)conn_info(&servers[k])->device_count, conn_addr(&servers[k]));
            return -1;
        }
        servers[k].g0 = g0;
    }
    gdevs = t;
    return 0;
}
