/* A mixture-of-experts FFN layer over all rows of a step (qwen3moe,
 * Mixtral, gpt-oss, Qwen3.5's MoE with its shared expert, Gemma 4's experts
 * beside its dense FFN): route every row (router logits, the
 * architecture's gating, top k), group the rows' (row, expert) slots by expert, run each touched
 * expert once over its slots (kernel_matmul_grouped: gate and up, the activation, down) and sum
 * each row's k outputs by their weights. An expert no row chose is never read.
 *
 * Batch invariance: routing, the activation and the weighted sum are per
 * row or per slot, in a fixed order (the row's experts in the order the
 * router ranked them), and each slot's products are its row's alone
 * (matmul.h), so a row's output does not depend on which rows share its
 * step or its experts. Not here: the norm before it and the residual add
 * (forward.c), the kernels. */
#ifndef TPS_ENGINE_MOE_H
#define TPS_ENGINE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/matmul.h"
#include "model/llama_model.h"

/* Scratch for steps of up to max_rows rows, allocated once. */
typedef struct moe_state moe_state;

/* What one call read: distinct experts run (summed over calls: expert and
 * layer pairs) and the bytes of their weights. */
typedef struct moe_tally {
    uint64_t experts;
    uint64_t bytes;
} moe_tally;

int moe_state_create(moe_state **out, const llama_config *c, size_t max_rows, tps_err *err);
void moe_state_free(moe_state *m);
/* Slots (rows x experts a token uses) a step of max_rows rows can have:
 * what the kernel context is sized for. */
size_t moe_max_slots(const llama_config *c, size_t max_rows);

/* out (n, dim) = the layer's experts of xb (n, dim), n <= max_rows; adds
 * what it read to *tally. Returns 0 or a kernel error (err says which). */
int moe_ffn(moe_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
            const float *xb, size_t n, float *out, moe_tally *tally, tps_err *err);

/* Gemma 4's experts (llama.cpp's gemma4.cpp) beside its dense FFN: out
 * (n, dim), holding the dense half's normed output, += RMSNorm(the experts
 * of RMSNorm(x, pre_ffw_norm_2), post_ffw_norm_2), the router reading
 * rms_norm(x) / sqrt(dim) * gate_inp_s; x (n, dim) is the residual stream
 * after attention. gelu: the F16 GELU table (kernel_gelu_table), borrowed.
 * Returns as moe_ffn. */
int moe_ffn_gemma4(moe_state *m, kernel_ctx *kc, const llama_config *c, const llama_layer *L,
                   const float *x, size_t n, const float *gelu, float *out, moe_tally *tally,
                   tps_err *err);

#endif
