/* Log-probabilities of a logits row for the API's logprobs: the natural-log
 * softmax of the model's raw logits (before logit_bias, penalties and
 * temperature: vLLM's default and what llama.cpp's n_probs reports), and
 * the k most likely tokens. Pure functions of the row; no allocation.
 * Not here: which rows want them (planner.c, engine_step.c), their JSON (server). */
#ifndef TPS_LOGPROBS_H
#define TPS_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#define LOGPROBS_MAX_TOP 20 /* top alternatives per token (OpenAI's limit) */

/* log(sum(exp(x))) over x (n,), in double; -inf when no logit is finite. */
double logprobs_lse(const float *restrict x, size_t n);
/* The k (<= LOGPROBS_MAX_TOP) largest logits of x (n,) as (id, x - lse),
 * most likely first, ties to the lower id; returns how many (min(k, n)
 * where every logit is finite: a NaN or -inf one, probability 0 (the
 * file's suppressed tokens), is never an alternative). */
size_t logprobs_top(int32_t *ids, float *lps, const float *restrict x, size_t n, uint32_t k,
                    double lse);

#endif
