/* ARM tier, NEON with dotprod: Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 weights
 * in 8-row groups (packed_q32.h; MXFP4's block_mxfp4x8 in kernel_impl.h)
 * against Q8_0 activation rows, up to 4 activation rows a tile. Compiled
 * for armv8.2-a+dotprod by the pragma below and called only when the CPU
 * has it (cpu_arm.c; the i8mm table falls back to these). Empty in any
 * other build.
 *
 * The tile is dot_neon.c's Q4_0 tile with a per-type step from the nibbles
 * to the int8 an sdot takes: Q4_1 the nibble (0..15), Q5_0 / Q5_1 the
 * nibble with its fifth bit ORed in (a shift and mask of the group's
 * regrouped qh), Q5_0's -16 entering as the start value -16 * sum(x),
 * IQ4_NL and MXFP4 the grid value looked up by tbl. Lane i of every int32
 * vector is one row's exact block sum; then packed_q32.h's float steps
 * lane by lane (vfmaq_f32 fused, vcvtq_f32_s32 to nearest even; Q4_1 /
 * Q5_1 add m_w * s_x after), so every tile gives the scalar tier's bits.
 * Not here: plain (unpacked) rows, which run the scalar tier; threading
 * (matmul.c). */
#include "kernels/packed_q32.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>

#include "kernels/neon_kq.h"

/* Rows 4h..4h+3 of a group block: lo[c] the int8 of the low nibbles of
 * vector c (elements 4c..4c+3), hi[c] of the high ones (16 + 4c..). */
ALWAYS_INLINE void q32_quants(const uint8_t *restrict wb, int h, const int t, int8x16_t lo[4],
                              int8x16_t hi[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b5 = vdupq_n_u8(0x10);
    const int8x16_t tbl = vld1q_s8(t == Q32_MXFP4 ? kernel_kvalues_mxfp4 : kvalues_iq4nl);
    uint8x16_t qh = vdupq_n_u8(0);
    if (q32_is_q5(t)) qh = vld1q_u8(wb + q32_off_qh(t) + 16 * h);
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const uint8x16_t v = vld1q_u8(wb + q32_off_qs(t) + 32 * c + 16 * h);
        uint8x16_t l = vandq_u8(v, m4), u = vshrq_n_u8(v, 4);
        if (q32_is_q5(t)) {
            l = vorrq_u8(l, vandq_u8(shl_u8(qh, 4 - c), b5));
            u = vorrq_u8(u, vandq_u8(shl_u8(qh, -c), b5));
        }
        const int grid = t == Q32_IQ4_NL || t == Q32_MXFP4;
        lo[c] = grid ? vqtbl1q_s8(tbl, l) : vreinterpretq_s8_u8(l);
        hi[c] = grid ? vqtbl1q_s8(tbl, u) : vreinterpretq_s8_u8(u);
    }
}

/* The group block's 8 weight scales as floats, dw[h] = rows 4h..4h+3
 * (fp16 d, or MXFP4's 2^(e - 128) as kernel_e8m0_half computes it). */
ALWAYS_INLINE void q32_scales(const uint8_t *restrict wb, const int t, float32x4_t dw[2]) {
    if (t == Q32_MXFP4) {
        float f[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            f[i] = kernel_e8m0_half(((const block_mxfp4x8 *)wb)->e[i]);
        dw[0] = vld1q_f32(f);
        dw[1] = vld1q_f32(f + 4);
        return;
    }
    dw[0] = f16x4((const uint16_t *)wb); /* d[8] first in every group */
    dw[1] = f16x4((const uint16_t *)wb + 4);
}

/* One group G (nb blocks) x MX (1..4) activation rows: lane i of is[j][h]
 * collects row 4h + i against activation row j. */
ALWAYS_INLINE void q32_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                            const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                            const int t, const int MX) {
    const size_t GB = q32_gb(t);
    const block_q8_0 *xr[4];
    const kernel_act_side *sd[4];
    float32x4_t acc[4][2];
    neon_q8_0_tile_init(xr, sd, acc, act, act_row_bytes, nb, MX);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = G + b * GB;
        __builtin_prefetch(wb + PREFETCH_AHEAD_BYTES, 0, 3);
        float32x4_t dw[2];
        q32_scales(wb, t, dw);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int8x16_t lo[4], hi[4];
            q32_quants(wb, h, t, lo, hi);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                int32x4_t is = vdupq_n_s32(t == Q32_Q5_0 ? 2 * sd[j][b].neg8 : 0); /* -16 sum x */
                SDOT4(is, lo, vld1q_s8(xr[j][b].qs));
                SDOT4(is, hi, vld1q_s8(xr[j][b].qs + 16));
                const float32x4_t dx = vdupq_n_f32(sd[j][b].d);
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(is), vmulq_f32(dw[h], dx));
                if (q32_has_min(t)) /* m[8] follows d[8] in Q4_1's and Q5_1's groups */
                    acc[j][h] = vfmaq_f32(acc[j][h], f16x4((const uint16_t *)wb + 8 + 4 * h),
                                          vdupq_n_f32(sd[j][b].s));
            }
        }
    }
    neon_tile_store(out, ld_out, acc, MX);
}

/* The groups of [o0, o1) against the activation rows, up to 4 rows a tile. */
#define Q32_ROWS_FN(name, t) NEON_R8_ROWS_FN(name, q32_tile, t, 4, QK8_0)

Q32_ROWS_FN(kernel_rows_q4_1_r8_dotprod, Q32_Q4_1)
Q32_ROWS_FN(kernel_rows_q5_0_r8_dotprod, Q32_Q5_0)
Q32_ROWS_FN(kernel_rows_q5_1_r8_dotprod, Q32_Q5_1)
Q32_ROWS_FN(kernel_rows_iq4_nl_r8_dotprod, Q32_IQ4_NL)
Q32_ROWS_FN(kernel_rows_mxfp4_r8_dotprod, Q32_MXFP4)

#endif
