/* Activation rows, quantized once per matmul call before any product: Q8_0
 * blocks with the side data the Q8_0/Q4_0 kernels read, or Q8_K blocks for
 * the K-quants, each by the AVX2 quantizer or the reference one (the same
 * bits either way). The file calls down into the tiers (dot_avx2.c,
 * dot_kquant_avx2.c, quant.c) and nothing in them calls back. Not here:
 * weights (repack.c packs those), threading (matmul.c). */
#include "kernels/kernel_impl.h"

void kernel_quantize_act(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2) {
    const size_t nb = n / QK8_0;
    block_q8_0 *y = (block_q8_0 *)row;
    kernel_act_side *side = (kernel_act_side *)(row + kernel_act_side_off(nb));
#if KERNEL_HAVE_AVX2
    if (use_avx2) {
        quantize_row_q8_0_avx2(y, x, n, side);
        return;
    }
#else
    (void)use_avx2;
#endif
    for (size_t b = 0; b < nb; b++) {
        float s;
        quantize_row_q8_0_act_ref(&y[b], x + b * QK8_0, QK8_0, &s);
        int32_t sum = 0;
        for (int j = 0; j < QK8_0; j++)
            sum += y[b].qs[j];
        side[b] = (kernel_act_side){fp16_to_fp32(y[b].d), -128 * sum, -8 * sum, s};
    }
}

void kernel_quantize_act_k(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2) {
    block_q8_K *y = (block_q8_K *)row;
#if KERNEL_HAVE_AVX2
    if (use_avx2) {
        quantize_row_q8_K_avx2(y, x, n);
        return;
    }
#else
    (void)use_avx2;
#endif
    quantize_row_q8_K_ref(y, x, n);
}
