/* ARM tier, NEON with dotprod (sdot): Q8_0 and Q4_0 weight rows against
 * Q8_0 activation rows, plain and in 8-row groups (kernel_impl.h has the
 * layouts), and the dotprod table. Compiled for armv8.2-a+dotprod by the
 * pragma below and called only when the CPU has it (cpu_arm.c); empty in
 * any other build.
 *
 * Every output element computes kernel_impl.h's formula in block order:
 * the block's exact int32 sum (sdot lanes add 4 products each; any lane
 * layout gives the same integer), then fmaf((float)isum, d_w * d_x, sumf)
 * lane by lane (vfmaq_f32 is fused, vcvtq_f32_s32 rounds to nearest even
 * like the scalar cast), so the bits equal the scalar tier's whatever the
 * tile. Not here: the smmla tiles (dot_neon_i8mm.c), K-quants (dot_kquant_neon.c,
 * dot_kq_neon.c), Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 (dot_q32_neon.c),
 * float weights (dot_f16_neon.c), threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>
#include <math.h>

#include "kernels/neon_kq.h" /* SDOT4, the rows loop and stores of the tiles */
#include "kernels/neon_q32.h"
#include "kernels/packed_kq.h"  /* the scalar rows of Q2_K, Q3_K, Q5_K, IQ4_XS */
#include "kernels/packed_q32.h" /* of Q4_1, Q5_0, Q5_1, IQ4_NL */

/* ---- plain rows: one weight row against one activation row --------------- */

/* A Q8_0 weight row . a Q8_0 activation row (nb blocks). */
static float dot_q8_0(const block_q8_0 *restrict w, const block_q8_0 *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32x4_t s = vdotq_s32(vdupq_n_s32(0), vld1q_s8(w[b].qs), vld1q_s8(x[b].qs));
        s = vdotq_s32(s, vld1q_s8(w[b].qs + 16), vld1q_s8(x[b].qs + 16));
        sumf = fmaf((float)vaddvq_s32(s), fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

/* A Q4_0 weight row . a Q8_0 activation row: unsigned nibbles, the -8 of
 * each enters as the side's -8 * sum(x) start value. */
static float dot_q4_0(const block_q4_0 *restrict w, const block_q8_0 *restrict x,
                      const kernel_act_side *restrict side, size_t nb) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const uint8x16_t v = vld1q_u8(w[b].qs);
        int32x4_t s =
            vdotq_s32(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(v, m4)), vld1q_s8(x[b].qs));
        s = vdotq_s32(s, vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vld1q_s8(x[b].qs + 16));
        const int32_t isum = vaddvq_s32(s) + side[b].neg8;
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

/* Plain rows [o0, o1) against every activation row: each weight row, once
 * loaded, serves all the rows from L1. */
static void rows_plain(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                       size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                       size_t act_row_bytes, size_t n_rows_x, size_t n_in, const int is_q4) {
    const size_t nb = n_in / QK8_0, soff = kernel_act_side_off(nb);
    for (size_t o = o0; o < o1; o++) {
        const uint8_t *w = W + o * w_row_bytes;
        for (size_t r = 0; r < n_rows_x; r++) {
            const uint8_t *a = act + r * act_row_bytes;
            out[r * ld_out + o] = is_q4
                                      ? dot_q4_0((const block_q4_0 *)w, (const block_q8_0 *)a,
                                                 (const kernel_act_side *)(a + soff), nb)
                                      : dot_q8_0((const block_q8_0 *)w, (const block_q8_0 *)a, nb);
        }
    }
}

static KERNEL_ROWS_DECL(rows_q8_0) {
    (void)tmp;
    rows_plain(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, 0);
}

static KERNEL_ROWS_DECL(rows_q4_0) {
    (void)tmp;
    rows_plain(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, 1);
}

/* ---- 8-row groups: sdot by lane, 4 weight rows per vector ----------------- */

/* One 8-row group G (nb blocks) x MX activation rows: lane i of is[j][h]
 * collects row 4h + i against activation row j. */
ALWAYS_INLINE void r8_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                           const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                           const int is_q4, const int MX) {
    const size_t GB = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const block_q8_0 *xr[4];
    const kernel_act_side *sd[4];
    float32x4_t acc[4][2];
    neon_q8_0_tile_init(xr, sd, acc, act, act_row_bytes, nb, MX);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = G + b * GB;
        __builtin_prefetch(wb + PREFETCH_AHEAD_BYTES, 0, 3);
        int32x4_t is[4][2];
        int8x16_t x0[4], x1[4];
#pragma GCC unroll 8
        for (int j = 0; j < MX; j++) {
            x0[j] = vld1q_s8(xr[j][b].qs);
            x1[j] = vld1q_s8(xr[j][b].qs + 16);
            is[j][0] = is[j][1] = vdupq_n_s32(is_q4 ? sd[j][b].neg8 : 0);
        }
        if (is_q4) {
            int8x16_t lo[2][4], hi[2][4];
            neon_q4_r8_nibbles(wb + 16, lo, hi);
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++)
#pragma GCC unroll 8
                for (int h = 0; h < 2; h++) {
                    SDOT4(is[j][h], lo[h], x0[j]);
                    SDOT4(is[j][h], hi[h], x1[j]);
                }
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 2; k++) {
                int8x16_t w[2][4];
                neon_q8_r8_chunk(wb + 16 + 128 * k, w);
#pragma GCC unroll 8
                for (int j = 0; j < MX; j++)
#pragma GCC unroll 8
                    for (int h = 0; h < 2; h++)
                        SDOT4(is[j][h], w[h], k ? x1[j] : x0[j]);
            }
        }
        float32x4_t dw[2];
        neon_r8_scales(wb, dw);
#pragma GCC unroll 8
        for (int j = 0; j < MX; j++) {
            const float32x4_t dx = vdupq_n_f32(sd[j][b].d);
#pragma GCC unroll 8
            for (int h = 0; h < 2; h++)
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(is[j][h]), vmulq_f32(dw[h], dx));
        }
    }
    neon_tile_store(out, ld_out, acc, MX);
}

/* The groups of [o0, o1) against the activation rows, up to 4 rows a tile. */
NEON_R8_ROWS_FN(kernel_rows_q8_0_r8_dotprod, r8_tile, 0, 4, QK8_0)
NEON_R8_ROWS_FN(kernel_rows_q4_0_r8_dotprod, r8_tile, 1, 4, QK8_0)

/* dot_q32_neon.c, dot_kquant_neon.c and dot_kq_neon.c; their plain rows
 * (only where n_out % 8 != 0: the loader repacks the rest) run the scalar
 * tier's */
KERNEL_ROWS_DECL(kernel_rows_q4_1_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q5_0_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q5_1_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_iq4_nl_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_mxfp4_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q4_K_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q5_K_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q6_K_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q2_K_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q3_K_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_iq4_xs_r8_dotprod);
/* dot_f16_neon.c: float weights (no packed form) */
KERNEL_ROWS_DECL(kernel_rows_f32_neon);
KERNEL_ROWS_DECL(kernel_rows_f16_neon);
KERNEL_ROWS_DECL(kernel_rows_bf16_neon);

const kernel_type_impl kernel_impl_neon_dotprod[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {GGML_TYPE_F32, kernel_rows_f32_neon, NULL},
    [GGML_TYPE_F16] = {GGML_TYPE_F32, kernel_rows_f16_neon, NULL},
    [GGML_TYPE_BF16] = {GGML_TYPE_F32, kernel_rows_bf16_neon, NULL},
    [GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, rows_q8_0, kernel_rows_q8_0_r8_dotprod},
    [GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, rows_q4_0, kernel_rows_q4_0_r8_dotprod},
    [GGML_TYPE_Q4_1] = {GGML_TYPE_Q8_0, kernel_rows_q4_1_scalar, kernel_rows_q4_1_r8_dotprod},
    [GGML_TYPE_Q5_0] = {GGML_TYPE_Q8_0, kernel_rows_q5_0_scalar, kernel_rows_q5_0_r8_dotprod},
    [GGML_TYPE_Q5_1] = {GGML_TYPE_Q8_0, kernel_rows_q5_1_scalar, kernel_rows_q5_1_r8_dotprod},
    [GGML_TYPE_IQ4_NL] = {GGML_TYPE_Q8_0, kernel_rows_iq4_nl_scalar, kernel_rows_iq4_nl_r8_dotprod},
    [GGML_TYPE_MXFP4] = {GGML_TYPE_Q8_0, kernel_rows_mxfp4_scalar, kernel_rows_mxfp4_r8_dotprod},
    [GGML_TYPE_Q2_K] = {GGML_TYPE_Q8_K, kernel_rows_q2_K_scalar, kernel_rows_q2_K_r8_dotprod},
    [GGML_TYPE_Q3_K] = {GGML_TYPE_Q8_K, kernel_rows_q3_K_scalar, kernel_rows_q3_K_r8_dotprod},
    [GGML_TYPE_Q4_K] = {GGML_TYPE_Q8_K, kernel_rows_q4_K_scalar, kernel_rows_q4_K_r8_dotprod},
    [GGML_TYPE_Q5_K] = {GGML_TYPE_Q8_K, kernel_rows_q5_K_scalar, kernel_rows_q5_K_r8_dotprod},
    [GGML_TYPE_Q6_K] = {GGML_TYPE_Q8_K, kernel_rows_q6_K_scalar, kernel_rows_q6_K_r8_dotprod},
    [GGML_TYPE_IQ4_XS] = {GGML_TYPE_Q8_K, kernel_rows_iq4_xs_scalar, kernel_rows_iq4_xs_r8_dotprod},
};

/* The i8mm table starts from this one (dot_neon_i8mm.c). */
KERNEL_ROWS_DECL(kernel_rows_q8_0_plain_dotprod) {
    rows_q8_0(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp);
}

KERNEL_ROWS_DECL(kernel_rows_q4_0_plain_dotprod) {
    rows_q4_0(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp);
}

#endif
