/* Row helpers for the forward pass: rmsnorm, softmax, swiglu, add, scale,
 * dot, axpy, embedding row lookup. Portable C here; the reductions and
 * streams that matter go to ops_avx2.c when the build has AVX2. Every
 * reduction has a fixed order for a given n. No threading, no allocation. */
#include <math.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/kernel_impl.h"
#include "kernels/ops.h"
#include "kernels/quant.h" /* fp16 conversions */
#include "base/error.h"

#if !KERNEL_HAVE_AVX2
/* Scalar dot with 8 partial sums folded pairwise, then the tail. */
static float dot_scalar(const float *restrict a, const float *restrict b, size_t n) {
    float s[8] = {0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int l = 0; l < 8; l++)
            s[l] += a[k + l] * b[k + l];
    float sum = ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
    for (; k < n; k++)
        sum += a[k] * b[k];
    return sum;
}
#endif

float kernel_dot_f32(const float *restrict a, const float *restrict b, size_t n) {
#if KERNEL_HAVE_AVX2
    return kernel_dot_f32_avx2(a, b, n);
#else
    return dot_scalar(a, b, n);
#endif
}

void kernel_axpy(float *restrict y, float a, const float *restrict x, size_t n) {
#if KERNEL_HAVE_AVX2
    kernel_axpy_avx2(y, a, x, n);
#else
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
#endif
}

/* ggml's rms_norm, operation for operation: the squares rounded to float,
 * summed in double in index order, the mean rounded to float, scale =
 * 1 / sqrtf(mean + eps), then (x * scale) * w. A quantized token embedding
 * puts the first layer's normalized inputs exactly on rounding ties of the
 * activation quantizer (127 k / 16 = 63.5 ...), so any other order of this
 * sum (a float one had been) flips those roundings against llama.cpp's. */
void kernel_rmsnorm(float *out, const float *x, const float *restrict w, size_t n, float eps) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float s = 1.0f / sqrtf(mean + eps);
#if KERNEL_HAVE_AVX2
    kernel_mul_scale_avx2(out, x, w, s, n);
#else
    for (size_t i = 0; i < n; i++)
        out[i] = x[i] * s * w[i];
#endif
}

void kernel_softmax(float *x, size_t n) {
    kernel_softmax_sink(x, n, -INFINITY); /* exp(-inf) adds nothing: the plain softmax */
}

void kernel_softmax_sink(float *x, size_t n, float sink) {
    if (n == 0) return;
#if KERNEL_HAVE_AVX2
    kernel_softmax_sink_avx2(x, n, sink);
#else
    float max = x[0];
    for (size_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    max = sink > max ? sink : max;
    float sum = 0.0f;
    for (size_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    sum += expf(sink - max);
    kernel_scale(x, 1.0f / sum, n);
#endif
}

void kernel_swiglu(float *out, const float *gate, const float *up, size_t n) {
#if KERNEL_HAVE_AVX2
    kernel_swiglu_avx2(out, gate, up, n);
#else
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
#endif
}

void kernel_add(float *out, const float *a, const float *b, size_t n) {
#if KERNEL_HAVE_AVX2
    kernel_add_avx2(out, a, b, n);
#else
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
#endif
}

static float gelu_tanh(float x) {
    const float a = 0.044715f, sqrt_2_over_pi = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(sqrt_2_over_pi * x * (1.0f + a * x * x)));
}

void kernel_gelu_table(float *table) {
    for (uint32_t h = 0; h < 65536; h++)
        table[h] = fp16_to_fp32(fp32_to_fp16(gelu_tanh(fp16_to_fp32((uint16_t)h))));
}

void kernel_geglu(float *out, const float *gate, const float *up, size_t n,
                  const float *restrict table) {
    for (size_t i = 0; i < n; i++) {
        const float g = gate[i];
        float v;
        if (g <= -10.0f) {
            v = 0.0f;
        } else if (g >= 10.0f) {
            v = g * up[i];
        } else {
#if defined(__F16C__)
            const uint16_t h = _cvtss_sh(g, _MM_FROUND_TO_NEAREST_INT);
#else
            const uint16_t h = fp32_to_fp16(g);
#endif
            v = table[h] * up[i];
        }
        out[i] = v;
    }
}

void kernel_scale(float *x, float s, size_t n) {
#if KERNEL_HAVE_AVX2
    kernel_scale_avx2(x, s, n);
#else
    for (size_t i = 0; i < n; i++)
        x[i] *= s;
#endif
}

void kernel_delta_rule(float *restrict M, const float *restrict q, const float *restrict k,
                       const float *restrict v, float decay, float beta, float scale,
                       float *restrict o, size_t S) {
#if KERNEL_HAVE_AVX2
    kernel_delta_rule_avx2(M, q, k, v, decay, beta, scale, o, S);
#else
    for (size_t j = 0; j < S; j++) {
        float *m = M + j * S;
        kernel_scale(m, decay, S);
        const float d = (v[j] - kernel_dot_f32(m, k, S)) * beta;
        kernel_axpy(m, d, k, S);
        o[j] = kernel_dot_f32(m, q, S) * scale;
    }
#endif
}

int kernel_get_row(float *restrict out, const void *restrict W, uint32_t wtype, size_t row,
                   size_t n_cols) {
    const size_t row_bytes = kernel_row_bytes(wtype, n_cols);
    if (!kernel_type_supported(wtype)) return TPS_EUNSUP;
    if (row_bytes == 0 && n_cols != 0) return TPS_EINVAL;
    return dequantize_row(out, (const uint8_t *)W + row * row_bytes, wtype, n_cols);
}
