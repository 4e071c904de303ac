/* The kernels' row helpers against double-precision references: RMSNorm
 * (in place too), softmax, SwiGLU, add, scale, dot, axpy, a dequantized row
 * of every type, and GeGLU against ggml's F16 GELU table. Split from
 * test_kernels.c (the matrix products). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "support/kernel_check.h"
#include "support/test_support.h"

#define TOL_OPS_REL 1e-5 /* row helpers vs double */

/* ---- row helpers -------------------------------------------------------- */

static const size_t OPS_N[] = {1, 3, 7, 8, 17, 33, 64, 100, 768};

Test(kernels, rmsnorm_matches_double_reference_and_works_in_place) {
    for (size_t t = 0; t < LEN(OPS_N); t++) {
        const size_t n = OPS_N[t];
        float *x = malloc(n * sizeof *x), *w = malloc(n * sizeof *w), *o = malloc(n * sizeof *o);
        kc_fill(x, n, n);
        kc_fill(w, n, n + 1);
        kernel_rmsnorm(o, x, w, n, 1e-5f);
        double ss = 0;
        for (size_t i = 0; i < n; i++)
            ss += (double)x[i] * x[i];
        const double s = 1.0 / sqrt(ss / (double)n + 1e-5);
        for (size_t i = 0; i < n; i++) {
            const double want = x[i] * s * w[i];
            cr_assert(fabs(o[i] - want) <= TOL_OPS_REL * fabs(want) + TOL_ABS, "n %zu i %zu", n, i);
        }
        kernel_rmsnorm(x, x, w, n, 1e-5f);
        cr_assert_eq(memcmp(x, o, n * sizeof *x), 0, "in place equals out of place");
        free(o);
        free(w);
        free(x);
    }
}

Test(kernels, softmax_sums_to_one_and_matches_reference) {
    for (size_t t = 0; t < LEN(OPS_N); t++) {
        const size_t n = OPS_N[t];
        float *x = malloc(n * sizeof *x);
        double *want = malloc(n * sizeof *want);
        kc_fill(x, n, 3 * n);
        for (size_t i = 0; i < n; i++)
            x[i] *= 20.0f; /* large spread: needs the max shift */
        double max = x[0], sum = 0;
        for (size_t i = 1; i < n; i++)
            max = fmax(max, x[i]);
        for (size_t i = 0; i < n; i++)
            sum += want[i] = exp(x[i] - max);
        kernel_softmax(x, n);
        double got = 0;
        for (size_t i = 0; i < n; i++) {
            got += x[i];
            cr_assert(fabs(x[i] - want[i] / sum) <= TOL_OPS_REL * want[i] / sum + TOL_ABS);
        }
        cr_assert(fabs(got - 1.0) < 1e-5);
        free(want);
        free(x);
    }
}

/* A row's bits do not depend on where the row starts: each element's exp
 * is one function whichever vector width or lane takes it. A softmax row
 * led by 8 masked scores (-inf: exp 0, which adds nothing to a sum taken 8
 * lanes in turn) gives the row's own bits; SwiGLU, per element, the same
 * values 8 places later. */
Test(kernels, softmax_and_swiglu_bits_do_not_depend_on_where_the_row_starts) {
    for (size_t t = 0; t < LEN(OPS_N); t++) {
        const size_t n = OPS_N[t], m = n + 8;
        float *buf = calloc(5 * m, sizeof *buf); /* x, then y, g, u, o of m each */
        float *x = buf, *y = buf + m, *g = buf + 2 * m, *u = buf + 3 * m, *o = buf + 4 * m;
        kc_fill(x, n, 5 * n);
        for (size_t i = 0; i < 8; i++)
            y[i] = -INFINITY;
        memcpy(y + 8, x, n * sizeof *x);
        kernel_softmax(x, n);
        kernel_softmax(y, m);
        cr_assert_eq(memcmp(x, y + 8, n * sizeof *x), 0, "softmax, n %zu", n);
        kc_fill(g + 8, n, 7 * n);
        kc_fill(u + 8, n, 7 * n + 1);
        kernel_swiglu(x, g + 8, u + 8, n);
        kernel_swiglu(o, g, u, m);
        cr_assert_eq(memcmp(x, o + 8, n * sizeof *x), 0, "swiglu, n %zu", n);
        free(buf);
    }
}

Test(kernels, swiglu_add_scale_dot_axpy_match_reference) {
    for (size_t t = 0; t < LEN(OPS_N); t++) {
        const size_t n = OPS_N[t];
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *o = malloc(n * sizeof *o);
        kc_fill(a, n, 5 * n);
        kc_fill(b, n, 7 * n);
        kernel_swiglu(o, a, b, n);
        for (size_t i = 0; i < n; i++) {
            const double want = a[i] / (1.0 + exp(-(double)a[i])) * b[i];
            cr_assert(fabs(o[i] - want) <= TOL_OPS_REL * fabs(want) + TOL_ABS);
        }
        kernel_add(o, a, b, n);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(o[i], a[i] + b[i]);
        memcpy(o, a, n * sizeof *o);
        kernel_scale(o, 0.5f, n);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(o[i], a[i] * 0.5f);
        double dot = 0, adot = 0;
        for (size_t i = 0; i < n; i++) {
            dot += (double)a[i] * b[i];
            adot += fabs((double)a[i] * b[i]);
        }
        cr_assert(fabs(kernel_dot_f32(a, b, n) - dot) <= TOL_OPS_REL * adot + TOL_ABS);
        memcpy(o, b, n * sizeof *o);
        kernel_axpy(o, 0.25f, a, n);
        for (size_t i = 0; i < n; i++)
            cr_assert(fabs(o[i] - (b[i] + 0.25 * a[i])) <= 1e-6, "n %zu i %zu", n, i);
        free(o);
        free(b);
        free(a);
    }
}

Test(kernels, get_row_returns_the_dequantized_row_of_every_type) {
    const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,    GGML_TYPE_BF16,  GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_0, GGML_TYPE_Q4_1,   GGML_TYPE_Q5_0,  GGML_TYPE_Q5_1,
                              GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,   GGML_TYPE_Q4_K,  GGML_TYPE_Q5_K,
                              GGML_TYPE_Q6_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
    enum { N_ROWS = 5, N_COLS = 256 };
    for (size_t t = 0; t < LEN(types); t++) {
        uint8_t *w = kc_make_weights(types[t], N_ROWS, N_COLS, 50 + t);
        const size_t rb = kernel_row_bytes(types[t], N_COLS);
        float got[N_COLS], want[N_COLS];
        for (size_t r = 0; r < N_ROWS; r++) {
            cr_assert_eq(kernel_get_row(got, w, types[t], r, N_COLS), 0);
            cr_assert_eq(dequantize_row(want, w + r * rb, types[t], N_COLS), 0);
            cr_assert_eq(memcmp(got, want, sizeof got), 0, "type %u row %zu", types[t], r);
        }
        free(w);
    }
    float out[256];
    const uint8_t src[64] = {0};
    cr_assert_eq(kernel_get_row(out, src, GGML_TYPE_IQ1_S, 0, 256), TPS_EUNSUP);
    cr_assert_eq(kernel_get_row(out, src, GGML_TYPE_Q8_0, 0, 31), TPS_EINVAL);
}

/* GeGLU against ggml's definition written out: gelu_tanh in float on the
 * F16-rounded input, the result rounded to F16, times up; 0 at or below -10
 * and g * up at or above 10 (ggml_vec_geglu_f32 with GGML_GELU_FP16). */
Test(ops, geglu_matches_ggml_f16_gelu) {
    float *table = malloc(65536 * sizeof *table);
    kernel_gelu_table(table);
    enum { N = 4099 };
    float *g = malloc(N * sizeof *g), *u = malloc(N * sizeof *u), *o = malloc(N * sizeof *o);
    for (int i = 0; i < N; i++) {
        g[i] = -12.0f + 24.0f * (float)i / (N - 1);
        u[i] = 0.5f + 0.001f * (float)(i % 97);
    }
    g[0] = -10.0f, g[1] = 10.0f, g[2] = 0.0f, g[3] = -0.0f, g[4] = 9.9990234f;
    kernel_geglu(o, g, u, N, table);
    for (int i = 0; i < N; i++) {
        float want;
        if (g[i] <= -10.0f)
            want = 0.0f;
        else if (g[i] >= 10.0f)
            want = g[i] * u[i];
        else {
            const float x = fp16_to_fp32(fp32_to_fp16(g[i]));
            const float gl = 0.5f * x *
                             (1.0f + tanhf(0.79788456080286535587989211986876f * x *
                                           (1.0f + 0.044715f * x * x)));
            want = fp16_to_fp32(fp32_to_fp16(gl)) * u[i];
        }
        cr_assert_eq(o[i], want, "g %.9g: got %.9g want %.9g", g[i], o[i], want);
    }
    free(g), free(u), free(o), free(table);
}
