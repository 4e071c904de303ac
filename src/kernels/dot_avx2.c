/* AVX2 + FMA + F16C tier of the matmul dot products and the Q8_0 activation
 * quantizer. Compiled only when the build targets such a CPU; otherwise this
 * file is empty and matmul.c uses the scalar tier.
 *
 * Micro-kernels compute a tile of weight rows x MX activation rows, so a
 * weight block loaded once serves MX tokens. Q8_0 / Q4_0 run on 8-row
 * interleaved groups (kernel_impl.h), packed at load or per tile. Every output element keeps its
 * own accumulator and sees exactly the same instruction sequence whatever
 * the tile shape, so a row computed alone or in a batch is bit-identical.
 * Not here: threading and scratch (matmul.c), the reference (matmul_ref.c). */
#include "kernels/kernel_impl.h"
#include "kernels/packed_kq.h"
#include "kernels/packed_q32.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/compiler.h"  /* ALWAYS_INLINE */
#include "kernels/f_rows.h" /* the float-weight rows loop around f_tile */
#include "kernels/r8_tile_zmm.h"
#include "kernels/vnni.h"
#include "kernels/x8_tile.h"

/* Fixed-order horizontal sum: (lo + hi) then pairs. */
ALWAYS_INLINE float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

ALWAYS_INLINE float h2f(uint16_t h) {
    return _cvtsh_ss(h);
}

/* ---- Q8_0 activation quantizer, bit-identical to quantize_row_q8_0_act_ref */

#if defined(__AVX512F__)
/* Lane i of the result: v[i]'s 16 lanes reduced by max (op 0, floats) or
 * by integer add (op 1): a transpose tree, 45 instructions for 16 vectors
 * where each alone took 8. Either reduction is exact in any order. */
ALWAYS_INLINE __m512 reduce16(const __m512 v[16], const int op) {
#define R16(a, b)                                                                                  \
    (op ? _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)))    \
        : _mm512_max_ps(a, b))
    __m512 t[8], u[4];
    for (int j = 0; j < 8; j++) /* each 128-bit lane: v[2j]'s pairs, v[2j + 1]'s pairs */
        t[j] = R16(_mm512_unpacklo_ps(v[2 * j], v[2 * j + 1]),
                   _mm512_unpackhi_ps(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 4; j++) { /* each 128-bit lane: v[4j] .. v[4j + 3] */
        const __m512d a = _mm512_castps_pd(t[2 * j]), b = _mm512_castps_pd(t[2 * j + 1]);
        u[j] = R16(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                   _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    const __m512 p01 = R16(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512 p23 = R16(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 1, 3, 1)));
    return R16(_mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(2, 0, 2, 0)),
               _mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(3, 1, 3, 1)));
#undef R16
}

/* side[0 .. k) <- lanes 0 .. k - 1 of the four fields, each block's four
 * words together (a 4 x 16 transpose). */
ALWAYS_INLINE void store_sides16(kernel_act_side *side, __m512 d, __m512i n128, __m512i n8,
                                 __m512 s, size_t k) {
    const __m512 b = _mm512_castsi512_ps(n128), c = _mm512_castsi512_ps(n8);
    const __m512d t0 = _mm512_castps_pd(_mm512_unpacklo_ps(d, b));
    const __m512d t1 = _mm512_castps_pd(_mm512_unpackhi_ps(d, b));
    const __m512d t2 = _mm512_castps_pd(_mm512_unpacklo_ps(c, s));
    const __m512d t3 = _mm512_castps_pd(_mm512_unpackhi_ps(c, s));
    /* r[j]'s 128-bit lane L: block 4L + j */
    const __m512 r0 = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    const __m512 r1 = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    const __m512 r2 = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    const __m512 r3 = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    const __m512 lo01 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 lo23 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 hi01 = _mm512_shuffle_f32x4(r0, r1, _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 hi23 = _mm512_shuffle_f32x4(r2, r3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 out[4] = {_mm512_shuffle_f32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1)),
                           _mm512_shuffle_f32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1))};
    for (size_t j = 0; j < 4 && 4 * j < k; j++) {
        const size_t m = k - 4 * j < 4 ? k - 4 * j : 4; /* blocks of this store */
        _mm512_mask_storeu_ps((float *)(side + 4 * j), (__mmask16)((1u << (4 * m)) - 1), out[j]);
    }
}

/* AVX-512: blocks go 16 at a time, their maxima and sums each reduced by
 * one transpose tree and the side data written four blocks a store: the
 * same IEEE steps as the 8-block code below (and the reference), so the
 * same bits. */
#define Q8_0_GROUP 16
static void q8_0_group(block_q8_0 *restrict y, const float *restrict x, size_t k,
                       kernel_act_side *restrict side) {
    const __m512 sign_mask = _mm512_set1_ps(-0.0f);
    __m512 v[16];
    for (size_t i = 0; i < 16; i++)
        v[i] = i < k
                   ? _mm512_max_ps(_mm512_andnot_ps(sign_mask, _mm512_loadu_ps(x + i * QK8_0)),
                                   _mm512_andnot_ps(sign_mask, _mm512_loadu_ps(x + i * QK8_0 + 16)))
                   : _mm512_setzero_ps();
    const __m512 am = reduce16(v, 0);
    const __m512 d = _mm512_div_ps(am, _mm512_set1_ps(127.f));
    /* C's `amax != 0 ? 127 / amax : 0`: NaN counts as true */
    const __mmask16 nz = _mm512_cmp_ps_mask(am, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    _Alignas(64) float id[16];
    _mm512_store_ps(id, _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.f), am));
    const __m256i h = _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _Alignas(32) uint16_t dh[16];
    _mm256_store_si256((__m256i *)dh, h);
    for (size_t i = 0; i < k; i++) {
        const float *xb = x + i * QK8_0;
        const __m512 vid = _mm512_set1_ps(id[i]);
        /* vcvtps2dq rounds half to even, as ggml-cpu's _mm256_round_ps does */
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb), vid));
        const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16), vid));
        const __m128i b0 = _mm512_cvtsepi32_epi8(q0), b1 = _mm512_cvtsepi32_epi8(q1);
        _mm256_storeu_si256((__m256i *)y[i].qs, _mm256_set_m128i(b1, b0));
        y[i].d = dh[i];
        /* the int8 values summed (|x * id| <= 127: saturating never bites);
         * v[k ..] stay the zeros the maxima had */
        v[i] = _mm512_castsi512_ps(_mm512_add_epi32(q0, q1));
    }
    if (!side) return;
    const __m512i sum = _mm512_castps_si512(reduce16(v, 1));
    const __m512 sx = _mm512_cvtph_ps(_mm512_cvtps_ph(
        _mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    store_sides16(side, _mm512_cvtph_ps(h), _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)),
                  _mm512_mullo_epi32(sum, _mm512_set1_epi32(-8)), sx, k);
}
#else
/* |x| max of one block, in the reference's order of lanes. */
ALWAYS_INLINE float block_amax(const float *xb) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    const __m256 m =
        _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb)),
                                    _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8))),
                      _mm256_max_ps(_mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 16)),
                                    _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 24))));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

/* Blocks go 8 at a time: their scales d = amax / 127, 127 / amax and the
 * fp16 of d are two vector divisions and one vcvtps2ph, each IEEE-exact like
 * the reference's scalar ones (the reference's fp32_to_fp16 rounds to
 * nearest even, as vcvtps2ph does here). One block at a time, two dependent scalar
 * divisions and a call per block had made quantization 6% of the AVX2
 * tier's prefill. */
#define Q8_0_GROUP 8
static void q8_0_group(block_q8_0 *restrict y, const float *restrict x, size_t k,
                       kernel_act_side *restrict side) {
    _Alignas(32) float amax[8] = {0}, id[8], dr[8];
    _Alignas(16) uint16_t dh[8];
    for (size_t i = 0; i < k; i++)
        amax[i] = block_amax(x + i * QK8_0);
    const __m256 am = _mm256_load_ps(amax);
    const __m256 d = _mm256_div_ps(am, _mm256_set1_ps(127.f));
    /* C's `amax != 0 ? 127 / amax : 0`: NaN counts as true */
    const __m256 nz = _mm256_cmp_ps(am, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    _mm256_store_ps(id, _mm256_and_ps(nz, _mm256_div_ps(_mm256_set1_ps(127.f), am)));
    const __m128i h = _mm256_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_store_si128((__m128i *)dh, h);
    _mm256_store_ps(dr, _mm256_cvtph_ps(h));
    _Alignas(32) float du[8]; /* d before its fp16 rounding: Q8_1's sum term */
    _mm256_store_ps(du, d);
    for (size_t i = 0; i < k; i++) {
        const float *xb = x + i * QK8_0;
        const __m256 vid = _mm256_set1_ps(id[i]);
        /* vcvtps2dq rounds half to even, as ggml-cpu's _mm256_round_ps does */
        const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb), vid));
        const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8), vid));
        const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 16), vid));
        const __m256i q3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 24), vid));
        const __m256i p = _mm256_permutevar8x32_epi32(
            _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3)),
            _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
        y[i].d = dh[i];
        if (side) {
            /* the int8 values, summed from the saturated bytes */
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), p);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
            __m128i t =
                _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
            const int32_t sum = _mm_cvtsi128_si32(t);
            const float sx = fp16_to_fp32(fp32_to_fp16(du[i] * (float)sum));
            side[i] = (kernel_act_side){dr[i], -128 * sum, -8 * sum, sx};
        }
    }
}
#endif

/* side (may be NULL) gets each block's kernel_act_side. */
void quantize_row_q8_0_avx2(block_q8_0 *restrict y, const float *restrict x, size_t n,
                            kernel_act_side *restrict side) {
    const size_t nb = n / QK8_0;
    for (size_t b0 = 0; b0 < nb; b0 += Q8_0_GROUP)
        q8_0_group(y + b0, x + b0 * QK8_0, nb - b0 < Q8_0_GROUP ? nb - b0 : Q8_0_GROUP,
                   side ? side + b0 : NULL);
}

/* ---- integer block dots over 8-row interleaved groups ------------------- */

/* dpbusd: int32 lane += 4 adjacent u8 x s8 products. Without VNNI the
 * stand-in (maddubs + madd) is exact only while a pair of products fits in
 * int16: Q4_0 nibbles (15 x 127) or |w| x sign(x, w) (128 x 127), which is
 * how the Q8_0 step runs there. Every variant gives the same integers. */
#define Q_VNNI KERNEL_VNNI
#if Q_VNNI
#define dpbusd kernel_dpbusd_vnni
#else
ALWAYS_INLINE __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
    return chain_pin(
        _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))));
}
#endif

#if !Q_VNNI
/* Q4_0 without VNNI: a maddubs pair of a nibble (0..15) and an int8 is at
 * most 2 * 15 * 128 = 3840 in magnitude, so a block's 8 maddubs (two per
 * chunk) sum exactly in int16 (<= 30720), and one madd per block widens
 * them: 8 maddubs + 8 adds + 1 madd instead of 8 x (maddubs + madd + add).
 * The same integers as dpbusd, so the same bits. */
ALWAYS_INLINE __m256i q4_pairs16(__m256i s16, __m256i lo, __m256i xl, __m256i hi, __m256i xh) {
    return chain_pin(_mm256_add_epi16(
        s16, _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh))));
}

ALWAYS_INLINE __m256i q4_widen16(__m256i acc, __m256i s16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(s16, _mm256_set1_epi16(1)));
}
#endif

/* MG groups (8 weight rows each, gs bytes apart) x MX activation rows over
 * nb blocks. Lane i of is[g][j] collects group g's row i against
 * activation row j: exact isum_b (the -128 / -8 offset of the unsigned
 * weights enters as the start value), then
 *   acc = fma(float(isum_b), d_w * d_x, acc)
 * lane by lane: the formula of kernel_impl.h, whatever MG and MX are.
 * Stores the first n_valid of the MG * 8 output columns. */
ALWAYS_INLINE void r8_tile(float *restrict out, size_t ld_out, const uint8_t *restrict G, size_t gs,
                           const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                           size_t n_valid, const int is_q4, const int MG, const int MX) {
    const size_t GB = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const size_t soff = kernel_act_side_off(nb);
    __m256 acc[4][4] = {{{0}}};
    for (size_t b = 0; b < nb; b++) {
        __m256i is[4][4];
        const x8_act8 ab = x8_act_q8_0(act, act_row_bytes, soff, b, MX);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m256i init = is_q4    ? _mm256_set1_epi32(ab.sd[j]->neg8)
                                 : Q_VNNI ? _mm256_set1_epi32(ab.sd[j]->neg128)
                                          : _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int g = 0; g < MG; g++)
                is[g][j] = init;
        }
        const uint8_t *wb[4];
        x8_group_blocks(wb, G, gs, b, GB, 8, MG, MX); /* MX > 1 (one row: r8_tile1) */
        if (is_q4) {
            const __m256i m0f = _mm256_set1_epi8(0x0f);
#if !Q_VNNI
            __m256i s16[4][4]; /* the block's maddubs pairs, summed in int16 */
#pragma GCC unroll 4
            for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++)
                    s16[g][j] = _mm256_setzero_si256();
#endif
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i lo[4], hi[4];
#pragma GCC unroll 4
                for (int g = 0; g < MG; g++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(wb[g] + 16 + 32 * c));
                    lo[g] = _mm256_and_si256(v, m0f);
                    hi[g] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
                }
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    const __m256i xl = x8_bcast4(ab.xq[j] + 4 * c),
                                  xh = x8_bcast4(ab.xq[j] + 16 + 4 * c);
#pragma GCC unroll 4
                    for (int g = 0; g < MG; g++)
#if Q_VNNI
                        is[g][j] = dpbusd(dpbusd(is[g][j], lo[g], xl), hi[g], xh);
#else
                        s16[g][j] = q4_pairs16(s16[g][j], lo[g], xl, hi[g], xh);
#endif
                }
            }
#if !Q_VNNI
#pragma GCC unroll 4
            for (int g = 0; g < MG; g++)
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++)
                    is[g][j] = q4_widen16(is[g][j], s16[g][j]);
#endif
        } else {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                __m256i w[4];
#pragma GCC unroll 4
                for (int g = 0; g < MG; g++) {
                    w[g] = _mm256_loadu_si256((const __m256i *)(wb[g] + 16 + 32 * c));
                }
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    const __m256i xb = x8_bcast4(ab.xq[j] + 4 * c);
#pragma GCC unroll 4
                    for (int g = 0; g < MG; g++) {
#if Q_VNNI
                        is[g][j] = dpbusd(is[g][j], w[g], xb);
#else
                        is[g][j] = dpbusd(is[g][j], _mm256_sign_epi8(w[g], w[g]),
                                          _mm256_sign_epi8(xb, w[g]));
#endif
                    }
                }
            }
        }
        __m256 dw[4];
#pragma GCC unroll 4
        for (int g = 0; g < MG; g++)
            dw[g] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb[g]));
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m256 dx = _mm256_set1_ps(ab.sd[j]->d);
#pragma GCC unroll 4
            for (int g = 0; g < MG; g++)
                acc[g][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[g][j]), _mm256_mul_ps(dw[g], dx),
                                            acc[g][j]);
        }
    }
    x8_store(out, ld_out, acc, n_valid, MG, MX);
}

/* One activation row (decode) against MG groups: the same isum_b and the
 * same float sequence as r8_tile, but each group's block sum is split over
 * four int32 accumulators (chunks c mod 4 for Q8_0; low / high nibbles of
 * even / odd chunks for Q4_0) added at the block's end. Integer addition
 * is exact, so the bits are r8_tile's; the dependency chain of dpbusd per
 * block drops from 8 to 2, which is what bounds a 1-row tile. */
ALWAYS_INLINE void r8_tile1(float *restrict out, const uint8_t *restrict G, size_t gs,
                            const uint8_t *restrict act, size_t nb, size_t n_valid, const int is_q4,
                            const int MG) {
    const size_t GB = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const kernel_act_side *side = (const kernel_act_side *)(act + kernel_act_side_off(nb));
    const block_q8_0 *xb = (const block_q8_0 *)act;
    __m256 acc[8];
#pragma GCC unroll 8
    for (int g = 0; g < MG; g++)
        acc[g] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const int8_t *xq = xb[b].qs;
        const __m256i init = is_q4    ? _mm256_set1_epi32(side[b].neg8)
                             : Q_VNNI ? _mm256_set1_epi32(side[b].neg128)
                                      : _mm256_setzero_si256();
        __m256i s[8][4];
        const uint8_t *wb[8];
#pragma GCC unroll 8
        for (int g = 0; g < MG; g++) {
            s[g][0] = init;
            s[g][1] = s[g][2] = s[g][3] = _mm256_setzero_si256();
            wb[g] = G + (size_t)g * gs + b * GB;
            prefetch_block_ahead(wb[g], GB);
        }
        if (is_q4) {
            const __m256i m0f = _mm256_set1_epi8(0x0f);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i xl = x8_bcast4(xq + 4 * c), xh = x8_bcast4(xq + 16 + 4 * c);
                const int k = (c & 1) * 2;
#pragma GCC unroll 8
                for (int g = 0; g < MG; g++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(wb[g] + 16 + 32 * c));
                    const __m256i lo = _mm256_and_si256(v, m0f);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
#if Q_VNNI
                    s[g][k] = dpbusd(s[g][k], lo, xl);
                    s[g][k + 1] = dpbusd(s[g][k + 1], hi, xh);
#else /* int16 sums in s[g][1] (even chunks) and s[g][2] (odd) */
                    s[g][1 + (c & 1)] = q4_pairs16(s[g][1 + (c & 1)], lo, xl, hi, xh);
                    (void)k;
#endif
                }
            }
#if !Q_VNNI
#pragma GCC unroll 8
            for (int g = 0; g < MG; g++) {
                s[g][0] = q4_widen16(s[g][0], _mm256_add_epi16(s[g][1], s[g][2]));
                s[g][1] = s[g][2] = _mm256_setzero_si256();
            }
#endif
        } else {
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i xc = x8_bcast4(xq + 4 * c);
#pragma GCC unroll 8
                for (int g = 0; g < MG; g++) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *)(wb[g] + 16 + 32 * c));
#if Q_VNNI
                    s[g][c & 3] = dpbusd(s[g][c & 3], w, xc);
#else
                    s[g][c & 3] =
                        dpbusd(s[g][c & 3], _mm256_sign_epi8(w, w), _mm256_sign_epi8(xc, w));
#endif
                }
            }
        }
        const __m256 dx = _mm256_set1_ps(side[b].d);
#pragma GCC unroll 8
        for (int g = 0; g < MG; g++) {
            const __m256i is = _mm256_add_epi32(_mm256_add_epi32(s[g][0], s[g][1]),
                                                _mm256_add_epi32(s[g][2], s[g][3]));
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wb[g]));
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(dw, dx), acc[g]);
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < MG; g++) {
        const size_t first = (size_t)g * 8;
        if (n_valid >= first + 8) {
            _mm256_storeu_ps(out + first, acc[g]);
        } else if (n_valid > first) {
            float t[8];
            _mm256_storeu_ps(t, acc[g]);
            memcpy(out + first, t, (n_valid - first) * sizeof(float));
        }
    }
}

/* Groups per tile beside 4 activation rows: X8_MG (2 x 4 accumulators,
 * their int32 sums and the weight vectors fit AVX-512VL's 32 registers;
 * with 16, one group). One activation row (decode) takes R8_MG_1 groups:
 * one on both tiers. Several groups read as many streams gs bytes apart, and in the
 * engine's decode, weights streamed from memory, one group was faster:
 * 110M tg128, 4-7 alternating pairs (2026-12-01), AVX2 tier 1.35x (Q8_0)
 * and 1.2x (Q4_0) over two groups, native 1.07x (Q8_0) and 1.03x (Q4_0)
 * over four; bench_kernels, weights in cache, had preferred more. With
 * R8_ZMM, r8_tile_zmm.h's tiles take pairs of groups beside several rows;
 * one row keeps this ymm tile (r8_tile_zmm.h says why). */
#define R8_MG_1 1

/* All activation rows against n_groups groups starting at G (gs bytes
 * apart); out column 0 is the groups' first row; n_valid columns exist.
 * Beside 2..4 rows: zmm pairs of groups (R8_ZMM), then X8_MG groups (4
 * rows) or 2 (3, 2 rows), then one; one row: r8_tile1, R8_MG_1 groups. */
ALWAYS_INLINE void r8_rows(float *restrict out, size_t ld_out, const uint8_t *restrict G, size_t gs,
                           size_t n_groups, size_t n_valid, const uint8_t *restrict act,
                           size_t act_row_bytes, size_t n_rows_x, size_t nb, const int is_q4) {
#define R8_TILE(g, MG)  r8_tile(X8_AT(g), n_valid - (g)*8, is_q4, MG, MX)
#define R8_TILE_Z(g, K) r8_tile_z(X8_AT(g), n_valid - (g)*8, is_q4, (K) / 2, MX)
#define R8_TILE1(g, MG) r8_tile1(o_r + (g)*8, G + (g)*gs, gs, a, nb, n_valid - (g)*8, is_q4, MG)
#define R8_PASS()                                                                                  \
    if (MX == 1) {                                                                                 \
        X8_GROUP_STEPS(R8_TILE1, R8_MG_1);                                                         \
    } else {                                                                                       \
        X8_PAIR_STEPS(R8_TILE_Z, 6);                                                               \
        X8_PAIR_STEPS(R8_TILE_Z, 4);                                                               \
        X8_PAIR_STEPS(R8_TILE_Z, 2);                                                               \
        X8_GROUP_STEPS(R8_TILE, MX == 4 ? X8_MG : 2);                                              \
        X8_GROUP_STEPS(R8_TILE, 1);                                                                \
    }
    X8_ROW_PASSES(R8_PASS);
#undef R8_PASS
#undef R8_TILE1
#undef R8_TILE_Z
#undef R8_TILE
}

/* Packed types: o0, o1 multiples of 8, W the packed matrix. */
ALWAYS_INLINE void r8_packed(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                             size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                             size_t act_row_bytes, size_t n_rows_x, size_t n_in,
                             float *restrict tmp, const int is_q4) {
    const size_t gs = 8 * w_row_bytes;
    r8_rows(out + o0, ld_out, W + o0 * w_row_bytes, gs, (o1 - o0 + 7) / 8, o1 - o0, act,
            act_row_bytes, n_rows_x, n_in / QK8_0, is_q4);
}

/* kernel_pack_group for 8 whole rows, with gathers: output vector c of a
 * block takes the int32 at byte 4c of each of the 8 rows' quants. */
ALWAYS_INLINE void pack_group_gather(uint8_t *restrict dst, const uint8_t *restrict W,
                                     size_t w_row_bytes, size_t nb, const int is_q4) {
    const int rb = (int)w_row_bytes;
    const __m256i idx = _mm256_setr_epi32(0, rb, 2 * rb, 3 * rb, 4 * rb, 5 * rb, 6 * rb, 7 * rb);
    const size_t in_bytes = is_q4 ? sizeof(block_q4_0) : sizeof(block_q8_0);
    const size_t out_bytes = is_q4 ? sizeof(block_q4_0x8) : sizeof(block_q8_0x8);
    const int n_c = is_q4 ? 4 : 8;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *src = W + b * in_bytes;
        uint8_t *g = dst + b * out_bytes;
        uint16_t d[8];
        for (size_t i = 0; i < 8; i++)
            memcpy(&d[i], src + i * w_row_bytes, sizeof d[i]);
        memcpy(g, d, sizeof d);
        for (int c = 0; c < n_c; c++) {
            __m256i v = _mm256_i32gather_epi32((const int *)(src + 2 + 4 * c), idx, 1);
#if KERNEL_Q8_R8_BIAS
            if (!is_q4) v = _mm256_xor_si256(v, _mm256_set1_epi8((char)KERNEL_Q8_R8_BIAS));
#endif
            _mm256_storeu_si256((__m256i *)(g + 16 + 32 * c), v);
        }
    }
}

/* Plain types: pack up to 2 groups of the tile into tmp, then the same
 * kernel, so plain and packed give the same bits. */
ALWAYS_INLINE void r8_plain(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                            size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                            size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp,
                            const int is_q4) {
    const size_t nb = n_in / QK8_0;
    const size_t gs = 8 * w_row_bytes;
    uint8_t *pk = (uint8_t *)tmp;
    for (size_t o = o0; o < o1; o += 16) {
        const size_t m = o1 - o < 16 ? o1 - o : 16;
        const size_t ng = (m + 7) / 8;
        for (size_t k = 0; k < ng; k++) {
            const size_t mk = m - 8 * k < 8 ? m - 8 * k : 8;
            if (mk == 8)
                pack_group_gather(pk + k * gs, W + (o + 8 * k) * w_row_bytes, w_row_bytes, nb,
                                  is_q4);
            else
                kernel_pack_group(pk + k * gs, W + (o + 8 * k) * w_row_bytes, w_row_bytes, mk, nb,
                                  is_q4);
        }
        r8_rows(out + o, ld_out, pk, gs, ng, m, act, act_row_bytes, n_rows_x, nb, is_q4);
    }
}

/* The plain and the packed rows kernels of Q8_0 (is_q4 0) and Q4_0 (1). */
#define R8_FNS(name, is_q4)                                                                        \
    static KERNEL_ROWS_DECL(rows_##name) {                                                         \
        r8_plain(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp,     \
                 is_q4);                                                                           \
    }                                                                                              \
    static KERNEL_ROWS_DECL(rows_##name##_r8) {                                                    \
        r8_packed(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, tmp,    \
                  is_q4);                                                                          \
    }

R8_FNS(q8_0, 0)
R8_FNS(q4_0, 1)

/* ---- float dots (F32 / F16 / BF16 weights, F32 activations) ------------- */

enum { WF32, WF16, WBF16 };

ALWAYS_INLINE __m256 load8(const uint8_t *restrict row, size_t k, const int wt) {
    if (wt == WF32) return _mm256_loadu_ps((const float *)row + k);
    const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
    if (wt == WF16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ALWAYS_INLINE float load1(const uint8_t *restrict row, size_t k, const int wt) {
    if (wt == WF32) return ((const float *)row)[k];
    const uint16_t h = ((const uint16_t *)row)[k];
    return wt == WF16 ? h2f(h) : bf16_to_fp32(h);
}

/* Per element: one 8-lane FMA accumulator over k in steps of 8, hsum8, then
 * the n % 8 tail with scalar FMA, in k order. */
ALWAYS_INLINE void f_tile(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, const float *restrict x, size_t n_in, const int wt,
                          const int MW, const int MX) {
    __m256 acc[4][4] = {{{0}}};
    size_t k = 0;
    for (; k + 8 <= n_in; k += 8) {
        __m256 w8[4];
#pragma GCC unroll 4
        for (int i = 0; i < MW; i++)
            w8[i] = load8(W + i * w_row_bytes, k, wt);
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m256 x8 = _mm256_loadu_ps(x + j * n_in + k);
#pragma GCC unroll 4
            for (int i = 0; i < MW; i++)
                acc[i][j] = _mm256_fmadd_ps(w8[i], x8, acc[i][j]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            float s = hsum8(acc[i][j]);
            for (size_t t = k; t < n_in; t++)
                s = fmaf(load1(W + i * w_row_bytes, t, wt), x[j * n_in + t], s);
            out[j * ld_out + i] = s;
        }
}

#define F_ROWS_FN(name, wt)                                                                        \
    static KERNEL_ROWS_DECL(name) {                                                                \
        (void)tmp, (void)act_row_bytes; /* F32 rows of n_in */                                     \
        f_rows(out, ld_out, W, w_row_bytes, o0, o1, act, n_rows_x, n_in, wt, f_tile);              \
    }

F_ROWS_FN(rows_f32, WF32)
F_ROWS_FN(rows_f16, WF16)
F_ROWS_FN(rows_bf16, WBF16)

const kernel_type_impl kernel_impl_avx2[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {GGML_TYPE_F32, rows_f32, NULL},
    [GGML_TYPE_F16] = {GGML_TYPE_F32, rows_f16, NULL},
    [GGML_TYPE_BF16] = {GGML_TYPE_F32, rows_bf16, NULL},
    [GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, rows_q8_0, rows_q8_0_r8},
    [GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, rows_q4_0, rows_q4_0_r8},
    [GGML_TYPE_Q4_1] = {GGML_TYPE_Q8_0, kernel_rows_q4_1_avx2, kernel_rows_q4_1_r8_avx2},
    [GGML_TYPE_Q5_0] = {GGML_TYPE_Q8_0, kernel_rows_q5_0_avx2, kernel_rows_q5_0_r8_avx2},
    [GGML_TYPE_Q5_1] = {GGML_TYPE_Q8_0, kernel_rows_q5_1_avx2, kernel_rows_q5_1_r8_avx2},
    [GGML_TYPE_IQ4_NL] = {GGML_TYPE_Q8_0, kernel_rows_iq4_nl_avx2, kernel_rows_iq4_nl_r8_avx2},
    [GGML_TYPE_Q2_K] = {GGML_TYPE_Q8_K, kernel_rows_q2_K_avx2, kernel_rows_q2_K_r8_avx2},
    [GGML_TYPE_Q3_K] = {GGML_TYPE_Q8_K, kernel_rows_q3_K_avx2, kernel_rows_q3_K_r8_avx2},
    [GGML_TYPE_Q4_K] = {GGML_TYPE_Q8_K, kernel_rows_q4_K_avx2, kernel_rows_q4_K_r8_avx2},
    [GGML_TYPE_Q5_K] = {GGML_TYPE_Q8_K, kernel_rows_q5_K_avx2, kernel_rows_q5_K_r8_avx2},
    [GGML_TYPE_Q6_K] = {GGML_TYPE_Q8_K, kernel_rows_q6_K_avx2, kernel_rows_q6_K_r8_avx2},
    [GGML_TYPE_IQ4_XS] = {GGML_TYPE_Q8_K, kernel_rows_iq4_xs_avx2, kernel_rows_iq4_xs_r8_avx2},
    [GGML_TYPE_MXFP4] = {GGML_TYPE_Q8_0, kernel_rows_mxfp4_avx2, kernel_rows_mxfp4_r8_avx2},
};

#endif
