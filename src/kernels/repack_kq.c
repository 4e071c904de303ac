/* Q2_K, Q3_K, Q5_K and IQ4_XS in 8-row interleaved groups (packed_kq.h has
 * the layouts): the packers, their inverse, and the scalar tier of the
 * packed groups, which unpacks a row back into plain superblocks (in the
 * rows kernel's scratch) and runs the plain scalar dot on it. Not here:
 * the vector tiles (dot_kq_x8_avx2.c, dot_kquant_x8_avx2.c). */
#include <string.h>

#include "kernels/packed_kq.h"

/* Q5_K's fifth bits of one plain row regrouped (packed_kq.h): byte l,
 * bit k <- bit 2k, bit 4 + k <- bit 2k + 1. */
static uint8_t q5_qh_regroup(uint8_t v) {
    uint8_t r = 0;
    for (int k = 0; k < 4; k++)
        r |= (uint8_t)(((v >> (2 * k)) & 1) << k | ((v >> (2 * k + 1)) & 1) << (4 + k));
    return r;
}

static uint8_t q5_qh_plain(uint8_t r) {
    uint8_t v = 0;
    for (int k = 0; k < 4; k++)
        v |= (uint8_t)(((r >> k) & 1) << (2 * k) | ((r >> (4 + k)) & 1) << (2 * k + 1));
    return v;
}

/* ---- one table per type: where each field goes (packed_kq.h) ------------- */

static const kq_field q2_K_fields[] = {
    KQ_F(block_q2_K, block_q2_Kx8, d, 0), KQ_F(block_q2_K, block_q2_Kx8, dmin, 0),
    KQ_F(block_q2_K, block_q2_Kx8, scales, 4), KQ_F(block_q2_K, block_q2_Kx8, qs, 16)};
static const kq_field q3_K_fields[] = {
    KQ_F(block_q3_K, block_q3_Kx8, d, 0), KQ_F(block_q3_K, block_q3_Kx8, scales, 3),
    KQ_F(block_q3_K, block_q3_Kx8, hmask, 8), KQ_F(block_q3_K, block_q3_Kx8, qs, 16)};
static const kq_field q5_K_fields[] = {
    KQ_F(block_q5_K, block_q5_Kx8, d, 0), KQ_F(block_q5_K, block_q5_Kx8, dmin, 0),
    KQ_F(block_q5_K, block_q5_Kx8, scales, 3), KQ_F(block_q5_K, block_q5_Kx8, qh, 8),
    KQ_F(block_q5_K, block_q5_Kx8, qs, 32)};
static const kq_field iq4_xs_fields[] = {
    KQ_F(block_iq4_xs, block_iq4_xsx8, d, 0), KQ_F(block_iq4_xs, block_iq4_xsx8, scales_h, 0),
    KQ_F(block_iq4_xs, block_iq4_xsx8, scales_l, 1), KQ_F(block_iq4_xs, block_iq4_xsx8, qs, 32)};

void kernel_pack_group_q2_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    kq_pack(dst, W, w_row_bytes, nb, sizeof(block_q2_K), KQ_TABLE(q2_K_fields));
}

void kernel_pack_group_q3_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    kq_pack(dst, W, w_row_bytes, nb, sizeof(block_q3_K), KQ_TABLE(q3_K_fields));
}

void kernel_pack_group_iq4_xs(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                              size_t nb) {
    kq_pack(dst, W, w_row_bytes, nb, sizeof(block_iq4_xs), KQ_TABLE(iq4_xs_fields));
}

/* Q5_K: each plain block's fifth bits regrouped in a copy first. */
void kernel_pack_group_q5_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    for (size_t b = 0; b < nb; b++)
        for (size_t i = 0; i < 8; i++) {
            block_q5_K y = ((const block_q5_K *)(W + i * w_row_bytes))[b];
            for (int l = 0; l < QK_K / 8; l++)
                y.qh[l] = q5_qh_regroup(y.qh[l]);
            kq_move(dst + b * sizeof(block_q5_Kx8), (const uint8_t *)&y, i, KQ_TABLE(q5_K_fields),
                    1);
        }
}

/* ---- the inverse: row `lane` of a group back to a plain superblock ------- */

static void unpack_q2_K(block_q2_K *restrict y, const block_q2_Kx8 *restrict g, size_t i) {
    kq_move((uint8_t *)y, (const uint8_t *)g, i, KQ_TABLE(q2_K_fields), 0);
}

static void unpack_q3_K(block_q3_K *restrict y, const block_q3_Kx8 *restrict g, size_t i) {
    kq_move((uint8_t *)y, (const uint8_t *)g, i, KQ_TABLE(q3_K_fields), 0);
}

static void unpack_q5_K(block_q5_K *restrict y, const block_q5_Kx8 *restrict g, size_t i) {
    kq_move((uint8_t *)y, (const uint8_t *)g, i, KQ_TABLE(q5_K_fields), 0);
    for (int l = 0; l < QK_K / 8; l++)
        y->qh[l] = q5_qh_plain(y->qh[l]);
}

static void unpack_iq4_xs(block_iq4_xs *restrict y, const block_iq4_xsx8 *restrict g, size_t i) {
    kq_move((uint8_t *)y, (const uint8_t *)g, i, KQ_TABLE(iq4_xs_fields), 0);
}

/* ---- scalar tier of the packed groups ------------------------------------ */

/* Each output row unpacked into tmp (a plain row of n_in: fewer bytes than
 * the KERNEL_TMP_ROWS * n_in floats of scratch), then the plain kernel. */
#define PACKED_ROWS_FN(name, plain_rows, blk_t, grp_t, unpack)                                     \
    KERNEL_ROWS_DECL(name) {                                                                       \
        const size_t nb = n_in / QK_K;                                                             \
        blk_t *row = (blk_t *)tmp;                                                                 \
        for (size_t o = o0; o < o1; o++) {                                                         \
            const grp_t *g = (const grp_t *)(W + (o / 8 * 8) * w_row_bytes);                       \
            for (size_t b = 0; b < nb; b++)                                                        \
                unpack(&row[b], &g[b], o % 8);                                                     \
            plain_rows(out + o, ld_out, (const uint8_t *)row, w_row_bytes, 0, 1, act,              \
                       act_row_bytes, n_rows_x, n_in, NULL);                                       \
        }                                                                                          \
    }

PACKED_ROWS_FN(kernel_rows_q2_K_r8_scalar, kernel_rows_q2_K_scalar, block_q2_K, block_q2_Kx8,
               unpack_q2_K)
PACKED_ROWS_FN(kernel_rows_q3_K_r8_scalar, kernel_rows_q3_K_scalar, block_q3_K, block_q3_Kx8,
               unpack_q3_K)
PACKED_ROWS_FN(kernel_rows_q5_K_r8_scalar, kernel_rows_q5_K_scalar, block_q5_K, block_q5_Kx8,
               unpack_q5_K)
PACKED_ROWS_FN(kernel_rows_iq4_xs_r8_scalar, kernel_rows_iq4_xs_scalar, block_iq4_xs,
               block_iq4_xsx8, unpack_iq4_xs)
