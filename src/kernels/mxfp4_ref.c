/* MXFP4's reference conversions: ggml's dequantizer and reference
 * quantizer (ggml-quants.c) bit for bit, and the codes' values. Readable,
 * not fast; calls nothing (quant.c's dequantize_row and quantize_row_any
 * dispatch here). */
#include <math.h>

#include "kernels/quant.h"
#include "kernels/quant_search.h" /* quant_absmax */

const int8_t kernel_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

void dequantize_row_mxfp4(float *restrict y, const block_mxfp4 *restrict x, size_t n) {
    assert(n % QK_MXFP4 == 0);
    for (size_t i = 0; i < n / QK_MXFP4; i++) {
        const float d = kernel_e8m0_half(x[i].e);
        for (size_t j = 0; j < QK_MXFP4 / 2; j++) {
            y[i * QK_MXFP4 + j] = kernel_kvalues_mxfp4[x[i].qs[j] & 0x0f] * d;
            y[i * QK_MXFP4 + j + QK_MXFP4 / 2] = kernel_kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
    }
}

/* The code whose value times e is nearest x, the lowest on ties. */
static uint8_t nearest_code(float x, float e) {
    uint8_t best = 0;
    float best_err = fabsf(kernel_kvalues_mxfp4[0] * e - x);
    for (uint8_t i = 1; i < 16; i++) {
        const float err = fabsf(kernel_kvalues_mxfp4[i] * e - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

void quantize_row_mxfp4_ref(block_mxfp4 *restrict y, const float *restrict x, size_t n) {
    assert(n % QK_MXFP4 == 0);
    for (size_t i = 0; i < n / QK_MXFP4; i++) {
        const float *xb = x + i * QK_MXFP4;
        const float amax = quant_absmax(xb, QK_MXFP4, NULL);
        /* ggml converts the float straight to uint8_t; through int is what
         * x86 does for the (never reached) negative values, without UB */
        const uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = kernel_e8m0_half(e);
        y[i].e = e;
        for (size_t j = 0; j < QK_MXFP4 / 2; j++)
            y[i].qs[j] =
                (uint8_t)(nearest_code(xb[j], d) | nearest_code(xb[QK_MXFP4 / 2 + j], d) << 4);
    }
}
