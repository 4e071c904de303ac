/* The kernels of Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K and IQ4_XS:
 * every tier against the double reference at awkward sizes (1, 3, 7, 17,
 * 33 outputs; 1 to 17 activation rows), and each one's 8-row groups giving
 * the plain scalar tier's bits on every tier, thread count and batch size,
 * at extreme values too (test_kernels.c does the same for the older types).
 * Weights are random bytes with small scales: every quant, fifth-bit and
 * sub-block scale pattern. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "support/kernel_check.h"

/* exact int block sums, float accumulation (test_kernels.c's TOL_Q_REL) */
#define TOL_REL 1e-5

static const size_t N_IN_32[] = {32, 64, 96, 288};
static const size_t N_IN_256[] = {256, 512, 768};

/* Each type, the n_in values of its awkward-size sweep (whole blocks), and
 * those of its packed sweep: for odd and for even batch sizes. */
static const struct quant_case {
    uint32_t type;
    const size_t *n_ins;
    size_t n_n_in;
    size_t packed_odd, packed_even;
} CASES[] = {
    {GGML_TYPE_Q4_1, N_IN_32, LEN(N_IN_32), 96, 32},
    {GGML_TYPE_Q5_0, N_IN_32, LEN(N_IN_32), 96, 32},
    {GGML_TYPE_Q5_1, N_IN_32, LEN(N_IN_32), 96, 32},
    {GGML_TYPE_IQ4_NL, N_IN_32, LEN(N_IN_32), 96, 32},
    {GGML_TYPE_Q2_K, N_IN_256, LEN(N_IN_256), 256, 768},
    {GGML_TYPE_Q3_K, N_IN_256, LEN(N_IN_256), 256, 768},
    {GGML_TYPE_Q5_K, N_IN_256, LEN(N_IN_256), 256, 768},
    {GGML_TYPE_IQ4_XS, N_IN_256, LEN(N_IN_256), 256, 768},
};

/* Every type, every tier against the double reference; the long rows at
 * n_in = 2816 (11 superblocks, 88 blocks). */
Test(kernels_quant, every_type_matches_reference_at_awkward_sizes) {
    for (size_t c = 0; c < LEN(CASES); c++)
        kc_sweep_matmul(CASES[c].type, CASES[c].n_ins, CASES[c].n_n_in, 2816, TOL_REL);
}

/* Every type in 8-row groups: every batch size 1..33 (each remainder of the
 * 4-row, 1-row, and 1-, 2- and 6-group tiles) and rows alone, 1-3 threads,
 * 1 to 9 groups; the K family at 1, 3 and 11 superblocks per row. */
Test(kernels_quant, every_type_repacked_gives_the_same_bits_as_plain_scalar) {
    for (size_t c = 0; c < LEN(CASES); c++)
        kc_packed_sweep(CASES[c].type, CASES[c].packed_odd, CASES[c].packed_even, 2816);
}

/* The largest magnitudes each 32-element type can hold (every quant at its
 * top or bottom, fifth bits all set or clear) against activations of +-127
 * of one sign per block: without VNNI the int16 maddubs pairs, with VNNI
 * the unsigned sums before their offset, stay exact. */
Test(kernels_quant, repacked_32_element_types_at_extreme_values_do_not_overflow) {
    enum { N_IN = 256, N_OUT = 24, ROWS = 6 };
    const uint32_t types[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_IQ4_NL};
    for (size_t t = 0; t < LEN(types); t++) {
        uint8_t *w = kc_make_weights(types[t], N_OUT, N_IN, 77);
        const size_t bs = ggml_type_get(types[t])->type_size, nb = N_OUT * N_IN / 32;
        for (size_t b = 0; b < nb; b++) {
            /* quants (and fifth bits) after the fp16 fields: all ones or all zeros */
            const size_t first = types[t] == GGML_TYPE_Q5_0 || types[t] == GGML_TYPE_IQ4_NL ? 2 : 4;
            memset(w + b * bs + first, b % 4 == 3 ? 0x00 : 0xff, bs - first);
        }
        kc_check_extremes(w, types[t], ROWS, N_IN, N_OUT, KC_ACT_3, TOL_REL);
        free(w);
    }
}

Test(kernels_quant, every_quantized_type_has_a_packed_form_on_every_tier) {
    for (uint32_t t = 0; t < GGML_TYPE_COUNT_MAX; t++) {
        if (!kernel_type_supported(t)) continue;
        const int is_float = t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
        cr_expect_eq(kernel_packed_type(t) != 0, !is_float, "type %u", t);
    }
}

/* A context sized 0 ("the first call allocates", matmul.h) is valid: found
 * by fuzz_gguf, whose context is made before it knows any shape (UBSan:
 * memset of its NULL scratch). */
Test(kernels_quant, a_context_sized_zero_grows_on_its_first_call) {
    kernel_ctx *ctx = NULL;
    tps_err err;
    cr_assert_eq(kernel_ctx_create(&ctx, 1, 0, 0, &err), 0, "%s", err.msg);
    uint8_t *w = kc_make_weights(GGML_TYPE_Q5_K, 8, 256, 3);
    float x[256], out[8];
    kc_fill(x, 256, 4);
    cr_assert_eq(kernel_matmul(out, w, GGML_TYPE_Q5_K, x, 1, 256, 8, ctx), 0);
    free(w);
    kernel_ctx_free(ctx);
}
