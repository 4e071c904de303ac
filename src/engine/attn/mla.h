/* The per-head products of multi-head latent attention (DeepSeek-V2/V3's
 * MLA in llama.cpp's absorbed form) over all rows of a step. The cache
 * holds one latent row a position (kv_lora_rank normed elements, then the
 * key's rope_dim rotated ones); every query head attends to it as one KV
 * head of head_dim = kv_lora_rank + rope_dim:
 *   q_h  = [wk_b[h] @ q_h(nope), q_h(rope)]       (mla_absorb_q)
 *   o_h  = softmax(q_h . latent * scale) @ latent  (attention.c, as MQA)
 *   out_h = wv_b[h] @ o_h[0 : kv_lora_rank]        (mla_values)
 * so a step reads the latent once per layer for all heads and never
 * decompresses a position's K or V. Each per-head product runs through
 * kernel_matmul_grouped with the heads as its groups (the tensors are
 * n_heads matrices each, bound like experts): each (row, head) slot's
 * result is its row's alone, so batch invariance holds.
 *
 * Not here: the projections, RoPE, the latent's norm and its write into
 * the cache, attention itself (forward.c, attention.c). */
#ifndef TPS_ENGINE_MLA_H
#define TPS_ENGINE_MLA_H

#include <stddef.h>

#include "kernels/matmul.h"
#include "model/llama_model.h"

/* Gather scratch for steps of up to max_rows rows, allocated once. */
typedef struct mla_state mla_state;

/* Also reserves the kernel context for max_rows x n_heads slots. */
int mla_state_create(mla_state **out, kernel_ctx *kc, const llama_config *c, size_t max_rows,
                     tps_err *err);
void mla_state_free(mla_state *m);

/* q (n, n_heads, head_dim) <- per row and head h, wk_b[h] @ its part
 * without RoPE, then its RoPE part, both from q_full (n, n_heads, mla_k)
 * (RoPE already applied). n <= max_rows. 0 or a kernel error (err says). */
int mla_absorb_q(mla_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
                 const float *q_full, size_t n, float *q, tps_err *err);

/* out (n, n_heads * mla_v) <- per row and head h, wv_b[h] @ the first
 * kv_lora_rank elements of its attention output in att (n, n_heads,
 * head_dim). */
int mla_values(mla_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
               const float *att, size_t n, float *out, tps_err *err);

#endif
