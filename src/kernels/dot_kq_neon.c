/* ARM tier, NEON with dotprod: Q2_K, Q3_K and IQ4_XS 8-row groups
 * (packed_kq.h) against Q8_K activation rows, one or two activation rows a
 * tile. Compiled for armv8.2-a+dotprod by the pragma below and called only
 * when the CPU has it (cpu_arm.c; the i8mm table falls back to these).
 * Empty in any other build.
 *
 * As in the Q4_K / Q6_K tiles (dot_kquant_neon.c), a 16-byte vector holds
 * 4 consecutive quants of each of 4 rows, so one sdot by lane adds each
 * row's products into its own lane: per sub-block an exact int32 sum per
 * row, started at the offset that makes it the signed sum (Q3_K's unsigned
 * q + 4 at -4 * bsum), times the lane's sub-block scale, then
 * packed_kq.h's float steps lane by lane (vfmaq_f32 fused, vcvtq_f32_s32
 * to nearest even): the scalar tier's bits. IQ4_XS's grid values come from
 * one table lookup (tbl) per nibble vector. Not here: plain (unpacked)
 * rows, which run the scalar tier; threading (matmul.c). */
#include "kernels/packed_kq.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>

#include "kernels/neon_kq.h"

enum { KQ_Q2_K, KQ_Q3_K, KQ_IQ4_XS };

ALWAYS_INLINE size_t kq_gb(const int t) {
    return t == KQ_Q2_K   ? sizeof(block_q2_Kx8)
           : t == KQ_Q3_K ? sizeof(block_q3_Kx8)
                          : sizeof(block_iq4_xsx8);
}

/* ---- per type: quants and scales of rows 4h..4h+3 ------------------------ */

/* Q2_K / Q3_K sub-block k = 8p + 2s + half, chunk cc < 4: qs vector
 * 8p + 4 half + cc, bits 2s (0..3). */
ALWAYS_INLINE uint8x16_t kq_low2(const uint8_t *qs, int h, int k, int cc) {
    const int p = k / 8, s = k % 8 / 2, c = 4 * (k % 2) + cc;
    const uint8x16_t v = vld1q_u8(qs + (8 * p + c) * 32 + 16 * h);
    return vandq_u8(shl_u8(v, -2 * s), vdupq_n_u8(3));
}

/* The 4 quant vectors of sub-block k (16 elements: 4 per vector, lanes
 * cc = elements 4cc..4cc+3): Q2_K's q (0..3); Q3_K's q + 4 (0..7), the
 * high bit from hmask vector 4 half + cc, bit 4p + s. */
ALWAYS_INLINE void kq_q16(const uint8_t *blk, int h, int k, const int t, int8x16_t q[4]) {
    const int p = k / 8, s = k % 8 / 2, c0 = 4 * (k % 2);
#pragma GCC unroll 4
    for (int cc = 0; cc < 4; cc++) {
        if (t == KQ_Q2_K) {
            q[cc] = vreinterpretq_s8_u8(kq_low2(((const block_q2_Kx8 *)blk)->qs, h, k, cc));
            continue;
        }
        const block_q3_Kx8 *g = (const block_q3_Kx8 *)blk;
        const uint8x16_t hm = vld1q_u8(g->hmask + (c0 + cc) * 32 + 16 * h);
        const uint8x16_t hb = vandq_u8(shl_u8(hm, 2 - (4 * p + s)), vdupq_n_u8(4));
        q[cc] = vreinterpretq_s8_u8(vorrq_u8(kq_low2(g->qs, h, k, cc), hb));
    }
}

/* Q3_K's 16 signed scales of rows 4h..4h+3: byte t of lane i of aux[w] is
 * row i's sub-block 4w + t (the plain dequantizer's word arithmetic on
 * bytes), minus 32. */
ALWAYS_INLINE void kq_q3_scales(const block_q3_Kx8 *g, int h, int32x4_t aux[4]) {
    const uint8x16_t u0 = vld1q_u8(g->scales + 16 * h), u1 = vld1q_u8(g->scales + 32 + 16 * h);
    const uint8x16_t u2 = vld1q_u8(g->scales + 64 + 16 * h);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(3);
    const uint8x16_t lo[4] = {vandq_u8(u0, m4), vandq_u8(u1, m4), vshrq_n_u8(u0, 4),
                              vshrq_n_u8(u1, 4)};
#pragma GCC unroll 4
    for (int w = 0; w < 4; w++) {
        const uint8x16_t hi = vshlq_n_u8(vandq_u8(shl_u8(u2, -2 * w), m2), 4);
        const int8x16_t sc = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo[w], hi)), vdupq_n_s8(32));
        aux[w] = vreinterpretq_s32_s8(sc);
    }
}

/* Q2_K sub-block k's scale (sh 0) or min (sh 4) per lane: a nibble of
 * byte k % 4 of scales vector k / 4. */
ALWAYS_INLINE int32x4_t kq_q2_nib(const block_q2_Kx8 *g, int h, int k, int sh) {
    const uint32x4_t sw = vld1q_u32((const uint32_t *)(g->scales + 32 * (k / 4) + 16 * h));
    return vreinterpretq_s32_u32(
        vandq_u32(vshlq_u32(sw, vdupq_n_s32(-(8 * (k % 4) + sh))), vdupq_n_u32(15)));
}

/* IQ4_XS sub-block ib's scale ls - 32 per lane. */
ALWAYS_INLINE int32x4_t kq_iq4_scale(const block_iq4_xsx8 *g, int h, int ib) {
    const uint32x4_t sl = vld1q_u32((const uint32_t *)(g->scales_l + 16 * h));
    const uint32x4_t sh = vmovl_u16(vld1_u16(g->scales_h + 4 * h));
    const uint32x4_t lo =
        vandq_u32(vshlq_u32(sl, vdupq_n_s32(-(8 * (ib / 2) + 4 * (ib % 2)))), vdupq_n_u32(15));
    const uint32x4_t hi = vandq_u32(vshlq_u32(sh, vdupq_n_s32(-2 * ib)), vdupq_n_u32(3));
    return vsubq_s32(vreinterpretq_s32_u32(vorrq_u32(lo, vshlq_n_u32(hi, 4))), vdupq_n_s32(32));
}

/* ---- per type: one superblock's integer sums ----------------------------- */

/* Q2_K / Q3_K, rows 4h..4h+3 x MX rows: isum[j] and (Q2_K) imin[j]. */
ALWAYS_INLINE void kq_sums16(const uint8_t *blk, const block_q8_K *const *xr, size_t b, int h,
                             const int t, const int MX, int32x4_t isum[2], int32x4_t imin[2]) {
    int32x4_t aux[4];
    if (t == KQ_Q3_K) kq_q3_scales((const block_q3_Kx8 *)blk, h, aux);
#pragma GCC unroll 2
    for (int j = 0; j < MX; j++)
        isum[j] = imin[j] = vdupq_n_s32(0);
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
        int8x16_t q[4];
        kq_q16(blk, h, k, t, q);
        const int32x4_t sc = t == KQ_Q3_K ? byte_s(aux[k / 4], k % 4)
                                          : kq_q2_nib((const block_q2_Kx8 *)blk, h, k, 0);
#pragma GCC unroll 2
        for (int j = 0; j < MX; j++) {
            const int16_t bsum = xr[j][b].bsums[k];
            int32x4_t s = vdupq_n_s32(t == KQ_Q3_K ? -4 * bsum : 0);
            SDOT4(s, q, vld1q_s8(xr[j][b].qs + 16 * k));
            isum[j] = vmlaq_s32(isum[j], s, sc);
            if (t == KQ_Q2_K)
                imin[j] = vmlaq_n_s32(imin[j], kq_q2_nib((const block_q2_Kx8 *)blk, h, k, 4), bsum);
        }
    }
}

/* IQ4_XS, rows 4h..4h+3 x MX rows: isum[j]. Sub-block ib's qs vectors
 * 4ib + c: low nibbles elements 32ib + 4c.., high 32ib + 16 + 4c... */
ALWAYS_INLINE void kq_sums_iq4(const block_iq4_xsx8 *g, const block_q8_K *const *xr, size_t b,
                               int h, const int MX, int32x4_t isum[2]) {
    const int8x16_t tbl = vld1q_s8(kvalues_iq4nl);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 2
    for (int j = 0; j < MX; j++)
        isum[j] = vdupq_n_s32(0);
#pragma GCC unroll 8
    for (int ib = 0; ib < 8; ib++) {
        int8x16_t lo[4], hi[4];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8x16_t v = vld1q_u8(g->qs + (4 * ib + c) * 32 + 16 * h);
            lo[c] = vqtbl1q_s8(tbl, vandq_u8(v, m4));
            hi[c] = vqtbl1q_s8(tbl, vshrq_n_u8(v, 4));
        }
        const int32x4_t sc = kq_iq4_scale(g, h, ib);
#pragma GCC unroll 2
        for (int j = 0; j < MX; j++) {
            int32x4_t s = vdupq_n_s32(0);
            SDOT4(s, lo, vld1q_s8(xr[j][b].qs + 32 * ib));
            SDOT4(s, hi, vld1q_s8(xr[j][b].qs + 32 * ib + 16));
            isum[j] = vmlaq_s32(isum[j], s, sc);
        }
    }
}

/* ---- the tile ------------------------------------------------------------ */

/* One group G (nb superblocks) x MX (1..2) activation rows. */
ALWAYS_INLINE void kq_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                           const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                           const int t, const int MX) {
    const size_t GB = kq_gb(t);
    const block_q8_K *xr[2];
    float32x4_t acc[2][2];
    neon_q8_K_tile_init(xr, acc, act, act_row_bytes, MX);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = G + b * GB;
        __builtin_prefetch(blk + PREFETCH_AHEAD_BYTES, 0, 3);
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            int32x4_t isum[2], imin[2];
            if (t == KQ_IQ4_XS)
                kq_sums_iq4((const block_iq4_xsx8 *)blk, xr, b, h, MX, isum);
            else
                kq_sums16(blk, xr, b, h, t, MX, isum, imin);
            const float32x4_t d = f16x4((const uint16_t *)blk + 4 * h); /* d[8] first in all */
#pragma GCC unroll 2
            for (int j = 0; j < MX; j++) {
                const float32x4_t dx = vdupq_n_f32(xr[j][b].d);
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(isum[j]), vmulq_f32(d, dx));
                if (t != KQ_Q2_K) continue;
                const float32x4_t dmin = f16x4(((const block_q2_Kx8 *)blk)->dmin + 4 * h);
                acc[j][h] =
                    vfmaq_f32(acc[j][h], vcvtq_f32_s32(imin[j]), vmulq_f32(vnegq_f32(dmin), dx));
            }
        }
    }
    neon_tile_store(out, ld_out, acc, MX);
}

/* The groups of [o0, o1) against the activation rows, two rows a tile. */
#define KQ_ROWS_FN(name, t) NEON_R8_ROWS_FN(name, kq_tile, t, 2, QK_K)

KQ_ROWS_FN(kernel_rows_q2_K_r8_dotprod, KQ_Q2_K)
KQ_ROWS_FN(kernel_rows_q3_K_r8_dotprod, KQ_Q3_K)
KQ_ROWS_FN(kernel_rows_iq4_xs_r8_dotprod, KQ_IQ4_XS)

#endif
