/* servers.c - see servers.h. */
#include "servers.h"

#include <stdlib.h>

#include "rpc.h"
#include "common/log.h"
#include "common/ops.gen.h"

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
int servers_used = 1;
_Thread_local struct server *servers_thread_server;

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
    /* With one server, the server applied CUDA_VISIBLE_DEVICES itself
     * (docs/architecture.md, 9.22); with several, the client does, over
     * the whole list, as the driver would over one machine's GPUs. */
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (n > 1 && visible != NULL) gdev_apply_visible(&t, visible);
    gdevs = t;
    servers_used = n;
    return 0;
}

CUresult servers_send_windows(int n)
{
    if (n < 2) return CUDA_SUCCESS; /* one server: its windows start at 0, as they always did */
    for (int k = 0; k < n; k++) {
        rpc_call call;
        struct msg_scuda_window_first_req m = {.first = (uint32_t)servers[k].g0};
        rpc_begin_on(&call, OP_scuda_window_first, &servers[k]);
        msg_scuda_window_first_req_put(&call.req, &m);
        struct msg_scuda_window_first_rep rep;
        CUresult r = rpc_sync(&call);
        if (r == CUDA_SUCCESS && (msg_scuda_window_first_rep_get(&call.out, &call.arena, &rep) != 0 ||
                                  rep.size == 0 || rep.base + rep.size < rep.base))
            r = CUDA_ERROR_INVALID_VALUE;
        rpc_end(&call);
        if (r == CUDA_SUCCESS) {
            servers[k].win_base = rep.base;
            servers[k].win_size = rep.size;
        }
        if (r != CUDA_SUCCESS) {
            LOG_ERROR("server %s cannot place its devices' memory in windows of their own (CUresult %d; its log "
                      "says why, an older server says nothing); a client of several servers needs them so that "
                      "device pointers never collide: run that server at this client's version and without "
                      "--driver-placed-memory, or use it alone",
                      conn_addr(&servers[k]), (int)r);
            return CUDA_ERROR_NO_DEVICE;
        }
    }
    return CUDA_SUCCESS;
}

struct server *server_window_of(uint64_t p)
{
    for (int k = 0; k < SCUDA_MAX_SERVERS && servers[k].win_size; k++) {
        struct server *s = &servers[k];
        if (p >= s->win_base && (p - s->win_base) / s->win_size < conn_info(s)->device_count) return s;
    }
    return NULL;
}

struct server *server_of_ptr(uint64_t p)
{
    struct server *s = server_window_of(p);
    return s ? s : server_current();
}

struct server *servers_of_copy(uint64_t dst, uint64_t src)
{
    struct server *d = server_window_of(dst), *s = server_window_of(src);
    if (d && s && d != s) {
        static int once;
        if (!once++)
            LOG_WARN("a 2D or 3D copy between memory of two servers (%s and %s) that memcpy.c did not send "
                     "server to server: it fails with CUDA_ERROR_NOT_SUPPORTED; copy through host memory",
                     conn_addr(s), conn_addr(d));
        return NULL;
    }
    return d ? d : s ? s : server_current();
}
