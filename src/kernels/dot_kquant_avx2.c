/* AVX2 + FMA + F16C tier of the K-quant dots (Q4_K and Q6_K weights
 * against Q8_K activations) and the Q8_K activation quantizer. Compiled
 * only when the build targets such a CPU; otherwise this file is empty and
 * matmul.c uses the scalar tier (dot_kquant_scalar.c).
 *
 * A tile is one weight row x MX (1..4) activation rows: each superblock of
 * weights is loaded and unpacked once and serves MX rows. Per (weight row,
 * activation row, superblock) the integer sums of kernel_impl.h are formed
 * exactly in int32 lanes, reduced across lanes into lane j of one vector
 * for activation row j, and folded into float with one 4-lane FMA per term:
 * lane by lane the scalar tier's float operations, so the bits match it
 * whatever MX is. Not here: Q4_K / Q6_K repacked into 8-row groups
 * (dot_kquant_x8_avx2.c), other K-quant types, threading (matmul.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/vnni.h"
#include "kernels/x8_tile.h" /* x8_act_q8_K, X8_ROW_PASSES */

/* ---- Q8_K activation quantizer, bit-identical to quantize_row_q8_K_ref -- */

/* Sum of the 8 int32 lanes (exact). */
ALWAYS_INLINE int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

/* The first of the 256 values whose magnitude is amax (the reference's
 * strict > keeps the first). */
static float first_of_magnitude(const float *xb, float amax) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f), m = _mm256_set1_ps(amax);
    for (int k = 0; k < QK_K; k += 8) {
        const __m256 a = _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + k));
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(a, m, _CMP_EQ_OQ));
        if (hit) return xb[k + __builtin_ctz((unsigned)hit)];
    }
    return 0.0f;
}

#if defined(__AVX512F__)
/* The 4 int32 sums of q[0..3] (16 lanes each) in lanes 0-3, in that order
 * (exact: any order of integer adds gives them). */
ALWAYS_INLINE __m128i hsum4_i32x16(const __m512i q[4]) {
    const __m512i t01 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(q[0], q[1]), _mm512_unpackhi_epi32(q[0], q[1]));
    const __m512i t23 =
        _mm512_add_epi32(_mm512_unpacklo_epi32(q[2], q[3]), _mm512_unpackhi_epi32(q[2], q[3]));
    /* each 128-bit lane: q0's, q1's, q2's, q3's sum of its four elements */
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(1, 0, 3, 2)));
    u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si128(u);
}

/* With AVX-512 a block goes 16 lanes at a time: the absmax in four chains
 * (a maximum is the same float in any order; one chain waited on each
 * vmaxps), the values rounded and clamped as 8 lanes are, the sums exact:
 * the same bits, 1.35x faster (the quantizer was 3% of a 1B Q4_K_M prefill
 * at 529 tokens, 2026-12-06). */
static float q8_K_amax(const float *xb) {
    const __m512 sign_mask = _mm512_set1_ps(-0.0f);
    __m512 m[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    for (int k = 0; k < QK_K; k += 64)
        for (int c = 0; c < 4; c++)
            m[c] =
                _mm512_max_ps(m[c], _mm512_andnot_ps(sign_mask, _mm512_loadu_ps(xb + k + 16 * c)));
    return _mm512_reduce_max_ps(
        _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
}

/* y's qs and bsums from xb scaled by iscale. */
static void q8_K_values(block_q8_K *restrict y, const float *restrict xb, float iscale) {
    const __m512 vis = _mm512_set1_ps(iscale), top = _mm512_set1_ps(127.f);
    for (int k = 0; k < QK_K; k += 64) {
        __m512i q[4];
        for (int c = 0; c < 4; c++) { /* vcvtps2dq: half to even, as nearest_int */
            q[c] = _mm512_cvtps_epi32(_mm512_min_ps(
                _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + k + 16 * c), vis),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                top));
            _mm_storeu_si128((__m128i *)(y->qs + k + 16 * c), _mm512_cvtsepi32_epi8(q[c]));
        }
        const __m128i s = hsum4_i32x16(q);
        _mm_storel_epi64((__m128i *)(y->bsums + k / 16), _mm_packs_epi32(s, s));
    }
}
#else
static float q8_K_amax(const float *xb) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < QK_K; k += 8)
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + k)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

static void q8_K_values(block_q8_K *restrict y, const float *restrict xb, float iscale) {
    const __m256 vis = _mm256_set1_ps(iscale), top = _mm256_set1_ps(127.f);
    for (int k = 0; k < QK_K; k += 32) {
        __m256i q[4];
        for (int c = 0; c < 4; c++) /* vcvtps2dq: half to even, as nearest_int */
            q[c] = _mm256_cvtps_epi32(
                _mm256_min_ps(_mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(xb + k + 8 * c), vis),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                              top));
        y->bsums[k / 16] = (int16_t)hsum_i32(_mm256_add_epi32(q[0], q[1]));
        y->bsums[k / 16 + 1] = (int16_t)hsum_i32(_mm256_add_epi32(q[2], q[3]));
        __m256i p =
            _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(y->qs + k), p);
    }
}
#endif

void quantize_row_q8_K_avx2(block_q8_K *restrict y, const float *restrict x, size_t n) {
    for (size_t i = 0; i < n / QK_K; i++) {
        const float *xb = x + i * QK_K;
        const float amax = q8_K_amax(xb);
        if (!amax) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -127.f / first_of_magnitude(xb, amax);
        y[i].d = 1 / iscale;
        q8_K_values(&y[i], xb, iscale);
    }
}

/* ---- integer superblock dots -------------------------------------------- */

/* dpwssd: int32 lane += 2 adjacent int16 x int16 products (VNNI fuses the
 * madd and the add; every variant gives the same integers). The u8 x s8
 * step before it is maddubs, exact here because a pair of products fits in
 * int16: q4 * q8 <= 15 * 127, q6 * q8 <= 63 * 127 (q8 is never -128). The
 * per-sub-block scales then enter as int16 factors of the madd. */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
ALWAYS_INLINE __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_epi32(acc, a, b);
}
#elif defined(__AVXVNNI__)
ALWAYS_INLINE __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpwssd_avx_epi32(acc, a, b);
}
#else
ALWAYS_INLINE __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
#endif

/* Lane j (< MX) of the result: the sum of the 8 int32 lanes of a[j]
 * (exact); the other lanes are unspecified. */
ALWAYS_INLINE __m128i hsum_rows(const __m256i *a, const int MX) {
    if (MX == 1) return _mm_cvtsi32_si128(hsum_i32(a[0]));
    const __m256i z = _mm256_setzero_si256();
    const __m256i h01 = _mm256_hadd_epi32(a[0], a[1]);
    const __m256i h23 = _mm256_hadd_epi32(MX > 2 ? a[2] : z, MX > 3 ? a[3] : z);
    const __m256i h = _mm256_hadd_epi32(h01, h23);
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* d_x of activation rows 0..MX-1 in lanes 0..MX-1, zero beyond. */
ALWAYS_INLINE __m128 row_scales(const block_q8_K *const *x, size_t b, const int MX) {
    return _mm_setr_ps(x[0][b].d, MX > 1 ? x[1][b].d : 0.0f, MX > 2 ? x[2][b].d : 0.0f,
                       MX > 3 ? x[3][b].d : 0.0f);
}

/* Stores lanes 0..MX-1 of acc to out[j * ld_out]. */
ALWAYS_INLINE void store_rows(float *restrict out, size_t ld_out, __m128 acc, const int MX) {
    float o[4];
    _mm_storeu_ps(o, acc);
#pragma GCC unroll 4
    for (int j = 0; j < MX; j++)
        out[(size_t)j * ld_out] = o[j];
}

/* One Q4_K weight row w (nb superblocks) x MX activation rows. Sub-block
 * 2k is the low nibbles of qs[32k .. 32k+31], 2k+1 the high ones. */
ALWAYS_INLINE void q4_K_tile(float *restrict out, size_t ld_out, const block_q4_K *restrict w,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int MX) {
    const block_q8_K *x[4];
    x8_act_q8_K(x, act, act_row_bytes, MX);
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m128 acc = _mm_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        kernel_q4_K_scales(w[b].scales, sc, mn);
        __m256i is[4], im[4];
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            is[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * k));
            const __m256i lo = _mm256_and_si256(v, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            const __m256i slo = _mm256_set1_epi16(sc[2 * k]);
            const __m256i shi = _mm256_set1_epi16(sc[2 * k + 1]);
#pragma GCC unroll 4
            for (int j = 0; j < MX; j++) {
                const int8_t *a = x[j][b].qs + 64 * k;
                const __m256i alo = _mm256_loadu_si256((const __m256i *)a);
                const __m256i ahi = _mm256_loadu_si256((const __m256i *)(a + 32));
                is[j] = dpwssd(is[j], _mm256_maddubs_epi16(lo, alo), slo);
                is[j] = dpwssd(is[j], _mm256_maddubs_epi16(hi, ahi), shi);
            }
        }
        /* min j against bsums 2j and 2j+1: each min twice, as int16 */
        const __m128i m8 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn));
        const __m256i m16 =
            _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            im[j] = _mm256_madd_epi16(m16, _mm256_loadu_si256((const __m256i *)x[j][b].bsums));
        const __m128i isum = hsum_rows(is, MX), imin = hsum_rows(im, MX);
        const __m128 dx = row_scales(x, b, MX);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(w[b].d)), dx),
                           acc);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(imin),
                           _mm_mul_ps(_mm_set1_ps(-_cvtsh_ss(w[b].dmin)), dx), acc);
    }
    store_rows(out, ld_out, acc, MX);
}

/* One Q6_K weight row w (nb superblocks) x MX activation rows. Chunk c of
 * 32 elements (half c/4, t = c%4): low nibbles of ql[0..31] (t = 0) or
 * ql[32..63] (t = 1), high nibbles (t = 2, 3), with bits 2t, 2t+1 of
 * qh[0..31] on top; scales 2c (first 16) and 2c+1. The q6 stay unsigned
 * (0..63) in the dot and 32 * sum_k sc_k * bsum_k comes off the int32 sum. */
ALWAYS_INLINE void q6_K_tile(float *restrict out, size_t ld_out, const block_q6_K *restrict w,
                             const uint8_t *restrict act, size_t act_row_bytes, size_t nb,
                             const int MX) {
    const block_q8_K *x[4];
    x8_act_q8_K(x, act, act_row_bytes, MX);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x30);
    __m128 acc = _mm_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const block_q6_K *wb = w + b;
        __m256i is[4];
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            is[j] = _mm256_setzero_si256();
        /* the 16 scales as int16, each doubled into an int32 (s_k, s_k):
         * pa = P0..P3 | P8..P11, pb = P4..P7 | P12..P15; chunk c's factor
         * vector (8 x s_2c | 8 x s_2c+1) is then one vpermd of them */
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)wb->scales));
        const __m256i pa = _mm256_unpacklo_epi16(s16, s16), pb = _mm256_unpackhi_epi16(s16, s16);
#pragma GCC unroll 4
        for (int h = 0; h < 2; h++) {
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h));
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)(wb->ql + 64 * h + 32));
            const __m256i hb = _mm256_loadu_si256((const __m256i *)(wb->qh + 32 * h));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(v0, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 4), m3));
            q[1] = _mm256_or_si256(_mm256_and_si256(v1, m4),
                                   _mm256_and_si256(_mm256_slli_epi16(hb, 2), m3));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                                   _mm256_and_si256(hb, m3));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(hb, 2), m3));
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                const int c = 4 * h + t;
                const int lane = (c & 1) * 2 + (c >= 4) * 4; /* of P_2c in pa or pb */
                const __m256i s = _mm256_permutevar8x32_epi32(
                    (c & 2) ? pb : pa, _mm256_setr_epi32(lane, lane, lane, lane, lane + 1, lane + 1,
                                                         lane + 1, lane + 1));
#pragma GCC unroll 4
                for (int j = 0; j < MX; j++) {
                    const __m256i a = _mm256_loadu_si256((const __m256i *)(x[j][b].qs + 32 * c));
                    is[j] = dpwssd(is[j], _mm256_maddubs_epi16(q[t], a), s);
                }
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const __m256i off =
                _mm256_madd_epi16(s16, _mm256_loadu_si256((const __m256i *)x[j][b].bsums));
            is[j] = _mm256_sub_epi32(is[j], _mm256_slli_epi32(off, 5));
        }
        const __m128i isum = hsum_rows(is, MX);
        const __m128 dx = row_scales(x, b, MX);
        acc =
            _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(_mm_set1_ps(_cvtsh_ss(wb->d)), dx), acc);
    }
    store_rows(out, ld_out, acc, MX);
}

/* Weight row w x every activation row, 4 activation rows per tile while
 * they last; a weight row (a few KiB) stays in L1 for all of them. */
ALWAYS_INLINE void kq_row(float *restrict out, size_t ld_out, const uint8_t *restrict w,
                          const uint8_t *restrict act, size_t act_row_bytes, size_t n_rows_x,
                          size_t nb, const int is_q6) {
#define KQ_PASS()                                                                                  \
    if (is_q6)                                                                                     \
        q6_K_tile(o_r, ld_out, (const block_q6_K *)w, a, act_row_bytes, nb, MX);                   \
    else                                                                                           \
        q4_K_tile(o_r, ld_out, (const block_q4_K *)w, a, act_row_bytes, nb, MX)
    X8_ROW_PASSES(KQ_PASS);
#undef KQ_PASS
}

/* Weight rows [o0, o1) x every activation row. */
ALWAYS_INLINE void kq_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                           size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                           size_t act_row_bytes, size_t n_rows_x, size_t n_in, const int is_q6) {
    for (size_t o = o0; o < o1; o++)
        kq_row(out + o, ld_out, W + o * w_row_bytes, act, act_row_bytes, n_rows_x, n_in / QK_K,
               is_q6);
}

KERNEL_ROWS_DECL(kernel_rows_q4_K_avx2) {
    (void)tmp;
    kq_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, 0);
}

KERNEL_ROWS_DECL(kernel_rows_q6_K_avx2) {
    (void)tmp;
    kq_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, 1);
}

#endif
