/* clock.h - the monotonic clock in nanoseconds, for timing and deadlines
 * (never for wall-clock time). */
#ifndef SCUDA_COMMON_CLOCK_H
#define SCUDA_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t now_ms(void) { return now_ns() / 1000000u; }

#endif
