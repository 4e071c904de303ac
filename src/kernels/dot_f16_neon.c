/* ARM tier, plain NEON: F32, F16 and BF16 weight rows against F32
 * activation rows (the table entries of dot_neon.c; no extension beyond
 * armv8-a is used, so no target pragma). Empty in any other build.
 *
 * Per output element: two 4-lane FMA accumulators (lanes k % 8) over k in
 * steps of 8, folded as the scalar tier folds its 8 partial sums
 * (((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7))), then the n % 8 tail
 * with scalar fmaf in k order. The scalar tier multiplies and adds
 * separately, so the two agree to float rounding (test_kernels.c's
 * TOL_F_REL), not bit for bit; every tile shape computes each element the
 * same way, so a row alone and the same row in any batch, with any thread
 * count, give the same bits. F16 widens with fcvtl (exact), BF16 by a
 * 16-bit shift. Not here: threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_NEON

#include <arm_neon.h>
#include <math.h>

#include "kernels/f_rows.h" /* the rows loop around f_tile */

enum { WF32, WF16, WBF16 };

/* Weights k..k+7 of a row as two float vectors. */
ALWAYS_INLINE void load8(const uint8_t *restrict row, size_t k, const int wt, float32x4_t w[2]) {
    if (wt == WF32) {
        w[0] = vld1q_f32((const float *)row + k);
        w[1] = vld1q_f32((const float *)row + k + 4);
        return;
    }
    const uint16x8_t h = vld1q_u16((const uint16_t *)row + k);
    if (wt == WF16) {
        const float16x8_t f = vreinterpretq_f16_u16(h);
        w[0] = vcvt_f32_f16(vget_low_f16(f));
        w[1] = vcvt_high_f32_f16(f);
        return;
    }
    w[0] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vget_low_u16(h)), 16));
    w[1] = vreinterpretq_f32_u32(vshlq_n_u32(vmovl_high_u16(h), 16));
}

ALWAYS_INLINE float load1(const uint8_t *restrict row, size_t k, const int wt) {
    if (wt == WF32) return ((const float *)row)[k];
    const uint16_t h = ((const uint16_t *)row)[k];
    return wt == WF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

/* The 8 lanes (a: 0..3, b: 4..7) folded in the scalar tier's order. */
ALWAYS_INLINE float fold8(float32x4_t a, float32x4_t b) {
    const float32x4_t t = vaddq_f32(a, b); /* s0+s4, s1+s5, s2+s6, s3+s7 */
    const float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t));
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

/* MW weight rows x MX activation rows (x: rows of n_in floats). */
ALWAYS_INLINE void f_tile(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, const float *restrict x, size_t n_in, const int wt,
                          const int MW, const int MX) {
    float32x4_t acc[4][4][2];
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            acc[i][j][0] = acc[i][j][1] = vdupq_n_f32(0.0f);
    size_t k = 0;
    for (; k + 8 <= n_in; k += 8) {
        float32x4_t w[4][2];
#pragma GCC unroll 4
        for (int i = 0; i < MW; i++)
            load8(W + i * w_row_bytes, k, wt, w[i]);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const float32x4_t x0 = vld1q_f32(x + j * n_in + k),
                              x1 = vld1q_f32(x + j * n_in + k + 4);
#pragma GCC unroll 4
            for (int i = 0; i < MW; i++) {
                acc[i][j][0] = vfmaq_f32(acc[i][j][0], w[i][0], x0);
                acc[i][j][1] = vfmaq_f32(acc[i][j][1], w[i][1], x1);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            float s = fold8(acc[i][j][0], acc[i][j][1]);
            for (size_t t = k; t < n_in; t++)
                s = fmaf(load1(W + i * w_row_bytes, t, wt), x[j * n_in + t], s);
            out[j * ld_out + i] = s;
        }
}

#define F_ROWS_FN(name, wt)                                                                        \
    KERNEL_ROWS_DECL(name) {                                                                       \
        (void)tmp, (void)act_row_bytes;                                                            \
        f_rows(out, ld_out, W, w_row_bytes, o0, o1, act, n_rows_x, n_in, wt, f_tile);              \
    }

F_ROWS_FN(kernel_rows_f32_neon, WF32)
F_ROWS_FN(kernel_rows_f16_neon, WF16)
F_ROWS_FN(kernel_rows_bf16_neon, WBF16)

#endif
