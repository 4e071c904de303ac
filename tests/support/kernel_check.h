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

/* ||got - ref|| / ||ref||: the relative L2 error the tests bound logits
 * and dequantised rows by. */
double test_rel_err(const float *got, const float *ref, size_t n);
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
/* The activations of the extreme-value tests: x[i] is big, or small at
 * every `every`-th i, its sign flipping every 32 values (one block of one
 * sign), so each block quantizes to +-127. */
typedef struct kc_act {
    size_t every;
    float big, small;
} kc_act;
#define KC_ACT_2 ((kc_act){7, 2.0f, 1.9f})
#define KC_ACT_3 ((kc_act){5, 3.0f, 2.9f})
/* On rows x n_in activations of pattern act: the plain scalar result of w
 * (type, n_out x n_in) is within tol of the double reference, and w
 * repacked (asserted to succeed) gives its bits on the scalar and best
 * tiers for 1..rows activation rows. */
void kc_check_extremes(const void *w, uint32_t type, size_t rows, size_t n_in, size_t n_out,
                       kc_act act, double tol);

/* The awkward-size sweep: kc_check_matmul for every n_in of n_ins[0..n) x
 * 1, 3, 7, 17, 33 outputs x 1, 2, 3, 5, 8, 17 activation rows, on the best
 * tier (2 threads) and the scalar tier; then big_n_in at 5 rows x 7 outputs
 * and 1 row x 33 outputs. */
void kc_sweep_matmul(uint32_t type, const size_t *n_ins, size_t n, size_t big_n_in, double tol);
/* kc_check_packed_equals_plain for every batch size 1..33 (n_in_odd for odd
 * sizes, n_in_even for even) at 8, 24 and 40 outputs (1 to 5 groups), then
 * 1, 4, 5 and 17 rows at n_in_long x 72 outputs (9 groups). */
void kc_packed_sweep(uint32_t type, size_t n_in_odd, size_t n_in_even, size_t n_in_long);

#endif
