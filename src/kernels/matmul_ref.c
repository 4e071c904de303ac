/* Reference tier of the matmul: dequantize everything to float and dot in
 * double, one element at a time. The yardstick the other tiers are tested
 * against; never optimised, allocates freely, single-threaded. */
#include <stdlib.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

int kernel_matmul_ref(float *restrict out, double *restrict abs_out, const void *restrict W,
                      uint32_t wtype, const float *restrict x, size_t n_rows_x, size_t n_in,
                      size_t n_out) {
    if (!kernel_type_supported(wtype)) return TPS_EUNSUP;
    const size_t w_row_bytes = kernel_row_bytes(wtype, n_in);
    if (w_row_bytes == 0 && n_in != 0) return TPS_EINVAL;
    const int quant_x =
        wtype == GGML_TYPE_Q8_0 || wtype == GGML_TYPE_Q4_0 || wtype == GGML_TYPE_MXFP4;
    const int quant_x_k = wtype == GGML_TYPE_Q4_K || wtype == GGML_TYPE_Q6_K;

    float *w = malloc((n_in ? n_in : 1) * sizeof *w);
    float *xd = malloc((n_in ? n_in : 1) * sizeof *xd);
    block_q8_0 *xq = malloc((n_in / QK8_0 + 1) * sizeof *xq);
    block_q8_K *xk = malloc((n_in / QK_K + 1) * sizeof *xk);
    if (!w || !xd || !xq || !xk) {
        free(w);
        free(xd);
        free(xq);
        free(xk);
        return TPS_ENOMEM;
    }
    for (size_t r = 0; r < n_rows_x; r++) {
        const float *xr = x + r * n_in;
        if (quant_x) {
            quantize_row_q8_0_ref(xq, xr, n_in);
            dequantize_row_q8_0(xd, xq, n_in);
        } else if (quant_x_k) {
            quantize_row_q8_K_ref(xk, xr, n_in);
            dequantize_row_q8_K(xd, xk, n_in);
        } else {
            for (size_t k = 0; k < n_in; k++)
                xd[k] = xr[k];
        }
        for (size_t o = 0; o < n_out; o++) {
            dequantize_row(w, (const uint8_t *)W + o * w_row_bytes, wtype, n_in);
            double s = 0.0, a = 0.0;
            for (size_t k = 0; k < n_in; k++) {
                s += (double)w[k] * (double)xd[k];
                a += __builtin_fabs((double)w[k] * (double)xd[k]);
            }
            out[r * n_out + o] = (float)s;
            if (abs_out) abs_out[r * n_out + o] = a;
        }
    }
    free(xk);
    free(xq);
    free(xd);
    free(w);
    return 0;
}
