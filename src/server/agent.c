/* agent.c - HAProxy's agent-check (agent.h).
 *
 * Room is what a new client would find: free session places (the
 * --max-sessions bound, and --max-sessions-per-gpu over the pool), and
 * free device memory: what the sessions hold against the memory of the
 * GPUs they see (their counters pages, session_stats.h). The parent never
 * loads CUDA, so memory used by other processes on the GPUs is not seen,
 * and with no session yet the memory is taken as free. */
#define _GNU_SOURCE
#include "agent.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "children.h"
#include "gpu_pool.h"
#include "session_stats.h"
#include "../common/transport.h"

static int agent_fd = -1, max_sessions_now;

int agent_open(const char *addr, int max_sessions, int *port, char *err, size_t errlen)
{
    char why[256];
    int fd = tcp_listen(addr, port, why, sizeof why);
    if (fd < 0) {
        snprintf(err, errlen, "--agent %s: %s; choose another address", addr, why);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    agent_fd = fd;
    max_sessions_now = max_sessions;
    return 0;
}

void agent_forget_in_child(void)
{
    if (agent_fd >= 0) close(agent_fd);
    agent_fd = -1;
}

/* Free session places, in percent. */
static double places_free(void)
{
    double room = max_sessions_now > 0 ? 1.0 - (double)children_sessions() / max_sessions_now : 1.0;
    int n = gpu_pool_size(), per = gpu_pool_max_per_gpu();
    if (n > 0 && per > 0) {
        int used = 0;
        for (int g = 0; g < n; g++) used += gpu_pool_sessions_on(g);
        double gpu_room = 1.0 - (double)used / ((double)n * per);
        if (gpu_room < room) room = gpu_room;
    }
    return room < 0 ? 0 : room;
}

/* Free device memory, as a fraction of the GPUs' memory. Sessions placed
 * on one GPU each report that GPU's memory; others report the whole pool. */
static double memory_free(void)
{
    int max = children_sessions() + 16;
    struct session_record *r = calloc((size_t)max, sizeof *r);
    if (!r) return 1.0; /* no worse than before any session started */
    int n = session_stats_list(r, max);
    uint64_t gpu_total[GPU_POOL_MAX] = {0}, gpu_held[GPU_POOL_MAX] = {0}, pool_total = 0, pool_held = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].seen.device_total == 0) continue; /* not started, or a raw link */
        if (r[i].gpu >= 0 && r[i].gpu < GPU_POOL_MAX) {
            gpu_total[r[i].gpu] = r[i].seen.device_total;
            gpu_held[r[i].gpu] += r[i].seen.device_mem;
        } else {
            if (r[i].seen.device_total > pool_total) pool_total = r[i].seen.device_total;
            pool_held += r[i].seen.device_mem;
        }
    }
    free(r);
    uint64_t total = pool_total, held = pool_held;
    for (int g = 0; g < GPU_POOL_MAX; g++) {
        total += gpu_total[g];
        held += gpu_held[g] < gpu_total[g] ? gpu_held[g] : gpu_total[g];
    }
    if (total == 0) return 1.0;
    return held >= total ? 0.0 : 1.0 - (double)held / (double)total;
}

int agent_room(void)
{
    double p = places_free(), m = memory_free();
    return (int)(100.0 * (p < m ? p : m));
}

void agent_line(char *out, size_t len)
{
    int room = agent_room();
    /* HAProxy's weight 0% is "drain" too; said outright, it is plain in logs. */
    if (room <= 0) snprintf(out, len, "drain\n");
    else snprintf(out, len, "up %d%%\n", room);
}

int agent_poll_count(void) { return agent_fd >= 0; }

void agent_poll_fill(struct pollfd *p)
{
    if (agent_fd >= 0) p[0] = (struct pollfd){.fd = agent_fd, .events = POLLIN};
}

void agent_poll_done(const struct pollfd *p, int n)
{
    if (agent_fd < 0 || n < 1 || !(p[0].revents & POLLIN)) return;
    char line[32];
    agent_line(line, sizeof line);
    /* At most 64 a round: a flood of connections cannot hold the loop. */
    for (int i = 0; i < 64; i++) {
        int fd = accept4(agent_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        /* A fresh socket's send buffer takes a short line at once. */
        ssize_t w = send(fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
        shutdown(fd, SHUT_WR);
        close(fd);
    }
}
