/* Internal to the reference quantizers (quant_q32.c, quant_kq.c): the
 * rounding and search steps ggml's quantizers share, written so that the
 * float operations and their order are ggml's (ggml-quants.c), which is
 * what makes tps's quantized blocks equal llama-quantize's. Not for the
 * hot path and not for other modules. */
#ifndef TPS_KERNELS_QUANT_SEARCH_H
#define TPS_KERNELS_QUANT_SEARCH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Below this a group's largest magnitude counts as all zero (ggml's GROUP_MAX_EPS). */
#define QUANT_GROUP_EPS 1e-15f

/* Scale steps either side of the first guess in llama-quantize's IQ4_NL /
 * IQ4_XS search (quantize_iq4_nl / quantize_iq4_xs pass 7). */
#define IQ4_NTRY 7

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
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < QUANT_GROUP_EPS) return 0.0f;
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
