/* Portable scalar tier of the K-quant dots: Q4_K, Q5_K and Q6_K weights
 * against activations quantized once per call to Q8_K blocks (act.c). Each
 * output element is the integer-then-float formula of kernel_impl.h written
 * out plainly, one dot per element; the AVX2 tiers (dot_kquant_avx2.c,
 * dot_kquant_x8_avx2.c) must give the same bits. Not tuned: no intrinsics,
 * no tiling. Q2_K, Q3_K and IQ4_XS: dot_kq_scalar.c. */
#include <math.h>
#include <stddef.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/kernel_impl.h"
#include "kernels/packed_kq.h"
#include "kernels/scalar_rows.h"

/* W row (n_in / 256 superblocks) . x: kernel_impl.h's Q4_K formula. Q5_K
 * (q5 1: block_q5_K, whose d, dmin and scales are Q4_K's) takes each
 * quant's fifth bit from qh too. Inlined into each type's kernel, so the
 * Q4_K one tests nothing per element. */
ALWAYS_INLINE float dot_q45_K(const uint8_t *restrict w, const block_q8_K *restrict x, size_t nb,
                              const int q5) {
    const size_t bytes = q5 ? sizeof(block_q5_K) : sizeof(block_q4_K);
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const block_q4_K *wb = (const block_q4_K *)(w + b * bytes);
        const uint8_t *qs = q5 ? ((const block_q5_K *)wb)->qs : wb->qs;
        const uint8_t *qh = q5 ? ((const block_q5_K *)wb)->qh : NULL;
        uint8_t sc[8], m[8];
        kernel_q4_K_scales(wb->scales, sc, m);
        int32_t isum = 0, imin = 0;
        for (int j = 0; j < 8; j++) {
            /* sub-block j: the low (j even) or high nibbles of 32 bytes */
            const uint8_t *q = qs + 32 * (j / 2);
            const int shift = 4 * (j % 2);
            const int8_t *a = x[b].qs + 32 * j;
            int32_t s = 0;
            for (int l = 0; l < 32; l++)
                s += (((q[l] >> shift) & 15) | (q5 ? ((qh[l] >> j) & 1) << 4 : 0)) * a[l];
            isum += sc[j] * s;
            imin += m[j] * (x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
        }
        sumf = scalar_k_min_steps(sumf, isum, imin, wb->d, wb->dmin, x[b].d);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_q4_K_scalar, 0, 0, dot_q45_K(w, (const block_q8_K *)a, n_in / QK_K, 0))
SCALAR_ROWS_FN(kernel_rows_q5_K_scalar, 0, 0, dot_q45_K(w, (const block_q8_K *)a, n_in / QK_K, 1))

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

SCALAR_ROWS_FN(kernel_rows_q6_K_scalar, 0, 0,
               dot_q6_K_q8_K((const block_q6_K *)w, (const block_q8_K *)a, n_in / QK_K))
