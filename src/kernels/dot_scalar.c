/* Portable scalar tier of the matmul dot products: plain C any compiler
 * turns into working code on any CPU (TPS_NATIVE=OFF builds run this).
 * One dot per output element, so each element's reduction order is the same
 * however many rows a call has. Not tuned: no intrinsics, no tiling. */
#include <math.h>

#include "kernels/kernel_impl.h"
#include "kernels/packed_kq.h"
#include "kernels/packed_q32.h"

/* ---- one dot per type --------------------------------------------------- */

/* Q8_0 weights x Q8_0 activations, ggml's scalar order: per block an exact
 * integer sum, then sumf = fmaf(sumi, d_w * d_x, sumf), the formula every
 * tier and tile computes (kernel_impl.h). */
static float dot_q8_0_q8_0(const block_q8_0 *restrict w, const block_q8_0 *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK8_0; j++)
            sumi += w[b].qs[j] * x[b].qs[j];
        sumf = fmaf((float)sumi, fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

static float dot_q4_0_q8_0(const block_q4_0 *restrict w, const block_q8_0 *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((w[b].qs[j] & 0x0f) - 8) * x[b].qs[j];
            sumi += ((w[b].qs[j] >> 4) - 8) * x[b].qs[j + QK4_0 / 2];
        }
        sumf = fmaf((float)sumi, fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

/* Float dots: 8 partial sums (lane k % 8), folded pairwise, then the tail. */
#define FLOAT_DOT(name, wtype_t, load)                                                             \
    static float name(const wtype_t *restrict w, const float *restrict x, size_t n) {              \
        float s[8] = {0};                                                                          \
        size_t k = 0;                                                                              \
        for (; k + 8 <= n; k += 8)                                                                 \
            for (int l = 0; l < 8; l++)                                                            \
                s[l] += load(w[k + l]) * x[k + l];                                                 \
        float sum = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));             \
        for (; k < n; k++)                                                                         \
            sum += load(w[k]) * x[k];                                                              \
        return sum;                                                                                \
    }

static inline float load_f32(float v) {
    return v;
}

FLOAT_DOT(dot_f32, float, load_f32)
FLOAT_DOT(dot_f16, uint16_t, fp16_to_fp32)
FLOAT_DOT(dot_bf16, uint16_t, bf16_to_fp32)

/* ---- rows kernels ------------------------------------------------------- */

#define ROWS_FN(name, dot, wtype_t, atype_t, len)                                                  \
    static void name(float *restrict out, size_t ld_out, const uint8_t *restrict W,                \
                     size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,        \
                     size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {    \
        (void)tmp;                                                                                 \
        for (size_t r = 0; r < n_rows_x; r++) {                                                    \
            const atype_t *a = (const atype_t *)(act + r * act_row_bytes);                         \
            for (size_t o = o0; o < o1; o++)                                                       \
                out[r * ld_out + o] = dot((const wtype_t *)(W + o * w_row_bytes), a, len);         \
        }                                                                                          \
    }

ROWS_FN(rows_q8_0, dot_q8_0_q8_0, block_q8_0, block_q8_0, n_in / QK8_0)
ROWS_FN(rows_q4_0, dot_q4_0_q8_0, block_q4_0, block_q8_0, n_in / QK4_0)
ROWS_FN(rows_f32, dot_f32, float, float, n_in)
ROWS_FN(rows_f16, dot_f16, uint16_t, float, n_in)
ROWS_FN(rows_bf16, dot_bf16, uint16_t, float, n_in)

const kernel_type_impl kernel_impl_scalar[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {GGML_TYPE_F32, rows_f32, NULL},
    [GGML_TYPE_F16] = {GGML_TYPE_F32, rows_f16, NULL},
    [GGML_TYPE_BF16] = {GGML_TYPE_F32, rows_bf16, NULL},
    [GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, rows_q8_0, kernel_rows_q8_0_r8_scalar},
    [GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, rows_q4_0, kernel_rows_q4_0_r8_scalar},
    [GGML_TYPE_Q4_1] = {GGML_TYPE_Q8_0, kernel_rows_q4_1_scalar, kernel_rows_q4_1_r8_scalar},
    [GGML_TYPE_Q5_0] = {GGML_TYPE_Q8_0, kernel_rows_q5_0_scalar, kernel_rows_q5_0_r8_scalar},
    [GGML_TYPE_Q5_1] = {GGML_TYPE_Q8_0, kernel_rows_q5_1_scalar, kernel_rows_q5_1_r8_scalar},
    [GGML_TYPE_IQ4_NL] = {GGML_TYPE_Q8_0, kernel_rows_iq4_nl_scalar, kernel_rows_iq4_nl_r8_scalar},
    [GGML_TYPE_Q2_K] = {GGML_TYPE_Q8_K, kernel_rows_q2_K_scalar, kernel_rows_q2_K_r8_scalar},
    [GGML_TYPE_Q3_K] = {GGML_TYPE_Q8_K, kernel_rows_q3_K_scalar, kernel_rows_q3_K_r8_scalar},
    [GGML_TYPE_Q4_K] = {GGML_TYPE_Q8_K, kernel_rows_q4_K_scalar, kernel_rows_q4_K_r8_scalar},
    [GGML_TYPE_Q5_K] = {GGML_TYPE_Q8_K, kernel_rows_q5_K_scalar, kernel_rows_q5_K_r8_scalar},
    [GGML_TYPE_Q6_K] = {GGML_TYPE_Q8_K, kernel_rows_q6_K_scalar, kernel_rows_q6_K_r8_scalar},
    [GGML_TYPE_IQ4_XS] = {GGML_TYPE_Q8_K, kernel_rows_iq4_xs_scalar, kernel_rows_iq4_xs_r8_scalar},
    [GGML_TYPE_MXFP4] = {GGML_TYPE_Q8_0, kernel_rows_mxfp4_scalar, kernel_rows_mxfp4_r8_scalar},
};
