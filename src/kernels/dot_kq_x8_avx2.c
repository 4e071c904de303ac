/* AVX2 + FMA + F16C tier (VNNI where the build has it) of Q2_K, Q3_K and
 * IQ4_XS weights in 8-row groups (packed_kq.h) against Q8_K activation
 * rows. Compiled only when the build targets such a CPU; the scalar tier
 * is dot_kq_scalar.c and repack_kq.c, Q5_K's tiles are Q4_K's
 * (dot_kquant_x8_avx2.c).
 *
 * Lane i of every int32 vector is row i of a group, so a 32-byte load of
 * quants serves 8 rows and the per-row scales are vectors too, as in the
 * Q4_K / Q6_K tiles. Each sub-block's sum runs in its own accumulator,
 * started at its offset so that it is exact for the signed values: Q3_K's
 * unsigned q + 4 starts at -4 * bsum, IQ4_XS's grid + 128 (VNNI) at
 * -128 * its activation sum. Without VNNI a sub-block's maddubs pairs stay
 * in int16 (Q2_K: 8 x 3 x 127, Q3_K: 8 x 7 x 127 + 4 x 2032; IQ4_XS's
 * |w| x sign(x, w) pairs are widened one by one) and one madd by the scale
 * widens them. The integers are the scalar tier's, then its float steps in
 * order, so every tile gives its bits. Not here: threading (matmul.c). */
#include "kernels/packed_kq.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "base/compiler.h"
#include "kernels/vnni.h"
#include "kernels/x8_tile.h"

enum { KQ_Q2_K, KQ_Q3_K, KQ_IQ4_XS };

ALWAYS_INLINE size_t kq_gb(const int t) {
    return t == KQ_Q2_K   ? sizeof(block_q2_Kx8)
           : t == KQ_Q3_K ? sizeof(block_q3_Kx8)
                          : sizeof(block_iq4_xsx8);
}

/* Sub-blocks per superblock and chunks (32-byte quant vectors) per sub-block. */
ALWAYS_INLINE int kq_nsub(const int t) {
    return t == KQ_IQ4_XS ? 8 : 16;
}

ALWAYS_INLINE __m256i kq_load(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}

/* The products of one chunk added to a sub-block's sum: dpbusd (int32)
 * with VNNI; without, maddubs pairs in int16 (Q2_K, Q3_K) or, for
 * IQ4_XS's signed grid, |w| x sign(x, w) widened at once. */
ALWAYS_INLINE __m256i kq_dot(__m256i acc, __m256i w, __m256i x, const int t) {
#if KERNEL_VNNI
    (void)t;
    return kernel_dpbusd_vnni(acc, w, x);
#else
    if (t == KQ_IQ4_XS)
        return chain_pin(_mm256_add_epi32(
            acc,
            _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)),
                              _mm256_set1_epi16(1))));
    return chain_pin(_mm256_add_epi16(acc, _mm256_maddubs_epi16(w, x)));
#endif
}

/* acc (kq_dot's form) times the lanes' int32 scales sc, exact in int32. */
ALWAYS_INLINE __m256i kq_scale(__m256i acc, __m256i sc, const int t) {
#if KERNEL_VNNI
    (void)t;
    return _mm256_mullo_epi32(acc, sc);
#else
    if (t == KQ_IQ4_XS) return _mm256_mullo_epi32(acc, sc);
    const __m256i pair =
        _mm256_or_si256(_mm256_and_si256(sc, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(sc, 16));
    return _mm256_madd_epi16(acc, pair);
#endif
}

/* ---- per type: quants, scales, offsets ----------------------------------- */

/* Q2_K / Q3_K sub-block k = 8h + 2s + half, chunk c < 4: qs vector
 * 8h + 4 half + c, bits 2s; activation word 32h + 8s + 4 half + c. */
ALWAYS_INLINE __m256i kq_low2(const uint8_t *qs, const int k, const int c) {
    const int h = k / 8, s = k % 8 / 2, cc = 4 * (k % 2) + c;
    const __m256i v = kq_load(qs + (size_t)(8 * h + cc) * 32);
    return _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), _mm256_set1_epi8(3));
}

/* Q3_K's unsigned q + 4 = low 2 bits | high bit << 2 of sub-block k, chunk c. */
ALWAYS_INLINE __m256i kq_q3(const block_q3_Kx8 *g, const int k, const int c) {
    const int h = k / 8, s = k % 8 / 2, cc = 4 * (k % 2) + c, sh = 4 * h + s - 2;
    const __m256i hm = kq_load(g->hmask + (size_t)cc * 32);
    const __m256i hb = sh >= 0 ? _mm256_srli_epi16(hm, sh) : _mm256_slli_epi16(hm, -sh);
    return _mm256_or_si256(kq_low2(g->qs, k, c), _mm256_and_si256(hb, _mm256_set1_epi8(4)));
}

/* Q3_K's 16 signed scales, 4 per vector (byte t of lane i: row i's
 * sub-block 4w + t), unpacked from the 3 words per row as the plain
 * dequantizer does, minus 32. */
ALWAYS_INLINE void kq_q3_scales(const block_q3_Kx8 *g, __m256i aux[4]) {
    const __m256i u0 = kq_load(g->scales), u1 = kq_load(g->scales + 32);
    const __m256i u2 = kq_load(g->scales + 64);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), b32 = _mm256_set1_epi8(32);
    const __m256i hi0 = _mm256_slli_epi32(_mm256_and_si256(u2, m2), 4);
    const __m256i hi1 = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 2), m2), 4);
    const __m256i hi2 = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m2), 4);
    const __m256i hi3 = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u2, 6), m2), 4);
    aux[0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(u0, m4), hi0), b32);
    aux[1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(u1, m4), hi1), b32);
    aux[2] =
        _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u0, 4), m4), hi2), b32);
    aux[3] =
        _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u1, 4), m4), hi3), b32);
}

/* Signed byte t of each lane as int32. */
ALWAYS_INLINE __m256i kq_sbyte(__m256i v, const int t) {
    return _mm256_srai_epi32(_mm256_slli_epi32(v, 24 - 8 * t), 24);
}

/* Q2_K sub-block k's scale (low nibble of byte k % 4 of scales vector k / 4). */
ALWAYS_INLINE __m256i kq_q2_scale(const block_q2_Kx8 *g, const int k) {
    const __m256i sw = kq_load(g->scales + (size_t)(k / 4) * 32);
    return _mm256_and_si256(_mm256_srli_epi32(sw, 8 * (k % 4)), _mm256_set1_epi32(15));
}

/* IQ4_XS sub-block ib's scale ls - 32 per lane. */
ALWAYS_INLINE __m256i kq_iq4_scale(const block_iq4_xsx8 *g, const int ib) {
    const __m256i sl = kq_load(g->scales_l);
    const __m256i sh = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)g->scales_h));
    const __m256i lo =
        _mm256_and_si256(_mm256_srli_epi32(sl, 8 * (ib / 2) + 4 * (ib % 2)), _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(sh, 2 * ib), _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
}

/* IQ4_XS's grid in both 128-bit halves: +128 as u8 with VNNI, signed without. */
ALWAYS_INLINE __m256i kq_iq4_table(void) {
    const __m128i v = _mm_loadu_si128((const __m128i *)kvalues_iq4nl);
    const __m256i t = _mm256_broadcastsi128_si256(v);
    return KERNEL_VNNI ? _mm256_xor_si256(t, _mm256_set1_epi8((char)0x80)) : t;
}

/* The int32 lanes' sum_k m_k * bsum_k of a Q2_K group (mins: high nibbles
 * of the scale bytes; int16 pairs madd'ed with pairs of bsums). */
ALWAYS_INLINE __m256i kq_q2_mins(const block_q2_Kx8 *g, const kernel_act_k_side *sd) {
    const int32_t *bp = sd->q6; /* (bsum_4w, bsum_4w+2), (bsum_4w+1, bsum_4w+3) */
    const __m256i even = _mm256_set1_epi32(0x00ff00ff);
    __m256i im = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int w = 0; w < 4; w++) {
        const __m256i mb = _mm256_and_si256(_mm256_srli_epi16(kq_load(g->scales + 32 * w), 4),
                                            _mm256_set1_epi8(0x0f));
        im = _mm256_add_epi32(
            im, _mm256_madd_epi16(_mm256_and_si256(mb, even), _mm256_set1_epi32(bp[2 * w])));
        im =
            _mm256_add_epi32(im, _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi32(mb, 8), even),
                                                   _mm256_set1_epi32(bp[2 * w + 1])));
    }
    return im;
}

/* The sub-blocks' start values of one activation block: the offsets that
 * make each sum signed-exact, in kq_dot's form (Q3_K without VNNI: an
 * int16 in the low half), computed once per superblock and row. */
ALWAYS_INLINE void kq_inits(const block_q8_K *x, const int t, int32_t init[16]) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    const __m256i lo = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(bs));
    const __m256i hi = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(bs, 1));
    if (t == KQ_Q3_K) {
        __m256i a = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(lo, 2));
        __m256i b = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(hi, 2));
        if (!KERNEL_VNNI) {
            a = _mm256_and_si256(a, _mm256_set1_epi32(0xffff));
            b = _mm256_and_si256(b, _mm256_set1_epi32(0xffff));
        }
        _mm256_storeu_si256((__m256i *)init, a);
        _mm256_storeu_si256((__m256i *)(init + 8), b);
    } else if (t == KQ_IQ4_XS && KERNEL_VNNI) {
        /* -128 * (bsum 2k + bsum 2k+1): pairs added by one madd */
        const __m256i s = _mm256_madd_epi16(bs, _mm256_set1_epi16(-128));
        _mm256_storeu_si256((__m256i *)init, s);
    }
}

/* ---- the tile ------------------------------------------------------------ */

/* MG groups (gs bytes apart) x MX activation rows over nb superblocks;
 * writes 8 * MG columns of MX rows. */
ALWAYS_INLINE void kq_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G, size_t gs,
                           const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                           const int t, const int MG, const int MX) {
    const size_t GB = kq_gb(t);
    const block_q8_K *x[4];
    const kernel_act_k_side *sd[4];
    x8_act_q8_K_side(x, sd, act, act_row_bytes, kernel_act_k_side_off(nb), MX);
    __m256 acc[2][4] = {{{0}}};
    const __m256i tbl = kq_iq4_table(), m0f = _mm256_set1_epi8(0x0f);
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *gb[2];
        __m256i is[2][4], q3s[2][4];
        _Alignas(32) int32_t init[4][16] = {{0}};
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            kq_inits(&x[j][b], t, init[j]);
        x8_group_blocks(gb, G, gs, b, GB, 4, MG, MX);
#pragma GCC unroll 2
        for (int g = 0; g < MG; g++) {
            if (t == KQ_Q3_K) kq_q3_scales((const block_q3_Kx8 *)gb[g], q3s[g]);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++)
                is[g][j] = _mm256_setzero_si256();
        }
#pragma GCC unroll 16
        for (int k = 0; k < kq_nsub(t); k++) {
            __m256i s[2][4];
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256i i0 = _mm256_set1_epi32(init[j][k]);
#pragma GCC unroll 2
                for (int g = 0; g < MG; g++)
                    s[g][j] = i0;
            }
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i q[2], q2[2];
#pragma GCC unroll 2
                for (int g = 0; g < MG; g++) {
                    if (t == KQ_Q2_K) q[g] = kq_low2(((const block_q2_Kx8 *)gb[g])->qs, k, c);
                    if (t == KQ_Q3_K) q[g] = kq_q3((const block_q3_Kx8 *)gb[g], k, c);
                    if (t == KQ_IQ4_XS) {
                        const __m256i v =
                            kq_load(((const block_iq4_xsx8 *)gb[g])->qs + (size_t)(4 * k + c) * 32);
                        q[g] = _mm256_shuffle_epi8(tbl, _mm256_and_si256(v, m0f));
                        q2[g] = _mm256_shuffle_epi8(tbl,
                                                    _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f));
                    }
                }
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    /* activation words: Q2_K / Q3_K 32h + 8s + 4 half + c; IQ4_XS 8k + c, +4 */
                    const int wi = t == KQ_IQ4_XS
                                       ? 8 * k + c
                                       : 32 * (k / 8) + 8 * (k % 8 / 2) + 4 * (k % 2) + c;
                    const __m256i xw = x8_bcast4(x[j][b].qs + 4 * wi);
#pragma GCC unroll 2
                    for (int g = 0; g < MG; g++) {
                        s[g][j] = kq_dot(s[g][j], q[g], xw, t);
                        if (t == KQ_IQ4_XS)
                            s[g][j] =
                                kq_dot(s[g][j], q2[g], x8_bcast4(x[j][b].qs + 4 * wi + 16), t);
                    }
                }
            }
#pragma GCC unroll 2
            for (int g = 0; g < MG; g++) {
                const __m256i sc = t == KQ_Q2_K   ? kq_q2_scale((const block_q2_Kx8 *)gb[g], k)
                                   : t == KQ_Q3_K ? kq_sbyte(q3s[g][k / 4], k % 4)
                                                  : kq_iq4_scale((const block_iq4_xsx8 *)gb[g], k);
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++)
                    is[g][j] = chain_pin(_mm256_add_epi32(is[g][j], kq_scale(s[g][j], sc, t)));
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < MG; g++) {
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)gb[g]));
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const __m256 dx = _mm256_set1_ps(x[j][b].d);
                acc[g][j] =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[g][j]), _mm256_mul_ps(dw, dx), acc[g][j]);
                if (t == KQ_Q2_K) {
                    const block_q2_Kx8 *g2 = (const block_q2_Kx8 *)gb[g];
                    const __m256 dm =
                        _mm256_xor_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)g2->dmin)),
                                      _mm256_set1_ps(-0.0f));
                    acc[g][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(kq_q2_mins(g2, &sd[j][b])),
                                                _mm256_mul_ps(dm, dx), acc[g][j]);
                }
            }
        }
    }
    x8_store(out, ld_out, acc, (size_t)8 * MG, MG, MX);
}

/* ---- the rows kernels ---------------------------------------------------- */

/* Rows [o0, o1) (whole groups of W, the packed matrix) x every activation
 * row: 4 activation rows per tile while they last, then the 1..3 left;
 * X8_MG groups a tile beside 2..4 rows, then one. */
ALWAYS_INLINE void kq_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                           size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                           size_t act_row_bytes, size_t n_rows_x, size_t n_in, const int t) {
    const size_t nb = n_in / QK_K, gs = 8 * w_row_bytes, n_groups = (o1 - o0) / 8;
    const uint8_t *G = W + o0 * w_row_bytes;
    out += o0;
#define KQ_TILE(g, MG) kq_tile(X8_AT(g), t, MG, MX)
#define KQ_PASS()                                                                                  \
    if (MX > 1) X8_GROUP_STEPS(KQ_TILE, X8_MG);                                                    \
    X8_GROUP_STEPS(KQ_TILE, 1)
    X8_ROW_PASSES(KQ_PASS);
#undef KQ_PASS
#undef KQ_TILE
}

/* Plain rows: each whole group of 8 packed into scratch, then the packed
 * tiles; the last rows short of a group run on the scalar tier (the same
 * bits either way). */
#define KQ_FNS(name, t, pack, scalar_rows)                                                         \
    KERNEL_ROWS_DECL(kernel_rows_##name##_r8_avx2) {                                               \
        (void)tmp;                                                                                 \
        kq_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, t);       \
    }                                                                                              \
    KERNEL_ROWS_DECL(kernel_rows_##name##_avx2) {                                                  \
        uint8_t *pk = (uint8_t *)tmp;                                                              \
        size_t o = o0;                                                                             \
        for (; o + 8 <= o1; o += 8) {                                                              \
            pack(pk, W + o * w_row_bytes, w_row_bytes, n_in / QK_K);                               \
            kq_rows(out + o, ld_out, pk, w_row_bytes, 0, 8, act, act_row_bytes, n_rows_x, n_in,    \
                    t);                                                                            \
        }                                                                                          \
        if (o < o1)                                                                                \
            scalar_rows(out, ld_out, W, w_row_bytes, o, o1, act, act_row_bytes, n_rows_x, n_in,    \
                        NULL);                                                                     \
    }

KQ_FNS(q2_K, KQ_Q2_K, kernel_pack_group_q2_K, kernel_rows_q2_K_scalar)
KQ_FNS(q3_K, KQ_Q3_K, kernel_pack_group_q3_K, kernel_rows_q3_K_scalar)
KQ_FNS(iq4_xs, KQ_IQ4_XS, kernel_pack_group_iq4_xs, kernel_rows_iq4_xs_scalar)

#endif /* KERNEL_HAVE_AVX2 */
