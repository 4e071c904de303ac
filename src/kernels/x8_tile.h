/* Internal to the AVX2 tier's tile files (dot_*_avx2.c and their zmm
 * headers): the scaffolding every tile over 8-row weight groups shares, so
 * that a tile file holds only its type's integer and float steps. Here:
 * the activation rows of one tile, the store of its ymm accumulators,
 * the broadcast activation word, and the order in which a rows kernel runs
 * its tiles. Not here: any type's arithmetic, the zmm accumulators
 * (r8_tile_zmm.h), threading (matmul.c).
 *
 * Everything is ALWAYS_INLINE with the tile shape (MG groups x MX
 * activation rows) a constant, as in the tiles themselves: after inlining
 * the loops unroll and the arrays stay in registers, so a tile compiles to
 * what it did with these steps written out in it. */
#ifndef TPS_KERNELS_X8_TILE_H
#define TPS_KERNELS_X8_TILE_H

#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */

/* Activation rows j < MX of a tile, Q8_K (act_row_bytes apart). */
ALWAYS_INLINE void x8_act_q8_K(const block_q8_K *x[4], const uint8_t *restrict act,
                               size_t act_row_bytes, const int MX) {
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++)
        x[j] = (const block_q8_K *)(act + (size_t)j * act_row_bytes);
}

/* x8_act_q8_K and each row's kernel_act_k_side, soff bytes after its first
 * block (kernel_act_k_side_off(nb) for a whole row). */
ALWAYS_INLINE void x8_act_q8_K_side(const block_q8_K *x[4], const kernel_act_k_side *sd[4],
                                    const uint8_t *restrict act, size_t act_row_bytes, size_t soff,
                                    const int MX) {
    x8_act_q8_K(x, act, act_row_bytes, MX);
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++)
        sd[j] = (const kernel_act_k_side *)((const uint8_t *)x[j] + soff);
}

/* Block b of a tile's activation rows j < MX, Q8_0 with side data: its
 * quants and its kernel_act_side (x8_act_q8_0). */
typedef struct x8_act8 {
    const int8_t *xq[4];
    const kernel_act_side *sd[4];
} x8_act8;

/* soff = kernel_act_side_off(nb); rows act_row_bytes apart. */
ALWAYS_INLINE x8_act8 x8_act_q8_0(const uint8_t *restrict act, size_t act_row_bytes, size_t soff,
                                  size_t b, const int MX) {
    x8_act8 r = {{NULL}, {NULL}};
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++) {
        const uint8_t *a = act + (size_t)j * act_row_bytes;
        r.xq[j] = ((const block_q8_0 *)a + b)->qs;
        r.sd[j] = (const kernel_act_side *)(a + soff) + b;
    }
    return r;
}

/* Block b of groups g < MG (G, gs bytes apart; GB bytes a block) in
 * wb[g], with a prefetch: one activation row streams the weights, so
 * every line of the block PREFETCH_AHEAD_BYTES on (prefetch_block_ahead);
 * beside more rows a block is read for longer, and one line `ahead`
 * blocks on is asked for. */
ALWAYS_INLINE void x8_group_blocks(const uint8_t **wb, const uint8_t *restrict G, size_t gs,
                                   size_t b, size_t GB, size_t ahead, const int MG, const int MX) {
#pragma GCC unroll 4
    for (int g = 0; g < MG; g++) {
        wb[g] = G + (size_t)g * gs + b * GB;
        if (MX == 1)
            prefetch_block_ahead(wb[g], GB);
        else
            _mm_prefetch((const char *)(wb[g] + ahead * GB), _MM_HINT_T0);
    }
}

/* The 4 int8 activations at p as one int32, in every lane: the word a
 * dpbusd (or its maddubs stand-in) multiplies a group's 8 rows by. */
ALWAYS_INLINE __m256i x8_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Stores a tile: group g's 8 rows at column 8 g of activation row j
 * (out + j * ld_out), the first n_valid columns only (n_valid >= 8 * MG
 * stores them all; a constant one compiles to plain stores). */
ALWAYS_INLINE void x8_store(float *restrict out, size_t ld_out, __m256 (*acc)[4], size_t n_valid,
                            const int MG, const int MX) {
#pragma GCC unroll 4
    for (int g = 0; g < MG; g++) {
        const size_t first = (size_t)g * 8;
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            float *o = out + (size_t)j * ld_out + first;
            if (n_valid >= first + 8) {
                _mm256_storeu_ps(o, acc[g][j]);
            } else if (n_valid > first) {
                float t[8];
                _mm256_storeu_ps(t, acc[g][j]);
                /* < 8 here; said again for GCC's -O1 bounds check */
                const size_t k = n_valid - first < 8 ? n_valid - first : 8;
                memcpy(o, t, k * sizeof(float));
            }
        }
    }
}

/* Packs rows [0, m) (m <= 8) of W (w_row_bytes apart, nb blocks) into one
 * group at dst, rows m..7 zero weights; type says which format, for the
 * packers that serve several (kernel_pack_group_q32). */
typedef void (*x8_pack_fn)(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                           size_t m, size_t nb, uint32_t type);

/* A plain rows kernel's step: the next min(left, 16) weight rows of W
 * packed into up to two groups at pk (8 * w_row_bytes apart, thread
 * scratch), so that the packed tiles run on them and plain and packed
 * rows give the same bits. Returns how many rows it packed. */
ALWAYS_INLINE size_t x8_pack_tile(uint8_t *restrict pk, const uint8_t *restrict W,
                                  size_t w_row_bytes, size_t left, size_t nb, x8_pack_fn pack,
                                  uint32_t type) {
    const size_t m = left < 16 ? left : 16;
    for (size_t k = 0; 8 * k < m; k++) {
        const size_t mk = m - 8 * k < 8 ? m - 8 * k : 8;
        pack(pk + 8 * k * w_row_bytes, W + 8 * k * w_row_bytes, w_row_bytes, mk, nb, type);
    }
    return m;
}

/* Groups per ymm tile beside several activation rows: two groups'
 * accumulators, int32 sums and weight vectors fit AVX-512VL's 32
 * registers; with 16, one group. (The rows kernels say where one activation
 * row, or a type, takes fewer.) */
#if defined(__AVX512VL__)
#define X8_MG 2
#else
#define X8_MG 1
#endif

/* ---- the order of a rows kernel's tiles ----------------------------------
 *
 * Activation rows four at a time while they last, then one pass over the
 * 1..3 left, so that every pass has its row count MX as a constant, as the
 * tiles need: the tiles take their shape as constants, which C can only
 * give a loop over shapes through a macro. X8_ROW_PASSES(PASS) runs in a
 * function whose arguments are named as a rows kernel's (out, ld_out, act,
 * act_row_bytes, n_rows_x); PASS() is one pass over the groups, with in
 * scope a (its first activation row), o_r (its first output row), MX and
 * g (the next group, 0 at the start). */
#define X8_ROW_PASSES(PASS)                                                                        \
    do {                                                                                           \
        size_t r_ = 0;                                                                             \
        for (; r_ + 4 <= n_rows_x; r_ += 4)                                                        \
            X8_PASS_AT_(PASS, r_, 4);                                                              \
        switch (n_rows_x - r_) {                                                                   \
        case 3:                                                                                    \
            X8_PASS_AT_(PASS, r_, 3);                                                              \
            break;                                                                                 \
        case 2:                                                                                    \
            X8_PASS_AT_(PASS, r_, 2);                                                              \
            break;                                                                                 \
        case 1:                                                                                    \
            X8_PASS_AT_(PASS, r_, 1);                                                              \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)
#define X8_PASS_AT_(PASS, r, MX_)                                                                  \
    do {                                                                                           \
        const uint8_t *a = act + (r)*act_row_bytes;                                                \
        float *o_r = out + (r)*ld_out;                                                             \
        const int MX = (MX_);                                                                      \
        size_t g = 0;                                                                              \
        PASS();                                                                                    \
        (void)a, (void)o_r, (void)g, (void)MX;                                                     \
    } while (0)

/* Within a pass: TILE(g, K) for groups g .. g + K - 1, K at a time while
 * whole steps of K remain before n_groups. */
#define X8_GROUP_STEPS(TILE, K)                                                                    \
    for (; g + (K) <= n_groups; g += (K))                                                          \
    TILE(g, K)

/* The first arguments of a tile at group g of a pass: its output, the
 * groups from g (gs bytes apart, G the first), its activation rows, nb. */
#define X8_AT(g) o_r + (g)*8, ld_out, G + (g)*gs, gs, a, act_row_bytes, nb

#endif /* KERNEL_HAVE_AVX2 */

#endif
