/* Internal to the ARM tier's files of 8-row groups (dot_neon.c,
 * dot_kquant_neon.c, dot_kq_neon.c, dot_q32_neon.c): the sdot-by-lane step,
 * lane helpers for the quants and scales, and the rows loop and stores all
 * their tiles share. Include after <arm_neon.h> and the file's target
 * pragma (armv8.2-a+dotprod). A 16-byte vector of a group holds 4
 * consecutive quants of each of 4 rows, rows in lanes (kernel_impl.h). */
#ifndef TPS_KERNELS_NEON_KQ_H
#define TPS_KERNELS_NEON_KQ_H

#include "base/compiler.h"       /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h" /* KERNEL_ROWS_DECL, block_q8_0, block_q8_K */

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

/* ---- tiles: MX activation rows x one 8-row group ------------------------ */

/* A Q8_K tile's start: xr[j] = activation row j (rows act_row_bytes apart),
 * acc[j][0..1] = 0, for j < MX. */
ALWAYS_INLINE void neon_q8_K_tile_init(const block_q8_K *xr[], float32x4_t acc[][2],
                                       const uint8_t *restrict act, size_t act_row_bytes,
                                       const int MX) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++) {
        xr[j] = (const block_q8_K *)(act + (size_t)j * act_row_bytes);
        acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    }
}

/* A Q8_0 tile's start: xr[j] = activation row j (rows act_row_bytes apart,
 * nb blocks), sd[j] its side data, acc[j][0..1] = 0, for j < MX. */
ALWAYS_INLINE void neon_q8_0_tile_init(const block_q8_0 *xr[], const kernel_act_side *sd[],
                                       float32x4_t acc[][2], const uint8_t *restrict act,
                                       size_t act_row_bytes, size_t nb, const int MX) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++) {
        xr[j] = (const block_q8_0 *)(act + (size_t)j * act_row_bytes);
        sd[j] = (const kernel_act_side *)((const uint8_t *)xr[j] + kernel_act_side_off(nb));
        acc[j][0] = acc[j][1] = vdupq_n_f32(0.0f);
    }
}

/* A tile's end: acc[j][h] (the group's rows 4h..4h+3 against activation row
 * j) -> out[j ld_out + 4h ..], for j < MX. */
ALWAYS_INLINE void neon_tile_store(float *restrict out, size_t ld_out, float32x4_t acc[][2],
                                   const int MX) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++) {
        vst1q_f32(out + (size_t)j * ld_out, acc[j][0]);
        vst1q_f32(out + (size_t)j * ld_out + 4, acc[j][1]);
    }
}

/* One 8-row group G (nb blocks) x MX activation rows from act (rows
 * act_row_bytes apart) -> out (MX rows of 8, ld_out apart); sel is the
 * file's type tag, MX a constant 1..4. */
typedef void neon_r8_tile_fn(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int sel, const int MX);

/* The groups of [o0, o1) against the activation rows, up to mx_max (2 or 4)
 * rows a tile. Each row count calls the tile with its own constant MX, and
 * the tile is inlined (a known function in an always-inline body). */
ALWAYS_INLINE void neon_r8_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                                size_t w_row_bytes, size_t o0, size_t o1,
                                const uint8_t *restrict act, size_t act_row_bytes, size_t n_rows_x,
                                size_t nb, const int sel, const int mx_max, neon_r8_tile_fn *tile) {
    for (size_t r = 0; r < n_rows_x; r += (size_t)mx_max) {
        const size_t mx = n_rows_x - r < (size_t)mx_max ? n_rows_x - r : (size_t)mx_max;
        const uint8_t *a = act + r * act_row_bytes;
        for (size_t o = o0; o < o1; o += 8) {
            float *dst = out + r * ld_out + o;
            const uint8_t *G = W + o * w_row_bytes;
            if (mx_max == 4 && mx == 4)
                tile(dst, ld_out, G, a, act_row_bytes, nb, sel, 4);
            else if (mx_max == 4 && mx == 3)
                tile(dst, ld_out, G, a, act_row_bytes, nb, sel, 3);
            else if (mx >= 2)
                tile(dst, ld_out, G, a, act_row_bytes, nb, sel, 2);
            else
                tile(dst, ld_out, G, a, act_row_bytes, nb, sel, 1);
        }
    }
}

/* A rows kernel over neon_r8_rows: blocks of qk elements, type tag sel. */
#define NEON_R8_ROWS_FN(name, tile, sel, mx_max, qk)                                               \
    KERNEL_ROWS_DECL(name) {                                                                       \
        (void)tmp;                                                                                 \
        neon_r8_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x,            \
                     n_in / (qk), sel, mx_max, tile);                                              \
    }

#endif
