/* AVX2 + FMA + F16C tier (with AVX-512 VNNI tiles where the build has
 * them) of Q4_1, Q5_0, Q5_1 and IQ4_NL weights in 8-row groups
 * (packed_q32.h) against Q8_0 activation rows. Compiled only when the
 * build targets such a CPU; the scalar tier is dot_q32_scalar.c and
 * repack_q32.c.
 *
 * The tiles are dot_avx2.c's Q4_0 tiles with a per-type step from the
 * nibbles to the bytes a dpbusd takes: Q4_1 the nibble, Q5_0 / Q5_1 the
 * nibble with its fifth bit ORed in (one shift and mask of the group's
 * regrouped qh word), IQ4_NL the grid value looked up by a byte shuffle
 * (+128 as u8 with VNNI, the -128 * S_x offset then the start value; the
 * signed value without VNNI, multiplied as |w| x sign(x, w)). Lane i of
 * every int32 vector is row i of a group; each lane's block sum is exact,
 * then packed_q32.h's float steps in order, so every tile gives the
 * scalar tier's bits. Not here: threading (matmul.c), the layouts
 * (repack_q32.c). */
#include "kernels/packed_q32.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "base/compiler.h"
#include "kernels/r8_tile_zmm.h"
#include "kernels/vnni.h"
#include "kernels/x8_tile.h"

/* Start value of a block's int32 sums: the offsets of unsigned forms. */
ALWAYS_INLINE int32_t q32_init(const kernel_act_side *sd, const int t) {
    if (t == Q32_Q5_0) return 2 * sd->neg8; /* -16 * S_x */
    if (t == Q32_IQ4_NL && KERNEL_VNNI) return sd->neg128;
    return 0;
}

/* IQ4_NL's grid in both 128-bit halves: +128 as u8 with VNNI, signed without. */
ALWAYS_INLINE __m256i iq4_table(void) {
    const int o = KERNEL_VNNI ? 128 : 0;
    return _mm256_setr_epi8((char)(-127 + o), (char)(-104 + o), (char)(-83 + o), (char)(-65 + o),
                            (char)(-49 + o), (char)(-35 + o), (char)(-22 + o), (char)(-10 + o),
                            (char)(1 + o), (char)(13 + o), (char)(25 + o), (char)(38 + o),
                            (char)(53 + o), (char)(69 + o), (char)(89 + o), (char)(113 + o),
                            (char)(-127 + o), (char)(-104 + o), (char)(-83 + o), (char)(-65 + o),
                            (char)(-49 + o), (char)(-35 + o), (char)(-22 + o), (char)(-10 + o),
                            (char)(1 + o), (char)(13 + o), (char)(25 + o), (char)(38 + o),
                            (char)(53 + o), (char)(69 + o), (char)(89 + o), (char)(113 + o));
}

/* Chunk c of a group block: the bytes for the low nibbles (elements
 * 4c + e) and the high ones (16 + 4c + e), per packed_q32.h. */
ALWAYS_INLINE void q32_chunk(const uint8_t *restrict wb, const int t, const int c, __m256i *lo,
                             __m256i *hi) {
    const __m256i m0f = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_loadu_si256((const __m256i *)(wb + q32_off_qs(t) + 32 * (size_t)c));
    __m256i l = _mm256_and_si256(v, m0f), h = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
    if (q32_is_q5(t)) {
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + q32_off_qh(t)));
        const __m256i b4 = _mm256_set1_epi8(0x10);
        l = _mm256_or_si256(l, _mm256_and_si256(_mm256_slli_epi32(qh, 4 - c), b4));
        h = _mm256_or_si256(h, _mm256_and_si256(_mm256_srli_epi32(qh, c), b4));
    }
    if (t == Q32_IQ4_NL) {
        l = _mm256_shuffle_epi8(iq4_table(), l);
        h = _mm256_shuffle_epi8(iq4_table(), h);
    }
    *lo = l;
    *hi = h;
}

/* One chunk's products into acc (int32 lanes): dpbusd with VNNI; without,
 * maddubs widened by madd at once (IQ4_NL as |w| x sign(x, w): a pair is
 * up to 2 * 127 * 127, so two cannot share an int16). */
ALWAYS_INLINE __m256i q32_dot(__m256i acc, __m256i w, __m256i x, const int t) {
#if KERNEL_VNNI
    (void)t;
    return kernel_dpbusd_vnni(acc, w, x);
#else
    const __m256i u = t == Q32_IQ4_NL ? _mm256_sign_epi8(w, w) : w;
    const __m256i s = t == Q32_IQ4_NL ? _mm256_sign_epi8(x, w) : x;
    return chain_pin(
        _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))));
#endif
}

/* Without VNNI the unsigned types sum maddubs pairs in int16 before one
 * madd widens them: a pair of a nibble and an int8 is at most 2 * 15 * 127
 * = 3810 (8 per block: 30480), of a 5-bit quant 7874 (4 per sum: 31496). */
#define Q32_INT16(t) (!KERNEL_VNNI && (t) != Q32_IQ4_NL)

/* MG groups (gs bytes apart) x MX activation rows over nb blocks; stores
 * the first n_valid of the 8 * MG output columns. */
ALWAYS_INLINE void q32_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                            size_t gs, const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                            size_t n_valid, const int t, const int MG, const int MX) {
    const size_t GB = q32_gb(t), soff = kernel_act_side_off(nb);
    const int NS = MX == 1 ? 2 : 1; /* one row: low and high nibbles in two chains */
    __m256 acc[2][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        __m256i is[2][4][2], s16[2][4];
        const x8_act8 ab = x8_act_q8_0(act, act_row_bytes, soff, b, MX);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
#pragma GCC unroll 2
            for (int g = 0; g < MG; g++) {
                is[g][j][0] = _mm256_set1_epi32(q32_init(ab.sd[j], t));
                is[g][j][1] = s16[g][j] = _mm256_setzero_si256();
            }
        }
        const uint8_t *wb[2];
        x8_group_blocks(wb, G, gs, b, GB, 8, MG, MX);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i lo[2], hi[2];
#pragma GCC unroll 2
            for (int g = 0; g < MG; g++)
                q32_chunk(wb[g], t, c, &lo[g], &hi[g]);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256i xl = x8_bcast4(ab.xq[j] + 4 * c),
                              xh = x8_bcast4(ab.xq[j] + 16 + 4 * c);
#pragma GCC unroll 2
                for (int g = 0; g < MG; g++) {
                    if (Q32_INT16(t)) { /* both chunks' pairs in the int16 sum */
                        s16[g][j] = chain_pin(_mm256_add_epi16(
                            s16[g][j], _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl),
                                                        _mm256_maddubs_epi16(hi[g], xh))));
                        continue;
                    }
                    is[g][j][0] = q32_dot(is[g][j][0], lo[g], xl, t);
                    is[g][j][NS - 1] = q32_dot(is[g][j][NS - 1], hi[g], xh, t);
                }
            }
            /* widen: Q4_1 once a block (8 maddubs), Q5 every 4 (their pairs are 4x bigger) */
            if (Q32_INT16(t) && (c == 3 || (c == 1 && q32_is_q5(t)))) {
#pragma GCC unroll 2
                for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                    for (int j = 0; j < MX; j++) {
                        is[g][j][0] = _mm256_add_epi32(
                            is[g][j][0], _mm256_madd_epi16(s16[g][j], _mm256_set1_epi16(1)));
                        s16[g][j] = _mm256_setzero_si256();
                    }
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < MG; g++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb[g]));
            const __m256 mw = q32_has_min(t)
                                  ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(wb[g] + 16)))
                                  : _mm256_setzero_ps();
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256 dx = _mm256_set1_ps(ab.sd[j]->d);
                const __m256i s =
                    NS == 2 ? _mm256_add_epi32(is[g][j][0], is[g][j][1]) : is[g][j][0];
                acc[g][j] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, dx), acc[g][j]);
                if (q32_has_min(t))
                    acc[g][j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(ab.sd[j]->s), acc[g][j]);
            }
        }
    }
    x8_store(out, ld_out, acc, n_valid, MG, MX);
}

/* ---- AVX-512 VNNI: two groups per zmm, and one row's pair vectors -------- */

#if R8_ZMM

ALWAYS_INLINE __m512i iq4_table_z(void) {
    return _mm512_broadcast_i64x4(iq4_table());
}

/* q32_chunk for groups g, g + 1 (gs bytes apart), chunk c of block wb. */
ALWAYS_INLINE void q32_chunk_z(const uint8_t *restrict wb, size_t gs, const int t, const int c,
                               __m512i *lo, __m512i *hi) {
    const __m512i m0f = _mm512_set1_epi8(0x0f);
    const __m512i v = z_pair(wb, gs, q32_off_qs(t) + 32 * (size_t)c);
    __m512i l = _mm512_and_si512(v, m0f), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
    if (q32_is_q5(t)) {
        const __m512i qh = z_pair(wb, gs, q32_off_qh(t)), b4 = _mm512_set1_epi8(0x10);
        l = _mm512_or_si512(l, _mm512_and_si512(_mm512_slli_epi32(qh, 4 - c), b4));
        h = _mm512_or_si512(h, _mm512_and_si512(_mm512_srli_epi32(qh, c), b4));
    }
    if (t == Q32_IQ4_NL) {
        l = _mm512_shuffle_epi8(iq4_table_z(), l);
        h = _mm512_shuffle_epi8(iq4_table_z(), h);
    }
    *lo = l;
    *hi = h;
}

/* 2 * MP groups (MP <= 3) x MX activation rows over nb blocks; stores the
 * first n_valid of the 16 * MP output columns (r8_tile_z's shape). */
ALWAYS_INLINE void q32_tile_z(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                              size_t gs, const uint8_t *restrict act, size_t act_row_bytes,
                              size_t nb, size_t n_valid, const int t, const int MP, const int MX) {
    const size_t GB = q32_gb(t), soff = kernel_act_side_off(nb);
    __m512 acc[3][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        __m512i is[3][4];
        const x8_act8 ab = x8_act_q8_0(act, act_row_bytes, soff, b, MX);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
#pragma GCC unroll 3
            for (int p = 0; p < MP; p++)
                is[p][j] = _mm512_set1_epi32(q32_init(ab.sd[j], t));
        const uint8_t *wb[3];
        z_pair_blocks(wb, G, gs, b, GB, MP);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m512i lo[3], hi[3];
#pragma GCC unroll 3
            for (int p = 0; p < MP; p++)
                q32_chunk_z(wb[p], gs, t, c, &lo[p], &hi[p]);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m512i xl = z_bcast4(ab.xq[j] + 4 * c), xh = z_bcast4(ab.xq[j] + 16 + 4 * c);
#pragma GCC unroll 3
                for (int p = 0; p < MP; p++)
                    is[p][j] =
                        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(is[p][j], lo[p], xl), hi[p], xh);
            }
        }
#pragma GCC unroll 3
        for (int p = 0; p < MP; p++) {
            const __m512 dw = z_half_pair(wb[p], gs, 0);
            const __m512 mw = q32_has_min(t) ? z_half_pair(wb[p], gs, 16) : _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m512 dx = _mm512_set1_ps(ab.sd[j]->d);
                acc[p][j] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[p][j]), _mm512_mul_ps(dw, dx), acc[p][j]);
                if (q32_has_min(t))
                    acc[p][j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(ab.sd[j]->s), acc[p][j]);
            }
        }
    }
    z_store_tile(out, ld_out, acc, n_valid, MP, MX);
}

#endif /* R8_ZMM */

/* ---- the rows kernels ---------------------------------------------------- */

/* All activation rows against n_groups groups at G (gs bytes apart); out
 * column 0 is the first group's first row; n_valid columns exist. Beside
 * 2..4 rows: zmm pairs (R8_ZMM: 3 pairs, then 1), then X8_MG groups (4
 * rows); then one group a tile. */
ALWAYS_INLINE void q32_rows(float *restrict out, size_t ld_out, const uint8_t *restrict G,
                            size_t gs, size_t n_groups, size_t n_valid, const uint8_t *restrict act,
                            size_t act_row_bytes, size_t n_rows_x, size_t nb, const int t) {
#define Q32_TILE(g, MG)  q32_tile(X8_AT(g), n_valid - (g)*8, t, MG, MX)
#define Q32_TILE_Z(g, K) q32_tile_z(X8_AT(g), n_valid - (g)*8, t, (K) / 2, MX)
#define Q32_PASS()                                                                                 \
    if (MX > 1) {                                                                                  \
        X8_PAIR_STEPS(Q32_TILE_Z, 6);                                                              \
        X8_PAIR_STEPS(Q32_TILE_Z, 2);                                                              \
    }                                                                                              \
    if (MX == 4) X8_GROUP_STEPS(Q32_TILE, X8_MG);                                                  \
    X8_GROUP_STEPS(Q32_TILE, 1)
    X8_ROW_PASSES(Q32_PASS);
#undef Q32_PASS
#undef Q32_TILE_Z
#undef Q32_TILE
}

static const uint32_t q32_ggml_type[4] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                          GGML_TYPE_IQ4_NL};

/* Packed: o0, o1 multiples of 8. */
ALWAYS_INLINE void q32_packed(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                              size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                              size_t act_row_bytes, size_t n_rows_x, size_t n_in,
                              float *restrict tmp, const int t) {
    q32_rows(out + o0, ld_out, W + o0 * w_row_bytes, 8 * w_row_bytes, (o1 - o0 + 7) / 8, o1 - o0,
             act, act_row_bytes, n_rows_x, n_in / QK8_0, t);
}

/* Plain: up to 2 groups of the range packed into tmp, then the same tiles
 * (so plain and packed give the same bits). */
ALWAYS_INLINE void q32_plain(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                             size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                             size_t act_row_bytes, size_t n_rows_x, size_t n_in,
                             float *restrict tmp, const int t) {
    const size_t nb = n_in / QK8_0;
    uint8_t *pk = (uint8_t *)tmp;
    for (size_t o = o0; o < o1; o += 16) {
        const size_t m = x8_pack_tile(pk, W + o * w_row_bytes, w_row_bytes, o1 - o, nb,
                                      kernel_pack_group_q32, q32_ggml_type[t]);
        q32_rows(out + o, ld_out, pk, 8 * w_row_bytes, (m + 7) / 8, m, act, act_row_bytes, n_rows_x,
                 nb, t);
    }
}

#define Q32_FNS(name, t)                                                                           \
    KERNEL_ROWS_DECL(kernel_rows_##name##_avx2) {                                                  \
        q32_plain(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp,    \
                  t);                                                                              \
    }                                                                                              \
    KERNEL_ROWS_DECL(kernel_rows_##name##_r8_avx2) {                                               \
        q32_packed(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp,   \
                   t);                                                                             \
    }

Q32_FNS(q4_1, Q32_Q4_1)
Q32_FNS(q5_0, Q32_Q5_0)
Q32_FNS(q5_1, Q32_Q5_1)
Q32_FNS(iq4_nl, Q32_IQ4_NL)

#endif /* KERNEL_HAVE_AVX2 */
