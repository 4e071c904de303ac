/* Internal to src/kernels: the per-tier dispatch tables matmul.c picks from,
 * and the AVX2 entry points of ops. Not for other modules (use matmul.h,
 * ops.h, quant.h). */
#ifndef TPS_KERNELS_IMPL_H
#define TPS_KERNELS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"

/* Rows of x in one micro-tile group share each weight load: a kernel may
 * tile however it likes as long as every output element is reduced in the
 * same order as its one-row path (batch invariance). */

/* Fills out[r * ld_out + o] for r in [0, n_rows_x), o in [o0, o1):
 *   out (n_rows_x, ld_out) <- act (n_rows_x, n_in) @ W[o0:o1]^T
 * W: rows of w_row_bytes bytes (row o starts at W + o * w_row_bytes).
 * act: rows of act_row_bytes bytes, in the type the table entry names
 * (Q8_0 blocks or F32). tmp: KERNEL_TMP_ROWS * n_in floats of thread-private
 * scratch (used by types dequantized before the dot). */
typedef void (*kernel_rows_fn)(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                               size_t w_row_bytes, size_t o0, size_t o1,
                               const uint8_t *restrict act, size_t act_row_bytes, size_t n_rows_x,
                               size_t n_in, float *restrict tmp);

#define KERNEL_TMP_ROWS 4

typedef struct kernel_type_impl {
    uint32_t act_type; /* GGML_TYPE_Q8_0 or GGML_TYPE_F32; 0 with rows NULL = unsupported */
    kernel_rows_fn rows;
} kernel_type_impl;

/* Indexed by ggml type id, designated initialisers; NULL rows = not handled. */
extern const kernel_type_impl kernel_impl_scalar[GGML_TYPE_COUNT_MAX];
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KERNEL_HAVE_AVX2 1
extern const kernel_type_impl kernel_impl_avx2[GGML_TYPE_COUNT_MAX];
void quantize_row_q8_0_avx2(block_q8_0 *restrict y, const float *restrict x, size_t n);

float kernel_dot_f32_avx2(const float *restrict a, const float *restrict b, size_t n);
void kernel_axpy_avx2(float *restrict y, float a, const float *restrict x, size_t n);
float kernel_sumsq_avx2(const float *x, size_t n);
void kernel_mul_scale_avx2(float *out, const float *x, const float *restrict w, float s, size_t n);
void kernel_add_avx2(float *out, const float *a, const float *b, size_t n);
void kernel_scale_avx2(float *x, float s, size_t n);
#else
#define KERNEL_HAVE_AVX2 0
#endif

/* Dequantizes rows o0..o1 (at most KERNEL_TMP_ROWS) of W into tmp and lets a
 * float rows kernel do the dots: shared by both tiers for Q4_K and Q6_K. */
void kernel_rows_dequant(kernel_rows_fn f32_rows, uint32_t wtype, float *restrict out,
                         size_t ld_out, const uint8_t *restrict W, size_t w_row_bytes, size_t o0,
                         size_t o1, const uint8_t *restrict act, size_t act_row_bytes,
                         size_t n_rows_x, size_t n_in, float *restrict tmp);

#endif
