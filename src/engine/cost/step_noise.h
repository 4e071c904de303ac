/* How a served step's time spreads about the step-cost fit, on one
 * machine. The fit (step_fit.h) holds the mean; a server's steps differ
 * from it by more than the engine's alone do (the HTTP thread and the
 * client on the same cores, a thread descheduled for a time slice), and a
 * latency's p99 is made of that spread: the quantiles of a served step's
 * time over the fit's, drawn from per simulated step by tps plan. As a
 * ratio, because a step 20 times as long is descheduled about as often
 * relative to its length (measured: one stream's p99 is 2.3x its p50, 16
 * streams' 1.7x), where a pooled spread in ns would give one-row steps
 * the long steps' tail. Their mean need not be 1: where the served steps
 * ran slower than the fit says on average, the draw carries that. Not here: running anything
 * (plan_calib), the file (step_fit.h). */
#ifndef TPS_ENGINE_STEP_NOISE_H
#define TPS_ENGINE_STEP_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define STEP_NOISE_Q 17 /* quantiles kept, at step_noise_p(0 .. STEP_NOISE_Q - 1) */

typedef struct step_noise {
    uint64_t n;             /* served steps it was taken on; 0: none measured */
    double q[STEP_NOISE_Q]; /* a step's time over the fit's, at step_noise_p(i) */
} step_noise;

/* The probability of quantile i: 0.001 ... 0.999, denser in the tails. */
double step_noise_p(int i);

/* *z from n served steps: took[i] ns (forward and after), fit[i] the
 * fit's ns for the same shape. TPS_EINVAL with fewer than 16 steps. */
int step_noise_fit(step_noise *z, const double *took, const double *fit, size_t n, tps_err *e);

/* The same split in two: *one from the one-row steps (a stream decoding
 * alone: their time over the fit differs from the rest's, the HTTP thread
 * and the client waking for every token), *rest from the others; when
 * either has fewer than 16, *rest from all of them and one->n 0. */
int step_noise_fit_split(step_noise *one, step_noise *rest, const double *rows, const double *took,
                         const double *fit, size_t n, tps_err *e);

/* The ratio at probability u in [0, 1): the quantiles interpolated, the
 * ends held (1 when none measured). */
double step_noise_at(const step_noise *z, double u);

#endif
