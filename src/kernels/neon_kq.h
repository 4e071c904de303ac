/* Internal to the ARM tier's files of 8-row groups (dot_kquant_neon.c,
 * dot_kq_neon.c, dot_q32_neon.c): the sdot-by-lane step and lane helpers
 * for the quants and scales. Include after <arm_neon.h> and the file's target
 * pragma (armv8.2-a+dotprod). A 16-byte vector of a group holds 4
 * consecutive quants of each of 4 rows, rows in lanes (kernel_impl.h). */
#ifndef TPS_KERNELS_NEON_KQ_H
#define TPS_KERNELS_NEON_KQ_H

#include "base/compiler.h" /* ALWAYS_INLINE */

/* s += the 4 vectors w[0..3] (4 rows x 4 quants each) . x's 4-byte lanes. */
#define SDOT4(s, w, x)                                                                             \
    do {                                                                                           \
        s = vdotq_laneq_s32(s, (w)[0], x, 0);                                                      \
        s = vdotq_laneq_s32(s, (w)[1], x, 1);                                                      \
        s = vdotq_laneq_s32(s, (w)[2], x, 2);                                                      \
        s = vdotq_laneq_s32(s, (w)[3], x, 3);                                                      \
    } while (0)

/* Byte t (0..3) of each 32-bit lane as an int32: unsigned, or signed. */
ALWAYS_INLINE int32x4_t byte_u(uint32x4_t v, int t) {
    return vreinterpretq_s32_u32(vandq_u32(vshlq_u32(v, vdupq_n_s32(-8 * t)), vdupq_n_u32(0xff)));
}

ALWAYS_INLINE int32x4_t byte_s(int32x4_t v, int t) {
    return vshlq_s32(vshlq_s32(v, vdupq_n_s32(24 - 8 * t)), vdupq_n_s32(-24));
}

/* Each byte shifted left by n (right for n < 0); n a constant once unrolled. */
ALWAYS_INLINE uint8x16_t shl_u8(uint8x16_t v, int n) {
    return vshlq_u8(v, vdupq_n_s8((int8_t)n));
}

/* The 4 rows' fp16 scales at p as floats (exact). */
ALWAYS_INLINE float32x4_t f16x4(const uint16_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

#endif
