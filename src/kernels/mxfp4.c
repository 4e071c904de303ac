/* MXFP4 (ggml type 39, gpt-oss's expert weights) in products: the scalar
 * tier of its dot product against Q8_0 activations, its 8-row interleaved
 * groups and their scalar tier. The vector tiles are in dot_mxfp4_avx2.c,
 * the format's reference conversions in mxfp4_ref.c. Not here: threading
 * (matmul.c), activation rows (act.c).
 *
 * The product follows kernel_impl.h's Q8_0 formula with the weight's scale
 * d_w = 2^(e - 128) (kernel_e8m0_half):
 *   isum_b = sum_j kvalues[q_j] * x8_j   (exact int32)
 *   sumf   = fmaf((float)isum_b, d_w * d_x, sumf),  b = 0 .. nb-1
 * ggml's own dot computes the same integers and scales and adds them in its
 * own order, so the results agree to float rounding. */
#include <math.h>

#include "kernels/kernel_impl.h"
#include "kernels/scalar_rows.h"

/* ---- scalar tier -------------------------------------------------------- */

static float dot_mxfp4_q8_0(const block_mxfp4 *restrict w, const block_q8_0 *restrict x,
                            size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            sumi += kernel_kvalues_mxfp4[w[b].qs[j] & 0x0f] * x[b].qs[j];
            sumi += kernel_kvalues_mxfp4[w[b].qs[j] >> 4] * x[b].qs[j + QK_MXFP4 / 2];
        }
        sumf = fmaf((float)sumi, kernel_e8m0_half(w[b].e) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_mxfp4_scalar, 0, 0,
               dot_mxfp4_q8_0((const block_mxfp4 *)w, (const block_q8_0 *)a, n_in / QK_MXFP4))

/* ---- 8-row groups --------------------------------------------------------- */

void kernel_pack_group_mxfp4(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                             size_t m, size_t nb) {
    for (size_t b = 0; b < nb; b++) {
        block_mxfp4x8 *g = (block_mxfp4x8 *)dst + b;
        for (size_t i = 0; i < 8; i++) {
            const block_mxfp4 *src = i < m ? (const block_mxfp4 *)(W + i * w_row_bytes) + b : NULL;
            g->e[i] = src ? src->e : 0;
            for (size_t c = 0; c < 4; c++)
                for (size_t e = 0; e < 4; e++) /* code 0 is the value 0 */
                    g->qs[c * 32 + i * 4 + e] = src ? src->qs[4 * c + e] : 0;
        }
    }
}

/* Row `lane` of a group (block_mxfp4x8) . x, as dot_mxfp4_q8_0 adds it. */
static float dot_mxfp4_packed(const block_mxfp4x8 *restrict g, size_t lane,
                              const block_q8_0 *restrict x, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t sumi = 0;
        for (size_t c = 0; c < 4; c++)
            for (size_t e = 0; e < 4; e++) {
                const uint8_t q = g[b].qs[c * 32 + lane * 4 + e];
                sumi += kernel_kvalues_mxfp4[q & 0x0f] * x[b].qs[4 * c + e];
                sumi += kernel_kvalues_mxfp4[q >> 4] * x[b].qs[16 + 4 * c + e];
            }
        sumf = fmaf((float)sumi, kernel_e8m0_half(g[b].e[lane]) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

SCALAR_ROWS_FN(kernel_rows_mxfp4_r8_scalar, 1, 0,
               dot_mxfp4_packed((const block_mxfp4x8 *)w, lane, (const block_q8_0 *)a,
                                n_in / QK_MXFP4))
