/* Portable scalar tier of Q2_K, Q3_K and IQ4_XS weight rows against Q8_K
 * activation rows (Q5_K's is Q4_K's, dot_kquant_scalar.c): packed_kq.h's formula written out
 * plainly, one dot per output element (the other tiers must give the same bits). Not tuned. The
 * packed groups' scalar tier is in repack_kq.c. */
#include <math.h>

#include "kernels/packed_kq.h"
#include "kernels/scalar_rows.h"

/* Q2_K / Q3_K: the 2 low bits of element 128h + 32s + l (l < 32). */
static inline int low2(const uint8_t *qs, int h, int s, int l) {
    return (qs[32 * h + l] >> (2 * s)) & 3;
}

static float dot_q2_K(const block_q2_K *restrict w, const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0, imin = 0;
        for (int k = 0; k < 16; k++) {
            const int h = k / 8, s = k % 8 / 2, l0 = 16 * (k % 2);
            int32_t t = 0;
            for (int l = l0; l < l0 + 16; l++)
                t += low2(w[b].qs, h, s, l) * x[b].qs[16 * k + l - l0];
            isum += (w[b].scales[k] & 15) * t;
            imin += (w[b].scales[k] >> 4) * x[b].bsums[k];
        }
        sumf = scalar_k_min_steps(sumf, isum, imin, w[b].d, w[b].dmin, x[b].d);
    }
    return sumf;
}

static float dot_q3_K(const block_q3_K *restrict w, const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int k = 0; k < 16; k++) {
            const int h = k / 8, s = k % 8 / 2, l0 = 16 * (k % 2);
            int32_t t = 0;
            for (int l = l0; l < l0 + 16; l++) {
                const int q = low2(w[b].qs, h, s, l) - ((w[b].hmask[l] >> (4 * h + s)) & 1 ? 0 : 4);
                t += q * x[b].qs[16 * k + l - l0];
            }
            isum += q3_K_sub_scale(w[b].scales, k) * t;
        }
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * x[b].d, sumf);
    }
    return sumf;
}

static float dot_iq4_xs(const block_iq4_xs *restrict w, const block_q8_K *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = w[b].qs + 16 * ib;
            const int8_t *a = x[b].qs + 32 * ib;
            int32_t t = 0;
            for (int j = 0; j < 16; j++)
                t += kvalues_iq4nl[qs[j] & 15] * a[j] + kvalues_iq4nl[qs[j] >> 4] * a[j + 16];
            isum += iq4_xs_scale(w[b].scales_l, w[b].scales_h, ib) * t;
        }
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * x[b].d, sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_q2_K_scalar, 0, 0,
               dot_q2_K((const block_q2_K *)w, (const block_q8_K *)a, n_in / QK_K))
SCALAR_ROWS_FN(kernel_rows_q3_K_scalar, 0, 0,
               dot_q3_K((const block_q3_K *)w, (const block_q8_K *)a, n_in / QK_K))
SCALAR_ROWS_FN(kernel_rows_iq4_xs_scalar, 0, 0,
               dot_iq4_xs((const block_iq4_xs *)w, (const block_q8_K *)a, n_in / QK_K))
