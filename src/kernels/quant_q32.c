/* Reference tier of the 32-element block formats beside Q8_0 / Q4_0: Q4_1,
 * Q5_0, Q5_1 and IQ4_NL. Each dequantizer is ggml's dequantize_row_* in
 * float operations and their order, so its output equals ggml's bit for
 * bit; each quantizer computes what llama-quantize writes for the type
 * without an importance matrix (ggml's quantize_row_*_ref, and for IQ4_NL
 * the 7-step scale search of quantize_iq4_nl), so a file tps makes holds
 * the bytes llama.cpp's would (tests/test_quant_ref.c checks both against
 * blocks made by llama.cpp). Readable, not fast: no SIMD, no threading. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/quant_search.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* ggml's float steps, each rounded on its own */
#endif

const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

/* ---- Q4_1 / Q5_1: min and step over each block -------------------------- */

#define MIN15(v) ((v) < 15 ? (v) : 15)

/* One Q4_1 (nmax 15, qh NULL) or Q5_1 (nmax 31) block of x: its min and
 * step (max - min) / nmax (fp16 in *m and *d), the quants (x - min) / step
 * rounded half up (Q4_1's clamped to 15, as ggml's is; Q5_1's as ggml's,
 * not clamped), packed into qs and (Q5_1) qh. */
ALWAYS_INLINE void min_step_block(const float *restrict x, int nmax, uint16_t *d, uint16_t *m,
                                  uint8_t *restrict qs, uint8_t *restrict qh) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < QK4_0; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    const float step = (hi - lo) / (float)nmax, id = step ? 1.0f / step : 0.0f;
    *d = fp32_to_fp16(step);
    *m = fp32_to_fp16(lo);
    uint32_t h = 0;
    for (int j = 0; j < QK4_0 / 2; j++) {
        /* ggml's: Q4_1 through int8 and clamped, Q5_1 straight to uint8 */
        const uint8_t v0 = nmax == 15 ? (uint8_t)MIN15((int8_t)((x[j] - lo) * id + 0.5f))
                                      : (uint8_t)((x[j] - lo) * id + 0.5f);
        const uint8_t v1 = nmax == 15
                               ? (uint8_t)MIN15((int8_t)((x[j + QK4_0 / 2] - lo) * id + 0.5f))
                               : (uint8_t)((x[j + QK4_0 / 2] - lo) * id + 0.5f);
        quant_pack_pair(qs, &h, j, v0, v1);
    }
    if (qh) memcpy(qh, &h, sizeof h);
}

void quantize_row_q4_1_ref(block_q4_1 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, x += QK4_0)
        min_step_block(x, 15, &y[i].d, &y[i].m, y[i].qs, NULL);
}

void quantize_row_q5_1_ref(block_q5_1 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, x += QK4_0)
        min_step_block(x, 31, &y[i].d, &y[i].m, y[i].qs, y[i].qh);
}

/* ---- Q5_0: Q4_0's rule with 32 levels ------------------------------------ */

void quantize_row_q5_0_ref(block_q5_0 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, x += QK4_0)
        quant_block_0(x, 16, &y[i].d, y[i].qs, y[i].qh);
}

/* ---- IQ4_NL: the block's best scale for the non-linear grid -------------- */

void quantize_row_iq4_nl(block_iq4_nl *restrict y, const float *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float w[QK4_0];
        uint8_t L[QK4_0];
        for (int j = 0; j < QK4_0; j++)
            w[j] = x[j] * x[j];
        const float d = iq4_block_scale(x, w, L, QK4_0, IQ4_NTRY);
        y[i].d = fp32_to_fp16(d);
        /* one block per superblock: the levels once more, for the chosen scale */
        const float id = d ? 1.0f / d : 0.0f;
        for (int j = 0; j < QK4_0; j++)
            L[j] = (uint8_t)iq4_nearest_level(id * x[j]);
        uint32_t h = 0; /* no fifth bits: the levels are 0..15 */
        for (int j = 0; j < QK4_0 / 2; j++)
            quant_pack_pair(y[i].qs, &h, j, L[j], L[j + QK4_0 / 2]);
    }
}

/* ---- dequantizers --------------------------------------------------------- */

void dequantize_row_q4_1(float *restrict y, const block_q4_1 *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = (float)(x[i].qs[j] & 15) * d + m;
            y[j + QK4_0 / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* The fifth bits of elements j and j + 16, as 0 or 16. */
static inline unsigned q5_hi(uint32_t qh, int j) {
    return (qh >> j & 1) << 4;
}

void dequantize_row_q5_0(float *restrict y, const block_q5_0 *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = (int)((x[i].qs[j] & 15) | q5_hi(qh, j)) - 16;
            const int q1 = (int)((x[i].qs[j] >> 4) | q5_hi(qh, j + 16)) - 16;
            y[j] = (float)q0 * d;
            y[j + QK4_0 / 2] = (float)q1 * d;
        }
    }
}

void dequantize_row_q5_1(float *restrict y, const block_q5_1 *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, sizeof qh);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = (int)((x[i].qs[j] & 15) | q5_hi(qh, j));
            const int q1 = (int)((x[i].qs[j] >> 4) | q5_hi(qh, j + 16));
            y[j] = (float)q0 * d + m;
            y[j + QK4_0 / 2] = (float)q1 * d + m;
        }
    }
}

void dequantize_row_iq4_nl(float *restrict y, const block_iq4_nl *restrict x, size_t n) {
    assert(n % QK4_0 == 0);
    for (size_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = d * (float)kvalues_iq4nl[x[i].qs[j] & 15];
            y[j + QK4_0 / 2] = d * (float)kvalues_iq4nl[x[i].qs[j] >> 4];
        }
    }
}
