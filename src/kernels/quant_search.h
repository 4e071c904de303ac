/* Internal to the reference quantizers (quant.c, quant_q32.c, quant_kq.c,
 * mxfp4_ref.c): the largest-magnitude, rounding, search and packing steps
 * ggml's quantizers share, written so that the float operations and their
 * order are ggml's (ggml-quants.c), which is what makes tps's quantized
 * blocks equal llama-quantize's. Not for the hot path and not for other
 * modules. */
#ifndef TPS_KERNELS_QUANT_SEARCH_H
#define TPS_KERNELS_QUANT_SEARCH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Below this a group's largest magnitude counts as all zero (ggml's GROUP_MAX_EPS). */
#define QUANT_GROUP_EPS 1e-15f

/* Scale steps either side of the first guess in llama-quantize's IQ4_NL /
 * IQ4_XS search (quantize_iq4_nl / quantize_iq4_xs pass 7). */
#define IQ4_NTRY 7

/* The largest magnitude of x (n,), and in *max (NULL: not wanted) the
 * first value that has it: ggml's amax and max, a NaN counting as neither. */
ALWAYS_INLINE float quant_absmax(const float *restrict x, size_t n, float *max) {
    float amax = 0.0f, first = 0.0f;
    for (size_t j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            first = x[j];
        }
    if (max) *max = first;
    return amax;
}

/* Quants q0 and q1 (0..31) of elements j and j + 16 of a 32-element block
 * as the formats hold them: their low 4 bits in the low and high nibble of
 * qs[j], their fifth bits as bits j and j + 16 of *h (Q5_0 and Q5_1 store
 * that word little-endian as qh). */
ALWAYS_INLINE void quant_pack_pair(uint8_t *restrict qs, uint32_t *h, int j, unsigned q0,
                                   unsigned q1) {
    qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
    *h |= (q0 >> 4 & 1) << j | (q1 >> 4 & 1) << (j + 16);
}

/* One Q4_0 (half 8) or Q5_0 (half 16) block of x (32,), ggml's rule: the
 * step d = max / -half of the first largest magnitude (fp16 in *d), the
 * quants min(2 half - 1, (int)(x / d + half + 0.5)), packed into qs and
 * (Q5_0) qh as quant_pack_pair says. */
ALWAYS_INLINE void quant_block_0(const float *restrict x, int half, uint16_t *d,
                                 uint8_t *restrict qs, uint8_t *restrict qh) {
    float max;
    quant_absmax(x, 32, &max);
    const float step = max / (float)-half;
    const float id = step ? 1.0f / step : 0.0f;
    *d = fp32_to_fp16(step);
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        const int8_t v0 = (int8_t)(x[j] * id + ((float)half + 0.5f));
        const int8_t v1 = (int8_t)(x[j + 16] * id + ((float)half + 0.5f));
        quant_pack_pair(qs, &h, j, (unsigned)(v0 < 2 * half - 1 ? v0 : 2 * half - 1),
                        (unsigned)(v1 < 2 * half - 1 ? v1 : 2 * half - 1));
    }
    if (qh) memcpy(qh, &h, sizeof h);
}

/* Round to nearest, ties to even, by the float trick ggml uses (|v| < 2^22):
 * adding 1.5 * 2^23 leaves the integer in the low mantissa bits. */
static inline int quant_nearest_int(float v) {
    const float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int quant_clamp(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Index of the kvalues_iq4nl entry nearest x (ties to the lower one's
 * neighbour as ggml's bisection resolves them). */
static inline int iq4_nearest_level(float x) {
    const int8_t *v = kvalues_iq4nl;
    if (x <= v[0]) return 0;
    if (x >= v[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (x < v[mid])
            hi = mid;
        else
            lo = mid;
    }
    return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

/* The scale of one group of n for the IQ4 grid, weights w: the least
 * squares scale of the levels nearest x / d for d from the group's largest
 * magnitude, then of 2 ntry + 1 other first guesses, the best kept. L gets
 * the first guess's levels. 0 for an all-zero group. */
static inline float iq4_block_scale(const float *restrict x, const float *restrict w,
                                    uint8_t *restrict L, int n, int ntry) {
    const int8_t *v = kvalues_iq4nl;
    float max;
    if (quant_absmax(x, (size_t)n, &max) < QUANT_GROUP_EPS) return 0.0f;
    float d = ntry > 0 ? -max / v[0] : max / v[0];
    float id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < n; j++) {
        const int l = iq4_nearest_level(id * x[j]);
        const float q = v[l];
        L[j] = (uint8_t)l;
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
    float best = d * sumqx;
    for (int t = -ntry; t <= ntry; t++) {
        id = (float)(t + v[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < n; j++) {
            const float q = v[iq4_nearest_level(id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

#endif
