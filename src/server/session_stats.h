/* session_stats.h - what each session did, for the parent's /metrics and
 * `scuda ps` (docs/architecture.md, 9.22 Pools).
 *
 * Sessions are processes: each gets a page of its own, shared with the
 * parent only (MAP_SHARED, made before its fork; every other session's
 * page is unmapped in the child). The session writes plain counters
 * there; the parent reads them as numbers and nothing else: no pointer,
 * length or text crosses, so a hostile or crashed session can lie only
 * about its own counters. Who the session is (user, peer, GPU, start) is
 * the parent's own record, never read back from the page. */
#ifndef SCUDA_SERVER_SESSION_STATS_H
#define SCUDA_SERVER_SESSION_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/token_file.h"

/* The page a session writes. */
struct session_counters {
    _Atomic uint64_t calls, errors;  /* calls run; of them, failed */
    _Atomic uint64_t bytes_in, bytes_out; /* call frames read and replies written */
    _Atomic uint64_t device_mem;     /* device bytes it holds now */
    _Atomic uint64_t module_hits;    /* modules served from the module cache */
    _Atomic uint64_t device_total;   /* device memory of the GPUs it sees (written once it started) */
    /* The last snapshot parked on a standby (9.24): when (CLOCK_MONOTONIC
     * ms; 0: none yet) and how many device bytes it copied. */
    _Atomic uint64_t snapshot_ms, snapshot_bytes;
};

/* The parent's record of one session. */
struct session_record {
    pid_t pid;
    char user[TOKEN_NAME_MAX];
    char peer[80];
    int gpu;           /* gpu_pool.h: a GPU of --gpus, or GPU_POOL_ALL */
    uint64_t start_ms; /* CLOCK_MONOTONIC */
    struct session_counters seen; /* a copy of its page, read now */
};

/* ---- in the parent ---- */
/* A page for the next session, before its fork: a slot, or -1 (no memory:
 * the session runs without counters). */
int session_stats_open(void);
/* After fork: the slot is session pid's. */
void session_stats_bind(int slot, pid_t pid, const char *user, const char *peer, int gpu);
/* The fork failed, or the session was reaped: free its slot. */
void session_stats_close_slot(int slot);
void session_stats_release(pid_t pid);
/* The sessions now, with their counters: at most max, returns how many. */
int session_stats_list(struct session_record *out, int max);
/* Milliseconds since start_ms (a record's); 0 for a time not yet come
 * (a session's own counter may say anything). */
uint64_t session_stats_age_ms(uint64_t start_ms);

/* ---- in a forked child ---- */
/* Keep only the page of `slot` (-1: none), unmapping every other. */
void session_stats_enter(int slot);
/* The session's own page, or NULL (writes then go nowhere). */
struct session_counters *session_stats_mine(void);
/* A snapshot of `bytes` device bytes parked on a standby just now. */
void session_stats_snapshot(uint64_t bytes);

#endif
