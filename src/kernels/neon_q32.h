/* Internal to the ARM tier (dot_neon.c, dot_neon_i8mm.c): loads of the
 * 8-row Q8_0 / Q4_0 groups of kernel_impl.h into NEON registers. Include
 * after <arm_neon.h> and the file's target pragma. A 16-byte vector of a
 * group holds 4 bytes (4 consecutive elements) of each of 4 rows: vector
 * (c, h) is rows 4h..4h+3, elements 4c..4c+3, at qs + 32c + 16h. */
#ifndef TPS_KERNELS_NEON_Q32_H
#define TPS_KERNELS_NEON_Q32_H

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h"

/* Q8_0: w[h][cc] = vector (c = 4k + cc, h), qs = the group's qs + 128k. */
ALWAYS_INLINE void neon_q8_r8_chunk(const uint8_t *qs, int8x16_t w[2][4]) {
#pragma GCC unroll 8
    for (int cc = 0; cc < 4; cc++)
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++)
            w[h][cc] = vld1q_s8((const int8_t *)qs + 32 * cc + 16 * h);
}

/* Q4_0: lo[h][c] the low nibbles of vector (c, h) (elements 4c..4c+3),
 * hi[h][c] the high ones (elements 16 + 4c..), both 0..15. */
ALWAYS_INLINE void neon_q4_r8_nibbles(const uint8_t *qs, int8x16_t lo[2][4], int8x16_t hi[2][4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 8
    for (int c = 0; c < 4; c++)
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const uint8x16_t v = vld1q_u8(qs + 32 * c + 16 * h);
            lo[h][c] = vreinterpretq_s8_u8(vandq_u8(v, m4));
            hi[h][c] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
}

/* The group's 8 fp16 scales as floats: dw[h] = rows 4h..4h+3 (exact). */
ALWAYS_INLINE void neon_r8_scales(const uint8_t *g, float32x4_t dw[2]) {
    const uint16x8_t d = vld1q_u16((const uint16_t *)g);
    dw[0] = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(d)));
    dw[1] = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(d)));
}

#endif
