/* Internal to the scalar tier (dot_kq_scalar.c, dot_kquant_scalar.c,
 * repack.c, repack_q32.c, mxfp4.c): the loop their rows kernels share, one
 * dot per output element in the order of kernel_impl.h, and the K-quants'
 * float steps, so that each file holds only its dots. Not here: the dots,
 * threading (matmul.c), the vector tiers. */
#ifndef TPS_KERNELS_SCALAR_ROWS_H
#define TPS_KERNELS_SCALAR_ROWS_H

#include <math.h>

#include "kernels/kernel_impl.h"

/* The two float steps of a K-quant superblock with mins (Q2_K, Q4_K, Q5_K;
 * kernel_impl.h): sumf += isum * d_w d_x, then += imin * -dmin_w d_x. */
static inline float scalar_k_min_steps(float sumf, int32_t isum, int32_t imin, uint16_t d,
                                       uint16_t dmin, float dx) {
    sumf = fmaf((float)isum, fp16_to_fp32(d) * dx, sumf);
    return fmaf((float)imin, -fp16_to_fp32(dmin) * dx, sumf);
}

/* A rows kernel (kernel_rows_fn; tmp unused) of the scalar tier: for each
 * activation row r and weight row o in [o0, o1), out[r * ld_out + o] =
 * call, an expression of w (the weight row, or with packed its 8-row group:
 * rows w_row_bytes apart, o0 and o1 multiples of 8), lane (o's row in the
 * group; 0 plain), a (activation row r), n_in and t (= type, for the dots
 * that serve several formats). The dot is written into the loop, as each
 * file's own loop had it. */
#define SCALAR_ROWS_FN(name, packed, type, call)                                                   \
    KERNEL_ROWS_DECL(name) {                                                                       \
        const size_t span_ = (packed) ? 8 : 1;                                                     \
        const uint32_t t = (type);                                                                 \
        for (size_t r_ = 0; r_ < n_rows_x; r_++) {                                                 \
            const uint8_t *a = act + r_ * act_row_bytes;                                           \
            for (size_t o_ = o0; o_ < o1; o_++) {                                                  \
                const uint8_t *w = W + o_ / span_ * span_ * w_row_bytes;                           \
                const size_t lane = o_ % span_;                                                    \
                out[r_ * ld_out + o_] = call;                                                      \
                (void)lane, (void)t;                                                               \
            }                                                                                      \
        }                                                                                          \
    }

#endif
