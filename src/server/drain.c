/* drain.c - see drain.h. One session at a time: a move holds only that
 * session, and the next peer is chosen knowing how the last one answered. */
#define _GNU_SOURCE
#include "drain.h"

#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "children.h"
#include "control.h"
#include "../common/log.h"
#include "../common/clock.h"

#define MAX_PEERS 32
#define MAX_DRAINED 4096


static int split_peers(const char *list, char peers[MAX_PEERS][256])
{
    int n = 0;
    const char *p = list;
    while (*p && n < MAX_PEERS) {
        size_t len = strcspn(p, ",");
        if (len > 0 && len < 256) {
            memcpy(peers[n], p, len);
            peers[n++][len] = '\0';
        }
        p += len;
        if (*p == ',') p++;
    }
    return n;
}

/* Ask session pid to move to `to` and read its one-line outcome, reaping
 * children meanwhile. Returns 1 moved, 0 the peer refused (another may
 * not), -1 the session cannot move (or is gone). */
static int move_one(pid_t pid, const char *to, int wait_s, void (*reap)(void), char *line, size_t cap)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
        snprintf(line, cap, "no socket pair for the answer");
        return -1;
    }
    int sent = control_send_move(pid, to, sp[1]);
    close(sp[1]);
    size_t n = 0;
    int eof = 0;
    line[0] = '\0';
    uint64_t deadline = now_ms() + (uint64_t)wait_s * 1000u;
    while (sent == 0 && n + 1 < cap && now_ms() < deadline) {
        struct pollfd p = {.fd = sp[0], .events = POLLIN};
        int rc = poll(&p, 1, 200);
        reap();
        if (rc <= 0) continue;
        ssize_t k = read(sp[0], line + n, cap - 1 - n);
        if (k <= 0) {
            eof = 1;
            break;
        }
        n += (size_t)k;
        line[n] = '\0';
        if (strchr(line, '\n')) break;
    }
    close(sp[0]);
    line[strcspn(line, "\n")] = '\0';
    if (sent != 0) snprintf(line, cap, "the session is gone");
    else if (!line[0] && eof) snprintf(line, cap, "the session ended without an answer");
    else if (!line[0]) snprintf(line, cap, "no answer within %d s", wait_s);
    if (strncmp(line, "moved", 5) == 0) return 1;
    return strncmp(line, "refused by", 10) == 0 ? 0 : -1;
}

void drain_sessions(const char *list, int wait_s, void (*reap)(void))
{
    static char peers[MAX_PEERS][256];
    static pid_t pids[MAX_DRAINED], moved[MAX_DRAINED];
    int npeers = split_peers(list, peers), nmoved = 0, next = 0, nended = 0;
    reap(); /* sessions that ended already are not asked */
    int n = children_list(pids, MAX_DRAINED);
    LOG_INFO("draining: %d session(s) to move to %d peer(s)", n, npeers);
    for (int i = 0; i < n; i++) {
        char line[1024] = "";
        int rc = -1;
        reap();
        if (children_ctl_any(pids[i]) < 0) continue; /* it ended meanwhile */
        for (int k = 0; k < npeers; k++) {
            const char *to = peers[(next + k) % npeers];
            rc = move_one(pids[i], to, wait_s, reap, line, sizeof line);
            if (rc == 1) {
                next = (next + k + 1) % npeers;
                break;
            }
            if (rc < 0) break;
            LOG_WARN("draining: session %d: %s; trying the next peer", (int)pids[i], line);
        }
        if (rc == 1) {
            moved[nmoved++] = pids[i];
            LOG_INFO("draining: session %d %s", (int)pids[i], line);
        } else if (children_ctl_any(pids[i]) < 0 || strcmp(line, "the session ended without an answer") == 0) {
            nended++; /* its client left while we asked: nothing to move */
            LOG_INFO("draining: session %d ended by itself", (int)pids[i]);
        } else {
            LOG_WARN("draining: session %d stays until its client ends it: %s", (int)pids[i],
                     rc == 0 ? "every peer refused it" : line);
        }
    }
    /* A moved session's process ends once its client is on the peer. */
    uint64_t deadline = now_ms() + (uint64_t)wait_s * 1000u;
    for (;;) {
        reap();
        int left = 0;
        for (int i = 0; i < nmoved; i++) left += kill(moved[i], 0) == 0;
        if (left == 0 || now_ms() >= deadline) break;
        poll(NULL, 0, 100);
    }
    LOG_INFO("drained: %d of %d session(s) moved", nmoved, n - nended);
}
