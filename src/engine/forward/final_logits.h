/* What becomes of the LM head's output before anything reads it: Gemma's
 * final soft-cap, then the file's suppressed tokens at -inf (llama.cpp's
 * gemma4.cpp adds its -inf bias right after the soft-cap), so the sampler,
 * the grammar and the logprobs all see those tokens as impossible.
 * Per row and in place: batch invariance holds.
 * Not here: the LM head's norm and projection (forward.c), logit_bias and
 * the penalties (sampler.c), which act on a copy per request. */
#ifndef TPS_ENGINE_FINAL_LOGITS_H
#define TPS_ENGINE_FINAL_LOGITS_H

#include <stddef.h>

#include "model/llama_config.h"

/* logits (n_rows, c->n_vocab), in place. */
void final_logits_apply(const llama_config *c, float *logits, size_t n_rows);

#endif
