/* gpu_pool.c - the GPUs this server serves and the GPU each session runs
 * on (gpu_pool.h). The parent books sessions against GPUs here; the
 * driver does the renumbering, through CUDA_VISIBLE_DEVICES. */
#define _POSIX_C_SOURCE 200809L
#include "gpu_pool.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/visible_devices.h"
#include "../common/protocol.h"
#include "../common/log.h"

#define GPU_NAME_MAX 96

static struct {
    int size, max_per_gpu;
    char name[GPU_POOL_MAX][GPU_NAME_MAX];
    int sessions[GPU_POOL_MAX];
    int entered; /* in a session: the GPU given (GPU_POOL_ALL: the pool) */
    /* In a session whose client sent its CUDA_VISIBLE_DEVICES: the
     * client's value, and the list the driver got (visible_devices.h). */
    int client_given, composed_n;
    char client[VISIBLE_MAX + 1];
    char composed[GPU_POOL_MAX * GPU_NAME_MAX];
} pool = {.entered = GPU_POOL_ALL};

/* Bookings: the parent's sessions that run on one GPU. */
static struct booking {
    pid_t pid;
    int gpu;
} *booked;
static size_t nbooked, capbooked;

static int already_named(const char *e, size_t len)
{
    for (int i = 0; i < pool.size; i++)
        if (strlen(pool.name[i]) == len && strncmp(pool.name[i], e, len) == 0) return 1;
    return 0;
}

int gpu_pool_init(const char *list, int max_per_gpu, char *err, size_t errlen)
{
    pool.size = 0;
    pool.max_per_gpu = max_per_gpu;
    if (list == NULL) {
        if (max_per_gpu == 0) return 0;
        snprintf(err, errlen, "--max-sessions-per-gpu needs --gpus: the server's parent never loads CUDA, so it "
                              "must be told the GPUs, e.g. --gpus 0,1,2,3 (see nvidia-smi -L)");
        return -1;
    }
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        if (!visible_entry_ok(p, len) || len >= GPU_NAME_MAX || already_named(p, len) || pool.size == GPU_POOL_MAX) {
            snprintf(err, errlen, "--gpus '%s': '%.*s' is %s; give GPU indices or UUIDs as CUDA_VISIBLE_DEVICES "
                                  "takes them, e.g. 0,2 or GPU-8f6c1d2e-... (see nvidia-smi -L)",
                     list, (int)(len > 80 ? 80 : len), p,
                     pool.size == GPU_POOL_MAX ? "one GPU too many (64 at most)"
                     : already_named(p, len)  ? "named twice"
                                              : "not a GPU index or UUID");
            pool.size = 0;
            return -1;
        }
        memcpy(pool.name[pool.size], p, len);
        pool.name[pool.size++][len] = '\0';
        p += len;
        if (*p == '\0') break;
        p++;
    }
    return 0;
}

int gpu_pool_size(void) { return pool.size; }
int gpu_pool_max_per_gpu(void) { return pool.max_per_gpu; }
const char *gpu_pool_name(int i) { return i >= 0 && i < pool.size ? pool.name[i] : "?"; }
int gpu_pool_sessions_on(int i) { return i >= 0 && i < pool.size ? pool.sessions[i] : 0; }

int gpu_pool_place(void)
{
    if (pool.max_per_gpu == 0 || pool.size == 0) return GPU_POOL_ALL;
    int best = GPU_POOL_FULL;
    for (int i = 0; i < pool.size; i++)
        if (pool.sessions[i] < pool.max_per_gpu && (best < 0 || pool.sessions[i] < pool.sessions[best])) best = i;
    return best;
}

void gpu_pool_bind(pid_t pid, int gpu)
{
    if (gpu < 0 || gpu >= pool.size) return;
    if (nbooked == capbooked) {
        size_t cap = capbooked ? capbooked * 2 : 16;
        struct booking *b = realloc(booked, cap * sizeof *b);
        if (!b) {
            /* The session runs; its GPU just goes uncounted. */
            LOG_WARN("out of memory booking session %d on GPU %s; it is not counted against "
                     "--max-sessions-per-gpu", (int)pid, pool.name[gpu]);
            return;
        }
        booked = b;
        capbooked = cap;
    }
    booked[nbooked++] = (struct booking){.pid = pid, .gpu = gpu};
    pool.sessions[gpu]++;
}

void gpu_pool_release(pid_t pid)
{
    for (size_t i = 0; i < nbooked; i++) {
        if (booked[i].pid != pid) continue;
        pool.sessions[booked[i].gpu]--;
        booked[i] = booked[--nbooked];
        return;
    }
}

int gpu_pool_gpu_of(pid_t pid)
{
    for (size_t i = 0; i < nbooked; i++)
        if (booked[i].pid == pid) return booked[i].gpu;
    return GPU_POOL_ALL;
}

/* The list this server exposes to the session: the pool (or its one GPU)
 * into list, or the server's own CUDA_VISIBLE_DEVICES, or NULL for every
 * GPU the driver shows. */
static const char *server_list(int gpu, char *list, size_t cap)
{
    if (pool.size == 0) return getenv("CUDA_VISIBLE_DEVICES");
    size_t at = 0;
    list[0] = '\0';
    for (int i = 0; i < pool.size; i++) {
        if (gpu >= 0 && i != gpu) continue;
        at += (size_t)snprintf(list + at, cap - at, "%s%s", at ? "," : "", pool.name[i]);
    }
    return list;
}

void gpu_pool_enter(int gpu, const char *client_visible)
{
    pool.entered = gpu;
    static char list[GPU_POOL_MAX * GPU_NAME_MAX];
    const char *server = server_list(gpu, list, sizeof list);
    if (client_visible) {
        /* A copy: composing may replace the environment it points into. */
        char exposed[sizeof list];
        snprintf(exposed, sizeof exposed, "%s", server ? server : "");
        pool.client_given = 1;
        snprintf(pool.client, sizeof pool.client, "%s", client_visible);
        pool.composed_n = visible_compose(server ? exposed : NULL, client_visible, pool.composed, sizeof pool.composed);
        setenv("CUDA_VISIBLE_DEVICES", pool.composed, 1);
        LOG_INFO("the client's CUDA_VISIBLE_DEVICES '%.200s' over %s%.200s%s: the driver is given '%.300s'",
                 client_visible, server ? "the server's '" : "every GPU", server ? exposed : "", server ? "'" : "",
                 pool.composed);
        return;
    }
    if (pool.size) setenv("CUDA_VISIBLE_DEVICES", server, 1);
    /* else every GPU: the server's own environment decides */
}

int gpu_pool_explain_none(char *msg, size_t msglen)
{
    if (!pool.client_given || pool.composed_n > 0) return 0;
    snprintf(msg, msglen, "no GPU is visible: the client's CUDA_VISIBLE_DEVICES='%.200s' names none of the GPUs "
                          "this server exposes to it",
             pool.client);
    return 1;
}

int gpu_pool_check(unsigned device_count, char *msg, size_t msglen)
{
    if (pool.size == 0) return 0;
    unsigned want = pool.client_given ? (unsigned)pool.composed_n : pool.entered >= 0 ? 1u : (unsigned)pool.size;
    if (device_count >= want) return 0;
    char bad[GPU_NAME_MAX];
    if (pool.client_given) visible_entry_at(pool.composed, (int)device_count, bad, sizeof bad);
    else snprintf(bad, sizeof bad, "%s", pool.entered >= 0 ? pool.name[pool.entered] : pool.name[device_count]);
    snprintf(msg, msglen, "the server's --gpus names GPU %s, which its driver does not show (it shows %u of the %u "
                          "given); the operator must fix --gpus (see nvidia-smi -L)",
             bad, device_count, want);
    return -1;
}
