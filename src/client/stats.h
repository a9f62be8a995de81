/* stats.h - SCUDA_STATS=1: which calls crossed the wire (per op, waiting or
 * one-way) and the time spent on things a slow start may pay for, printed
 * to stderr at exit. A tool for finding round trips a workload should not
 * pay, not a benchmark. */
#ifndef SCUDA_CLIENT_STATS_H
#define SCUDA_CLIENT_STATS_H

#include <stdint.h>

/* STATS_IMAGE_PACK: compressing requests that carry module images, their
 * plain bytes; STATS_IMAGE_PACKED: those sent compressed, their bytes on
 * the wire, no time (request_pack.h). */
enum stats_timer { STATS_IMAGE_HASH, STATS_IMAGE_LOAD, STATS_IMAGE_PACK, STATS_IMAGE_PACKED, STATS_TIMERS };
/* Round trips and work saved (docs/architecture.md, 3.8.1). */
enum stats_counter {
    STATS_LOADS_ONE_WAY,
    STATS_LOADS_NEW_ONE_WAY, /* of images new to the session, their kernels read here (image_kernels.h) */
    STATS_LOADS_HELD_ONE_WAY, /* of those, by digest: the server's module cache held them (module_held.h) */
    STATS_HASHES_SKIPPED,
    STATS_ATTR_HITS,
    STATS_IMAGES_KEPT,   /* images the session keeps for one-way loads (module_known.c) */
    STATS_IMAGES_NOT_KEPT, /* images past the session's budget for them: their loads wait for a reply */
    STATS_COMPILE_SERVICE, /* compile stages asked of the compile cache: two per NVRTC compile (compile_cache.h) */
    STATS_COMPILE_HITS,    /* of them, served from the cache */
    STATS_ALLOC_SPARES,    /* cuMemAlloc answered with a spare (alloc_ahead.c) */
    STATS_ATTR_RECALLED,   /* functions whose attributes came from the attribute cache (attr_store.h) */
    STATS_KEPT_RECALLED,   /* occupancy answers from the attribute cache (spec flag `kept`) */
    STATS_COUNTERS
};

int stats_enabled(void);
/* One call of op sent: async, or waiting for its reply. */
void stats_count(uint16_t op, int async);
/* A call of op that waited got its reply ns after it was sent. */
void stats_waited(uint16_t op, uint64_t ns);
void stats_time(enum stats_timer t, uint64_t ns, uint64_t bytes);
uint64_t stats_now_ns(void);
void stats_add(enum stats_counter c);

#endif
