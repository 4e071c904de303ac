/* Internal to src/kernels: Q2_K, Q3_K, Q5_K and IQ4_XS weights (256-element
 * superblocks) against Q8_K activation rows, the formula every tier
 * computes, and their 8-row interleaved groups. Not for other modules
 * (matmul.h is the interface).
 *
 * Per output element, in superblock order b = 0 .. nb-1, with q8 and d_x
 * the activation block's (kernel_impl.h), bsum_k its sums per 16:
 *   Q2_K, 16 sub-blocks k of 16, scale sc_k and min m_k (4 bits), q 0..3;
 *   Q5_K, 8 sub-blocks j of 32, Q4_K's 6-bit scales and mins, q 0..31:
 *     isum = sum_k sc_k * (sum q * q8)       imin = sum_k m_k * (sum q8)
 *     sumf = fmaf((float)isum,  d_w * d_x, sumf)
 *     sumf = fmaf((float)imin, -dmin_w * d_x, sumf)
 *   Q3_K, 16 sub-blocks of 16, signed scale sc_k (6 bits - 32), q -4..3;
 *   IQ4_XS, 8 sub-blocks of 32, scale ls - 32, values kvalues_iq4nl[q]:
 *     isum = sum_k sc_k * (sum value * q8)
 *     sumf = fmaf((float)isum, d_w * d_x, sumf)
 * Exact in int32 in any order: |isum| < 2^27 (Q5_K: 8 * 63 * 32 * 31 *
 * 127; IQ4_XS: 8 * 32 * 32 * 127 * 127), so every tier and tile shape
 * gives the same bits (kernel_impl.h's rule). */
#ifndef TPS_KERNELS_PACKED_KQ_H
#define TPS_KERNELS_PACKED_KQ_H

#include <stddef.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h"

/* The groups: 8 rows i = 0..7 of one superblock, the quants interleaved so
 * that int32 lane i of a 32-byte vector holds 4 consecutive bytes of row
 * i, and each row's sub-block scales in lane i of scale vectors (the
 * K-quant tiles' scheme, kernel_impl.h). Each group takes exactly the
 * bytes of its 8 plain superblocks.
 *
 * Q2_K: qs[(8h + c)*32 + 4i + e] = row i's qs[32h + 4c + e] (h < 2, c < 8),
 * bits 2s of which are element 128h + 32s + 4c + e (sub-block 8h + 2s +
 * c/4); scales[32w + 4i + t] = row i's scales[4w + t] (w < 4). */
typedef struct block_q2_Kx8 {
    uint16_t d[8];
    uint16_t dmin[8];
    uint8_t scales[8 * QK_K / 16];
    uint8_t qs[8 * QK_K / 4];
} block_q2_Kx8;
_Static_assert(sizeof(block_q2_Kx8) == 8 * sizeof(block_q2_K), "block_q2_Kx8 size");

/* Q3_K: qs as Q2_K's; hmask[c*32 + 4i + e] = row i's hmask[4c + e] (c < 8),
 * whose bit 4h + s is the high bit of element 128h + 32s + 4c + e;
 * scales[32w + 4i + t] = row i's packed scale bytes 4w + t (w < 3), the
 * 32-bit words the plain dequantizer unpacks, one vector each. */
typedef struct block_q3_Kx8 {
    uint16_t d[8];
    uint8_t scales[8 * 12];
    uint8_t hmask[8 * QK_K / 8];
    uint8_t qs[8 * QK_K / 4];
} block_q3_Kx8;
_Static_assert(sizeof(block_q3_Kx8) == 8 * sizeof(block_q3_K), "block_q3_Kx8 size");

/* Q5_K: d, dmin, scales and qs as block_q4_Kx8's; the fifth bits regrouped,
 * qh[c*32 + 4i + e] (c < 8) bit k = that of element 64k + 4c + e (the low
 * nibble of qs vector 8k + c), bit 4 + k = that of element 64k + 32 + 4c + e
 * (its high nibble): (qh << (4 - k)) & 0x10 and (qh >> k) & 0x10 per byte. */
typedef struct block_q5_Kx8 {
    uint16_t d[8];
    uint16_t dmin[8];
    uint8_t scales[8 * K_SCALE_SIZE];
    uint8_t qh[8 * QK_K / 8];
    uint8_t qs[8 * QK_K / 2];
} block_q5_Kx8;
_Static_assert(sizeof(block_q5_Kx8) == 8 * sizeof(block_q5_K), "block_q5_Kx8 size");

/* IQ4_XS: qs[(4ib + c)*32 + 4i + e] = row i's qs[16ib + 4c + e] (ib < 8,
 * c < 4): low nibble element 32ib + 4c + e, high 32ib + 16 + 4c + e;
 * scales_l[4i + t] = row i's scales_l[t]; scales_h[i] = row i's scales_h. */
typedef struct block_iq4_xsx8 {
    uint16_t d[8];
    uint16_t scales_h[8];
    uint8_t scales_l[8 * 4];
    uint8_t qs[8 * QK_K / 2];
} block_iq4_xsx8;
_Static_assert(sizeof(block_iq4_xsx8) == 8 * sizeof(block_iq4_xs), "block_iq4_xsx8 size");

/* ---- moving a superblock's fields between plain rows and groups ----------
 *
 * Every group above (and Q4_K's, Q6_K's scales) is its plain blocks'
 * fields side by side: 2-byte values row by row, and arrays of 4-byte words
 * interleaved so that word v of row i sits at 32 v + 4 i. A table per type
 * says which field goes where; the packers and their inverse are one mover
 * (inlined with the table a constant, so it unrolls to the copies). */
typedef struct kq_field {
    uint16_t plain, group; /* offsets in the plain block and in the group block */
    uint16_t n;            /* 4-byte words, or 0: one 2-byte value */
} kq_field;
#define KQ_F(plain_t, group_t, field, n)                                                           \
    { offsetof(plain_t, field), offsetof(group_t, field), n }

/* Row i's fields (f, n_f of them) from the plain block src into the group
 * block dst (to_group 1), or from the group block src into the plain
 * block dst (0). */
ALWAYS_INLINE void kq_move(uint8_t *restrict dst, const uint8_t *restrict src, size_t i,
                           const kq_field *f, size_t n_f, const int to_group) {
#pragma GCC unroll 8
    for (size_t k = 0; k < n_f; k++) {
        const size_t p = f[k].plain, g = f[k].group;
        if (!f[k].n) memcpy(dst + (to_group ? g + 2 * i : p), src + (to_group ? p : g + 2 * i), 2);
#pragma GCC unroll 32
        for (size_t v = 0; v < f[k].n; v++)
            memcpy(dst + (to_group ? g + 32 * v + 4 * i : p + 4 * v),
                   src + (to_group ? p + 4 * v : g + 32 * v + 4 * i), 4);
    }
}

/* A packer (kernel_pack8_fn) by a table: 8 rows of W (w_row_bytes apart)
 * of nb plain blocks of plain_bytes each into nb group blocks at dst. */
ALWAYS_INLINE void kq_pack(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                           size_t nb, size_t plain_bytes, const kq_field *f, size_t n_f) {
    for (size_t b = 0; b < nb; b++)
        for (size_t i = 0; i < 8; i++)
            kq_move(dst + 8 * plain_bytes * b, W + i * w_row_bytes + plain_bytes * b, i, f, n_f, 1);
}
#define KQ_TABLE(t) t, sizeof(t) / sizeof((t)[0])

/* Sub-block ib's scale of an IQ4_XS row, ls - 32 (-32..31). */
static inline int iq4_xs_scale(const uint8_t scales_l[4], uint16_t scales_h, int ib) {
    return (int)(((scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | ((scales_h >> (2 * ib)) & 3) << 4) -
           32;
}

/* Sub-block k's signed scale of a Q3_K row (6 bits - 32) from its 12 bytes. */
static inline int q3_K_sub_scale(const uint8_t s[12], int k) {
    const int lo = k < 8 ? s[k] & 15 : s[k - 8] >> 4;
    return (lo | ((s[8 + k % 4] >> (2 * (k / 4))) & 3) << 4) - 32;
}

/* Packers (kernel_pack8_fn) of 8 whole rows. */
void kernel_pack_group_q2_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb);
void kernel_pack_group_q3_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb);
void kernel_pack_group_q5_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb);
void kernel_pack_group_iq4_xs(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                              size_t nb);

/* Rows kernels (kernel_rows_fn, act in Q8_K): plain scalar (dot_kq_scalar.c),
 * packed scalar (repack_kq.c), and the AVX2 tier's (dot_kq_x8_avx2.c; Q5_K's
 * in dot_kquant_x8_avx2.c beside Q4_K's). The AVX2 tier runs plain rows by
 * packing them into scratch (tmp: KERNEL_TMP_ROWS * n_in floats holds a
 * group and one row's pair vectors). */
KERNEL_ROWS_DECL(kernel_rows_q2_K_scalar);
KERNEL_ROWS_DECL(kernel_rows_q3_K_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_K_scalar);
KERNEL_ROWS_DECL(kernel_rows_iq4_xs_scalar);
KERNEL_ROWS_DECL(kernel_rows_q2_K_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q3_K_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_K_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_iq4_xs_r8_scalar);
#if KERNEL_HAVE_AVX2
KERNEL_ROWS_DECL(kernel_rows_q2_K_avx2);
KERNEL_ROWS_DECL(kernel_rows_q3_K_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_K_avx2);
KERNEL_ROWS_DECL(kernel_rows_iq4_xs_avx2);
KERNEL_ROWS_DECL(kernel_rows_q2_K_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_q3_K_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_K_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_iq4_xs_r8_avx2);
#endif

#endif
