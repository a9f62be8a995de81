/* stats.c - see stats.h. */
#define _GNU_SOURCE
#include "stats.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../common/config.h"
#include "../common/ops.gen.h"

/* Counted per op id below STATS_OPS; printed to stderr at exit, the calls
 * that waited for a reply first. A tool for finding round trips that a
 * workload should not pay, not a benchmark. */
#define STATS_OPS 1024
static _Atomic uint32_t stats_sync[STATS_OPS], stats_async[STATS_OPS];
static _Atomic uint64_t stats_wait_ns[STATS_OPS]; /* sync calls: send to reply, summed */
static _Atomic int stats_on = -1; /* -1 until SCUDA_STATS is read */
static void stats_print(void);

static const char *const timer_names[STATS_TIMERS] = {"hashing module images", "loading module images",
                                                      "compressing module loads (plain bytes)",
                                                      "module loads sent compressed (bytes on the wire)"};
static _Atomic uint64_t timer_ns[STATS_TIMERS], timer_bytes[STATS_TIMERS], timer_count[STATS_TIMERS];
static const char *const counter_names[STATS_COUNTERS] = {
    "module loads sent one-way", "module loads of new images sent one-way with their bytes (their kernels read here)",
    "module loads of new images sent one-way by digest (the server's module cache held them)",
    "module image hashes skipped", "function attributes answered here",
    "module images the session keeps for one-way loads",
    "module images past the session's budget for them (MODULE_PIN_MAX): their loads wait for a reply",
    "compile stages asked of the compile cache (NVRTC asks two per compile)",
    "compile stages served by the compile cache (not compiled again)",
    "allocations answered with a spare allocated ahead (slow link)",
    "functions whose attributes came from the client's attribute cache",
    "occupancy answers that came from the client's attribute cache"};
static _Atomic uint64_t counters[STATS_COUNTERS];

int stats_enabled(void)
{
    int on = stats_on;
    if (on < 0) {
        int want = scuda_env_on("SCUDA_STATS"), unset = -1;
        /* The thread that settles it registers the report, once. */
        if (atomic_compare_exchange_strong(&stats_on, &unset, want) && want) atexit(stats_print);
        on = stats_on;
    }
    return on;
}

uint64_t stats_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void stats_time(enum stats_timer t, uint64_t ns, uint64_t bytes)
{
    timer_ns[t] += ns;
    timer_bytes[t] += bytes;
    timer_count[t]++;
}

void stats_add(enum stats_counter c)
{
    if (stats_enabled()) atomic_fetch_add_explicit(&counters[c], 1, memory_order_relaxed);
}

static void stats_print(void)
{
    for (int k = 0; k < STATS_COUNTERS; k++)
        if (counters[k])
            fprintf(stderr, "scuda stats: %s: %llu\n", counter_names[k], (unsigned long long)counters[k]);
    for (int t = 0; t < STATS_TIMERS; t++)
        if (timer_count[t] && timer_ns[t])
            fprintf(stderr, "scuda stats: %s: %llu times, %.1f ms, %.1f MiB\n", timer_names[t],
                    (unsigned long long)timer_count[t], (double)timer_ns[t] / 1e6, (double)timer_bytes[t] / 1048576.0);
        else if (timer_count[t]) /* a count of bytes, not timed */
            fprintf(stderr, "scuda stats: %s: %llu times, %.1f MiB\n", timer_names[t],
                    (unsigned long long)timer_count[t], (double)timer_bytes[t] / 1048576.0);
    uint64_t ts = 0, ta = 0;
    for (unsigned op = 0; op < STATS_OPS; op++) ts += stats_sync[op], ta += stats_async[op];
    fprintf(stderr, "scuda stats: %llu calls waited for a reply, %llu one-way\n", (unsigned long long)ts,
            (unsigned long long)ta);
    for (int pass = 0; pass < 2; pass++)
        for (unsigned op = 0; op < STATS_OPS; op++) {
            uint32_t n = pass ? stats_async[op] : stats_sync[op];
            if (n && !pass)
                fprintf(stderr, "  %-6s %8u  %-40s %9.1f ms waited\n", "sync", n, scuda_op_name(op),
                        (double)stats_wait_ns[op] / 1e6);
            else if (n)
                fprintf(stderr, "  %-6s %8u  %s\n", "async", n, scuda_op_name(op));
        }
}

/* For a process that leaves with _exit (no atexit handlers: Python's
 * os._exit, as bench/torch_bench.py's workers do): print now. */
__attribute__((visibility("default"))) void scuda_client_stats_print(void)
{
    if (stats_enabled()) stats_print();
}

void stats_waited(uint16_t op, uint64_t ns)
{
    if (op < STATS_OPS) atomic_fetch_add_explicit(&stats_wait_ns[op], ns, memory_order_relaxed);
}

void stats_count(uint16_t op, int async)
{
    if (stats_enabled() && op < STATS_OPS)
        atomic_fetch_add_explicit(async ? &stats_async[op] : &stats_sync[op], 1, memory_order_relaxed);
}
