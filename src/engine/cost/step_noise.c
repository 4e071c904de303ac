/* A served step's spread about the fit (step_noise.h): quantiles of its
 * time over the fit's, interpolated when drawn. */
#include "engine/cost/step_noise.h"

#include <stdlib.h>
#include <string.h>

static const double noise_p[STEP_NOISE_Q] = {0.001, 0.01, 0.05, 0.1,  0.2,  0.3,  0.4,   0.5,  0.6,
                                             0.7,   0.8,  0.9,  0.95, 0.98, 0.99, 0.995, 0.999};

double step_noise_p(int i) {
    return i < 0 ? 0 : i >= STEP_NOISE_Q ? 1 : noise_p[i];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int step_noise_fit(step_noise *z, const double *took, const double *fit, size_t n, tps_err *e) {
    memset(z, 0, sizeof *z);
    if (n < 16)
        return tps_fail(e, TPS_EINVAL, "%zu observed, too few for quantiles (16 at least)", n);
    double *rest = malloc(sizeof *rest * n);
    if (!rest) return tps_fail(e, TPS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        rest[i] = fit[i] > 0 ? took[i] / fit[i] : 1;
    qsort(rest, n, sizeof *rest, cmp_double);
    for (int k = 0; k < STEP_NOISE_Q; k++) {
        double at = noise_p[k] * (double)(n - 1);
        size_t i = (size_t)at;
        double f = at - (double)i;
        z->q[k] = i + 1 < n ? rest[i] * (1 - f) + rest[i + 1] * f : rest[n - 1];
    }
    z->n = n;
    free(rest);
    return 0;
}

int step_noise_fit_split(step_noise *one, step_noise *rest, const double *rows, const double *took,
                         const double *fit, size_t n, tps_err *e) {
    memset(one, 0, sizeof *one);
    size_t n1 = 0;
    for (size_t i = 0; i < n; i++)
        n1 += rows[i] <= 1;
    if (n1 < 16 || n - n1 < 16) return step_noise_fit(rest, took, fit, n, e);
    double *t = malloc(sizeof *t * n), *f = malloc(sizeof *f * n);
    int rc = t && f ? 0 : tps_fail(e, TPS_ENOMEM, "out of memory");
    for (int part = 0; !rc && part < 2; part++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if ((rows[i] <= 1) == (part == 0)) t[k] = took[i], f[k++] = fit[i];
        rc = step_noise_fit(part == 0 ? one : rest, t, f, k, e);
    }
    free(t);
    free(f);
    return rc;
}

double step_noise_at(const step_noise *z, double u) {
    if (!z->n) return 1;
    if (u <= noise_p[0]) return z->q[0];
    for (int k = 1; k < STEP_NOISE_Q; k++)
        if (u <= noise_p[k]) {
            double f = (u - noise_p[k - 1]) / (noise_p[k] - noise_p[k - 1]);
            return z->q[k - 1] + f * (z->q[k] - z->q[k - 1]);
        }
    return z->q[STEP_NOISE_Q - 1];
}
