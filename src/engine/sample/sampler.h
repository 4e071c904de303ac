/* Token sampler: one `sampler` per sequence turns a row of logits into the
 * next token id. It owns everything a sequence's sampling depends on (its RNG
 * state, its penalty window, its candidate scratch), so a request's tokens
 * depend only on its own seed, params and logits, never on what else runs in
 * the batch. All memory is allocated once by sampler_create; sampling a token
 * allocates nothing, takes no lock and makes no syscall.
 *
 * It will not: tokenize, decode text, check stop conditions (stop.h), apply
 * grammars, or touch global state.
 *
 * The chain, in order (llama.cpp's default order, without dry/xtc):
 *   0. logit_bias (OpenAI): logit += bias; a bias of -100 := -inf (banned)
 *   1. ignore_eos: logit of every end-of-generation id := -inf
 *   2. penalties over the last `penalty_last_n` accepted tokens, per token t
 *      with count c > 0 in the window:
 *        repetition (llama.cpp): logit > 0 ? logit /= rep : logit *= rep
 *        then (OpenAI):          logit -= c * frequency + presence
 *   3. temperature == 0: greedy, the exact argmax of the logits after 1-2,
 *      ties to the lowest id (top_k/top_p/min_p cannot change the argmax).
 *   4. top_k: keep the k largest logits (ties to the lower id); partial
 *      selection, the vocab is never fully sorted.
 *   5. typical_p (llama.cpp's locally typical sampling): softmax at
 *      temperature 1 over what is left, entropy H = -sum p log p; order the
 *      tokens by |-log p - H| (ties: logit desc, id asc) and keep the
 *      shortest prefix of that order whose cumulative probability exceeds
 *      typical_p (strictly; the token that crosses is kept).
 *   6. top_p: softmax at temperature 1 over what is left; keep the smallest
 *      prefix (by logit desc, id asc) whose cumulative probability >= top_p;
 *      the token that crosses top_p is kept.
 *   7. min_p: keep tokens with p >= min_p * p_max, i.e.
 *      logit >= max_logit + log(min_p), p_max over what is left
 *      (temperature 1, as llama.cpp).
 *   8. temperature: p_i proportional to exp((logit_i - max) / T) over the
 *      survivors; one uniform draw from the sequence's RNG picks the token.
 * So typical_p, top_p and min_p decide WHICH tokens survive at temperature
 * 1; the temperature only reweights the survivors (llama.cpp semantics; vLLM
 * and OpenAI apply the temperature first). */
#ifndef TPS_ENGINE_SAMPLER_H
#define TPS_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SAMPLER_MAX_EOG            8  /* end-of-generation ids a model may have */
#define SAMPLER_DEFAULT_LAST_N     64 /* penalty window, as llama.cpp */
#define SAMPLER_MAX_TEMPERATURE    100.0f
#define SAMPLER_MAX_REP_PENALTY    10.0f
#define SAMPLER_MIN_REP_PENALTY    0.01f
#define SAMPLER_MAX_OPENAI_PENALTY 2.0f /* |frequency|, |presence|: OpenAI's range */

/* Per-request sampling parameters. Neutral values switch a stage off. */
typedef struct sampler_params {
    float temperature;        /* 0 = greedy argmax; [0, 100] */
    int32_t top_k;            /* 0 = off; larger than the vocab = off */
    float top_p;              /* 1 = off; (0, 1] */
    float min_p;              /* 0 = off; [0, 1] */
    float typical_p;          /* 1 = off; (0, 1] */
    uint64_t seed;            /* RNG seed; same seed + same logits -> same tokens */
    float repetition_penalty; /* 1 = off; [0.01, 10] */
    float frequency_penalty;  /* 0 = off; [-2, 2] */
    float presence_penalty;   /* 0 = off; [-2, 2] */
    int32_t penalty_last_n;   /* window of accepted tokens; 0 = off, -1 = whole context */
    bool ignore_eos;          /* never sample an end-of-generation id */
} sampler_params;

/* Per-model facts the engine supplies. */
typedef struct sampler_vocab {
    int32_t n_vocab;                  /* logits row length, > 0 */
    int32_t n_ctx;                    /* context length: the window when penalty_last_n = -1 */
    int32_t n_eog;                    /* how many eog ids are set (0..SAMPLER_MAX_EOG) */
    int32_t eog_ids[SAMPLER_MAX_EOG]; /* end-of-generation ids (EOS, EOT), for ignore_eos */
} sampler_vocab;

/* One candidate after filtering. */
typedef struct sampler_cand {
    int32_t id;
    float logit; /* after penalties, before temperature */
    float p;     /* probability after temperature, normalized over the survivors */
} sampler_cand;

typedef struct sampler sampler;

#define SAMPLER_MAX_LOGIT_BIAS 1024

/* One logit_bias entry: added to the token's logit before every other
 * stage; -100 bans the token, +100 all but forces it. */
typedef struct sampler_bias {
    int32_t id;
    float bias; /* [-100, 100] */
} sampler_bias;

/* Neutral parameters: temperature 1, no top_k/top_p/min_p/typical_p, no penalties,
 * window 64, seed 0 (OpenAI's defaults). */
void sampler_params_default(sampler_params *p);

/* Checks every field. Returns 0, or TPS_EINVAL with a message that starts
 * with the field's name ("top_p must be in (0, 1]; got 1.5") and, when
 * field is not NULL, *field = that name (a static string), for HTTP 400. */
int sampler_params_validate(const sampler_params *p, const char **field, tps_err *err);

/* Allocates a sampler for one sequence (one allocation, sized by vocab and
 * params: ~12 bytes per vocab entry of candidate scratch, or 12*top_k when
 * top_k is set, plus ~20 bytes per penalty-window slot). Validates p. The
 * RNG is seeded from p->seed. Free with sampler_free. */
int sampler_create(sampler **out, const sampler_params *p, const sampler_vocab *v, tps_err *err);
void sampler_free(sampler *s);
/* Sets the logit_bias entries (copied; replaces earlier ones). TPS_EINVAL
 * naming the entry when an id is outside the vocabulary or a bias outside
 * [-100, 100], or when there are more than SAMPLER_MAX_LOGIT_BIAS. */
int sampler_set_logit_bias(sampler *s, const sampler_bias *b, size_t n, tps_err *err);

/* Records a token in the penalty window (evicting the oldest when full).
 * Feed every generated token; feed the prompt tokens too for llama.cpp's
 * semantics (its server penalizes prompt tokens in the window). Returns
 * TPS_ERANGE if tok is outside [0, n_vocab). */
int sampler_accept(sampler *s, int32_t tok);

/* Forgets the penalty window and re-seeds the RNG from seed (params kept). */
void sampler_reset(sampler *s, uint64_t seed);

/* Stages 1-2 only, in place: logits (n_vocab,) is modified. */
void sampler_apply_penalties(const sampler *s, float *logits);

/* Stages 1-6 plus the softmax of 7, without drawing. logits (n_vocab,) is
 * modified in place (stages 1-2), then used as scratch: its contents are
 * unspecified afterwards. Returns the number of survivors n >= 1
 * (0 only if no logit is finite) and sets *out to them, borrowed from s until
 * the next call on s; for temperature 0, the single argmax with p = 1.
 * The order of *out is unspecified. */
size_t sampler_candidates(sampler *s, float *logits, const sampler_cand **out);

/* The whole chain: returns the next token id. logits (n_vocab,) is
 * clobbered, as sampler_candidates says. Consumes one RNG draw unless greedy. Does not
 * accept the token: call sampler_accept with the id the sequence keeps.
 * Returns -1 when no token can be sampled (every logit -inf or NaN:
 * logit_bias, suppressed tokens, ignore_eos or min_tokens banned them all,
 * or the model's output is not finite). */
int32_t sampler_sample(sampler *s, float *logits);

#endif
