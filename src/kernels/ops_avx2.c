/* AVX2 + FMA versions of the row helpers' reductions and streams (ops.c
 * calls them when the build has AVX2). Each reduction: 4 accumulators over
 * 32-float steps, one over 8-float steps, a fixed fold, then the scalar tail
 * in order. Not here: transcendental functions (ops.c uses libm). */
#include "kernels/kernel_impl.h"

#if KERNEL_HAVE_AVX2

#include <immintrin.h>
#include <math.h>

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

float kernel_sumsq_avx2(const float *x, size_t n) {
    return kernel_dot_f32_avx2(x, x, n);
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
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++)
        x[i] *= s;
}

#endif
