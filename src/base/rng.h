/* The one seeded generator behind every reproducible stream in tps: the
 * sampler's draws, the synthetic model's weights, the bench's arrival gaps
 * and lengths. xoshiro256** seeded through splitmix64 (Blackman & Vigna,
 * https://prng.di.unimi.it/): the same seed gives the same stream on every
 * machine, and stored golden outputs depend on it, so the arithmetic here
 * must never change.
 *
 * Not here: distributions (bench/workload/load.c draws normals, gammas and lengths),
 * anything cryptographic. */
#ifndef TPS_BASE_RNG_H
#define TPS_BASE_RNG_H

#include <stdint.h>

/* splitmix64: advances *state by one step and returns a well-mixed 64-bit
 * value. Alone it is a tiny generator of its own (model_make uses one per
 * weight row, seeded from the row's index); here it also seeds tps_rng. */
static inline uint64_t tps_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* xoshiro256** state; owned by whoever draws from it (one per sequence, per
 * load generator), never shared between threads. */
typedef struct tps_rng {
    uint64_t s[4];
} tps_rng;

static inline void tps_rng_seed(tps_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = tps_splitmix64(&x);
}

static inline uint64_t tps_rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t tps_rng_next(tps_rng *r) {
    uint64_t *s = r->s;
    const uint64_t out = tps_rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = tps_rotl64(s[3], 45);
    return out;
}

/* The top 53 bits of a draw as a double in [0, 1) (exact: k / 2^53). */
static inline double tps_unit_from_bits(uint64_t bits) {
    return (double)(bits >> 11) * 0x1.0p-53;
}

/* Uniform in [0, 1). */
static inline double tps_rng_uniform(tps_rng *r) {
    return tps_unit_from_bits(tps_rng_next(r));
}

/* Uniform in (0, 1), never 0 or 1 (safe under log): (k + 0.5) / 2^53. */
static inline double tps_rng_uniform_open(tps_rng *r) {
    return ((double)(tps_rng_next(r) >> 11) + 0.5) * 0x1.0p-53;
}

#endif
