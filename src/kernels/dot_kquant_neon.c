/* ARM tier, NEON with dotprod: Q4_K and Q6_K 8-row groups (block_q4_Kx8,
 * block_q6_Kx8 of kernel_impl.h) against Q8_K activation rows, one or two
 * activation rows a tile. Compiled for armv8.2-a+dotprod by the pragma
 * below and called only when the CPU has it (cpu_arm.c); the i8mm table
 * takes these entries as they are. Empty in any other build.
 *
 * A vector of a group holds 4 consecutive quants of each of 4 rows, so
 * one sdot by lane (the activation's 4 bytes broadcast) adds 4 products
 * into each row's own lane: per sub-block an exact int32 sum per row, then
 * kernel_impl.h's integer and float steps lane by lane (vfmaq_f32 fused,
 * vcvtq_f32_s32 to nearest even): the scalar tier's bits. Q6_K's quants go
 * in unsigned (0..63) and each sub-block takes 32 * its activation sum off
 * (Q8_K's bsums), the same integer as (q - 32) . x. Not here: plain
 * (unpacked) rows, which run the scalar tier; threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>

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

/* ---- Q4_K ---------------------------------------------------------------- */

/* Rows 4h..4h+3 of a group's 6-bit scales and mins (kernel_q4_K_scales'
 * word arithmetic, lane by lane): sc[0] bytes = sub-blocks 0..3, sc[1]
 * 4..7, m[0], m[1] the same for the mins. */
ALWAYS_INLINE void q4_K_scales(const uint8_t *scales, int h, uint32x4_t sc[2], uint32x4_t m[2]) {
    const uint32x4_t u0 = vld1q_u32((const uint32_t *)(scales + 16 * h));
    const uint32x4_t u1 = vld1q_u32((const uint32_t *)(scales + 32 + 16 * h));
    const uint32x4_t u2 = vld1q_u32((const uint32_t *)(scales + 64 + 16 * h));
    const uint32x4_t lo6 = vdupq_n_u32(0x3f3f3f3fu), lo4 = vdupq_n_u32(0x0f0f0f0fu),
                     top2 = vdupq_n_u32(0x03030303u);
    sc[0] = vandq_u32(u0, lo6);
    sc[1] = vorrq_u32(vandq_u32(u2, lo4), vshlq_n_u32(vandq_u32(vshrq_n_u32(u0, 6), top2), 4));
    m[0] = vandq_u32(u1, lo6);
    m[1] = vorrq_u32(vandq_u32(vshrq_n_u32(u2, 4), lo4),
                     vshlq_n_u32(vandq_u32(vshrq_n_u32(u1, 6), top2), 4));
}

/* One Q4_K group (nb superblocks) x MX (1..2) Q8_K activation rows. */
ALWAYS_INLINE void q4_K_tile(float *restrict out, size_t ld_out, const block_q4_Kx8 *restrict g,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int MX) {
    const block_q8_K *xr[2];
    float32x4_t acc[2][2];
#pragma GCC unroll 8
    for (int j = 0; j < MX; j++) {
        xr[j] = (const block_q8_K *)(act + (size_t)j * act_row_bytes);
        acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (size_t b = 0; b < nb; b++) {
        __builtin_prefetch((const uint8_t *)(g + b) + PREFETCH_AHEAD_BYTES, 0, 3);
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            uint32x4_t sc[2], mn[2];
            q4_K_scales(g[b].scales, h, sc, mn);
            int32x4_t isum[2], imin[2];
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++)
                isum[j] = imin[j] = vdupq_n_s32(0);
#pragma GCC unroll 8
            for (int k = 0; k < 4; k++) { /* sub-blocks 2k (low nibbles), 2k + 1 (high) */
                int32x4_t slo[2], shi[2];
#pragma GCC unroll 8
                for (int j = 0; j < MX; j++)
                    slo[j] = shi[j] = vdupq_n_s32(0);
#pragma GCC unroll 8
                for (int c4 = 0; c4 < 2; c4++) {
                    int8x16_t lo[4], hi[4];
#pragma GCC unroll 8
                    for (int cc = 0; cc < 4; cc++) {
                        const uint8x16_t v =
                            vld1q_u8(g[b].qs + (8 * k + 4 * c4 + cc) * 32 + 16 * h);
                        lo[cc] = vreinterpretq_s8_u8(vandq_u8(v, m4));
                        hi[cc] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
                    }
#pragma GCC unroll 8
                    for (int j = 0; j < MX; j++) {
                        const int8_t *xq = xr[j][b].qs + 64 * k + 16 * c4;
                        SDOT4(slo[j], lo, vld1q_s8(xq));
                        SDOT4(shi[j], hi, vld1q_s8(xq + 32));
                    }
                }
                const int32x4_t s_lo = byte_u(sc[k / 2], 2 * (k % 2)),
                                s_hi = byte_u(sc[k / 2], 2 * (k % 2) + 1);
                const int32x4_t m_lo = byte_u(mn[k / 2], 2 * (k % 2)),
                                m_hi = byte_u(mn[k / 2], 2 * (k % 2) + 1);
#pragma GCC unroll 8
                for (int j = 0; j < MX; j++) {
                    const int16_t *bs = xr[j][b].bsums + 4 * k;
                    isum[j] = vmlaq_s32(vmlaq_s32(isum[j], slo[j], s_lo), shi[j], s_hi);
                    imin[j] = vmlaq_n_s32(imin[j], m_lo, bs[0] + bs[1]);
                    imin[j] = vmlaq_n_s32(imin[j], m_hi, bs[2] + bs[3]);
                }
            }
            const uint16x4_t dh = vld1_u16(g[b].d + 4 * h), mh = vld1_u16(g[b].dmin + 4 * h);
            const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(dh));
            const float32x4_t dmin = vnegq_f32(vcvt_f32_f16(vreinterpret_f16_u16(mh)));
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++) {
                const float32x4_t dx = vdupq_n_f32(xr[j][b].d);
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(isum[j]), vmulq_f32(d, dx));
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(imin[j]), vmulq_f32(dmin, dx));
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < MX; j++) {
        vst1q_f32(out + (size_t)j * ld_out, acc[j][0]);
        vst1q_f32(out + (size_t)j * ld_out + 4, acc[j][1]);
    }
}

/* ---- Q6_K ---------------------------------------------------------------- */

/* One Q6_K group (nb superblocks) x MX (1..2) Q8_K activation rows. The
 * quants of element 128hh + 32t + 4c + e: Q_t = byte & 63 of vector
 * (hh, t, c) for t < 3, Q_3 the top 2 bits of those three. */
ALWAYS_INLINE void q6_K_tile(float *restrict out, size_t ld_out, const block_q6_Kx8 *restrict g,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int MX) {
    const block_q8_K *xr[2];
    float32x4_t acc[2][2];
#pragma GCC unroll 8
    for (int j = 0; j < MX; j++) {
        xr[j] = (const block_q8_K *)(act + (size_t)j * act_row_bytes);
        acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    }
    const uint8x16_t m6 = vdupq_n_u8(63), m2 = vdupq_n_u8(3);
    for (size_t b = 0; b < nb; b++) {
        __builtin_prefetch((const uint8_t *)(g + b) + PREFETCH_AHEAD_BYTES, 0, 3);
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) { /* rows 4h..4h+3 */
            int32x4_t isum[2];
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++)
                isum[j] = vdupq_n_s32(0);
#pragma GCC unroll 8
            for (int hh = 0; hh < 2; hh++)
#pragma GCC unroll 8
                for (int s = 0; s < 2; s++) { /* c = 4s + cc: sub-blocks 8hh + 2t + s */
                    int8x16_t q[4][4];
#pragma GCC unroll 8
                    for (int cc = 0; cc < 4; cc++) {
                        uint8x16_t v[3];
#pragma GCC unroll 8
                        for (int t = 0; t < 3; t++)
                            v[t] = vld1q_u8(g[b].q + (24 * hh + 8 * t + 4 * s + cc) * 32 + 16 * h);
                        uint8x16_t q3 = vshrq_n_u8(v[0], 6);
                        q3 = vorrq_u8(q3, vshlq_n_u8(vandq_u8(vshrq_n_u8(v[1], 6), m2), 2));
                        q3 = vorrq_u8(q3, vshlq_n_u8(vshrq_n_u8(v[2], 6), 4));
#pragma GCC unroll 8
                        for (int t = 0; t < 3; t++)
                            q[t][cc] = vreinterpretq_s8_u8(vandq_u8(v[t], m6));
                        q[3][cc] = vreinterpretq_s8_u8(q3);
                    }
#pragma GCC unroll 8
                    for (int t = 0; t < 4; t++) {
                        const int sub = 8 * hh + 2 * t + s;
                        const int32x4_t scv = byte_s(
                            vld1q_s32((const int32_t *)(g[b].scales + 32 * (sub / 4) + 16 * h)),
                            sub % 4);
#pragma GCC unroll 8
                        for (int j = 0; j < MX; j++) {
                            int32x4_t sum = vdupq_n_s32(-32 * xr[j][b].bsums[sub]);
                            SDOT4(sum, q[t], vld1q_s8(xr[j][b].qs + 16 * sub));
                            isum[j] = vmlaq_s32(isum[j], sum, scv);
                        }
                    }
                }
            const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(g[b].d + 4 * h)));
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++)
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(isum[j]),
                                      vmulq_f32(d, vdupq_n_f32(xr[j][b].d)));
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < MX; j++) {
        vst1q_f32(out + (size_t)j * ld_out, acc[j][0]);
        vst1q_f32(out + (size_t)j * ld_out + 4, acc[j][1]);
    }
}

/* ---- rows kernels (dot_neon.c's table names them) ------------------------------------ */

/* The groups of [o0, o1) against the activation rows, two rows a tile. */
#define KQ_ROWS_R8(name, tile, gtype)                                                              \
    KERNEL_ROWS_DECL(name) {                                                                       \
        (void)tmp;                                                                                 \
        const size_t nb = n_in / QK_K;                                                             \
        for (size_t r = 0; r < n_rows_x; r += 2) {                                                 \
            const uint8_t *a = act + r * act_row_bytes;                                            \
            for (size_t o = o0; o < o1; o += 8) {                                                  \
                const gtype *g = (const gtype *)(W + o * w_row_bytes);                             \
                if (n_rows_x - r >= 2)                                                             \
                    tile(out + r * ld_out + o, ld_out, g, a, act_row_bytes, nb, 2);                \
                else                                                                               \
                    tile(out + r * ld_out + o, ld_out, g, a, act_row_bytes, nb, 1);                \
            }                                                                                      \
        }                                                                                          \
    }

KQ_ROWS_R8(kernel_rows_q4_K_r8_dotprod, q4_K_tile, block_q4_Kx8)
KQ_ROWS_R8(kernel_rows_q6_K_r8_dotprod, q6_K_tile, block_q6_Kx8)

#endif
