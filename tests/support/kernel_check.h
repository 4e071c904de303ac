/* Helpers of the kernel tests (tests/test_kernels.c,
 * tests/test_kernels_quant.c): seeded inputs, weights of any type, kernel
 * contexts per tier, and the checks every type runs: a tier against the
 * double reference, packed weights against plain ones bit for bit. They
 * assert with Criterion. */
#ifndef TPS_TESTS_KERNEL_CHECK_H
#define TPS_TESTS_KERNEL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matmul.h"

#define TOL_ABS 1e-6
#define LEN(a)  (sizeof(a) / sizeof(a)[0])

/* xorshift64; uniform in [-1, 1) */
uint64_t kc_rng_next(uint64_t *s);
float kc_rng_f(uint64_t *s);
void kc_fill(float *x, size_t n, uint64_t seed);
/* W (n_out, n_in) of type: Q4_K / Q6_K and the types without a 32-element
 * legacy quantizer from random bytes with small finite scales (every bit
 * pattern of quants and sub-block scales), the others from random floats
 * through their quantizer. Caller frees. */
void *kc_make_weights(uint32_t type, size_t n_out, size_t n_in, uint64_t seed);
kernel_ctx *kc_new_ctx(int threads, kernel_tier tier);
/* kernel_matmul on each ctx against the reference: every element within
 * tol_rel * sum |w x| + TOL_ABS. */
void kc_check_matmul(kernel_ctx *const *ctxs, size_t n_ctx, uint32_t type, size_t n_rows_x,
                     size_t n_in, size_t n_out, double tol_rel);
/* type's weights repacked: on every tier and 1-3 threads, plain and
 * packed, batch and rows alone, the plain scalar tier's bits. */
void kc_check_packed_equals_plain(uint32_t type, size_t n_in, size_t n_out, size_t n_rows);
/* The plain scalar result of w (rows x n_in activations x) is within tol of
 * the double reference, and the packed copy gives its bits on the scalar
 * and best tiers for 1..rows activation rows. */
void kc_check_extremes_packed(const void *w, const void *packed, uint32_t type, const float *x,
                              size_t rows, size_t n_in, size_t n_out, double tol);

#endif
