/* Reference tier for formats: fp16/bf16 conversion, ggml's reference
 * quantizers and the dequantizers, written to be read and checked against
 * ggml-quants.c, not to be fast. No SIMD, no threading, no allocation. */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "kernels/quant_search.h" /* quant_absmax, quant_block_0, quant_nearest_int */

/* ---- fp16 --------------------------------------------------------------- */

float fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return kernel_bits_f32(sign);
        /* subnormal: normalise the mantissa */
        uint32_t e = 127 - 15 + 1;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            e--;
        }
        mant &= 0x3ffu;
        return kernel_bits_f32(sign | (e << 23) | (mant << 13));
    }
    if (exp == 31) return kernel_bits_f32(sign | 0x7f800000u | (mant << 13));
    return kernel_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
    uint32_t u = kernel_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00u; /* NaN */
    int exp = (int)(u >> 23) - 127;
    if (exp >= 16) return sign | 0x7c00u; /* inf, or too large */
    uint32_t mant = u & 0x7fffffu;
    if (exp >= -14) {
        uint32_t h = ((uint32_t)(exp + 15) << 10) | (mant >> 13);
        uint32_t rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into inf */
        return (uint16_t)(sign | h);
    }
    if (exp < -25) return sign; /* below half the smallest subnormal */
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(-14 - exp) + 13; /* 14..24 */
    uint32_t h = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* The row forms of the conversions: y[i] = convert(x[i]), i < n. */
#define CONVERT_ROW_FN(name, out_t, in_t, convert)                                                 \
    void name(out_t *restrict y, const in_t *restrict x, size_t n) {                               \
        for (size_t i = 0; i < n; i++)                                                             \
            y[i] = convert(x[i]);                                                                  \
    }

CONVERT_ROW_FN(fp16_to_fp32_row, float, uint16_t, fp16_to_fp32)
CONVERT_ROW_FN(fp32_to_fp16_row, uint16_t, float, fp32_to_fp16)
CONVERT_ROW_FN(bf16_to_fp32_row, float, uint16_t, bf16_to_fp32)
CONVERT_ROW_FN(fp32_to_bf16_row, uint16_t, float, fp32_to_bf16)

/* ---- reference quantizers ---------------------------------------------- */

void quantize_row_q8_0_ref(block_q8_0 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK8_0 == 0);
    for (size_t i = 0; i < n / QK8_0; i++) {
        const float *xb = x + i * QK8_0;
        const float d = quant_absmax(xb, QK8_0, NULL) / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (size_t j = 0; j < QK8_0; j++)
            y[i].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

void quantize_row_q4_0_ref(block_q4_0 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++)
        quant_block_0(x + i * QK4_0, 8, &y[i].d, y[i].qs, NULL);
}

void quantize_row_q8_K_ref(block_q8_K *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float *xb = x + i * QK_K;
        float max; /* the first value of largest magnitude */
        const float amax = quant_absmax(xb, QK_K, &max);
        memset(y[i].bsums, 0, sizeof y[i].bsums);
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, QK_K);
            continue;
        }
        const float iscale = -127.f / max;
        for (size_t j = 0; j < QK_K; j++) {
            const int v = quant_nearest_int(iscale * xb[j]);
            y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (size_t k = 0; k < QK_K / 16; k++) {
            int sum = 0;
            for (size_t j = 0; j < 16; j++)
                sum += y[i].qs[16 * k + j];
            y[i].bsums[k] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

void quantize_row_q8_0_act_ref(block_q8_0 *restrict y, const float *restrict x, size_t n,
                               float *restrict s) {
    assert(n % QK8_0 == 0);
    for (size_t i = 0; i < n / QK8_0; i++) {
        const float *xb = x + i * QK8_0;
        const float amax = quant_absmax(xb, QK8_0, NULL);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int32_t sum = 0;
        for (size_t j = 0; j < QK8_0; j++) {
            y[i].qs[j] = (int8_t)nearbyintf(xb[j] * id); /* ties to even (the default mode) */
            sum += y[i].qs[j];
        }
        if (s) s[i] = fp16_to_fp32(fp32_to_fp16(d * (float)sum));
    }
}

/* ---- dequantizers ------------------------------------------------------ */

void dequantize_row_f16(float *restrict y, const uint16_t *restrict x, size_t n) {
    fp16_to_fp32_row(y, x, n);
}

void dequantize_row_bf16(float *restrict y, const uint16_t *restrict x, size_t n) {
    bf16_to_fp32_row(y, x, n);
}

void dequantize_row_q8_0(float *restrict y, const block_q8_0 *restrict x, size_t n) {
    assert(n % QK8_0 == 0);
    for (size_t i = 0; i < n / QK8_0; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (size_t j = 0; j < QK8_0; j++)
            y[i * QK8_0 + j] = x[i].qs[j] * d;
    }
}

void dequantize_row_q4_0(float *restrict y, const block_q4_0 *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++) {
        const float d = fp16_to_fp32(x[i].d);
        for (size_t j = 0; j < QK4_0 / 2; j++) {
            y[i * QK4_0 + j] = ((x[i].qs[j] & 0x0f) - 8) * d;
            y[i * QK4_0 + j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* Sub-block j's 6-bit scale and min from q4_K's packed 12 bytes. */
static void q4_K_scale_min(int j, const uint8_t *restrict q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void dequantize_row_q4_K(float *restrict y, const block_q4_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const uint8_t *q = x[i].qs;
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        int is = 0;
        for (int j = 0; j < QK_K; j += 64) {
            uint8_t sc, m;
            q4_K_scale_min(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            q4_K_scale_min(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (q[l] & 0xf) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void dequantize_row_q6_K(float *restrict y, const block_q6_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++) {
        const float d = fp16_to_fp32(x[i].d);
        const uint8_t *ql = x[i].ql;
        const uint8_t *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int n128 = 0; n128 < QK_K; n128 += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = (int8_t)((ql[l + 0] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = (int8_t)((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

void dequantize_row_q8_K(float *restrict y, const block_q8_K *restrict x, size_t n) {
    assert(n % QK_K == 0);
    for (size_t i = 0; i < n / QK_K; i++)
        for (size_t j = 0; j < QK_K; j++)
            y[i * QK_K + j] = x[i].qs[j] * x[i].d;
}
