/* The gated delta-rule kernel (kernel_delta_rule, Qwen3.5's linear layers)
 * against a double-precision reference of ggml's gated_delta_net: five
 * tokens through one head's state, for head sizes that are and are not
 * whole vectors, outputs and the final state within float rounding. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "kernels/ops.h"

static double rnd(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*st >> 11) / 9007199254740992.0 * 2 - 1;
}

/* One token on the reference: the whole state decayed, then per row j the
 * read with k, the write, the read with q (ggml's order of passes). */
static void reference_step(double *M, const double *q, const double *k, const double *v,
                           double decay, double beta, double scale, double *o, size_t S) {
    for (size_t i = 0; i < S * S; i++)
        M[i] *= decay;
    for (size_t j = 0; j < S; j++) {
        double sk = 0;
        for (size_t i = 0; i < S; i++)
            sk += M[j * S + i] * k[i];
        const double d = (v[j] - sk) * beta;
        double sq = 0;
        for (size_t i = 0; i < S; i++) {
            M[j * S + i] += d * k[i];
            sq += M[j * S + i] * q[i];
        }
        o[j] = sq * scale;
    }
}

static void check_size(size_t S) {
    uint64_t st = 17 + S;
    float *M = calloc(S * S, sizeof *M), *q = malloc(S * sizeof *q), *k = malloc(S * sizeof *k);
    float *v = malloc(S * sizeof *v), *o = malloc(S * sizeof *o);
    double *Md = calloc(S * S, sizeof *Md), *qd = malloc(S * sizeof *qd);
    double *kd = malloc(S * sizeof *kd), *vd = malloc(S * sizeof *vd), *od = malloc(S * sizeof *od);
    const float scale = 1.0f / sqrtf((float)S);
    for (int t = 0; t < 5; t++) {
        for (size_t i = 0; i < S; i++) {
            q[i] = (float)rnd(&st) / sqrtf((float)S);
            k[i] = (float)rnd(&st) / sqrtf((float)S);
            v[i] = (float)rnd(&st);
            qd[i] = q[i], kd[i] = k[i], vd[i] = v[i];
        }
        const float decay = 0.5f + 0.1f * (float)t, beta = 0.3f + 0.1f * (float)t;
        kernel_delta_rule(M, q, k, v, decay, beta, scale, o, S);
        reference_step(Md, qd, kd, vd, decay, beta, scale, od, S);
        for (size_t j = 0; j < S; j++)
            cr_assert(fabs(o[j] - od[j]) <= 1e-5 * (1 + fabs(od[j])),
                      "S %zu token %d: o[%zu] %g, reference %g", S, t, j, o[j], od[j]);
    }
    for (size_t i = 0; i < S * S; i++)
        cr_assert(fabs(M[i] - Md[i]) <= 1e-5 * (1 + fabs(Md[i])), "S %zu: state[%zu] %g vs %g", S,
                  i, M[i], Md[i]);
    free(M), free(q), free(k), free(v), free(o);
    free(Md), free(qd), free(kd), free(vd), free(od);
}

Test(delta_rule, matches_the_double_precision_reference) {
    const size_t sizes[] = {1, 7, 16, 24, 100, 128};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        check_size(sizes[i]);
}
