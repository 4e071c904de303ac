/* AVX2 + FMA + F16C tier of the matmul dot products and the Q8_0 activation
 * quantizer. Compiled only when the build targets such a CPU; otherwise this
 * file is empty and matmul.c uses the scalar tier.
 *
 * Micro-kernels compute a tile of MW weight rows x MX activation rows, so a
 * weight block loaded once serves MX tokens. Every output element keeps its
 * own accumulator and sees exactly the same instruction sequence whatever
 * the tile shape, so a row computed alone or in a batch is bit-identical.
 * Not here: threading and scratch (matmul.c), the reference (matmul_ref.c). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <math.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

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

/* ---- Q8_0 activation quantizer, bit-identical to the reference ---------- */

/* roundf semantics (half away from zero): trunc(v) + sign(v) if |frac| >= 0.5. */
ALWAYS_INLINE __m256 round_half_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    const __m256 frac = _mm256_andnot_ps(sign_mask, _mm256_sub_ps(v, t));
    const __m256 ge = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, sign_mask));
    return _mm256_add_ps(t, _mm256_and_ps(ge, one));
}

void quantize_row_q8_0_avx2(block_q8_0 *restrict y, const float *restrict x, size_t n) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    for (size_t i = 0; i < n / QK8_0; i++) {
        const float *xb = x + i * QK8_0;
        __m256 v[4];
        for (int k = 0; k < 4; k++)
            v[k] = _mm256_loadu_ps(xb + 8 * k);
        __m256 m = _mm256_max_ps(
            _mm256_max_ps(_mm256_andnot_ps(sign_mask, v[0]), _mm256_andnot_ps(sign_mask, v[1])),
            _mm256_max_ps(_mm256_andnot_ps(sign_mask, v[2]), _mm256_andnot_ps(sign_mask, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(round_half_away(_mm256_mul_ps(v[k], vid)));
        __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
        __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

/* ---- integer block dots ------------------------------------------------- */

/* Block b of a weight row as 32 bytes: Q8_0's int8 values, or Q4_0's
 * unsigned nibbles 0..15 (element j low, j + 16 high), 8 not yet subtracted. */
ALWAYS_INLINE __m256i load_wq(const uint8_t *restrict row, size_t b, int is_q4, float *d) {
    if (is_q4) {
        const block_q4_0 *blk = (const block_q4_0 *)row + b;
        *d = h2f(blk->d);
        const __m128i t = _mm_loadu_si128((const __m128i *)blk->qs);
        return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0f));
    }
    const block_q8_0 *blk = (const block_q8_0 *)row + b;
    *d = h2f(blk->d);
    return _mm256_loadu_si256((const __m256i *)blk->qs);
}

/* Exact int32 lane sums of 4 adjacent u8 x s8 products: VNNI's dpbusd when
 * the build has it (AVX512-VNNI+VL or AVX-VNNI), else maddubs + madd. Both
 * give the same integers (maddubs cannot saturate here: |w| <= 128 and
 * |x| <= 127, or w <= 15), so tiers and CPUs agree bit for bit. */
ALWAYS_INLINE __m256i dot4_u8s8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* MW weight rows x MX activation rows over nb blocks. Per element and block:
 *   p   = 8 int32 lane sums of 4 products w[k] x[k] (exact)
 *   acc = fma(d_w * d_x, float(p), acc)
 * with d_w * d_x one float product, the same in every lane and tile shape.
 * Q8_0: p = dot4(|w|, sign(x, w)); |w| is the unsigned operand so a -128
 * weight (0x80 = 128 unsigned) stays exact. Q4_0: p = dot4(nibble, x) -
 * dot4(8, x), the same int32 values without the sign step. */
ALWAYS_INLINE void q_tile(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, const uint8_t *restrict act, size_t act_row_bytes,
                          size_t nb, const int is_q4, const int MW, const int MX) {
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        __m256i wv[4], aw[4];
        __m256 dw[4];
#pragma GCC unroll 4
        for (int i = 0; i < MW; i++) {
            float d;
            wv[i] = load_wq(W + i * w_row_bytes, b, is_q4, &d);
            dw[i] = _mm256_set1_ps(d);
            if (!is_q4) aw[i] = _mm256_sign_epi8(wv[i], wv[i]);
        }
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++) {
            const block_q8_0 *xb = (const block_q8_0 *)(act + j * act_row_bytes) + b;
            const __m256i xv = _mm256_loadu_si256((const __m256i *)xb->qs);
            const __m256 dx = _mm256_set1_ps(h2f(xb->d));
            const __m256i corr = is_q4 ? dot4_u8s8(_mm256_set1_epi8(8), xv) : xv;
#pragma GCC unroll 4
            for (int i = 0; i < MW; i++) {
                const __m256i p = is_q4 ? _mm256_sub_epi32(dot4_u8s8(wv[i], xv), corr)
                                        : dot4_u8s8(aw[i], _mm256_sign_epi8(xv, wv[i]));
                acc[i][j] =
                    _mm256_fmadd_ps(_mm256_mul_ps(dw[i], dx), _mm256_cvtepi32_ps(p), acc[i][j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            out[j * ld_out + i] = hsum8(acc[i][j]);
}

/* Weight rows per tile beside 4 activation rows: 16 accumulators plus the
 * weight vectors need the 32 vector registers of AVX-512VL; with 16, two. */
#if defined(__AVX512VL__)
#define Q_TILE_W 4
#else
#define Q_TILE_W 2
#endif

/* Walks the rectangle in tiles: groups of 4 activation rows x Q_TILE_W weight rows,
 * single activation rows x 4 weight rows, and the edges with smaller tiles. */
ALWAYS_INLINE void q_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                          size_t act_row_bytes, size_t n_rows_x, size_t nb, const int is_q4) {
    size_t r = 0;
    for (; r + 4 <= n_rows_x; r += 4) {
        const uint8_t *a = act + r * act_row_bytes;
        float *o_r = out + r * ld_out;
        size_t o = o0;
        for (; o + Q_TILE_W <= o1; o += Q_TILE_W)
            q_tile(o_r + o, ld_out, W + o * w_row_bytes, w_row_bytes, a, act_row_bytes, nb, is_q4,
                   Q_TILE_W, 4);
        for (; o + 2 <= o1; o += 2)
            q_tile(o_r + o, ld_out, W + o * w_row_bytes, w_row_bytes, a, act_row_bytes, nb, is_q4,
                   2, 4);
        for (; o < o1; o++)
            q_tile(o_r + o, ld_out, W + o * w_row_bytes, w_row_bytes, a, act_row_bytes, nb, is_q4,
                   1, 4);
    }
    for (; r < n_rows_x; r++) {
        const uint8_t *a = act + r * act_row_bytes;
        float *o_r = out + r * ld_out;
        size_t o = o0;
        for (; o + 4 <= o1; o += 4)
            q_tile(o_r + o, ld_out, W + o * w_row_bytes, w_row_bytes, a, act_row_bytes, nb, is_q4,
                   4, 1);
        for (; o < o1; o++)
            q_tile(o_r + o, ld_out, W + o * w_row_bytes, w_row_bytes, a, act_row_bytes, nb, is_q4,
                   1, 1);
    }
}

static void rows_q8_0(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                      size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                      size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {
    (void)tmp;
    q_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in / QK8_0, 0);
}

static void rows_q4_0(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                      size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                      size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {
    (void)tmp;
    q_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in / QK4_0, 1);
}

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
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < MW; i++)
#pragma GCC unroll 4
        for (int j = 0; j < MX; j++)
            acc[i][j] = _mm256_setzero_ps();
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

ALWAYS_INLINE void f_rows(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                          size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                          size_t act_row_bytes, size_t n_rows_x, size_t n_in, const int wt) {
    (void)act_row_bytes; /* F32 rows of n_in */
    const float *x = (const float *)act;
    size_t r = 0;
    for (; r + 4 <= n_rows_x; r += 4) {
        size_t o = o0;
        for (; o + 2 <= o1; o += 2)
            f_tile(out + r * ld_out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x + r * n_in,
                   n_in, wt, 2, 4);
        for (; o < o1; o++)
            f_tile(out + r * ld_out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x + r * n_in,
                   n_in, wt, 1, 4);
    }
    for (; r < n_rows_x; r++) {
        size_t o = o0;
        for (; o + 4 <= o1; o += 4)
            f_tile(out + r * ld_out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x + r * n_in,
                   n_in, wt, 4, 1);
        for (; o < o1; o++)
            f_tile(out + r * ld_out + o, ld_out, W + o * w_row_bytes, w_row_bytes, x + r * n_in,
                   n_in, wt, 1, 1);
    }
}

#define F_ROWS_FN(name, wt)                                                                        \
    static void name(float *restrict out, size_t ld_out, const uint8_t *restrict W,                \
                     size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,        \
                     size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {    \
        (void)tmp;                                                                                 \
        f_rows(out, ld_out, W, w_row_bytes, o0, o1, act, act_row_bytes, n_rows_x, n_in, wt);       \
    }

F_ROWS_FN(rows_f32, WF32)
F_ROWS_FN(rows_f16, WF16)
F_ROWS_FN(rows_bf16, WBF16)

static void rows_q4_K(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                      size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                      size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {
    kernel_rows_dequant(rows_f32, GGML_TYPE_Q4_K, out, ld_out, W, w_row_bytes, o0, o1, act,
                        act_row_bytes, n_rows_x, n_in, tmp);
}

static void rows_q6_K(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                      size_t w_row_bytes, size_t o0, size_t o1, const uint8_t *restrict act,
                      size_t act_row_bytes, size_t n_rows_x, size_t n_in, float *restrict tmp) {
    kernel_rows_dequant(rows_f32, GGML_TYPE_Q6_K, out, ld_out, W, w_row_bytes, o0, o1, act,
                        act_row_bytes, n_rows_x, n_in, tmp);
}

const kernel_type_impl kernel_impl_avx2[GGML_TYPE_COUNT_MAX] = {
    [GGML_TYPE_F32] = {GGML_TYPE_F32, rows_f32},    [GGML_TYPE_F16] = {GGML_TYPE_F32, rows_f16},
    [GGML_TYPE_BF16] = {GGML_TYPE_F32, rows_bf16},  [GGML_TYPE_Q8_0] = {GGML_TYPE_Q8_0, rows_q8_0},
    [GGML_TYPE_Q4_0] = {GGML_TYPE_Q8_0, rows_q4_0}, [GGML_TYPE_Q4_K] = {GGML_TYPE_F32, rows_q4_K},
    [GGML_TYPE_Q6_K] = {GGML_TYPE_F32, rows_q6_K},
};

#endif
