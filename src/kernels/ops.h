/* Element-wise and row helpers the forward pass needs between matmuls:
 * rmsnorm, softmax, swiglu, geglu, add, dot, axpy, scale, embedding row lookup.
 *
 * Each works on one row (vector) of n floats and is deterministic for a
 * given n (fixed reduction order), so they keep the forward pass batch
 * invariant. AVX2 when the build has it, scalar otherwise. No threading
 * (rows are small; the caller may loop rows in its own parallel region).
 * Not here: matrix multiply (matmul.h), attention over a KV cache (engine). */
#ifndef TPS_KERNELS_OPS_H
#define TPS_KERNELS_OPS_H

#include <stddef.h>
#include <stdint.h>

/* out (n,) = x * w / sqrt(mean(x^2) + eps). out may be x (in place). */
void kernel_rmsnorm(float *out, const float *x, const float *restrict w, size_t n, float eps);

/* x (n,) = softmax(x), in place, max-subtracted. n >= 1. */
void kernel_softmax(float *x, size_t n);

/* x (n,) = softmax over x and one more logit, sink, that takes its share
 * of the sum and has no output of its own (gpt-oss's attention sinks), as
 * ggml's soft_max with sinks: max over both, exp, the sum plus
 * exp(sink - max), scaled. n >= 1. */
void kernel_softmax_sink(float *x, size_t n, float sink);

/* out (n,) = silu(gate) * up, silu(g) = g / (1 + exp(-g)). out may be gate or up. */
void kernel_swiglu(float *out, const float *gate, const float *up, size_t n);

/* out (n,) = gelu(gate) * up (Gemma's GeGLU), gelu the tanh approximation
 * evaluated as ggml's CPU backend does: looked up by the F16-rounded input
 * in a table of F16-rounded results, exact outside (-10, 10). table: the
 * 65536 floats kernel_gelu_table fills, owned by the caller. out may be
 * gate or up. */
void kernel_geglu(float *out, const float *gate, const float *up, size_t n,
                  const float *restrict table);
/* table (65536,) <- gelu of every F16 value, rounded to F16 (ggml_table_gelu_f16). */
void kernel_gelu_table(float *table);

/* out (n,) = a + b. out may be a or b. */
void kernel_add(float *out, const float *a, const float *b, size_t n);

/* x (n,) *= s, in place. */
void kernel_scale(float *x, float s, size_t n);

/* returns a (n,) . b (n,), float, fixed order for a given n. */
float kernel_dot_f32(const float *restrict a, const float *restrict b, size_t n);

/* y (n,) += a * x (n,). */
void kernel_axpy(float *restrict y, float a, const float *restrict x, size_t n);

/* One token through one head's gated delta-rule state (Gated DeltaNet, as
 * ggml's gated_delta_net): M (S, S) row-major, row j for value j, is
 * decayed, M *= decay; then per row j: d = (v[j] - M[j] . k) * beta,
 * M[j] += d * k, o[j] = (M[j] . q) * scale. Rows are independent, so the
 * decay is applied a row at a time. Deterministic for a given S. */
void kernel_delta_rule(float *restrict M, const float *restrict q, const float *restrict k,
                       const float *restrict v, float decay, float beta, float scale,
                       float *restrict o, size_t S);

/* out (n_cols,) = row `row` of W (n_rows, n_cols) of type wtype, as float
 * (embedding lookup). Returns 0, TPS_EUNSUP or TPS_EINVAL (n_cols not whole
 * blocks). Does not check row < n_rows: the caller owns the bounds. */
int kernel_get_row(float *restrict out, const void *restrict W, uint32_t wtype, size_t row,
                   size_t n_cols);

#endif
