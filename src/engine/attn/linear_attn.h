/* The recurrent part of a linear-attention layer (Qwen3.5's gated DeltaNet,
 * as llama.cpp's qwen35.cpp and ggml's ssm_conv / gated_delta_net compute
 * it), over one step's rows: per sequence, a causal depthwise conv over the
 * last ssm_conv inputs of Q, K and V, then per value head the delta rule on
 * an S x S state, then a gated RMSNorm. The projections before and after
 * are the forward pass's matmuls (forward.c).
 *
 * The state lives in the sequence's slot of the KV cache's state pool
 * (kv_state): a row at position 0 starts from zero, any other continues the
 * state its sequence's previous row left. Each output depends only on its
 * own sequence's rows, in a fixed order, so batching leaves bits unchanged.
 * Not thread-safe beyond the pool it is given. */
#ifndef TPS_ENGINE_LINEAR_ATTN_H
#define TPS_ENGINE_LINEAR_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv/kv_cache.h"
#include "kernels/pool.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

/* One step's rows of a linear layer, each (rows, width) row-major. */
typedef struct lin_rows {
    float *qkv;   /* (conv channels): the projected Q, K, V (attn_qkv); read */
    float *z;     /* (value heads * S): the output gate (attn_gate); read */
    float *beta;  /* (value heads): ssm_beta's output; overwritten with its sigmoid */
    float *alpha; /* (value heads): ssm_alpha's output; overwritten with the decay factor */
    float *conv;  /* (conv channels): written: silu(conv), Q and K L2-normalised per head */
    float *out;   /* (value heads * S): written: what ssm_out projects */
} lin_rows;

/* Runs of rows that belong to one sequence, consecutive positions, each
 * sequence in one run at most: run i is rows [first[i], first[i + 1]). */
typedef struct lin_runs {
    const uint32_t *first;
    size_t n;
} lin_runs;

/* Fills first (n_rows + 1 entries) with the runs of b's rows; returns their
 * count, or 0 when a sequence's rows are split (not consecutive), which the
 * state cannot follow. */
size_t linear_attn_plan(uint32_t *first, const uint32_t *seq, const uint32_t *pos, size_t n_rows);

/* Per row: its sequence (an index into the step's seqs), its position, and
 * the checkpoint its state goes to once folded in (KV_CKPT_NONE: none). */
typedef struct lin_rows_of {
    const uint32_t *seq, *pos, *ckpt;
} lin_rows_of;

/* The recurrence of layer l for every run, on the pool (NULL: the caller's
 * thread): reads r->qkv, r->z, r->beta, r->alpha and the states, writes
 * r->out, the states and the rows' checkpoints. */
void linear_attn_step(tps_pool *pool, const llama_config *c, const llama_layer *L, kv_cache *kv,
                      const kv_seq *const *seqs, const lin_rows_of *rows, uint32_t l,
                      const lin_runs *runs, const lin_rows *r);

#endif
