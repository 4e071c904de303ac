/* The batched Llama forward pass (selective batching, Orca): every token row
 * of a step goes through each linear layer together, so one read of a weight
 * serves the whole batch; attention runs per row over its own sequence's
 * paged KV; the LM head runs only on rows that want logits.
 *
 * Batch invariance: each output is reduced in a fixed order that depends only
 * on the row's own sequence, never on its neighbours in the batch, so greedy
 * output is bit-identical alone or in a batch of 64. Scheduling (which rows
 * run) is the scheduler's job; sampling is the sampler's. */
#ifndef TPS_FORWARD_H
#define TPS_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "engine/kv/kv_cache.h"
#include "kernels/matmul.h"
#include "model/llama_model.h"

typedef struct fwd_row {
    int32_t token;
    uint32_t pos;        /* position in its sequence */
    uint32_t seq;        /* index into fwd_batch.seqs */
    uint8_t want_logits; /* 1: write this row's logits */
} fwd_row;

/* Rows of one sequence must appear in increasing position order, and its
 * block table must already hold every position up to the largest one. */
typedef struct fwd_batch {
    size_t n_rows;
    const fwd_row *rows;
    const kv_seq *const *seqs;
} fwd_batch;

/* Step scratch, allocated once for at most max_rows rows and max_ctx
 * positions per sequence (the `State` of STYLE.md). */
typedef struct fwd_state fwd_state;

int fwd_state_create(fwd_state **out, const llama_model *m, size_t max_rows, uint32_t max_ctx,
                     int n_threads, tps_err *err);
void fwd_state_free(fwd_state *s);
kernel_ctx *fwd_state_kernels(fwd_state *s);

/* What one llama_forward read, counted where it was read: weight bytes
 * (every dense matrix once, one embedding row, and the experts the step's
 * rows were routed to, each once however many rows chose it), and the
 * experts run, summed over the layers (0 for a dense model). */
typedef struct fwd_step_stats {
    uint64_t weight_bytes;
    uint64_t experts;
} fwd_step_stats;
/* Of the last llama_forward call (zeros before the first). */
fwd_step_stats fwd_state_last_step(const fwd_state *s);

/* Runs the batch: writes K/V of every row into kv, and the logits of rows
 * with want_logits into logits (n_want, n_vocab) in row order. logits is
 * borrowed from s (valid until the next call); *n_logits says how many rows. */
int llama_forward(fwd_state *s, const llama_model *m, kv_cache *kv, const fwd_batch *b,
                  const float **logits, size_t *n_logits, tps_err *err);

#endif
