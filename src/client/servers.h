/* servers.h - the servers this client talks to, one `struct server` each
 * (docs/architecture.md, 3.6).
 *
 * Everything that belongs to one connection lives here rather than in file
 * statics: the connection and its liveness (conn.c), the writer's queue
 * (send_queue.c), the resume state (resume.c), the striping connections
 * (bulk.c), and what the module cache learnt about the server (module.c).
 * Each of those files works on the server it is handed, so a client can
 * hold several connections at once.
 *
 * SCUDA_SERVER lists the servers (servers[0] is its first entry); init.c
 * opens them all. A call goes to the server of what it names: its
 * device, context, handle or device pointer (rpc_route.h), else the
 * server of the calling thread's current context (server_current). */
#ifndef SCUDA_CLIENT_SERVERS_H
#define SCUDA_CLIENT_SERVERS_H

#include <cuda.h>
#include <stdatomic.h>

#include "bulk.h"
#include "handle_tag.h"
#include "conn.h"
#include "gdev.h"
#include "resume.h"
#include "send_queue.h"

#define SCUDA_MAX_SERVERS 8

struct server {
    int index; /* in servers[] (SCUDA_SERVER's order) */
    struct conn_state c;
    struct sendq q;
    struct resume_state r;
    struct bulk_state b;
    /* The server lacks scuda_module_load_by_hash (older than the module
     * cache): module.c sends it every image in full. */
    _Atomic int lacks_by_hash;
    /* Lookups by digest that missed in a row, and loads since that sent
     * their bytes without asking (module.c, ask_by_digest). */
    _Atomic unsigned digest_misses, digest_skipped;
    /* The window index of this server's first device (device_window.c on
     * the server): its place in the list of every server's devices, before
     * CUDA_VISIBLE_DEVICES picks from it. Its devices follow in its order,
     * so no two devices of the client share an address window. */
    int g0;
    /* The client applies CUDA_VISIBLE_DEVICES over its list of several
     * servers' devices (gdev_apply_visible) and sends the server none. */
    int visible_here;
    /* With several servers: the window of this server's device 0, and
     * every window's size (scuda_window_first's reply); 0 with one. */
    uint64_t win_base, win_size;
    /* A live context on this server (its wire id, 0: none): what a call
     * from a thread that never had one there runs in (conn_send). */
    _Atomic uint32_t any_ctx;
};

extern struct server servers[SCUDA_MAX_SERVERS];

/* The handle the application gets for id `id` from server s's reply: the
 * id tagged with s (handle_tag.h). 0 and the special streams stay as they
 * are; server 0's tag is 0, so with one server this is the id itself. */
static inline void *handle_from_server(const struct server *s, uint64_t id)
{
    return (void *)(uintptr_t)handle_tag(id, (unsigned)s->index);
}

/* The client's device list over the servers in use (gdev.h), built by
 * servers_build_devices once the connections are open, before any call
 * can read it: device queries (device.c) and context.c's device check
 * look ordinals up here. Calls that carry a device to a server still send
 * the ordinal as it is, which is the local one while there is one server. */
extern struct gdev_table gdevs;
/* How many of servers[] are in use: SCUDA_SERVER's entries (1 otherwise). */
extern int servers_used;
/* (Re)build gdevs from servers[0..n-1]'s session infos, in that order,
 * setting each one's g0; with n > 1, CUDA_VISIBLE_DEVICES then picks from
 * the list. Returns 0, or -1 (logged) when the servers have
 * more devices together than SCUDA_MAX_GLOBAL_DEVICES. */
int servers_build_devices(int n);

/* Open the configured server(s) (addr and source from
 * scuda_resolve_server; SCUDA_SERVER may list several, opened at once) and
 * build gdevs over them; *listed: how many SCUDA_SERVER lists (1
 * otherwise). CUDA_SUCCESS, or an error already logged. Both shims open
 * their servers here, so NVML numbers the devices as CUDA does. */
CUresult servers_open(const char *addr, const char *source, int *listed);

/* With n > 1 servers, tell each the window index of its first device
 * (g0), before any memory is placed: scuda_window_first. CUDA_SUCCESS, or
 * CUDA_ERROR_NO_DEVICE (logged) when a server cannot. */
CUresult servers_send_windows(int n);

/* The server of the calling thread's current context (context.c sets
 * it with the context stack); NULL: no context, servers[0]. */
extern _Thread_local struct server *servers_thread_server;

/* The server the calling thread's calls go to when they name nothing of
 * one server (rpc_begin): its current context's. */
static inline struct server *server_current(void)
{
    struct server *s = servers_thread_server;
    return s ? s : &servers[0];
}

/* The server that handle id `id` belongs to, by its tag (handle_tag.h).
 * A handle on every server, or a special id, goes where the calling
 * thread's calls go. NULL: the tag names no server, which the caller
 * reports as CUDA_ERROR_INVALID_HANDLE, the driver's answer for a handle
 * it never gave out. */
static inline struct server *server_of_id(uint64_t id)
{
    unsigned tag = handle_tag_of(id);
    if (tag == HANDLE_TAG_ALL || id <= HANDLE_TAG_SPECIAL_MAX) return server_current();
    return tag < SCUDA_MAX_SERVERS ? &servers[tag] : NULL;
}

/* The server of handle h (by its tag); where the thread's calls go when
 * the tag names no server: that server then reports the handle as one it
 * never gave out. */
static inline struct server *server_of_handle(const void *h)
{
    struct server *s = server_of_id((uint64_t)(uintptr_t)h);
    return s ? s : server_current();
}

/* The server of the client's device `dev` (gdevs); for an ordinal that
 * names no device (CU_DEVICE_CPU, a bad one), where the thread's calls go. */
static inline struct server *server_of_device(CUdevice dev)
{
    const struct gdev *g = gdev_get(&gdevs, dev);
    return g ? g->s : server_current();
}

/* What the device's server calls the client's device `dev`: its local
 * ordinal. An ordinal that names no device goes as it is while there is
 * one server (the server's driver judges it, CU_DEVICE_CPU included);
 * with several a positive one becomes one no server has. */
static inline CUdevice device_local(CUdevice dev)
{
    const struct gdev *g = gdev_get(&gdevs, dev);
    if (g) return (CUdevice)g->local;
    return dev >= 0 && servers_used > 1 ? (CUdevice)0x7fffffff : dev;
}

/* The client's ordinal of server s's device `local`, or -1. */
static inline CUdevice device_global(const struct server *s, int local) { return gdev_find(&gdevs, s, local); }

/* Whether the client's devices a and b are on different servers (peer
 * access and copies between them are not forwarded). */
static inline int devices_apart(CUdevice a, CUdevice b)
{
    const struct gdev *ga = gdev_get(&gdevs, a), *gb = gdev_get(&gdevs, b);
    return ga && gb && ga->s != gb->s;
}

/* The server whose device windows hold device address p; a pointer in
 * no window (one server, host memory) goes where the thread's calls go. */
struct server *server_of_ptr(uint64_t p);
/* The server whose windows hold p, or NULL (not in a window). */
struct server *server_window_of(uint64_t p);
/* The server a 2D/3D copy between dst and src (device or host addresses)
 * goes to: the one whose windows hold either. NULL, logged once, when they
 * are in two servers' windows (memcpy.c sends those server to server,
 * cross_server.h, before it asks). */
struct server *servers_of_copy(uint64_t dst, uint64_t src);

#endif
