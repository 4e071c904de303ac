/* Reference tier of the matmul: dequantize everything to float and dot in
 * double, one element at a time. The yardstick the other tiers are tested
 * against; never optimised, allocates freely, single-threaded. The
 * activations are quantized as the kernels quantize them (quant.h's
 * activation quantizers); Q4_1 / Q5_1 add their min as llama.cpp's Q8_1
 * dot does, the weight's m times the activation block's rounded sum term. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernel_impl.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

int kernel_matmul_ref(float *restrict out, double *restrict abs_out, const void *restrict W,
                      uint32_t wtype, const float *restrict x, size_t n_rows_x, size_t n_in,
                      size_t n_out) {
    if (!kernel_type_supported(wtype)) return TPS_EUNSUP;
    const size_t w_row_bytes = kernel_row_bytes(wtype, n_in);
    if (w_row_bytes == 0 && n_in != 0) return TPS_EINVAL;
    /* the activations in the type the kernels quantize them to */
    const uint32_t act_type = kernel_impl_scalar[wtype].act_type;
    const int quant_x = act_type == GGML_TYPE_Q8_0, quant_x_k = act_type == GGML_TYPE_Q8_K;

    /* Q4_1 / Q5_1: m (fp16 at byte 2 of each block) enters through s_x */
    const int has_min = wtype == GGML_TYPE_Q4_1 || wtype == GGML_TYPE_Q5_1;
    float *sx = malloc((n_in / QK8_0 + 1) * sizeof *sx);
    uint8_t *wrow = malloc(w_row_bytes ? w_row_bytes : 1);
    float *w = malloc((n_in ? n_in : 1) * sizeof *w);
    float *xd = malloc((n_in ? n_in : 1) * sizeof *xd);
    block_q8_0 *xq = malloc((n_in / QK8_0 + 1) * sizeof *xq);
    block_q8_K *xk = malloc((n_in / QK_K + 1) * sizeof *xk);
    if (!w || !xd || !xq || !xk || !sx || !wrow) {
        free(sx);
        free(wrow);
        free(w);
        free(xd);
        free(xq);
        free(xk);
        return TPS_ENOMEM;
    }
    for (size_t r = 0; r < n_rows_x; r++) {
        const float *xr = x + r * n_in;
        if (quant_x) {
            quantize_row_q8_0_act_ref(xq, xr, n_in, sx);
            dequantize_row_q8_0(xd, xq, n_in);
        } else if (quant_x_k) {
            quantize_row_q8_K_ref(xk, xr, n_in);
            dequantize_row_q8_K(xd, xk, n_in);
        } else {
            for (size_t k = 0; k < n_in; k++)
                xd[k] = xr[k];
        }
        for (size_t o = 0; o < n_out; o++) {
            memcpy(wrow, (const uint8_t *)W + o * w_row_bytes, w_row_bytes);
            double s = 0.0, a = 0.0;
            const size_t bb = ggml_type_get(wtype)->type_size;
            for (size_t b = 0; has_min && b < n_in / QK8_0; b++) {
                uint16_t m;
                memcpy(&m, wrow + b * bb + 2, sizeof m);
                s += (double)fp16_to_fp32(m) * (double)sx[b];
                a += __builtin_fabs((double)fp16_to_fp32(m) * (double)sx[b]);
                memset(wrow + b * bb + 2, 0, sizeof m); /* the rest without the min */
            }
            dequantize_row(w, wrow, wtype, n_in);
            for (size_t k = 0; k < n_in; k++) {
                s += (double)w[k] * (double)xd[k];
                a += __builtin_fabs((double)w[k] * (double)xd[k]);
            }
            out[r * n_out + o] = (float)s;
            if (abs_out) abs_out[r * n_out + o] = a;
        }
    }
    free(sx);
    free(wrow);
    free(xk);
    free(xq);
    free(xd);
    free(w);
    return 0;
}
