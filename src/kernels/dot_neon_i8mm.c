/* ARM tier, NEON with i8mm (smmla): the multi-row tiles of the Q8_0 and
 * Q4_0 8-row groups, and the i8mm table (the dotprod table's entries with
 * these tiles for 2 or more activation rows; one row, decode, stays on
 * sdot, which reads each weight once for that row as smmla would).
 * Compiled for armv8.2-a+dotprod+i8mm by the pragma below and called only
 * when the CPU has both (cpu_arm.c); empty in any other build.
 *
 * smmla multiplies a 2x8 int8 matrix by the transpose of another: with
 * two weight rows (8 consecutive elements each) and two activation rows,
 * one instruction gives the 4 int32 sums of 8 products, lanes (w0 x0,
 * w0 x1, w1 x0, w1 x1). The groups hold 4 elements per row per vector, so
 * two vectors zipped as 32-bit lanes give two rows of 8. Each lane is one
 * output element's exact block sum; the float steps are kernel_impl.h's,
 * lane by lane, so the bits equal the scalar tier's. Not here: the sdot
 * kernels (dot_neon.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#include <arm_neon.h>

#include "kernels/neon_q32.h"

KERNEL_ROWS_DECL(kernel_rows_q8_0_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q4_0_r8_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q8_0_plain_dotprod);
KERNEL_ROWS_DECL(kernel_rows_q4_0_plain_dotprod);

/* Two activation rows' block b as smmla's right operand: xp[t] holds
 * elements 8t..8t+7 of row a, then of row c. */
ALWAYS_INLINE void act_pair(int8x16_t xp[4], const block_q8_0 *ra, const block_q8_0 *rc) {
#pragma GCC unroll 8
    for (int k = 0; k < 2; k++) {
        const int64x2_t a = vreinterpretq_s64_s8(vld1q_s8(ra->qs + 16 * k));
        const int64x2_t c = vreinterpretq_s64_s8(vld1q_s8(rc->qs + 16 * k));
        xp[2 * k] = vreinterpretq_s8_s64(vzip1q_s64(a, c));
        xp[2 * k + 1] = vreinterpretq_s8_s64(vzip2q_s64(a, c));
    }
}

/* Vectors (c, h) and (c + 1, h) of a group as smmla's left operands:
 * wp[0] rows 4h, 4h+1 and wp[1] rows 4h+2, 4h+3, elements 4c..4c+7. */
ALWAYS_INLINE void w_pairs(int8x16_t wp[2], int8x16_t v0, int8x16_t v1) {
    const int32x4_t a = vreinterpretq_s32_s8(v0), b = vreinterpretq_s32_s8(v1);
    wp[0] = vreinterpretq_s8_s32(vzip1q_s32(a, b));
    wp[1] = vreinterpretq_s8_s32(vzip2q_s32(a, b));
}

/* One 8-row group (nb blocks) x NP pairs of activation rows (the last row
 * of a pair may repeat the one before; its results are not stored).
 * is[p][q]: weight rows 2p, 2p+1 x activation pair q. */
ALWAYS_INLINE void mmla_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             size_t n_rows, const int is_q4, const int NP) {
    const size_t GB = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const block_q8_0 *xr[4];
    const kernel_act_side *sd[4];
#pragma GCC unroll 8
    for (int j = 0; j < 2 * NP; j++) {
        const size_t r = (size_t)j < n_rows ? (size_t)j : n_rows - 1;
        xr[j] = (const block_q8_0 *)(act + r * act_row_bytes);
        sd[j] = (const kernel_act_side *)((const uint8_t *)xr[j] + kernel_act_side_off(nb));
    }
    float32x4_t acc[4][2];
#pragma GCC unroll 8
    for (int p = 0; p < 4; p++)
#pragma GCC unroll 8
        for (int q = 0; q < NP; q++)
            acc[p][q] = vdupq_n_f32(0.0f);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = G + b * GB;
        int8x16_t xp[2][4];
        int32x4_t is[4][2];
#pragma GCC unroll 8
        for (int q = 0; q < NP; q++) {
            act_pair(xp[q], &xr[2 * q][b], &xr[2 * q + 1][b]);
            const int32_t n0 = is_q4 ? sd[2 * q][b].neg8 : 0,
                          n1 = is_q4 ? sd[2 * q + 1][b].neg8 : 0;
            const int32x4_t init =
                vcombine_s32(vcreate_s32((uint32_t)n0 | (uint64_t)(uint32_t)n1 << 32),
                             vcreate_s32((uint32_t)n0 | (uint64_t)(uint32_t)n1 << 32));
#pragma GCC unroll 8
            for (int p = 0; p < 4; p++)
                is[p][q] = init;
        }
        if (is_q4) {
            int8x16_t lo[2][4], hi[2][4];
            neon_q4_r8_nibbles(wb + 16, lo, hi);
#pragma GCC unroll 8
            for (int t = 0; t < 2; t++)
#pragma GCC unroll 8
                for (int h = 0; h < 2; h++) {
                    int8x16_t wl[2], wh[2];
                    w_pairs(wl, lo[h][2 * t], lo[h][2 * t + 1]);
                    w_pairs(wh, hi[h][2 * t], hi[h][2 * t + 1]);
#pragma GCC unroll 8
                    for (int q = 0; q < NP; q++)
#pragma GCC unroll 8
                        for (int s = 0; s < 2; s++) {
                            is[2 * h + s][q] = vmmlaq_s32(is[2 * h + s][q], wl[s], xp[q][t]);
                            is[2 * h + s][q] = vmmlaq_s32(is[2 * h + s][q], wh[s], xp[q][2 + t]);
                        }
                }
        } else {
#pragma GCC unroll 8
            for (int k = 0; k < 2; k++) {
                int8x16_t w[2][4];
                neon_q8_r8_chunk(wb + 16 + 128 * k, w);
#pragma GCC unroll 8
                for (int u = 0; u < 2; u++)
#pragma GCC unroll 8
                    for (int h = 0; h < 2; h++) {
                        int8x16_t wp[2];
                        w_pairs(wp, w[h][2 * u], w[h][2 * u + 1]);
#pragma GCC unroll 8
                        for (int q = 0; q < NP; q++)
#pragma GCC unroll 8
                            for (int s = 0; s < 2; s++)
                                is[2 * h + s][q] =
                                    vmmlaq_s32(is[2 * h + s][q], wp[s], xp[q][2 * k + u]);
                    }
            }
        }
        float32x4_t dw4[2];
        neon_r8_scales(wb, dw4);
#pragma GCC unroll 8
        for (int q = 0; q < NP; q++) {
            const float32x2_t d2 = {sd[2 * q][b].d, sd[2 * q + 1][b].d};
            const float32x4_t dx = vcombine_f32(d2, d2);
#pragma GCC unroll 8
            for (int p = 0; p < 4; p++) {
                const float32x4_t dw =
                    p % 2 ? vzip2q_f32(dw4[p / 2], dw4[p / 2]) : vzip1q_f32(dw4[p / 2], dw4[p / 2]);
                acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(is[p][q]), vmulq_f32(dw, dx));
            }
        }
    }
/* lanes (w 2p x0, w 2p x1, w 2p+1 x0, w 2p+1 x1) back to rows */
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++)
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const float32x4_t r0 = vuzp1q_f32(acc[2 * h][q], acc[2 * h + 1][q]);
            const float32x4_t r1 = vuzp2q_f32(acc[2 * h][q], acc[2 * h + 1][q]);
            vst1q_f32(out + (size_t)(2 * q) * ld_out + 4 * h, r0);
            if ((size_t)(2 * q + 1) < n_rows)
                vst1q_f32(out + (size_t)(2 * q + 1) * ld_out + 4 * h, r1);
        }
}

/* Groups of [o0, o1) x the activation rows, 4 rows a tile; one row alone
 * takes the sdot kernel. */
ALWAYS_INLINE void rows_r8(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                           size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                           size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp,
                           const int is_q4) {
    if (n_rows_x == 1) {
        (is_q4 ? kernel_rows_q4_0_r8_dotprod : kernel_rows_q8_0_r8_dotprod)(
            out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp);
        return;
    }
    const size_t nb = n_in / QK8_0;
    for (size_t r = 0; r < n_rows_x; r += 4) {
        const size_t mx = n_rows_x - r < 4 ? n_rows_x - r : 4;
        const uint8_t *a = act + r * act_row_bytes;
        for (size_t o = o0; o < o1; o += 8) {
            float *dst = out + r * ld_out + o;
            const uint8_t *G = W + o * w_row_bytes;
            if (mx > 2)
                mmla_tile(dst, ld_out, G, a, act_row_bytes, nb, mx, is_q4, 2);
            else
                mmla_tile(dst, ld_out, G, a, act_row_bytes, nb, mx, is_q4, 1);
        }
    }
}

static KERNEL_ROWS_DECL(rows_q8_0_r8) {
    rows_r8(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp, 0);
}

static KERNEL_ROWS_DECL(rows_q4_0_r8) {
    rows_r8(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp, 1);
}

const kernel_type_impl kernel_impl_neon_i8mm[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, kernel_rows_q8_0_plain_dotprod, rows_q8_0_r8},
    [GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, kernel_rows_q4_0_plain_dotprod, rows_q4_0_r8},
};

#endif
