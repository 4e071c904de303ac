/* Gemma 4's per-layer input embeddings (PLE: the E2B/E4B files'
 * embedding_length_per_layer_input), as llama.cpp's gemma4.cpp computes
 * them. Each token gets n_embd_pl inputs per layer, once per step before
 * the first layer:
 *   inp[l] = (rmsnorm(model_proj @ x0 / sqrt(dim))[l] * proj_norm
 *             + per_layer_token_embd[token][l] * sqrt(n_embd_pl)) / sqrt(2)
 * (x0 the token's scaled embedding), and after layer l's FFN:
 *   x += rmsnorm(proj @ (gelu(inp_gate @ x) * inp[l])) * post_norm.
 * Every product is per row, so batch invariance holds.
 *
 * Not here: the layer itself (forward.c). */
#ifndef TPS_ENGINE_PLE_H
#define TPS_ENGINE_PLE_H

#include <stddef.h>

#include "engine/forward/forward.h"
#include "kernels/matmul.h"
#include "model/llama_model.h"

/* Each row's inputs and one layer's scratch, for up to max_rows rows. */
typedef struct ple_state ple_state;

int ple_state_create(ple_state **out, const llama_config *c, size_t max_rows, tps_err *err);
void ple_state_free(ple_state *p);

/* Every row's per-layer inputs from its token and x0 (n, dim): the
 * embeddings after Gemma's sqrt(dim) scale. */
int ple_inputs(ple_state *p, kernel_ctx *kc, const llama_model *m, const fwd_batch *b,
               const float *x0, tps_err *err);

/* x (n, dim) += layer l's per-layer input term (gelu: kernel_gelu_table's). */
int ple_layer(ple_state *p, kernel_ctx *kc, const llama_model *m, uint32_t l, float *x, size_t n,
              const float *gelu, tps_err *err);

#endif
