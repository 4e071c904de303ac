/* AVX2 + FMA versions of the row helpers' reductions and streams (ops.c
 * calls them when the build has AVX2). Each reduction: 4 accumulators over
 * 32-float steps, one over 8-float steps, a fixed fold, then the scalar tail
 * in order. exp for softmax and swiglu: one 8-lane polynomial, the same
 * function for every element (the tail goes through a padded vector), so
 * a value never depends on where it sits in the row. */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

float kernel_dot_f32_avx2(const float *restrict a, const float *restrict b, size_t n) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    size_t k = 0;
    for (; k + 32 <= n; k += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), acc3);
    }
    for (; k + 8 <= n; k += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; k < n; k++)
        s = fmaf(a[k], b[k], s);
    return s;
}

void kernel_axpy_avx2(float *restrict y, float a, const float *restrict x, size_t n) {
    const __m256 va = _mm256_set1_ps(a);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] = fmaf(a, x[i], y[i]);
}

void kernel_mul_scale_avx2(float *out, const float *x, const float *restrict w, float s, size_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs),
                                                _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        out[i] = x[i] * s * w[i];
}

void kernel_add_avx2(float *out, const float *a, const float *b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

void kernel_scale_avx2(float *x, float s, size_t n) {
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512 vs16 = _mm512_set1_ps(s);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs16));
#endif
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++)
        x[i] *= s;
}

/* e^x lane by lane (Cephes expf: x = k ln2 + r, |r| <= ln2 / 2, a
 * degree-6 polynomial for e^r, 2^k from exponent bits); about 1 ulp. x is
 * clamped to [-87.33, 88]: below, the result is FLT_MIN rather than 0.
 * Written once for both widths (V the intrinsics' prefix): a lane of exp16
 * is the same float as the lane of exp8, so the width a row takes never
 * moves its bits. */
#define DEFINE_EXP(name, T, V, ROUND, CAST_PS)                                                     \
    static inline T name(T x) {                                                                    \
        x = V##_min_ps(V##_max_ps(x, V##_set1_ps(-87.3365f)), V##_set1_ps(88.0f));                 \
        const T k = ROUND(V##_mul_ps(x, V##_set1_ps(1.44269504088896341f)),                        \
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);                          \
        T r = V##_fnmadd_ps(k, V##_set1_ps(0.693359375f), x);                                      \
        r = V##_fnmadd_ps(k, V##_set1_ps(-2.12194440e-4f), r);                                     \
        T p = V##_set1_ps(1.9875691500e-4f);                                                       \
        p = V##_fmadd_ps(p, r, V##_set1_ps(1.3981999507e-3f));                                     \
        p = V##_fmadd_ps(p, r, V##_set1_ps(8.3334519073e-3f));                                     \
        p = V##_fmadd_ps(p, r, V##_set1_ps(4.1665795894e-2f));                                     \
        p = V##_fmadd_ps(p, r, V##_set1_ps(1.6666665459e-1f));                                     \
        p = V##_fmadd_ps(p, r, V##_set1_ps(5.0000001201e-1f));                                     \
        const T y = V##_add_ps(V##_fmadd_ps(p, V##_mul_ps(r, r), r), V##_set1_ps(1.0f));           \
        const T e =                                                                                \
            CAST_PS(V##_slli_epi32(V##_add_epi32(V##_cvtps_epi32(k), V##_set1_epi32(127)), 23));   \
        return V##_mul_ps(y, e);                                                                   \
    }

DEFINE_EXP(exp8, __m256, _mm256, _mm256_round_ps, _mm256_castsi256_ps)
#if defined(__AVX512F__)
DEFINE_EXP(exp16, __m512, _mm512, _mm512_roundscale_ps, _mm512_castsi512_ps)
#endif

/* x (n,) <- exp(x - max), returns their sum: 8-lane sum over whole vectors,
 * hsum8, then the tail in order. With AVX-512, 16 at a time through exp16,
 * the sum taking the two halves in turn, as 8 at a time would: the same
 * bits at half the exp's instructions (the softmax was 5% of a 2k-token
 * prefill of 1B, 2026-12-06). */
static float exp_sub_sum(float *x, float max, size_t n) {
    const __m256 vm = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0;
#if defined(__AVX512F__)
    const __m512 vm16 = _mm512_set1_ps(max);
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm16));
        _mm512_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
#endif
    for (; i + 8 <= n; i += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum8(acc);
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, (n - i) * sizeof *t);
        _mm256_storeu_ps(t, exp8(_mm256_sub_ps(_mm256_loadu_ps(t), vm)));
        for (size_t k = 0; k < n - i; k++)
            sum += x[i + k] = t[k];
    }
    return sum;
}

/* With sink -INFINITY the plain softmax, bit for bit: the max is x's, and
 * exp(-inf) adds 0 to the sum. With AVX-512 the max runs four zmm chains (a
 * maximum is the same whatever the order; one ymm chain waited on each
 * vmaxps's latency, a fifth of the softmax at 2048 scores). */
void kernel_softmax_sink_avx2(float *x, size_t n, float sink) {
    __m256 vmax = _mm256_set1_ps(x[0]);
    size_t i = 0;
#if defined(__AVX512F__)
    __m512 m0 = _mm512_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
    for (; i + 64 <= n; i += 64) {
        m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
        m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
    }
    const __m512 mz = _mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3));
    vmax = _mm256_max_ps(_mm512_castps512_ps256(mz),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(mz), 1)));
#endif
    for (; i + 8 <= n; i += 8)
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float m8[8], max = x[0];
    _mm256_storeu_ps(m8, vmax);
    for (int k = 0; k < 8; k++)
        max = m8[k] > max ? m8[k] : max;
    for (; i < n; i++)
        max = x[i] > max ? x[i] : max;
    max = sink > max ? sink : max;
    const float sum = exp_sub_sum(x, max, n) + expf(sink - max);
    kernel_scale_avx2(x, 1.0f / sum, n);
}

static inline __m256 swiglu8(__m256 g, __m256 u) {
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), u);
}

/* With AVX-512, 16 at a time: each lane the same steps as swiglu8's. */
void kernel_swiglu_avx2(float *out, const float *gate, const float *up, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        const __m512 g = _mm512_loadu_ps(gate + i);
        const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_storeu_ps(out + i,
                         _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)),
                                       _mm512_loadu_ps(up + i)));
    }
#endif
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, swiglu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
    if (i < n) {
        float g[8] = {0}, u[8] = {0};
        memcpy(g, gate + i, (n - i) * sizeof *g);
        memcpy(u, up + i, (n - i) * sizeof *u);
        _mm256_storeu_ps(g, swiglu8(_mm256_loadu_ps(g), _mm256_loadu_ps(u)));
        memcpy(out + i, g, (n - i) * sizeof *g);
    }
}

/* kernel_delta_rule in two passes a row: decay and M[j] . k together, then
 * the write and M[j] . q together, the row in L1 throughout. */
void kernel_delta_rule_avx2(float *restrict M, const float *restrict q, const float *restrict k,
                            const float *restrict v, float decay, float beta, float scale,
                            float *restrict o, size_t S) {
    const __m256 vdecay = _mm256_set1_ps(decay);
    for (size_t j = 0; j < S; j++) {
        float *m = M + j * S;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        size_t i = 0;
        for (; i + 16 <= S; i += 16) {
            const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(m + i), vdecay);
            const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(m + i + 8), vdecay);
            _mm256_storeu_ps(m + i, x0);
            _mm256_storeu_ps(m + i + 8, x1);
            a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(k + i), a0);
            a1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(k + i + 8), a1);
        }
        float sk = hsum8(_mm256_add_ps(a0, a1));
        for (size_t t = i; t < S; t++) {
            m[t] *= decay;
            sk = fmaf(m[t], k[t], sk);
        }
        const float d = (v[j] - sk) * beta;
        const __m256 vd = _mm256_set1_ps(d);
        a0 = a1 = _mm256_setzero_ps();
        for (i = 0; i + 16 <= S; i += 16) {
            const __m256 x0 = _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i), _mm256_loadu_ps(m + i));
            const __m256 x1 =
                _mm256_fmadd_ps(vd, _mm256_loadu_ps(k + i + 8), _mm256_loadu_ps(m + i + 8));
            _mm256_storeu_ps(m + i, x0);
            _mm256_storeu_ps(m + i + 8, x1);
            a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(q + i), a0);
            a1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(q + i + 8), a1);
        }
        float sq = hsum8(_mm256_add_ps(a0, a1));
        for (size_t t = i; t < S; t++) {
            m[t] = fmaf(d, k[t], m[t]);
            sq = fmaf(m[t], q[t], sq);
        }
        o[j] = sq * scale;
    }
}

#endif
