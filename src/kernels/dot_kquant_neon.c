/* ARM tier, NEON with dotprod: Q4_K, Q5_K and Q6_K 8-row groups
 * (block_q4_Kx8, block_q6_Kx8 of kernel_impl.h, block_q5_Kx8 of
 * packed_kq.h) against Q8_K activation rows, one or two
 * activation rows a tile. Compiled for armv8.2-a+dotprod by the pragma
 * below and called only when the CPU has it (cpu_arm.c); the i8mm table
 * takes these entries as they are. Empty in any other build.
 *
 * A vector of a group holds 4 consecutive quants of each of 4 rows, so
 * one sdot by lane (the activation's 4 bytes broadcast) adds 4 products
 * into each row's own lane: per sub-block an exact int32 sum per row, then
 * kernel_impl.h's integer and float steps lane by lane (vfmaq_f32 fused,
 * vcvtq_f32_s32 to nearest even): the scalar tier's bits. Q5_K is Q4_K
 * with each nibble's fifth bit ORed in (q 0..31). Q6_K's quants go
 * in unsigned (0..63) and each sub-block takes 32 * its activation sum off
 * (Q8_K's bsums), the same integer as (q - 32) . x. Not here: plain
 * (unpacked) rows, which run the scalar tier; Q2_K, Q3_K, IQ4_XS
 * (dot_kq_neon.c); threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_NEON

#pragma GCC target("arch=armv8.2-a+dotprod")
#include <arm_neon.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/neon_kq.h"
#include "kernels/packed_kq.h" /* block_q5_Kx8 */

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

/* Q4_K's groups and Q5_K's (packed_kq.h: the same d, dmin and scales; qs
 * after Q5_K's fifth bits). */
ALWAYS_INLINE size_t k45_gb(const int q5) {
    return q5 ? sizeof(block_q5_Kx8) : sizeof(block_q4_Kx8);
}

/* Rows 4h..4h+3 of qs vectors 8k + 4c4 + cc (cc < 4): lo[cc] the low
 * nibbles (sub-block 2k), hi[cc] the high ones (2k + 1); Q5_K ORs in the
 * fifth bits of qh vector 4c4 + cc, (qh << (4 - k)) & 0x10 and
 * (qh >> k) & 0x10 per byte. */
ALWAYS_INLINE void k45_quants(const uint8_t *restrict blk, int h, int k, int c4, const int q5,
                              int8x16_t lo[4], int8x16_t hi[4]) {
    const uint8_t *qs = blk + (q5 ? offsetof(block_q5_Kx8, qs) : offsetof(block_q4_Kx8, qs));
    const uint8x16_t m4 = vdupq_n_u8(0x0f), b5 = vdupq_n_u8(0x10);
#pragma GCC unroll 8
    for (int cc = 0; cc < 4; cc++) {
        const uint8x16_t v = vld1q_u8(qs + (8 * k + 4 * c4 + cc) * 32 + 16 * h);
        uint8x16_t l = vandq_u8(v, m4), u = vshrq_n_u8(v, 4);
        if (q5) {
            const uint8x16_t qh =
                vld1q_u8(blk + offsetof(block_q5_Kx8, qh) + (4 * c4 + cc) * 32 + 16 * h);
            l = vorrq_u8(l, vandq_u8(shl_u8(qh, 4 - k), b5));
            u = vorrq_u8(u, vandq_u8(shl_u8(qh, -k), b5));
        }
        lo[cc] = vreinterpretq_s8_u8(l);
        hi[cc] = vreinterpretq_s8_u8(u);
    }
}

/* Rows 4h..4h+3 of one superblock x MX rows: isum[j], imin[j] of
 * kernel_impl.h's Q4_K formula (Q5_K: q 0..31, the same steps). */
ALWAYS_INLINE void k45_sums(const uint8_t *restrict blk, const block_q8_K *const *xr, size_t b,
                            int h, const int q5, const int MX, int32x4_t isum[2],
                            int32x4_t imin[2]) {
    const block_q4_Kx8 *g = (const block_q4_Kx8 *)blk; /* d, dmin, scales */
    uint32x4_t sc[2], mn[2];
    q4_K_scales(g->scales, h, sc, mn);
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
            k45_quants(blk, h, k, c4, q5, lo, hi);
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
}

/* One Q4_K (q5 0) or Q5_K (1) group G (nb superblocks) x MX (1..2) Q8_K
 * activation rows. */
ALWAYS_INLINE void q45_K_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                              const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                              const int q5, const int MX) {
    const size_t GB = k45_gb(q5);
    const block_q8_K *xr[2];
    float32x4_t acc[2][2];
    neon_q8_K_tile_init(xr, acc, act, act_row_bytes, MX);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = G + b * GB;
        const block_q4_Kx8 *g = (const block_q4_Kx8 *)blk;
        __builtin_prefetch(blk + PREFETCH_AHEAD_BYTES, 0, 3);
#pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            int32x4_t isum[2], imin[2];
            k45_sums(blk, xr, b, h, q5, MX, isum, imin);
            const float32x4_t d = f16x4(g->d + 4 * h), dmin = vnegq_f32(f16x4(g->dmin + 4 * h));
#pragma GCC unroll 8
            for (int j = 0; j < MX; j++) {
                const float32x4_t dx = vdupq_n_f32(xr[j][b].d);
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(isum[j]), vmulq_f32(d, dx));
                acc[j][h] = vfmaq_f32(acc[j][h], vcvtq_f32_s32(imin[j]), vmulq_f32(dmin, dx));
            }
        }
    }
    neon_tile_store(out, ld_out, acc, MX);
}

/* ---- Q6_K ---------------------------------------------------------------- */

/* One Q6_K group (nb superblocks) x MX (1..2) Q8_K activation rows (sel
 * unused: one type, in neon_r8_tile_fn's shape). The quants of element
 * 128hh + 32t + 4c + e: Q_t = byte & 63 of vector (hh, t, c) for t < 3,
 * Q_3 the top 2 bits of those three. */
ALWAYS_INLINE void q6_K_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int sel, const int MX) {
    (void)sel;
    const block_q8_K *xr[2];
    float32x4_t acc[2][2];
    neon_q8_K_tile_init(xr, acc, act, act_row_bytes, MX);
    const block_q6_Kx8 *g = (const block_q6_Kx8 *)G;
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
    neon_tile_store(out, ld_out, acc, MX);
}

/* ---- rows kernels (dot_neon.c's table names them) ------------------------------------ */

/* The groups of [o0, o1) against the activation rows, two rows a tile. */
NEON_R8_ROWS_FN(kernel_rows_q4_K_r8_dotprod, q45_K_tile, 0, 2, QK_K)
NEON_R8_ROWS_FN(kernel_rows_q5_K_r8_dotprod, q45_K_tile, 1, 2, QK_K)
NEON_R8_ROWS_FN(kernel_rows_q6_K_r8_dotprod, q6_K_tile, 0, 2, QK_K)

#endif
