/* Portable scalar tier of Q4_1, Q5_0, Q5_1 and IQ4_NL weight rows against
 * Q8_0 activation rows: packed_q32.h's formula written out plainly, one
 * dot per output element (the other tiers must give the same bits). Not
 * tuned: no intrinsics, no tiling. The packed groups' scalar tier is in
 * repack_q32.c. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "base/compiler.h" /* ALWAYS_INLINE */
#include "kernels/packed_q32.h"

static float dot_q4_1(const block_q4_1 *restrict w, const block_q8_0 *restrict x,
                      const kernel_act_side *restrict side, size_t nb) {
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++)
            isum += (w[b].qs[j] & 15) * x[b].qs[j] + (w[b].qs[j] >> 4) * x[b].qs[j + 16];
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
        sumf = fmaf(fp16_to_fp32(w[b].m), side[b].s, sumf);
    }
    return sumf;
}

/* The 5-bit quants of elements j and j + 16 of a Q5_0 / Q5_1 block. */
static void q5_pair(const uint8_t *qs, const uint8_t *qh_bytes, int j, int *q0, int *q1) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    *q0 = (int)((qs[j] & 15) | (qh >> j & 1) << 4);
    *q1 = (int)((qs[j] >> 4) | (qh >> (j + 16) & 1) << 4);
}

/* Q5_0 (q5_1 0: quants q - 16, no min) and Q5_1 (1: quants q, then the
 * min's step): rows of block_q5_0 or block_q5_1 (d first in both), their
 * other fields at their offsets. Inlined into each type's dot. */
ALWAYS_INLINE float dot_q5(const uint8_t *restrict w, const block_q8_0 *restrict x,
                           const kernel_act_side *restrict side, size_t nb, const int q5_1) {
    const size_t bytes = q5_1 ? sizeof(block_q5_1) : sizeof(block_q5_0);
    const size_t qh = q5_1 ? offsetof(block_q5_1, qh) : offsetof(block_q5_0, qh);
    const size_t qs = q5_1 ? offsetof(block_q5_1, qs) : offsetof(block_q5_0, qs);
    const int off = q5_1 ? 0 : 16;
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + b * bytes;
        uint16_t d, m;
        memcpy(&d, blk, sizeof d);
        int32_t isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0, q1;
            q5_pair(blk + qs, blk + qh, j, &q0, &q1);
            isum += (q0 - off) * x[b].qs[j] + (q1 - off) * x[b].qs[j + 16];
        }
        sumf = fmaf((float)isum, fp16_to_fp32(d) * fp16_to_fp32(x[b].d), sumf);
        if (q5_1) {
            memcpy(&m, blk + offsetof(block_q5_1, m), sizeof m);
            sumf = fmaf(fp16_to_fp32(m), side[b].s, sumf);
        }
    }
    return sumf;
}

static float dot_q5_0(const block_q5_0 *restrict w, const block_q8_0 *restrict x,
                      const kernel_act_side *restrict side, size_t nb) {
    return dot_q5((const uint8_t *)w, x, side, nb, 0);
}

static float dot_q5_1(const block_q5_1 *restrict w, const block_q8_0 *restrict x,
                      const kernel_act_side *restrict side, size_t nb) {
    return dot_q5((const uint8_t *)w, x, side, nb, 1);
}

static float dot_iq4_nl(const block_iq4_nl *restrict w, const block_q8_0 *restrict x,
                        const kernel_act_side *restrict side, size_t nb) {
    (void)side;
    float sumf = 0.0f;
    for (size_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < QK4_0 / 2; j++)
            isum += kvalues_iq4nl[w[b].qs[j] & 15] * x[b].qs[j] +
                    kvalues_iq4nl[w[b].qs[j] >> 4] * x[b].qs[j + 16];
        sumf = fmaf((float)isum, fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), sumf);
    }
    return sumf;
}

#define ROWS_FN(name, dot, wtype_t)                                                                \
    KERNEL_ROWS_DECL(name) {                                                                       \
        (void)tmp;                                                                                 \
        const size_t nb = n_in / QK8_0;                                                            \
        for (size_t r = 0; r < n_rows_x; r++) {                                                    \
            const uint8_t *row = act + r * act_row_bytes;                                          \
            const kernel_act_side *side =                                                          \
                (const kernel_act_side *)(row + kernel_act_side_off(nb));                          \
            for (size_t o = o0; o < o1; o++)                                                       \
                out[r * ld_out + o] = dot((const wtype_t *)(W + o * w_row_bytes),                  \
                                          (const block_q8_0 *)row, side, nb);                      \
        }                                                                                          \
    }

ROWS_FN(kernel_rows_q4_1_scalar, dot_q4_1, block_q4_1)
ROWS_FN(kernel_rows_q5_0_scalar, dot_q5_0, block_q5_0)
ROWS_FN(kernel_rows_q5_1_scalar, dot_q5_1, block_q5_1)
ROWS_FN(kernel_rows_iq4_nl_scalar, dot_iq4_nl, block_iq4_nl)
