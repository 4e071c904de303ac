/* Load shape for the bench: draws from the seeded generator, request
 * length distributions (fixed, uniform:a:b, normal:mu:sigma) and arrival
 * processes for open-loop load (poisson, constant, gamma with burstiness).
 *
 * Everything is a pure function of the seed, so a run's schedule and
 * workload repeat exactly. Not here: sending anything, clocks. */
#ifndef TPS_BENCH_LOAD_H
#define TPS_BENCH_LOAD_H

#include <stdint.h>

#include "base/error.h"
#include "base/rng.h"

/* Draws from the seeded generator (base/rng.h; tps_rng_seed seeds it). */
double load_rng_normal(tps_rng *r);              /* mean 0, sd 1 */
double load_rng_gamma(tps_rng *r, double shape); /* scale 1, shape > 0 */
uint64_t load_rng_below(tps_rng *r, uint64_t n); /* in [0, n), n > 0 */

/* Token-length distributions (--input-len / --output-len). */
typedef enum load_dist_kind {
    LOAD_DIST_FIXED = 0,   /* a */
    LOAD_DIST_UNIFORM = 1, /* integers in [a, b] */
    LOAD_DIST_NORMAL = 2,  /* round(N(a, b)), clamped to >= 1 */
} load_dist_kind;

typedef struct load_dist {
    load_dist_kind kind;
    double a, b;
} load_dist;

/* "128", "uniform:64:256", "normal:128:32". */
int load_dist_parse(load_dist *d, const char *s, tps_err *e);
/* A sample >= 1. */
uint32_t load_dist_sample(const load_dist *d, tps_rng *r);
/* The distribution as text, as parsed ("uniform:64:256"). */
void load_dist_format(const load_dist *d, char *out, unsigned cap);

/* Arrival process for --rate. */
typedef enum load_arrival {
    LOAD_ARRIVAL_POISSON = 0,  /* exponential gaps, mean 1/rate */
    LOAD_ARRIVAL_CONSTANT = 1, /* every gap exactly 1/rate */
    LOAD_ARRIVAL_GAMMA = 2,    /* gamma gaps, shape = burstiness, mean 1/rate */
} load_arrival;

const char *load_arrival_name(load_arrival a);

/* The gap before the next scheduled send, in ns. rate > 0 requests/s;
 * burstiness > 0 (gamma only: < 1 burstier than Poisson, 1 = Poisson, > 1
 * more regular). */
uint64_t load_next_gap_ns(load_arrival a, double rate, double burstiness, tps_rng *r);

#endif
