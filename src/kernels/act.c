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

/* Two int16 in one int32 word, a in the low half. */
static int32_t int16_pair(int32_t a, int32_t b) {
    return (int32_t)(((uint32_t)(uint16_t)(int16_t)b << 16) | (uint16_t)(int16_t)a);
}

void kernel_quantize_act_k(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2) {
    block_q8_K *y = (block_q8_K *)row;
    const size_t nb = n / QK_K;
#if KERNEL_HAVE_AVX2
    if (use_avx2)
        quantize_row_q8_K_avx2(y, x, n);
    else
        quantize_row_q8_K_ref(y, x, n);
#else
    (void)use_avx2;
    quantize_row_q8_K_ref(y, x, n);
#endif
    kernel_act_k_side *side = (kernel_act_k_side *)(row + kernel_act_k_side_off(nb));
    for (size_t b = 0; b < nb; b++) {
        const int16_t *bs = y[b].bsums;
        int32_t s32[8]; /* |s| <= 32 * 127: an int16 */
        for (int j = 0; j < 8; j++)
            s32[j] = bs[2 * j] + bs[2 * j + 1];
        for (int w = 0; w < 2; w++) {
            side[b].q4[2 * w] = int16_pair(s32[4 * w], s32[4 * w + 2]);
            side[b].q4[2 * w + 1] = int16_pair(s32[4 * w + 1], s32[4 * w + 3]);
        }
        for (int w = 0; w < 4; w++) {
            side[b].q6[2 * w] = int16_pair(bs[4 * w], bs[4 * w + 2]);
            side[b].q6[2 * w + 1] = int16_pair(bs[4 * w + 1], bs[4 * w + 3]);
        }
    }
}
