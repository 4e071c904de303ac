/* Portable scalar tier of the K-quant dots: Q4_K and Q6_K weights against
 * activations quantized once per call to Q8_K blocks (act.c). Each output element is the
 * integer-then-float formula of kernel_impl.h written out plainly, one dot per element; the AVX2
 * tier (dot_kquant_avx2.c) must give the same bits. Not tuned: no intrinsics, no tiling; no other
 * K-quant types (Q2_K, Q3_K, Q5_K). */
#include <math.h>

#include "kernels/kernel_impl.h"

/* W row (nb block_q4_K) . x (nb block_q8_K): kernel_impl.h's Q4_K formula. */
static float dot_q4_K_q8_K(const block_q4_K *restrict w, const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        uint8_t sc[8], m[8];
        kernel_q4_K_scales(w[b].scales, sc, m);
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            /* sub-block j: the low (j even) or high nibbles of 32 bytes */
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            const int8_t *a = x[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 32; l++)
                s += ((q[l] >> shift) & 15) * a[l];
            isum += sc[j] * s;
            imin += m[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        const float dx = x[b].d;
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * dx, sumf);
        sumf = fmaf((float)imin, -fp16_to_fp32(w[b].dmin) * dx, sumf);
    }
    return sumf;
}

/* W row (nb block_q6_K) . x (nb block_q8_K): kernel_impl.h's Q6_K formula.
 * Elements 32c + l (c = 0..3, l < 32) of each 128-half take ql[l + 32(c&1)]'s
 * low (c < 2) or high nibble and bits 2c, 2c+1 of qh[l]; scale 2c + l/16. */
static float dot_q6_K_q8_K(const block_q6_K *restrict w, const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[b].ql + 64 * h;
            const uint8_t *qh = w[b].qh + 32 * h;
            const int8_t *sc = w[b].scales + 8 * h;
            const int8_t *a = x[b].qs + 128 * h;
            for (int c = 0; c < 4; c++)
                for (int s = 0; s < 2; s++) {
                    int32_t t = 0;
                    for (int l = 16 * s; l < 16 * s + 16; l++) {
                        const int lo = (ql[l + 32 * (c & 1)] >> (4 * (c >> 1))) & 15;
                        const int hi = (qh[l] >> (2 * c)) & 3;
                        t += ((lo | (hi << 4)) - 32) * a[32 * c + l];
                    }
                    isum += sc[2 * c + s] * t;
                }
        }
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * x[b].d, sumf);
    }
    return sumf;
}

#define ROWS_FN(name, dot, wtype_t)                                                                \
    void name(float *restrict out, size_t ld_out, const uint8_t *restrict W, size_t w_row_bytes,   \
              size_t o0, size_t o1, const uint8_t *restrict act, size_t act_row_bytes,             \
              size_t n_rows_x, size_t n_in, float *restrict tmp) {                                 \
        (void)tmp;                                                                                 \
        for (size_t r = 0; r < n_rows_x; r++) {                                                    \
            const block_q8_K *a = (const block_q8_K *)(act + r * act_row_bytes);                   \
            for (size_t o = o0; o < o1; o++)                                                       \
                out[r * ld_out + o] = dot((const wtype_t *)(W + o * w_row_bytes), a, n_in / QK_K); \
        }                                                                                          \
    }

ROWS_FN(kernel_rows_q4_K_scalar, dot_q4_K_q8_K, block_q4_K)
ROWS_FN(kernel_rows_q6_K_scalar, dot_q6_K_q8_K, block_q6_K)
