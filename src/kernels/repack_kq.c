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

/* Moves 4-byte words between a plain row's array (n_words words) and a
 * group's interleaved vectors: word v of row i <-> group bytes 32v + 4i. */
static void words_to_group(uint8_t *restrict g, const uint8_t *restrict row, size_t i,
                           int n_words) {
    for (int v = 0; v < n_words; v++)
        memcpy(g + 32 * v + 4 * i, row + 4 * v, 4);
}

static void words_from_group(uint8_t *restrict row, const uint8_t *restrict g, size_t i,
                             int n_words) {
    for (int v = 0; v < n_words; v++)
        memcpy(row + 4 * v, g + 32 * v + 4 * i, 4);
}

void kernel_pack_group_q2_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_q2_Kx8 *g = (block_q2_Kx8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_q2_K *src = (const block_q2_K *)(W + i * w_row_bytes) + b;
            g->d[i] = src->d;
            g->dmin[i] = src->dmin;
            words_to_group(g->scales, src->scales, i, 4);
            words_to_group(g->qs, src->qs, i, 16);
        }
    }
}

void kernel_pack_group_q3_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_q3_Kx8 *g = (block_q3_Kx8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_q3_K *src = (const block_q3_K *)(W + i * w_row_bytes) + b;
            g->d[i] = src->d;
            words_to_group(g->scales, src->scales, i, 3);
            words_to_group(g->hmask, src->hmask, i, 8);
            words_to_group(g->qs, src->qs, i, 16);
        }
    }
}

void kernel_pack_group_q5_K(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                            size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_q5_Kx8 *g = (block_q5_Kx8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_q5_K *src = (const block_q5_K *)(W + i * w_row_bytes) + b;
            g->d[i] = src->d;
            g->dmin[i] = src->dmin;
            words_to_group(g->scales, src->scales, i, 3);
            uint8_t qh[QK_K / 8];
            for (int l = 0; l < QK_K / 8; l++)
                qh[l] = q5_qh_regroup(src->qh[l]);
            words_to_group(g->qh, qh, i, 8);
            words_to_group(g->qs, src->qs, i, 32);
        }
    }
}

void kernel_pack_group_iq4_xs(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                              size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_iq4_xsx8 *g = (block_iq4_xsx8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_iq4_xs *src = (const block_iq4_xs *)(W + i * w_row_bytes) + b;
            g->d[i] = src->d;
            g->scales_h[i] = src->scales_h;
            memcpy(g->scales_l + 4 * i, src->scales_l, 4);
            words_to_group(g->qs, src->qs, i, 32);
        }
    }
}

/* ---- the inverse: row `lane` of a group back to a plain superblock ------- */

static void unpack_q2_K(block_q2_K *restrict y, const block_q2_Kx8 *restrict g, size_t i) {
    y->d = g->d[i];
    y->dmin = g->dmin[i];
    words_from_group(y->scales, g->scales, i, 4);
    words_from_group(y->qs, g->qs, i, 16);
}

static void unpack_q3_K(block_q3_K *restrict y, const block_q3_Kx8 *restrict g, size_t i) {
    y->d = g->d[i];
    words_from_group(y->scales, g->scales, i, 3);
    words_from_group(y->hmask, g->hmask, i, 8);
    words_from_group(y->qs, g->qs, i, 16);
}

static void unpack_q5_K(block_q5_K *restrict y, const block_q5_Kx8 *restrict g, size_t i) {
    y->d = g->d[i];
    y->dmin = g->dmin[i];
    words_from_group(y->scales, g->scales, i, 3);
    words_from_group(y->qh, g->qh, i, 8);
    for (int l = 0; l < QK_K / 8; l++)
        y->qh[l] = q5_qh_plain(y->qh[l]);
    words_from_group(y->qs, g->qs, i, 32);
}

static void unpack_iq4_xs(block_iq4_xs *restrict y, const block_iq4_xsx8 *restrict g, size_t i) {
    y->d = g->d[i];
    y->scales_h = g->scales_h[i];
    memcpy(y->scales_l, g->scales_l + 4 * i, 4);
    words_from_group(y->qs, g->qs, i, 32);
}

/* ---- scalar tier of the packed groups ------------------------------------ */

/* Each output row unpacked into tmp (a plain row of n_in: fewer bytes than
 * the KERNEL_TMP_ROWS * n_in floats of scratch), then the plain kernel. */
#define PACKED_ROWS_FN(name, plain_rows, blk_t, grp_t, unpack)                                     \
    KQ_ROWS_DECL(name) {                                                                           \
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
