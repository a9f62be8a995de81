/* servers_open.c - open every server of SCUDA_SERVER and build the one
 * device list over them (servers.h). Shared by both shims: the driver
 * shim's cuInit (init.c) and the NVML shim's nvmlInit (nvml/nvml_init.c),
 * so that NVML numbers the devices exactly as CUDA does. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "servers.h"
#include "../common/config.h"
#include "../common/log.h"

/* One server's connection, opened on a thread of its own so that a
 * client of several servers waits for the slowest, not for their sum.
 * conn_open bounds its own time (connect and handshake timeouts). */
struct opening {
    struct server *s;
    char addr[256];
    CUresult r;
};

static void *open_one(void *arg)
{
    struct opening *o = arg;
    o->r = conn_open(o->s, o->addr);
    return NULL;
}

/* Open SCUDA_SERVER's n entries (n > 1) at once. CUDA_SUCCESS when every
 * one is open: a client that silently lost a server would renumber the
 * devices of the others. */
static CUresult open_servers(const char *list, int n)
{
    static struct opening o[SCUDA_MAX_SERVERS];
    pthread_t t[SCUDA_MAX_SERVERS];
    int started[SCUDA_MAX_SERVERS] = {0};
    for (int k = 0; k < n; k++) {
        o[k].s = &servers[k];
        o[k].r = CUDA_ERROR_NO_DEVICE;
        servers[k].visible_here = 1;
        if (scuda_server_list_entry(list, k, o[k].addr, sizeof o[k].addr) != 0) {
            LOG_ERROR("SCUDA_SERVER's entry %d is too long for an address; fix SCUDA_SERVER", k + 1);
            continue;
        }
        started[k] = pthread_create(&t[k], NULL, open_one, &o[k]) == 0;
        if (!started[k]) open_one(&o[k]);
    }
    CUresult r = CUDA_SUCCESS;
    for (int k = 0; k < n; k++) {
        if (started[k]) pthread_join(t[k], NULL);
        if (o[k].r != CUDA_SUCCESS && r == CUDA_SUCCESS) r = o[k].r;
        if (o[k].r != CUDA_SUCCESS)
            LOG_ERROR("SCUDA_SERVER's entry %d (%s) did not open (the reason is above); start that server, "
                      "or remove it from SCUDA_SERVER, to use the others", k + 1, o[k].addr);
    }
    return r;
}

CUresult servers_open(const char *addr, const char *source, int *listed_out)
{
    int listed = strcmp(source, "SCUDA_SERVER") == 0 ? scuda_server_list_len(getenv("SCUDA_SERVER")) : 1;
    *listed_out = listed;
    if (listed > SCUDA_MAX_SERVERS) {
        LOG_ERROR("SCUDA_SERVER lists %d servers; a client uses at most %d: list fewer", listed, SCUDA_MAX_SERVERS);
        return CUDA_ERROR_NO_DEVICE;
    }
    if (listed > 1) LOG_INFO("SCUDA_SERVER lists %d servers: their devices are numbered in that order", listed);
    CUresult r = listed > 1 ? open_servers(getenv("SCUDA_SERVER"), listed) : conn_open(&servers[0], addr);
    if (r == CUDA_SUCCESS && servers_build_devices(listed) != 0) r = CUDA_ERROR_NO_DEVICE;
    if (r == CUDA_SUCCESS && listed > 1 && gdevs.count == 0) {
        /* As the driver answers when CUDA_VISIBLE_DEVICES names no GPU. */
        LOG_INFO("CUDA_VISIBLE_DEVICES names none of the %d servers' devices", listed);
        r = CUDA_ERROR_NO_DEVICE;
    }
    return r;
}
