/* The kernel tests' shared helpers (kernel_check.h). */
#include "support/kernel_check.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "support/quant_ref_input.h"

uint64_t kc_rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* uniform in [-1, 1) */
float kc_rng_f(uint64_t *s) {
    return (float)((double)(kc_rng_next(s) >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

void kc_fill(float *x, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++)
        x[i] = kc_rng_f(&s);
}

double test_rel_err(const float *got, const float *ref, size_t n) {
    double d = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        t += (double)ref[i] * ref[i];
    }
    return sqrt(d / t);
}

/* W (n_out, n_in) of type, made from random floats (K-quants from random
 * bytes with small scales). Caller frees. */
/* Random bytes with every fp16 field of the type's blocks (quant_ref_input.h
 * knows where they sit) a small value of either sign: 0.0005 .. 0.003. */
static void random_blocks(uint8_t *row, uint32_t type, size_t n_in, uint64_t *s) {
    const qref_layout *t = NULL;
    for (size_t k = 0; k < QREF_N_TYPES; k++)
        if (QREF_TYPES[k].type == type) t = &QREF_TYPES[k];
    cr_assert_not_null(t, "type %u", type);
    const size_t nb = n_in / t->block_elems;
    for (size_t i = 0; i < nb * t->block_bytes; i++)
        row[i] = (uint8_t)kc_rng_next(s);
    for (size_t b = 0; b < nb; b++)
        for (int h = 0; h < t->n_half; h++) {
            const uint64_t r = kc_rng_next(s);
            const float v = (0.0005f + 0.0005f * (float)(r % 6)) * ((r >> 8) % 2 ? -1.0f : 1.0f);
            const uint16_t bits = fp32_to_fp16(v);
            memcpy(row + b * t->block_bytes + t->half_off[h], &bits, sizeof bits);
        }
}

void *kc_make_weights(uint32_t type, size_t n_out, size_t n_in, uint64_t seed) {
    const size_t row_bytes = kernel_row_bytes(type, n_in);
    cr_assert(row_bytes > 0, "type %u n_in %zu", type, n_in);
    uint8_t *w = malloc(row_bytes * n_out);
    float *f = malloc(n_in * sizeof *f);
    uint64_t s = seed + 7;
    for (size_t o = 0; o < n_out; o++) {
        uint8_t *row = w + o * row_bytes;
        kc_fill(f, n_in, seed * 1000 + o);
        switch (type) {
        case GGML_TYPE_Q4_K:
            for (size_t i = 0; i < row_bytes; i++)
                row[i] = (uint8_t)kc_rng_next(&s);
            for (size_t b = 0; b < n_in / QK_K; b++) {
                block_q4_K *blk = (block_q4_K *)row + b;
                blk->d = fp32_to_fp16(0.001f + 0.001f * (float)(b % 3));
                blk->dmin = fp32_to_fp16(0.002f);
            }
            break;
        case GGML_TYPE_Q6_K:
            for (size_t i = 0; i < row_bytes; i++)
                row[i] = (uint8_t)kc_rng_next(&s);
            for (size_t b = 0; b < n_in / QK_K; b++)
                ((block_q6_K *)row + b)->d = fp32_to_fp16(0.0005f);
            break;
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_IQ4_XS:
            random_blocks(row, type, n_in, &s);
            break;
        default: /* the writers' own quantizers */
            cr_assert_eq(quantize_row_any(type, row, f, n_in), 0, "no maker for type %u", type);
        }
    }
    free(f);
    return w;
}

kernel_ctx *kc_new_ctx(int threads, kernel_tier tier) {
    kernel_ctx *ctx = NULL;
    tps_err err;
    cr_assert_eq(kernel_ctx_create(&ctx, threads, 4, 256, &err), 0);
    cr_assert_eq(kernel_ctx_set_tier(ctx, tier), 0);
    return ctx;
}

/* Runs kernel_matmul on each ctx (one per tier) and checks every element
 * against the reference, computed once. */
void kc_check_matmul(kernel_ctx *const *ctxs, size_t n_ctx, uint32_t type, size_t n_rows_x,
                     size_t n_in, size_t n_out, double tol_rel) {
    void *w = kc_make_weights(type, n_out, n_in, n_in * 31 + n_out);
    float *x = malloc(n_rows_x * n_in * sizeof *x);
    float *out = malloc(n_rows_x * n_out * sizeof *out);
    float *ref = malloc(n_rows_x * n_out * sizeof *ref);
    double *abs_ref = malloc(n_rows_x * n_out * sizeof *abs_ref);
    kc_fill(x, n_rows_x * n_in, n_rows_x + 100 * n_in);
    cr_assert_eq(kernel_matmul_ref(ref, abs_ref, w, type, x, n_rows_x, n_in, n_out), 0);
    for (size_t c = 0; c < n_ctx; c++) {
        cr_assert_eq(kernel_matmul(out, w, type, x, n_rows_x, n_in, n_out, ctxs[c]), 0);
        for (size_t i = 0; i < n_rows_x * n_out; i++) {
            const double err = fabs((double)out[i] - (double)ref[i]);
            cr_assert(err <= tol_rel * abs_ref[i] + TOL_ABS,
                      "type %u tier %s rows %zu n_in %zu n_out %zu elem %zu: got %.9g want "
                      "%.9g (err %.3g, scale %.3g)",
                      type, kernel_tier_name(kernel_ctx_tier(ctxs[c])), n_rows_x, n_in, n_out, i,
                      out[i], ref[i], err, abs_ref[i]);
        }
    }
    free(abs_ref);
    free(ref);
    free(out);
    free(x);
    free(w);
}

/* Q8_0 / Q4_0 / Q4_K / Q6_K: every element is one fixed formula (kernel_impl.h),
 * so the scalar tier, the AVX2 tier, weights repacked into 8-row groups or
 * not, any batch size and thread count give the same bits. */
void kc_check_packed_equals_plain(uint32_t type, size_t n_in, size_t n_out, size_t n_rows) {
    void *w = kc_make_weights(type, n_out, n_in, 4321 + n_out);
    const size_t bytes = kernel_row_bytes(type, n_in) * n_out;
    void *wp = malloc(bytes);
    cr_assert_eq(kernel_repack(wp, w, type, n_out, n_in), 0);
    const uint32_t ptype = kernel_packed_type(type);
    float *x = malloc(n_rows * n_in * sizeof *x);
    float *want = malloc(n_rows * n_out * sizeof *want);
    float *got = malloc(n_rows * n_out * sizeof *got);
    kc_fill(x, n_rows * n_in, 55 + n_rows);
    kernel_ctx *scalar1 = kc_new_ctx(1, KERNEL_TIER_SCALAR);
    cr_assert_eq(kernel_matmul(want, w, type, x, n_rows, n_in, n_out, scalar1), 0);
    const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR};
    for (size_t a = 0; a < LEN(tiers); a++)
        for (int threads = 1; threads <= 3; threads++) {
            kernel_ctx *ctx = kc_new_ctx(threads, tiers[a]);
            for (int packed = 0; packed <= 1; packed++) {
                memset(got, 0xff, n_rows * n_out * sizeof *got);
                cr_assert_eq(kernel_matmul(got, packed ? wp : w, packed ? ptype : type, x, n_rows,
                                           n_in, n_out, ctx),
                             0);
                cr_assert_eq(memcmp(got, want, n_rows * n_out * sizeof *got), 0,
                             "type %u tier %s threads %d packed %d n_in %zu n_out %zu rows %zu: "
                             "differs from the scalar plain result",
                             type, kernel_tier_name(tiers[a]), threads, packed, n_in, n_out,
                             n_rows);
                /* each row alone equals its row in the batch */
                for (size_t r = 0; r < n_rows; r += 3) {
                    cr_assert_eq(kernel_matmul(got, packed ? wp : w, packed ? ptype : type,
                                               x + r * n_in, 1, n_in, n_out, ctx),
                                 0);
                    cr_assert_eq(memcmp(got, want + r * n_out, n_out * sizeof *got), 0,
                                 "type %u packed %d row %zu alone differs", type, packed, r);
                }
            }
            kernel_ctx_free(ctx);
        }
    kernel_ctx_free(scalar1);
    free(got);
    free(want);
    free(x);
    free(wp);
    free(w);
}

/* The extreme-value tests' check (kernel_check.h). */
void kc_check_extremes(const void *w, uint32_t type, size_t rows, size_t n_in, size_t n_out,
                       kc_act act, double tol) {
    float *x = malloc(rows * n_in * sizeof *x);
    for (size_t i = 0; i < rows * n_in; i++)
        x[i] = ((i / 32) % 2 ? 1.0f : -1.0f) * (i % act.every ? act.big : act.small);
    void *packed = malloc(n_out * kernel_row_bytes(type, n_in));
    cr_assert_eq(kernel_repack(packed, w, type, n_out, n_in), 0, "type %u", type);
    kernel_ctx *sc = kc_new_ctx(1, KERNEL_TIER_SCALAR), *best = kc_new_ctx(2, KERNEL_TIER_BEST);
    float *want = malloc(rows * n_out * sizeof *want), *got = malloc(rows * n_out * sizeof *got);
    float *ref = malloc(rows * n_out * sizeof *ref);
    double *s = malloc(rows * n_out * sizeof *s);
    cr_assert_eq(kernel_matmul(want, w, type, x, rows, n_in, n_out, sc), 0);
    cr_assert_eq(kernel_matmul_ref(ref, s, w, type, x, rows, n_in, n_out), 0);
    for (size_t i = 0; i < rows * n_out; i++)
        cr_assert(fabs((double)want[i] - ref[i]) <= tol * s[i] + TOL_ABS,
                  "elem %zu: got %.9g want %.9g", i, want[i], ref[i]);
    kernel_ctx *ctxs[] = {sc, best};
    for (size_t c = 0; c < LEN(ctxs); c++)
        for (size_t r = 1; r <= rows; r++) {
            cr_assert_eq(
                kernel_matmul(got, packed, kernel_packed_type(type), x, r, n_in, n_out, ctxs[c]),
                0);
            cr_assert_eq(memcmp(got, want, r * n_out * sizeof *got), 0,
                         "tier %s rows %zu: packed differs from plain",
                         kernel_tier_name(kernel_ctx_tier(ctxs[c])), r);
        }
    free(s);
    free(ref);
    free(got);
    free(want);
    kernel_ctx_free(best);
    kernel_ctx_free(sc);
    free(packed);
    free(x);
}

static const size_t SWEEP_N_OUT[] = {1, 3, 7, 17, 33};
static const size_t SWEEP_N_ROWS[] = {1, 2, 3, 5, 8, 17};

void kc_sweep_matmul(uint32_t type, const size_t *n_ins, size_t n, size_t big_n_in, double tol) {
    kernel_ctx *ctxs[2] = {kc_new_ctx(2, KERNEL_TIER_BEST), kc_new_ctx(1, KERNEL_TIER_SCALAR)};
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < LEN(SWEEP_N_OUT); b++)
            for (size_t c = 0; c < LEN(SWEEP_N_ROWS); c++)
                kc_check_matmul(ctxs, 2, type, SWEEP_N_ROWS[c], n_ins[a], SWEEP_N_OUT[b], tol);
    kc_check_matmul(ctxs, 2, type, 5, big_n_in, 7, tol);
    kc_check_matmul(ctxs, 2, type, 1, big_n_in, 33, tol);
    kernel_ctx_free(ctxs[1]);
    kernel_ctx_free(ctxs[0]);
}

void kc_packed_sweep(uint32_t type, size_t n_in_odd, size_t n_in_even, size_t n_in_long) {
    const size_t n_outs[] = {8, 24, 40};
    for (size_t b = 0; b < LEN(n_outs); b++)
        for (size_t rows = 1; rows <= 33; rows++)
            kc_check_packed_equals_plain(type, rows % 2 ? n_in_odd : n_in_even, n_outs[b], rows);
    const size_t few_rows[] = {1, 4, 5, 17};
    for (size_t c = 0; c < LEN(few_rows); c++)
        kc_check_packed_equals_plain(type, n_in_long, 72, few_rows[c]);
}
