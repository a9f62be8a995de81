/* fuzz_rng.h - random numbers for the in-process fuzzers: xorshift64,
 * seeded from FUZZ_SEED (else the clock), so that a failing run can be
 * repeated exactly. */
#ifndef SCUDA_FUZZ_RNG_H
#define SCUDA_FUZZ_RNG_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static uint64_t rng;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

/* Seed the generator; returns the seed, for the run's first line. */
static uint64_t rng_seed(void)
{
    const char *env = getenv("FUZZ_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    rng = seed * 0x9e3779b97f4a7c15ull + 1;
    return seed;
}

#endif
