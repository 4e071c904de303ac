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
 * scratch (used by types dequantized before the dot, and by the Q8_0/Q4_0 tiles to
 * pack 8 weight rows: 9 * n_in bytes). act rows of Q8_0 type are laid out
 * as kernel_act_row_bytes below says. */
typedef void (*kernel_rows_fn)(float *restrict out, size_t ld_out, const uint8_t *restrict W,
                               size_t w_row_bytes, size_t o0, size_t o1,
                               const uint8_t *restrict act, size_t act_row_bytes, size_t n_rows_x,
                               size_t n_in, float *restrict tmp);

#define KERNEL_TMP_ROWS 5 /* also room for 2 packed Q8_0 groups: 17 * n_in bytes */

/* ---- activations and 8-row interleaved weight groups --------------------
 *
 * Every Q8_0 / Q4_0 product, in every tier and tile shape, computes per
 * output element ggml's scalar formula in block order:
 *   sumf = fmaf((float)isum_b, d_w_b * d_x_b, sumf),  b = 0 .. nb-1
 * with isum_b the exact int32 sum of the block's 32 products. Any lane
 * layout gives the same isum_b, so the float sequence and its bits depend
 * only on n_in: batch size, tiles, threads and repacking cannot change them.
 *
 * A quantized activation row (act_row_bytes = kernel_act_row_bytes(nb)):
 * nb block_q8_0, then at kernel_act_side_off(nb) nb kernel_act_side. */
typedef struct kernel_act_side {
    float d;        /* the block's scale as float */
    int32_t neg128; /* -128 * sum of its 32 int8 values */
    int32_t neg8;   /* -8 * that sum */
    int32_t pad;
} kernel_act_side;

static inline size_t kernel_act_side_off(size_t nb) {
    return (nb * sizeof(block_q8_0) + 15) / 16 * 16;
}

static inline size_t kernel_act_row_bytes(size_t nb) {
    return (kernel_act_side_off(nb) + nb * sizeof(kernel_act_side) + 63) / 64 * 64;
}

/* Quantizes x (n,) to Q8_0 blocks plus their side data. */
void kernel_quantize_act(uint8_t *restrict row, const float *restrict x, size_t n, int use_avx2);

/* 8 weight rows i = 0..7 of one 32-element block, interleaved so that a
 * 32-byte load holds 4 consecutive elements of each row in int32 lane i:
 * one dpbusd then serves 8 weight rows with no horizontal sum.
 * Q8_0: qs[c*32 + i*4 + e] = w_i[4c + e] ^ 0x80 (stored as unsigned w + 128).
 * Q4_0: qs[c*32 + i*4 + e] = the Q4_0 byte qs_i[4c + e], c < 4: its low
 * nibble is element 4c + e, its high nibble element 16 + 4c + e.
 * A packed matrix is groups of 8 rows, each nb group blocks in block order;
 * it takes exactly the bytes of the plain one (8 * 34 and 8 * 18). */
typedef struct block_q8_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK8_0];
} block_q8_0x8;
_Static_assert(sizeof(block_q8_0x8) == 8 * sizeof(block_q8_0), "block_q8_0x8 size");

typedef struct block_q4_0x8 {
    uint16_t d[8];
    uint8_t qs[8 * QK4_0 / 2];
} block_q4_0x8;
_Static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0), "block_q4_0x8 size");

/* Packs rows [0, m) (m <= 8) of W (row stride w_row_bytes, nb blocks) into
 * one group of nb packed blocks at dst; rows m..7 are zero weights with
 * scale 0. is_q4 picks Q4_0 (else Q8_0). */
void kernel_pack_group(uint8_t *restrict dst, const uint8_t *restrict W, size_t w_row_bytes,
                       size_t m, size_t nb, int is_q4);

/* The rows kernels of the packed types, per tier ([0] Q8_0_R8, [1] Q4_0_R8):
 * same signature as kernel_rows_fn with W the packed matrix, w_row_bytes
 * the plain row size and o0, o1 multiples of 8. */
extern const kernel_rows_fn kernel_packed_scalar[2];

typedef struct kernel_type_impl {
    uint32_t act_type; /* GGML_TYPE_Q8_0 or GGML_TYPE_F32; 0 with rows NULL = unsupported */
    kernel_rows_fn rows;
} kernel_type_impl;

/* Indexed by ggml type id, designated initialisers; NULL rows = not handled. */
extern const kernel_type_impl kernel_impl_scalar[GGML_TYPE_COUNT_MAX];
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KERNEL_HAVE_AVX2 1
extern const kernel_type_impl kernel_impl_avx2[GGML_TYPE_COUNT_MAX];
extern const kernel_rows_fn kernel_packed_avx2[2];
void quantize_row_q8_0_avx2(block_q8_0 *restrict y, const float *restrict x, size_t n);

float kernel_dot_f32_avx2(const float *restrict a, const float *restrict b, size_t n);
void kernel_axpy_avx2(float *restrict y, float a, const float *restrict x, size_t n);
float kernel_sumsq_avx2(const float *x, size_t n);
void kernel_mul_scale_avx2(float *out, const float *x, const float *restrict w, float s, size_t n);
void kernel_add_avx2(float *out, const float *a, const float *b, size_t n);
void kernel_scale_avx2(float *x, float s, size_t n);
void kernel_softmax_avx2(float *x, size_t n);
void kernel_swiglu_avx2(float *out, const float *gate, const float *up, size_t n);
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
