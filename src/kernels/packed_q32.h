/* Internal to src/kernels: Q4_1, Q5_0, Q5_1 and IQ4_NL weights (32-element
 * blocks, as Q4_0) against Q8_0 activation rows, the formula every tier
 * computes, and their 8-row interleaved groups. Not for other modules
 * (matmul.h is the interface).
 *
 * Per output element, in block order b = 0 .. nb-1, with x the block's
 * int8 activations, d_x its scale, s_x Q8_1's sum term (side data: the
 * float of fp16(d_x * sum x), d_x before its fp16 rounding, as llama.cpp's
 * quantize_row_q8_1 keeps it), q the weight's quants:
 *   Q4_1 (q 0..15), Q5_1 (q 0..31), value q * d_w + m_w:
 *     isum = sum_j q_j x_j
 *     sumf = fmaf((float)isum, d_w * d_x, sumf)
 *     sumf = fmaf(m_w, s_x, sumf)
 *   Q5_0, value (q - 16) * d_w:     isum = sum_j (q_j - 16) x_j
 *   IQ4_NL, value kv[q] * d_w:      isum = sum_j kvalues_iq4nl[q_j] x_j
 *     sumf = fmaf((float)isum, d_w * d_x, sumf)
 * The sums are exact in int32 in any order (|isum| <= 32 * 127 * 127), so
 * the float sequence, and its bits, depend only on n_in: every tier, tile
 * shape and thread count gives the same output (kernel_impl.h's rule).
 * These are llama.cpp's products (vec_dot_q4_1_q8_1 and the rest) up to
 * the order of the float additions. */
#ifndef TPS_KERNELS_PACKED_Q32_H
#define TPS_KERNELS_PACKED_Q32_H

#include <stddef.h> /* offsetof */

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h"

/* Groups of 8 rows i = 0..7 of one block, the quants interleaved as
 * block_q4_0x8's: qs[c*32 + i*4 + e] = row i's qs[4c + e] (c < 4), whose
 * low nibble is element 4c + e and high nibble element 16 + 4c + e.
 * Q5_0 / Q5_1: the fifth bits of row i regrouped into one 32-bit word,
 * qh[4i + e] bit c = bit of element 4c + e, bit 4 + c = of element
 * 16 + 4c + e, so chunk c's fifth bits are one shift and mask away
 * ((qh << (4 - c)) & 0x10 per byte for the low nibbles, (qh >> c) & 0x10
 * for the high). Each group takes exactly the bytes of its 8 plain blocks. */
typedef struct block_q4_1x8 {
    uint16_t d[8];
    uint16_t m[8];
    uint8_t qs[8 * QK4_0 / 2];
} block_q4_1x8;
_Static_assert(sizeof(block_q4_1x8) == 8 * sizeof(block_q4_1), "block_q4_1x8 size");

typedef struct block_q5_0x8 {
    uint16_t d[8];
    uint8_t qh[8 * 4];
    uint8_t qs[8 * QK4_0 / 2];
} block_q5_0x8;
_Static_assert(sizeof(block_q5_0x8) == 8 * sizeof(block_q5_0), "block_q5_0x8 size");

typedef struct block_q5_1x8 {
    uint16_t d[8];
    uint16_t m[8];
    uint8_t qh[8 * 4];
    uint8_t qs[8 * QK4_0 / 2];
} block_q5_1x8;
_Static_assert(sizeof(block_q5_1x8) == 8 * sizeof(block_q5_1), "block_q5_1x8 size");

typedef struct block_iq4_nlx8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_0 / 2];
} block_iq4_nlx8;
_Static_assert(sizeof(block_iq4_nlx8) == 8 * sizeof(block_iq4_nl), "block_iq4_nlx8 size");

/* A plain row's regrouped fifth bits (the qh word of the layout above). */
static inline uint32_t q32_qh_regroup(const uint8_t qh_bytes[4]) {
    uint32_t qh, r = 0;
    memcpy(&qh, qh_bytes, sizeof qh);
    for (unsigned c = 0; c < 4; c++)
        for (unsigned e = 0; e < 4; e++) {
            r |= (qh >> (4 * c + e) & 1u) << (8 * e + c);
            r |= (qh >> (16 + 4 * c + e) & 1u) << (8 * e + 4 + c);
        }
    return r;
}

/* The vector tiers' Q32 tiles (dot_q32_avx2.c, dot_q32_neon.c) take the
 * type as a tag; per tag, the group's size and field offsets, constants
 * once a tile is inlined. MXFP4's group is kernel_impl.h's block_mxfp4x8. */
enum { Q32_Q4_1, Q32_Q5_0, Q32_Q5_1, Q32_IQ4_NL, Q32_MXFP4 };

ALWAYS_INLINE size_t q32_gb(const int t) {
    return t == Q32_Q4_1     ? sizeof(block_q4_1x8)
           : t == Q32_Q5_0   ? sizeof(block_q5_0x8)
           : t == Q32_Q5_1   ? sizeof(block_q5_1x8)
           : t == Q32_IQ4_NL ? sizeof(block_iq4_nlx8)
                             : sizeof(block_mxfp4x8);
}
ALWAYS_INLINE size_t q32_off_qs(const int t) {
    return t == Q32_Q4_1     ? offsetof(block_q4_1x8, qs)
           : t == Q32_Q5_0   ? offsetof(block_q5_0x8, qs)
           : t == Q32_Q5_1   ? offsetof(block_q5_1x8, qs)
           : t == Q32_IQ4_NL ? offsetof(block_iq4_nlx8, qs)
                             : offsetof(block_mxfp4x8, qs);
}
/* Q5_0 and Q5_1 only. */
ALWAYS_INLINE size_t q32_off_qh(const int t) {
    return t == Q32_Q5_0 ? offsetof(block_q5_0x8, qh) : offsetof(block_q5_1x8, qh);
}
ALWAYS_INLINE int q32_has_min(const int t) {
    return t == Q32_Q4_1 || t == Q32_Q5_1;
}
ALWAYS_INLINE int q32_is_q5(const int t) {
    return t == Q32_Q5_0 || t == Q32_Q5_1;
}

/* Packs rows [0, m) (m <= 8) of W (row stride w_row_bytes, nb blocks of
 * type) into one group of nb packed blocks at dst; rows m..7 are zero
 * weights (scales 0). type: GGML_TYPE_Q4_1, _Q5_0, _Q5_1 or _IQ4_NL. */
void kernel_pack_group_q32(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                           size_t m, size_t nb, uint32_t type);

/* The scalar tier: plain rows (dot_q32_scalar.c) and packed groups
 * (repack_q32.c), kernel_rows_fn each, act in Q8_0 with side data. */
KERNEL_ROWS_DECL(kernel_rows_q4_1_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_0_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_1_scalar);
KERNEL_ROWS_DECL(kernel_rows_iq4_nl_scalar);
KERNEL_ROWS_DECL(kernel_rows_q4_1_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_0_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_q5_1_r8_scalar);
KERNEL_ROWS_DECL(kernel_rows_iq4_nl_r8_scalar);
#if KERNEL_HAVE_AVX2
KERNEL_ROWS_DECL(kernel_rows_q4_1_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_0_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_1_avx2);
KERNEL_ROWS_DECL(kernel_rows_iq4_nl_avx2);
KERNEL_ROWS_DECL(kernel_rows_q4_1_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_0_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_q5_1_r8_avx2);
KERNEL_ROWS_DECL(kernel_rows_iq4_nl_r8_avx2);
#endif

#endif
