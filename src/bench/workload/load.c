/* Random draws, length distributions and arrival gaps (load.h). Not here:
 * scheduling sends (client.c). */
#include "bench/workload/load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- draws ------------------------------------------------------------------- */

double load_rng_normal(tps_rng *r) {
    double u1 = tps_rng_uniform_open(r), u2 = tps_rng_uniform_open(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Marsaglia and Tsang; shape < 1 boosted by U^(1/shape). */
double load_rng_gamma(tps_rng *r, double shape) {
    if (shape < 1.0)
        return load_rng_gamma(r, shape + 1.0) * pow(tps_rng_uniform_open(r), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = load_rng_normal(r), v = 1.0 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = tps_rng_uniform_open(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

uint64_t load_rng_below(tps_rng *r, uint64_t n) {
    return n ? tps_rng_next(r) % n : 0;
}

/* ---- length distributions ------------------------------------------------------ */

static int parse_num(double *out, const char *s, const char *what, tps_err *e) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || (*end && *end != ':') || !isfinite(v) || v < 0)
        return tps_fail(e, TPS_EINVAL, "%s: '%s' is not a non-negative number", what, s);
    *out = v;
    return TPS_OK;
}

int load_dist_parse(load_dist *d, const char *s, tps_err *e) {
    int rc;
    memset(d, 0, sizeof *d);
    if (!strncmp(s, "uniform:", 8) || !strncmp(s, "normal:", 7)) {
        d->kind = s[0] == 'u' ? LOAD_DIST_UNIFORM : LOAD_DIST_NORMAL;
        const char *p = strchr(s, ':') + 1, *q = strchr(p, ':');
        if (!q)
            return tps_fail(e, TPS_EINVAL, "length '%s': expected %s", s,
                            d->kind == LOAD_DIST_UNIFORM ? "uniform:MIN:MAX" : "normal:MEAN:SD");
        if ((rc = parse_num(&d->a, p, "length", e)) || (rc = parse_num(&d->b, q + 1, "length", e)))
            return rc;
        if (d->kind == LOAD_DIST_UNIFORM && (d->a < 1 || d->b < d->a))
            return tps_fail(e, TPS_EINVAL, "length '%s': need 1 <= MIN <= MAX", s);
        if (d->kind == LOAD_DIST_NORMAL && d->a < 1)
            return tps_fail(e, TPS_EINVAL, "length '%s': the mean must be >= 1", s);
        return TPS_OK;
    }
    d->kind = LOAD_DIST_FIXED;
    if ((rc = parse_num(&d->a, s, "length", e))) return rc;
    if (d->a < 1 || strchr(s, ':'))
        return tps_fail(e, TPS_EINVAL,
                        "length '%s': expected N >= 1, uniform:MIN:MAX or normal:MEAN:SD", s);
    return TPS_OK;
}

uint32_t load_dist_sample(const load_dist *d, tps_rng *r) {
    double v = d->a;
    if (d->kind == LOAD_DIST_UNIFORM)
        v = floor(d->a) + (double)load_rng_below(r, (uint64_t)(floor(d->b) - floor(d->a)) + 1);
    else if (d->kind == LOAD_DIST_NORMAL)
        v = d->a + d->b * load_rng_normal(r);
    v = round(v);
    if (v < 1) v = 1;
    if (v > 1e9) v = 1e9;
    return (uint32_t)v;
}

void load_dist_format(const load_dist *d, char *out, unsigned cap) {
    if (d->kind == LOAD_DIST_UNIFORM)
        snprintf(out, cap, "uniform:%g:%g", d->a, d->b);
    else if (d->kind == LOAD_DIST_NORMAL)
        snprintf(out, cap, "normal:%g:%g", d->a, d->b);
    else
        snprintf(out, cap, "%g", d->a);
}

/* ---- arrivals ------------------------------------------------------------------- */

const char *load_arrival_name(load_arrival a) {
    return a == LOAD_ARRIVAL_CONSTANT ? "constant" : a == LOAD_ARRIVAL_GAMMA ? "gamma" : "poisson";
}

uint64_t load_next_gap_ns(load_arrival a, double rate, double burstiness, tps_rng *r) {
    const double mean = 1e9 / rate;
    double g = mean;
    if (a == LOAD_ARRIVAL_POISSON)
        g = -log(tps_rng_uniform_open(r)) * mean;
    else if (a == LOAD_ARRIVAL_GAMMA)
        g = load_rng_gamma(r, burstiness) * mean / burstiness;
    if (g > 1e15) g = 1e15;
    return (uint64_t)g;
}
