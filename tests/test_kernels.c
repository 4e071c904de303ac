/* Kernel tests: every tier against the reference at awkward sizes, format
 * conversions on special values, quantize/dequantize round trips, batch and
 * thread invariance (bit-identical). The row helpers (norms, softmax,
 * activations) are test_kernel_ops.c's. Fast: well under a second in
 * Release, a few under AddressSanitizer. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_impl.h" /* the Q8_K activation quantizer, both tiers */
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "support/kernel_check.h"
#include "support/test_support.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

/* Errors are measured against sum_k |w_k x_k| (what float rounding scales with). */
#define TOL_Q_REL     1e-5 /* Q8_0/Q4_0 x Q8_0: exact int block sums, float accumulation */
#define TOL_K_REL     1e-5 /* Q4_K/Q6_K x Q8_K: exact int superblock sums, float accumulation */
#define TOL_F_REL     2e-5 /* F32/F16/BF16: float FMA accumulation vs double */
#define TOL_TIERS_REL 2e-5 /* scalar tier vs AVX2 tier: both float, different orders */

static const size_t SWEEP_N_OUT[] = {1, 3, 7, 17, 33};
static const size_t N_IN_BLOCK32[] = {32, 64, 96, 288};
static const size_t N_IN_ANY[] = {1, 3, 7, 8, 17, 33, 96, 291};
static const size_t N_IN_K[] = {256, 512, 768, 2816};

/* ---- fp16 / bf16 -------------------------------------------------------- */

Test(kernels, fp16_converts_special_values_exactly) {
    cr_assert_eq(fp32_to_fp16(0.0f), 0x0000);
    cr_assert_eq(fp32_to_fp16(-0.0f), 0x8000);
    cr_assert_eq(fp32_to_fp16(1.0f), 0x3c00);
    cr_assert_eq(fp32_to_fp16(-2.0f), 0xc000);
    cr_assert_eq(fp32_to_fp16(65504.0f), 0x7bff);
    cr_assert_eq(fp32_to_fp16(65519.0f), 0x7bff, "below the halfway point to 65536");
    cr_assert_eq(fp32_to_fp16(65520.0f), 0x7c00, "halfway rounds to even = inf");
    cr_assert_eq(fp32_to_fp16(1e10f), 0x7c00);
    cr_assert_eq(fp32_to_fp16(INFINITY), 0x7c00);
    cr_assert_eq(fp32_to_fp16(-INFINITY), 0xfc00);
    cr_assert_eq(fp32_to_fp16(NAN) & 0x7e00, 0x7e00, "NaN stays a quiet NaN");
    cr_assert_eq(fp32_to_fp16(ldexpf(1.0f, -24)), 0x0001, "smallest subnormal");
    cr_assert_eq(fp32_to_fp16(ldexpf(1.0f, -25)), 0x0000, "tie to even rounds to zero");
    cr_assert_eq(fp32_to_fp16(ldexpf(1.5f, -25)), 0x0001);
    cr_assert_eq(fp32_to_fp16(ldexpf(1.0f, -14)), 0x0400, "smallest normal");
    cr_assert_eq(fp32_to_fp16(1.0f + ldexpf(1.0f, -11)), 0x3c00, "tie rounds to even (down)");
    cr_assert_eq(fp32_to_fp16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02, "tie rounds to even (up)");
    cr_assert_eq(fp16_to_fp32(0x0001), ldexpf(1.0f, -24));
    cr_assert_eq(fp16_to_fp32(0x03ff), ldexpf(1023.0f, -24));
    cr_assert(isinf(fp16_to_fp32(0x7c00)) && fp16_to_fp32(0xfc00) < 0);
    cr_assert(isnan(fp16_to_fp32(0x7e00)));
    cr_assert(signbit(fp16_to_fp32(0x8000)));
}

Test(kernels, fp16_round_trips_every_half_and_matches_hardware) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = fp16_to_fp32((uint16_t)h);
        if (isnan(f)) continue;
        cr_assert_eq(fp32_to_fp16(f), h, "half 0x%04x", h);
#if defined(__F16C__)
        cr_assert_eq(kernel_f32_bits(_cvtsh_ss((uint16_t)h)), kernel_f32_bits(f));
#endif
    }
#if defined(__F16C__)
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        const float f = kernel_bits_f32((uint32_t)kc_rng_next(&s));
        if (isnan(f)) continue;
        cr_assert_eq(fp32_to_fp16(f), _cvtss_sh(f, 0), "float bits 0x%08x", kernel_f32_bits(f));
    }
#endif
}

Test(kernels, bf16_rounds_to_nearest_even_and_keeps_nan) {
    cr_assert_eq(fp32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(fp32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80, "tie rounds to even (down)");
    cr_assert_eq(fp32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82, "tie rounds to even (up)");
    cr_assert_eq(fp32_to_bf16(-0.0f), 0x8000);
    cr_assert_eq(fp32_to_bf16(INFINITY), 0x7f80);
    cr_assert(isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
    cr_assert(isnan(bf16_to_fp32(fp32_to_bf16(kernel_bits_f32(0x7f800001u)))),
              "a NaN whose payload is all in the low bits stays NaN");
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = bf16_to_fp32((uint16_t)h);
        if (isnan(f)) continue;
        cr_assert_eq(fp32_to_bf16(f), h);
    }
}

/* ---- quantize / dequantize --------------------------------------------- */

Test(kernels, q8_0_round_trip_error_is_within_half_a_step) {
    enum { N = 32 * 40 };
    float x[N], y[N];
    block_q8_0 q[N / 32];
    kc_fill(x, N, 3);
    for (int i = 0; i < 32; i++)
        x[5 * 32 + i] = 0.0f; /* an all-zero block */
    quantize_row_q8_0_ref(q, x, N);
    dequantize_row_q8_0(y, q, N);
    for (int b = 0; b < N / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++)
            amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float step = amax / 127; /* d is stored as fp16: up to 2^-11 off */
        for (int i = 0; i < 32; i++)
            cr_assert(fabsf(x[b * 32 + i] - y[b * 32 + i]) <=
                          step * (0.5f + 127.0f / 2048) * 1.01f + 1e-7f,
                      "block %d elem %d", b, i);
    }
}

Test(kernels, q4_0_round_trip_error_is_within_one_step) {
    enum { N = 32 * 40 };
    float x[N], y[N];
    block_q4_0 q[N / 32];
    kc_fill(x, N, 4);
    quantize_row_q4_0_ref(q, x, N);
    dequantize_row_q4_0(y, q, N);
    for (int b = 0; b < N / 32; b++) {
        const float step = fabsf(fp16_to_fp32(q[b].d));
        for (int i = 0; i < 32; i++)
            cr_assert(fabsf(x[b * 32 + i] - y[b * 32 + i]) <= step * 1.01f, "block %d elem %d", b,
                      i);
    }
}

Test(kernels, q4_0_packs_element_j_low_and_j_plus_16_high) {
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j % 16) - 8.0f; /* max |.| = 8 at j=0 */
    block_q4_0 q;
    quantize_row_q4_0_ref(&q, x, 32);
    cr_assert_eq(fp16_to_fp32(q.d), 1.0f); /* d = -8 / -8 */
    for (int j = 0; j < 16; j++) {
        cr_assert_eq(q.qs[j] & 15, j % 16);
        cr_assert_eq(q.qs[j] >> 4, (j + 16) % 16);
    }
    float y[32];
    dequantize_row_q4_0(y, &q, 32);
    for (int j = 0; j < 32; j++)
        cr_assert_eq(y[j], x[j]);
}

Test(kernels, fast_q8_0_quantizer_is_bit_identical_to_reference) {
    enum { N = 32 * 64 };
    float x[N];
    kc_fill(x, N, 5);
    /* blocks whose scaled values land exactly on .5 ties: amax 127 -> id 1 */
    for (int i = 0; i < 32; i++)
        x[i] = (i == 0) ? 127.0f : (float)i - 15.5f;
    for (int i = 0; i < 32; i++)
        x[32 + i] = 0.0f;
    for (int i = 0; i < 32; i++)
        x[64 + i] = (i & 1) ? -1e-30f : 3e-30f;
    block_q8_0 a[N / 32], b[N / 32];
    quantize_row_q8_0_act_ref(a, x, N, NULL);
    quantize_row_q8_0(b, x, N);
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    cr_assert_eq(a[0].qs[1], -14, "-14.5 rounds half to even, as ggml-cpu's quantizer");
    cr_assert_eq(a[0].qs[2], -14, "-13.5 too");
}

/* The activation rows the Q8_0 / Q4_0 kernels read: blocks and side data,
 * 8 blocks at a time in the AVX2 quantizer (16 with AVX-512), so block counts around both and
 * scales that round (or overflow, or go subnormal) in fp16. */
Test(kernels, q8_0_activation_rows_are_the_same_bytes_on_both_tiers) {
    if (!kernel_tier_available(KERNEL_TIER_AVX2)) cr_skip_test("no AVX2 tier in this build");
    const size_t counts[] = {1, 7, 8, 9, 15, 16, 17, 21, 33};
    for (size_t c = 0; c < LEN(counts); c++) {
        const size_t nb = counts[c], n = nb * QK8_0, bytes = kernel_act_row_bytes(nb);
        float *x = malloc(n * sizeof *x);
        kc_fill(x, n, (int)(7 + c));
        for (size_t b = 0; b < nb; b++) {
            const float scale[] = {
                1.0f, 0.0f, 1e-6f, 3e9f, 65504.0f * 127.0f, 2049.0f * 127 / 2048};
            for (size_t j = 0; j < QK8_0; j++)
                x[b * QK8_0 + j] *= scale[b % LEN(scale)];
        }
        uint8_t *a = malloc(bytes), *v = malloc(bytes);
        memset(a, 0x5a, bytes);
        memset(v, 0x5a, bytes);
        kernel_quantize_act(a, x, n, 0);
        kernel_quantize_act(v, x, n, 1);
        cr_assert_eq(memcmp(a, v, bytes), 0, "%zu blocks", nb);
        const kernel_act_side *side = (const kernel_act_side *)(a + kernel_act_side_off(nb));
        const block_q8_0 *q = (const block_q8_0 *)a;
        for (size_t b = 0; b < nb; b++) {
            int32_t sum = 0;
            for (int j = 0; j < QK8_0; j++)
                sum += q[b].qs[j];
            cr_assert_eq(side[b].neg128, -128 * sum);
            cr_assert_eq(side[b].d, fp16_to_fp32(q[b].d));
            float s;
            block_q8_0 one;
            quantize_row_q8_0_act_ref(&one, x + b * QK8_0, QK8_0, &s);
            cr_assert_eq(side[b].s, s, "block %zu: Q8_1's sum term", b);
        }
        free(x);
        free(a);
        free(v);
    }
}

Test(kernels, k_quants_dequantize_known_blocks) {
    block_q6_K q6;
    memset(&q6, 0, sizeof q6);
    q6.d = fp32_to_fp16(0.5f);
    for (int i = 0; i < 16; i++)
        q6.scales[i] = (int8_t)(i - 8);
    q6.ql[0] = 0x21; /* element 0: low 1; element 64: low 2 */
    q6.qh[0] = 0x03; /* element 0: high bits 3 -> q = 1 | 48 = 49 */
    float y[QK_K];
    dequantize_row_q6_K(y, &q6, QK_K);
    cr_assert_eq(y[0], 0.5f * -8 * (49 - 32));
    cr_assert_eq(y[64], 0.5f * (4 - 8) * (2 - 32));
    cr_assert_eq(y[255], 0.5f * (15 - 8) * (0 - 32));

    block_q4_K q4;
    memset(&q4, 0, sizeof q4);
    q4.d = fp32_to_fp16(0.25f);
    q4.dmin = fp32_to_fp16(1.0f);
    q4.scales[0] = 2;     /* sub-block 0 scale 2 */
    q4.scales[4] = 3;     /* sub-block 0 min 3 */
    q4.scales[8] = 0x54;  /* sub-block 4: scale 4 | (q[0]>>6)<<4, min 5 | (q[4]>>6)<<4 */
    q4.scales[0] |= 0x40; /* adds 16 to sub-block 4's scale, sub-block 0 keeps 2 */
    q4.qs[0] = 0x97;      /* element 0: 7, element 32: 9 */
    q4.qs[64] = 0x05;     /* element 128 (sub-block 4): 5 */
    dequantize_row_q4_K(y, &q4, QK_K);
    cr_assert_eq(y[0], 0.25f * 2 * 7 - 1.0f * 3);
    cr_assert_eq(y[32], 0.25f * 0 * 9 - 0.0f); /* sub-block 1: scale 0, min 0 */
    cr_assert_eq(y[128], 0.25f * 20 * 5 - 1.0f * 5);
}

/* x for the K-quant round trips: uniform in [-1, 1) with sub-blocks of very
 * different magnitudes, an all-zero and an all-negative superblock. */
static void fill_k_input(float *x, size_t n, uint64_t seed) {
    kc_fill(x, n, seed);
    for (size_t i = 0; i < n; i++)
        x[i] *= (i / 32 % 5 == 3) ? 0.01f : (i / 16 % 7 == 1) ? 4.0f : 1.0f;
    for (size_t i = QK_K; i < 2 * QK_K && i < n; i++)
        x[i] = 0.0f;
    for (size_t i = 2 * QK_K; i < 3 * QK_K && i < n; i++)
        x[i] = -fabsf(x[i]) - 0.5f;
}

/* Every quantizer (each is ggml's, bit for bit: test_quant_ref.c) keeps an
 * all-zero superblock zero and loses no more than its bits allow: relative
 * rms error over fill_k_input's mix of magnitudes. */
Test(kernels, every_quantizer_round_trips_within_its_bits) {
    static const struct {
        uint32_t type;
        double max_rms; /* measured x 1.5, rounded up */
    } cases[] = {
        {GGML_TYPE_Q8_0, 0.01}, {GGML_TYPE_Q4_0, 0.15},  {GGML_TYPE_Q4_1, 0.12},
        {GGML_TYPE_Q5_0, 0.07}, {GGML_TYPE_Q5_1, 0.06},  {GGML_TYPE_IQ4_NL, 0.12},
        {GGML_TYPE_Q2_K, 0.35}, {GGML_TYPE_Q3_K, 0.19},  {GGML_TYPE_Q4_K, 0.1},
        {GGML_TYPE_Q5_K, 0.05}, {GGML_TYPE_Q6_K, 0.025}, {GGML_TYPE_IQ4_XS, 0.12},
    };
    enum { N = QK_K * 8 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    fill_k_input(x, N, 21);
    for (size_t c = 0; c < LEN(cases); c++) {
        uint8_t *q = malloc(kernel_row_bytes(cases[c].type, N));
        cr_assert_eq(quantize_row_any(cases[c].type, q, x, N), 0);
        cr_assert_eq(dequantize_row(y, q, cases[c].type, N), 0);
        for (size_t i = QK_K; i < 2 * QK_K; i++)
            cr_assert_eq(y[i], 0.0f, "type %u: an all-zero superblock stays zero", cases[c].type);
        const double rms = test_rel_err(y, x, N);
        cr_log_info("type %u: relative rms error %.4f", cases[c].type, rms);
        cr_expect(rms < cases[c].max_rms, "type %u: relative rms error %.4f, bound %.3f",
                  cases[c].type, rms, cases[c].max_rms);
        free(q);
    }
    free(y);
    free(x);
}

/* ---- matmul vs reference ------------------------------------------------ */

/* Each type against the double reference at awkward sizes: its n_in values
 * (whole blocks for Q8_0/Q4_0, any for the float types), then a long row. */
Test(kernels, q8_0_q4_0_and_float_matmuls_match_reference_at_awkward_sizes) {
    static const struct {
        uint32_t type;
        const size_t *n_ins;
        size_t n_n_in, big_n_in;
        double tol;
    } cases[] = {
        {GGML_TYPE_Q8_0, N_IN_BLOCK32, LEN(N_IN_BLOCK32), 768, TOL_Q_REL},
        {GGML_TYPE_Q4_0, N_IN_BLOCK32, LEN(N_IN_BLOCK32), 768, TOL_Q_REL},
        {GGML_TYPE_F32, N_IN_ANY, LEN(N_IN_ANY), 771, TOL_F_REL},
        {GGML_TYPE_F16, N_IN_ANY, LEN(N_IN_ANY), 771, TOL_F_REL},
        {GGML_TYPE_BF16, N_IN_ANY, LEN(N_IN_ANY), 771, TOL_F_REL},
    };
    for (size_t c = 0; c < LEN(cases); c++)
        kc_sweep_matmul(cases[c].type, cases[c].n_ins, cases[c].n_n_in, cases[c].big_n_in,
                        cases[c].tol);
}

/* K-quants: every n_in x n_out x row count (1..5 and 9: the 4-row tiles,
 * every remainder) on the best tier with 2 threads and the scalar tier. */
static void sweep_k(uint32_t type) {
    static const size_t rows[] = {1, 2, 3, 4, 5, 9};
    kernel_ctx *ctxs[2] = {kc_new_ctx(2, KERNEL_TIER_BEST), kc_new_ctx(1, KERNEL_TIER_SCALAR)};
    for (size_t a = 0; a < LEN(N_IN_K); a++)
        for (size_t b = 0; b < LEN(SWEEP_N_OUT); b++)
            for (size_t c = 0; c < LEN(rows); c++)
                kc_check_matmul(ctxs, 2, type, rows[c], N_IN_K[a], SWEEP_N_OUT[b], TOL_K_REL);
    kernel_ctx_free(ctxs[1]);
    kernel_ctx_free(ctxs[0]);
}

Test(kernels, q4_K_matmul_matches_reference_at_awkward_sizes) {
    sweep_k(GGML_TYPE_Q4_K);
}

Test(kernels, q6_K_matmul_matches_reference_at_awkward_sizes) {
    sweep_k(GGML_TYPE_Q6_K);
}

Test(kernels, q8_0_weight_of_minus_128_is_exact) {
    /* files may hold -128; the AVX2 sign trick must not overflow on it */
    block_q8_0 w[2];
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (i % 3 == 0) ? -1.0f : 0.5f;
    for (int b = 0; b < 2; b++) {
        w[b].d = fp32_to_fp16(0.01f);
        for (int i = 0; i < 32; i++)
            w[b].qs[i] = (int8_t)(i % 2 ? -128 : 127);
    }
    float out = 0, ref = 0;
    kernel_ctx *ctx = kc_new_ctx(1, KERNEL_TIER_BEST);
    cr_assert_eq(kernel_matmul(&out, w, GGML_TYPE_Q8_0, x, 1, 64, 1, ctx), 0);
    cr_assert_eq(kernel_matmul_ref(&ref, NULL, w, GGML_TYPE_Q8_0, x, 1, 64, 1), 0);
    cr_assert_float_eq(out, ref, 1e-4f * fabsf(ref) + 1e-6f);
    kernel_ctx_free(ctx);
}

Test(kernels, scalar_and_avx2_tiers_agree) {
    if (!kernel_tier_available(KERNEL_TIER_AVX2)) cr_skip_test("no AVX2 in this build");
    const uint32_t types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    kernel_ctx *sc = kc_new_ctx(1, KERNEL_TIER_SCALAR), *av = kc_new_ctx(1, KERNEL_TIER_AVX2);
    enum { ROWS = 5, N_IN = 512, N_OUT = 19 };
    float *x = malloc(ROWS * N_IN * sizeof *x);
    float a[ROWS * N_OUT], b[ROWS * N_OUT], r[ROWS * N_OUT];
    double s[ROWS * N_OUT];
    kc_fill(x, ROWS * N_IN, 77);
    for (size_t t = 0; t < LEN(types); t++) {
        void *w = kc_make_weights(types[t], N_OUT, N_IN, 9 + t);
        cr_assert_eq(kernel_matmul(a, w, types[t], x, ROWS, N_IN, N_OUT, sc), 0);
        cr_assert_eq(kernel_matmul(b, w, types[t], x, ROWS, N_IN, N_OUT, av), 0);
        cr_assert_eq(kernel_matmul_ref(r, s, w, types[t], x, ROWS, N_IN, N_OUT), 0);
        for (int i = 0; i < ROWS * N_OUT; i++)
            cr_assert(fabs((double)a[i] - b[i]) <= TOL_TIERS_REL * s[i] + TOL_ABS,
                      "type %u elem %d: scalar %.9g avx2 %.9g", types[t], i, a[i], b[i]);
        free(w);
    }
    free(x);
    kernel_ctx_free(av);
    kernel_ctx_free(sc);
}

/* ---- batch and thread invariance (bit-identical) ------------------------ */

static void check_invariance(uint32_t type, kernel_tier tier, size_t n_in) {
    enum { ROWS = 64, N_OUT = 37 };
    void *w = kc_make_weights(type, N_OUT, n_in, 1234);
    float *x = malloc(ROWS * n_in * sizeof *x);
    float *batch = malloc(ROWS * N_OUT * sizeof *batch);
    float *batch3 = malloc(ROWS * N_OUT * sizeof *batch3);
    float alone[N_OUT];
    kc_fill(x, ROWS * n_in, 99);
    kernel_ctx *one = kc_new_ctx(1, tier), *two = kc_new_ctx(2, tier), *three = kc_new_ctx(3, tier);
    cr_assert_eq(kernel_matmul(batch, w, type, x, ROWS, n_in, N_OUT, two), 0);
    cr_assert_eq(kernel_matmul(batch3, w, type, x, ROWS, n_in, N_OUT, three), 0);
    cr_assert_eq(memcmp(batch, batch3, ROWS * N_OUT * sizeof *batch), 0,
                 "type %u: 2 vs 3 threads differ", type);
    for (size_t r = 0; r < ROWS; r++) {
        cr_assert_eq(kernel_matmul(alone, w, type, x + r * n_in, 1, n_in, N_OUT, one), 0);
        cr_assert_eq(memcmp(alone, batch + r * N_OUT, sizeof alone), 0,
                     "type %u tier %s: row %zu alone (1 thread) differs from batch of 64 (2 "
                     "threads)",
                     type, kernel_tier_name(tier), r);
    }
    /* odd-sized sub-batches starting at odd rows hit every tile edge */
    const size_t starts[] = {1, 5, 17}, lens[] = {3, 6, 13};
    for (size_t i = 0; i < LEN(starts); i++) {
        float *sub = malloc(lens[i] * N_OUT * sizeof *sub);
        cr_assert_eq(kernel_matmul(sub, w, type, x + starts[i] * n_in, lens[i], n_in, N_OUT, one),
                     0);
        cr_assert_eq(memcmp(sub, batch + starts[i] * N_OUT, lens[i] * N_OUT * sizeof *sub), 0,
                     "type %u: sub-batch %zu+%zu differs", type, starts[i], lens[i]);
        free(sub);
    }
    kernel_ctx_free(three);
    kernel_ctx_free(two);
    kernel_ctx_free(one);
    free(batch3);
    free(batch);
    free(x);
    free(w);
}

Test(kernels, row_alone_equals_row_in_batch_of_64_with_any_thread_count) {
    const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                              GGML_TYPE_Q4_0};
    const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR};
    for (size_t a = 0; a < LEN(tiers); a++)
        for (size_t t = 0; t < LEN(types); t++) {
            check_invariance(types[t], tiers[a], 288);
            if (types[t] == GGML_TYPE_F32 || types[t] == GGML_TYPE_F16)
                check_invariance(types[t], tiers[a], 291); /* with a scalar tail */
        }
    for (size_t a = 0; a < LEN(tiers); a++) {
        check_invariance(GGML_TYPE_Q4_K, tiers[a], 512);
        check_invariance(GGML_TYPE_Q6_K, tiers[a], 512);
    }
}

Test(kernels, repacked_weights_give_the_same_bits_as_plain_on_every_tier) {
    const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    const size_t n_outs[] = {8, 16, 24, 40, 56, 72};
    const size_t n_ins[] = {32, 96, 288};
    const size_t n_rows[] = {1, 2, 3, 4, 5, 8, 17};
    for (size_t t = 0; t < LEN(types); t++)
        for (size_t a = 0; a < LEN(n_ins); a++)
            for (size_t b = 0; b < LEN(n_outs); b++)
                for (size_t c = 0; c < LEN(n_rows); c++)
                    kc_check_packed_equals_plain(types[t], n_ins[a], n_outs[b], n_rows[c]);
}

/* Q4_K in 8-row groups: the same bits as the plain scalar tier on every
 * tier and thread count, for every batch size 1..33 (each tile remainder
 * of the 4-row and 1-row tiles, and of the 1-, 2- and 4-group tiles) and
 * rows alone, at 1, 3 and 11 superblocks per row. */
Test(kernels, repacked_q4_K_gives_the_same_bits_as_plain_scalar_for_1_to_33_rows) {
    kc_packed_sweep(GGML_TYPE_Q4_K, 256, 768, 2816);
}

/* Prefill chunks run in blocks of activation rows that fit in L2 (matmul.c:
 * about 256 KB of quantized rows, 20 rows of Q8_0 and 28 of Q8_K at
 * n_in = 8192): rows on both sides of a block boundary, and each alone,
 * give the plain scalar bits. */
Test(kernels, repacked_weights_give_the_same_bits_across_activation_row_blocks) {
    const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K};
    for (size_t t = 0; t < LEN(types); t++)
        kc_check_packed_equals_plain(types[t], 8192, 16, 61);
}

/* Long K runs in panels of superblocks where the build has them (matmul.c's
 * K_PANEL_SB, 4, beyond K = ~6000: the 512-bit VNNI tiles), each block of
 * 192 activation rows panel by panel: 26 superblocks (panels of 4 and a
 * last of 2) and 32, 200 rows (blocks of 192 and 8, the last under the
 * unpacked tiles' 16 rows, so computed whole at the last panel), 24 weight
 * rows (a last odd group, also whole at the last panel): the plain scalar
 * bits, and each row's alone. */
Test(kernels, repacked_k_quants_give_the_same_bits_in_k_panels) {
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K};
    for (size_t t = 0; t < LEN(types); t++) {
        kc_check_packed_equals_plain(types[t], 6656, 24, 200);
        kc_check_packed_equals_plain(types[t], 8192, 16, 200);
    }
}

/* The largest Q4_K magnitudes (sc = m = 63, q4 = 15) against activations
 * of +-127 of one sign per 32: the AVX2 tier's int16 sums of 8 maddubs
 * pairs (up to 30480) and int32 sums stay exact in the packed form too, and
 * so do the AVX-512 prefill tile's int16 half sub-block sums (16 products,
 * 30480 again: kquant_x8_zmm.h), which need 16 rows or more. */
Test(kernels, repacked_q4_K_extreme_values_do_not_overflow) {
    enum { N_IN = 512, N_OUT = 16, ROWS = 17 };
    block_q4_K q4[N_OUT * N_IN / QK_K];
    for (size_t b = 0; b < LEN(q4); b++) {
        memset(q4[b].scales, 0xff, sizeof q4[b].scales);
        memset(q4[b].qs, b % 3 == 2 ? 0x0f : 0xff, sizeof q4[b].qs);
        q4[b].d = fp32_to_fp16(0.01f);
        q4[b].dmin = fp32_to_fp16(0.02f);
    }
    kc_check_extremes(q4, GGML_TYPE_Q4_K, ROWS, N_IN, N_OUT, KC_ACT_2, TOL_K_REL);
}

/* Q4_0 at its largest magnitudes (every nibble 15, or 0) against activations
 * quantized to +-127 of one sign per block: the AVX2 tier's int16 sums of a
 * block's 8 maddubs pairs reach 8 * 2 * 15 * 127 = 30480 and must stay exact,
 * packed, for the 4-row and 1-row tiles alike. */
Test(kernels, repacked_q4_0_extreme_values_do_not_overflow) {
    enum { N_IN = 256, N_OUT = 24, ROWS = 6 };
    block_q4_0 q4[N_OUT * N_IN / QK4_0];
    for (size_t b = 0; b < LEN(q4); b++) {
        memset(q4[b].qs, b % 4 == 3 ? 0x00 : 0xff, sizeof q4[b].qs);
        q4[b].d = fp32_to_fp16(b % 2 ? 0.03f : -0.05f);
    }
    kc_check_extremes(q4, GGML_TYPE_Q4_0, ROWS, N_IN, N_OUT, KC_ACT_3, TOL_Q_REL);
}

/* Q6_K in 8-row groups, as the Q4_K test above: every batch size 1..33 and
 * rows alone, 1-3 threads, 1, 3 and 11 superblocks per row, 1 to 9 groups. */
Test(kernels, repacked_q6_K_gives_the_same_bits_as_plain_scalar_for_1_to_33_rows) {
    kc_packed_sweep(GGML_TYPE_Q6_K, 256, 768, 2816);
}

/* The largest Q6_K magnitudes (scales -128 / 127, q6 = 63 or 0) against
 * activations of +-127 of one sign per 32: the AVX2 tier's int16 sums of
 * two maddubs pairs without VNNI (up to 2 * 2 * 63 * 127 = 32004) and the
 * unsigned int32 sums before the 32 * bsum offset stay exact. */
Test(kernels, repacked_q6_K_extreme_values_do_not_overflow) {
    enum { N_IN = 512, N_OUT = 24, ROWS = 5 };
    block_q6_K q6[N_OUT * N_IN / QK_K];
    for (size_t b = 0; b < LEN(q6); b++) {
        for (int i = 0; i < QK_K / 16; i++)
            q6[b].scales[i] = (int8_t)((b / 2) % 2 ? -128 : 127);
        memset(q6[b].ql, b % 3 == 2 ? 0x00 : 0xff, sizeof q6[b].ql);
        memset(q6[b].qh, b % 3 == 2 ? 0x00 : 0xff, sizeof q6[b].qh);
        q6[b].d = fp32_to_fp16(0.001f);
    }
    kc_check_extremes(q6, GGML_TYPE_Q6_K, ROWS, N_IN, N_OUT, KC_ACT_2, TOL_K_REL);
}

/* plain Q8_0 / Q4_0 at output counts that leave partial 8-row groups:
 * the AVX2 tier's padded groups give the scalar tier's bits */
Test(kernels, partial_groups_match_the_scalar_tier_bit_for_bit) {
    const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    const size_t n_outs[] = {1, 3, 7, 17, 33};
    for (size_t t = 0; t < LEN(types); t++)
        for (size_t b = 0; b < LEN(n_outs); b++)
            for (size_t rows = 1; rows <= 6; rows++) {
                const size_t n_in = 96, n_out = n_outs[b];
                void *w = kc_make_weights(types[t], n_out, n_in, 9 + n_out);
                float *x = malloc(rows * n_in * sizeof *x);
                float *o1 = malloc(rows * n_out * sizeof *o1),
                      *o2 = malloc(rows * n_out * sizeof *o2);
                kc_fill(x, rows * n_in, 3 + rows);
                kernel_ctx *sc = kc_new_ctx(1, KERNEL_TIER_SCALAR),
                           *best = kc_new_ctx(2, KERNEL_TIER_BEST);
                cr_assert_eq(kernel_matmul(o1, w, types[t], x, rows, n_in, n_out, sc), 0);
                cr_assert_eq(kernel_matmul(o2, w, types[t], x, rows, n_in, n_out, best), 0);
                cr_assert_eq(memcmp(o1, o2, rows * n_out * sizeof *o1), 0,
                             "type %u n_out %zu rows %zu: tiers differ", types[t], n_out, rows);
                kernel_ctx_free(best);
                kernel_ctx_free(sc);
                free(o2);
                free(o1);
                free(x);
                free(w);
            }
}

Test(kernels, repack_rejects_row_counts_not_a_multiple_of_8) {
    void *w = kc_make_weights(GGML_TYPE_Q8_0, 12, 64, 1);
    uint8_t dst[12 * 68];
    cr_assert_eq(kernel_repack(dst, w, GGML_TYPE_Q8_0, 12, 64), TPS_EINVAL);
    cr_assert_eq(kernel_repack(dst, w, GGML_TYPE_F16, 8, 64), TPS_EUNSUP);
    /* Q4_K: n_in must be whole 256-element superblocks */
    cr_assert_eq(kernel_repack(dst, w, GGML_TYPE_Q4_K, 8, 64), TPS_EINVAL);
    cr_assert_eq(kernel_repack(dst, w, GGML_TYPE_Q6_K, 8, 64), TPS_EINVAL);
    cr_assert_eq(kernel_packed_type(GGML_TYPE_Q4_K), KERNEL_TYPE_Q4_K_R8);
    cr_assert_eq(kernel_packed_type(GGML_TYPE_Q6_K), KERNEL_TYPE_Q6_K_R8);
    cr_assert_eq(kernel_packed_type(GGML_TYPE_F32), 0u);
    free(w);
}

/* kernel_matmul_multi (Q/K/V, gate/up in one call) gives every element
 * bit-identical to one kernel_matmul per matrix, at awkward output counts,
 * any thread count, mixed weight types (one shared activation type or not). */
/* kernel_matmul_multi over 3 matrices of each set's types equals one
 * kernel_matmul per matrix, bit for bit, at 1 to 3 threads. */
static void check_multi_equals_single(const uint32_t (*sets)[3], size_t n_sets, size_t n_in,
                                      uint64_t seed) {
    const size_t n_rows = 5;
    const size_t n_outs[3] = {7, 33, 1};
    float *x = malloc(sizeof(float) * n_rows * n_in);
    kc_fill(x, n_rows * n_in, seed + 67);
    for (size_t k = 0; k < n_sets; k++)
        for (int threads = 1; threads <= 3; threads++) {
            kernel_ctx *ctx = kc_new_ctx(threads, KERNEL_TIER_BEST);
            void *w[3];
            float *one[3], *multi[3];
            kernel_mat mats[3];
            for (int i = 0; i < 3; i++) {
                w[i] = kc_make_weights(sets[k][i], n_outs[i], n_in, seed + (uint64_t)i);
                one[i] = malloc(sizeof(float) * n_rows * n_outs[i]);
                multi[i] = malloc(sizeof(float) * n_rows * n_outs[i]);
                cr_assert_eq(
                    kernel_matmul(one[i], w[i], sets[k][i], x, n_rows, n_in, n_outs[i], ctx), 0);
                mats[i] = (kernel_mat){multi[i], w[i], sets[k][i], n_outs[i]};
            }
            cr_assert_eq(kernel_matmul_multi(mats, 3, x, n_rows, n_in, ctx), 0);
            for (int i = 0; i < 3; i++) {
                cr_assert_eq(memcmp(one[i], multi[i], sizeof(float) * n_rows * n_outs[i]), 0,
                             "set %zu matrix %d threads %d differs", k, i, threads);
                free(w[i]);
                free(one[i]);
                free(multi[i]);
            }
            kernel_ctx_free(ctx);
        }
    free(x);
}

Test(kernels, matmul_multi_equals_one_call_per_matrix) {
    const uint32_t sets[][3] = {{GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0},
                                {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_BF16},
                                {GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_Q4_0}};
    check_multi_equals_single(sets, LEN(sets), 96, 10);
}

/* ---- K-quants: one formula, the same bits everywhere ---------------------- */

Test(kernels, fast_q8_K_quantizer_is_bit_identical_to_reference) {
    enum { N = QK_K * 6 };
    float *x = malloc(N * sizeof *x);
    kc_fill(x, N, 11);
    for (int i = 0; i < QK_K; i++) /* .5 ties after scaling: amax 127 -> d = 1 */
        x[i] = (i == 0) ? 127.0f : (float)(i % 64) - 31.5f;
    for (int i = 0; i < QK_K; i++)
        x[QK_K + i] = 0.0f;
    for (int i = 0; i < QK_K; i++)
        x[2 * QK_K + i] = (i & 1) ? -1e-30f : 3e-30f;
    block_q8_K a[N / QK_K];
    memset(a, 0, sizeof a);
    uint8_t *row = malloc(kernel_act_k_row_bytes(N / QK_K));
    memset(row, 0x55, kernel_act_k_row_bytes(N / QK_K));
    quantize_row_q8_K_ref(a, x, N);
    kernel_quantize_act_k(row, x, N, kernel_tier_available(KERNEL_TIER_AVX2));
    cr_assert_eq(memcmp(a, row, sizeof a), 0);
    const kernel_act_k_side *side =
        (const kernel_act_k_side *)(row + kernel_act_k_side_off(N / QK_K));
    cr_assert_eq(a[0].d, -1.0f, "d = 1 / (-127 / max): the signs flip");
    cr_assert_eq(a[0].qs[1], 30, "-30.5 -> 30.5 rounds half to even, as ggml's nearest_int");
    for (size_t i = 0; i < N / QK_K; i++)
        for (int k = 0; k < QK_K / 16; k++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) {
                cr_assert(a[i].qs[16 * k + j] >= -127, "q8 never -128");
                sum += a[i].qs[16 * k + j];
            }
            cr_assert_eq(a[i].bsums[k], sum, "block %zu bsum %d", i, k);
        }
    /* the side's int16 pairs, low half first: Q4_K's per 32 (s0, s2), (s1,
     * s3), (s4, s6), (s5, s7); Q6_K's per 16 the same pattern over 16 */
    for (size_t i = 0; i < N / QK_K; i++) {
        int s32[8];
        for (int j = 0; j < 8; j++)
            s32[j] = a[i].bsums[2 * j] + a[i].bsums[2 * j + 1];
        for (int w = 0; w < 4; w++) {
            const int lo = 4 * (w / 2) + w % 2;
            cr_assert_eq((int16_t)(side[i].q4[w] & 0xffff), s32[lo], "block %zu q4 %d", i, w);
            cr_assert_eq((int16_t)((uint32_t)side[i].q4[w] >> 16), s32[lo + 2]);
        }
        for (int w = 0; w < 8; w++) {
            const int lo = 4 * (w / 2) + w % 2;
            cr_assert_eq((int16_t)(side[i].q6[w] & 0xffff), a[i].bsums[lo], "block %zu q6 %d", i,
                         w);
            cr_assert_eq((int16_t)((uint32_t)side[i].q6[w] >> 16), a[i].bsums[lo + 2]);
        }
    }
    free(row);
    free(x);
}

/* Scalar and AVX2 tiers, 1 and 2 threads: memcmp-identical at awkward
 * shapes (every 4-row tile remainder, partial thread splits). */
Test(kernels, k_quant_tiers_and_thread_counts_give_identical_bits) {
    if (!kernel_tier_available(KERNEL_TIER_AVX2)) cr_skip_test("no AVX2 in this build");
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    const size_t n_ins[] = {256, 768, 2816};
    kernel_ctx *sc = kc_new_ctx(1, KERNEL_TIER_SCALAR), *av1 = kc_new_ctx(1, KERNEL_TIER_AVX2),
               *av2 = kc_new_ctx(2, KERNEL_TIER_AVX2), *sc2 = kc_new_ctx(2, KERNEL_TIER_SCALAR);
    for (size_t t = 0; t < LEN(types); t++)
        for (size_t a = 0; a < LEN(n_ins); a++)
            for (size_t b = 0; b < LEN(SWEEP_N_OUT); b++) {
                const size_t n_in = n_ins[a], n_out = SWEEP_N_OUT[b], max_rows = 9;
                void *w = kc_make_weights(types[t], n_out, n_in, 77 + n_out);
                float *x = malloc(max_rows * n_in * sizeof *x);
                float *want = malloc(max_rows * n_out * sizeof *want);
                float *got = malloc(max_rows * n_out * sizeof *got);
                kc_fill(x, max_rows * n_in, 5 + n_in);
                for (size_t rows = 1; rows <= max_rows; rows++) {
                    cr_assert_eq(kernel_matmul(want, w, types[t], x, rows, n_in, n_out, sc), 0);
                    kernel_ctx *others[] = {av1, av2, sc2};
                    for (size_t c = 0; c < LEN(others); c++) {
                        memset(got, 0xff, rows * n_out * sizeof *got);
                        cr_assert_eq(
                            kernel_matmul(got, w, types[t], x, rows, n_in, n_out, others[c]), 0);
                        cr_assert_eq(memcmp(got, want, rows * n_out * sizeof *got), 0,
                                     "type %u tier %s threads %d n_in %zu n_out %zu rows %zu: "
                                     "differs from the scalar tier",
                                     types[t], kernel_tier_name(kernel_ctx_tier(others[c])),
                                     kernel_ctx_threads(others[c]), n_in, n_out, rows);
                    }
                }
                free(got);
                free(want);
                free(x);
                free(w);
            }
    kernel_ctx_free(sc2);
    kernel_ctx_free(av2);
    kernel_ctx_free(av1);
    kernel_ctx_free(sc);
}

/* Each row alone (1 thread) equals the same row inside a batch of 9
 * (2 threads), on every tier. */
Test(kernels, k_quant_row_alone_equals_row_in_batch_of_9) {
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    const kernel_tier tiers[] = {KERNEL_TIER_BEST, KERNEL_TIER_SCALAR};
    enum { ROWS = 9, N_IN = 768, N_OUT = 17 };
    float *x = malloc(ROWS * N_IN * sizeof *x);
    kc_fill(x, ROWS * N_IN, 123);
    for (size_t t = 0; t < LEN(types); t++)
        for (size_t a = 0; a < LEN(tiers); a++) {
            void *w = kc_make_weights(types[t], N_OUT, N_IN, 31);
            kernel_ctx *one = kc_new_ctx(1, tiers[a]), *two = kc_new_ctx(2, tiers[a]);
            float batch[ROWS * N_OUT], alone[N_OUT];
            cr_assert_eq(kernel_matmul(batch, w, types[t], x, ROWS, N_IN, N_OUT, two), 0);
            for (size_t r = 0; r < ROWS; r++) {
                cr_assert_eq(kernel_matmul(alone, w, types[t], x + r * N_IN, 1, N_IN, N_OUT, one),
                             0);
                cr_assert_eq(memcmp(alone, batch + r * N_OUT, sizeof alone), 0,
                             "type %u tier %s: row %zu alone differs from the batch of 9", types[t],
                             kernel_tier_name(tiers[a]), r);
            }
            kernel_ctx_free(two);
            kernel_ctx_free(one);
            free(w);
        }
    free(x);
}

/* The largest magnitudes the formats allow (6-bit scales and mins of 63,
 * q4 = 15; Q6_K scales -128 / 127 with q6 = 0 / 63) against activations
 * that quantize to +-127: no int16 pair or int32 sum overflows, every tier
 * agrees bit for bit and with the reference. */
Test(kernels, k_quant_extreme_values_do_not_overflow) {
    enum { N_IN = 512, N_OUT = 3, ROWS = 5 };
    float x[ROWS * N_IN];
    for (int i = 0; i < ROWS * N_IN; i++)
        x[i] = (i / N_IN) % 2 ? ((i % 3) ? 1.0f : -1.0f) : (i % 5 ? -2.0f : 2.0f);
    block_q4_K q4[N_OUT * N_IN / QK_K];
    block_q6_K q6[N_OUT * N_IN / QK_K];
    for (size_t b = 0; b < LEN(q4); b++) {
        memset(q4[b].scales, 0xff, sizeof q4[b].scales); /* every sc and m = 63 */
        memset(q4[b].qs, b % 3 == 2 ? 0x0f : 0xff, sizeof q4[b].qs);
        q4[b].d = fp32_to_fp16(0.01f);
        q4[b].dmin = fp32_to_fp16(0.02f);
        for (int i = 0; i < QK_K / 16; i++)
            q6[b].scales[i] = (int8_t)((i + (int)b) % 2 ? -128 : 127);
        memset(q6[b].ql, b % 2 ? 0xff : 0x00, sizeof q6[b].ql);
        memset(q6[b].qh, b % 2 ? 0xff : 0x00, sizeof q6[b].qh);
        q6[b].d = fp32_to_fp16(0.001f);
    }
    const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    const void *ws[] = {q4, q6};
    kernel_ctx *sc = kc_new_ctx(1, KERNEL_TIER_SCALAR), *best = kc_new_ctx(2, KERNEL_TIER_BEST);
    for (size_t t = 0; t < LEN(types); t++) {
        float a[ROWS * N_OUT], b[ROWS * N_OUT], ref[ROWS * N_OUT];
        double s[ROWS * N_OUT];
        cr_assert_eq(kernel_matmul(a, ws[t], types[t], x, ROWS, N_IN, N_OUT, sc), 0);
        cr_assert_eq(kernel_matmul(b, ws[t], types[t], x, ROWS, N_IN, N_OUT, best), 0);
        cr_assert_eq(kernel_matmul_ref(ref, s, ws[t], types[t], x, ROWS, N_IN, N_OUT), 0);
        cr_assert_eq(memcmp(a, b, sizeof a), 0, "type %u: tiers differ", types[t]);
        for (int i = 0; i < ROWS * N_OUT; i++)
            cr_assert(fabs((double)a[i] - ref[i]) <= TOL_K_REL * s[i] + TOL_ABS,
                      "type %u elem %d: got %.9g want %.9g", types[t], i, a[i], ref[i]);
    }
    kernel_ctx_free(best);
    kernel_ctx_free(sc);
}

/* Q4_K / Q6_K / Q8_0 matrices over the same x in one kernel_matmul_multi:
 * each bit-identical to its own kernel_matmul (mixed activation types fall
 * back to one call each). */
Test(kernels, k_quant_matmul_multi_equals_one_call_per_matrix) {
    const uint32_t sets[][3] = {{GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K},
                                {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K}};
    check_multi_equals_single(sets, LEN(sets), 512, 20);
}

/* ---- errors ------------------------------------------------------------- */

Test(kernels, matmul_rejects_unsupported_types_and_partial_blocks) {
    kernel_ctx *ctx = kc_new_ctx(1, KERNEL_TIER_BEST);
    float x[64] = {0}, out[2];
    uint8_t w[256] = {0};
    cr_assert_eq(kernel_matmul(out, w, GGML_TYPE_IQ2_XXS, x, 1, 256, 1, ctx), TPS_EUNSUP);
    cr_assert_eq(kernel_matmul(out, w, 63, x, 1, 32, 1, ctx), TPS_EUNSUP);
    cr_assert_eq(kernel_matmul(out, w, 1000, x, 1, 32, 1, ctx), TPS_EUNSUP);
    cr_assert_eq(kernel_matmul(out, w, GGML_TYPE_Q8_0, x, 1, 33, 1, ctx), TPS_EINVAL);
    cr_assert_eq(kernel_matmul(out, w, GGML_TYPE_Q4_K, x, 1, 64, 1, ctx), TPS_EINVAL);
    cr_assert_eq(kernel_ctx_set_tier(ctx, (kernel_tier)99), TPS_EUNSUP);
    kernel_ctx_free(ctx);
}
