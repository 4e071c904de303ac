/* A request as the engine takes it, and what each of its choices ends
 * with: the options a sequence runs under (sampling, stops, grammar,
 * reasoning), why it finished, its timings. Its own header, below the
 * engine's API, so the scheduling state (seq.h) and the output rules
 * (seq_rules.h) can hold these without the engine; engine.h includes it
 * for its callers. Not here: submitting one (engine.h), its life inside the
 * engine (seq.h). */
#ifndef TPS_ENGINE_REQUEST_H
#define TPS_ENGINE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/sample/sampler.h"
#include "engine/sample/think.h"

typedef struct constraint_prog constraint_prog; /* a compiled grammar (constraint.h) */

typedef struct engine_request {
    const int32_t *prompt; /* token ids (BOS included if wanted); copied at submit */
    size_t n_prompt;
    uint32_t max_tokens; /* generated tokens at most; 0: up to the context */
    sampler_params sampling;
    const char *const *stop; /* stop strings (copied); the stop text is never emitted */
    size_t n_stop;
    const int32_t *stop_ids; /* extra stop token ids (EOS/EOT always stop unless ignore_eos) */
    size_t n_stop_ids;
    /* Choices sampled from the one prompt (0 or 1: one). The prompt is
     * prefilled once; its KV blocks are shared by every choice and the last
     * partial block is copied for each. Choice i samples with seed + i. */
    uint32_t n;
    /* OpenAI logit_bias (copied): token id -> bias in [-100, 100], added to
     * the logits before every other sampling stage; -100 bans the token. */
    const sampler_bias *logit_bias;
    size_t n_logit_bias;
    /* logprobs: each TOKEN event carries the token's log-probability under
     * the model's raw logits and the top_logprobs (0..LOGPROBS_MAX_TOP)
     * most likely tokens (logprobs.h). */
    bool logprobs;
    uint32_t top_logprobs;
    /* Constrained decoding: a GBNF grammar (constrain/grammar.h) the output
     * must stay in (constrain/constraint.h): tokens it does not allow are
     * masked before sampling, end-of-generation and stop ids only once the
     * output is complete, and the choice ends (stop) when nothing more can
     * follow. Either grammar_prog, compiled beforehand (constrain_compile,
     * with the caller's grammar cache, off its latency-critical thread;
     * borrowed: each choice takes its own reference), or the text in
     * grammar, which submit compiles once through the same constrain_compile,
     * without a cache or limits, for all the choices. Both NULL: free text. */
    constraint_prog *grammar_prog;
    const char *grammar;
    size_t grammar_len;
    /* vLLM's output options. min_tokens: until that many tokens are out,
     * end-of-generation and stop ids are masked and stop strings do not
     * match (stop.h). include_stop_str: a matched stop string is output.
     * render_special: control tokens' text is output (skip_special_tokens
     * false; by default it is omitted). */
    uint32_t min_tokens;
    bool include_stop_str;
    bool render_special;
    /* Reasoning (think.h): THINK_OFF, THINK_START (the output may open a
     * thinking block) or THINK_IN (the prompt left one open). While the
     * output is inside a block the grammar does not constrain it; at the
     * start a grammar allows "<think>" besides its own tokens.
     * think_kind: the block's markers (think.h; THINK_TAGS by default;
     * THINK_HARMONY: gpt-oss's analysis channel, which a grammar describes
     * itself, so it stays on inside).
     * think_budget: tokens a block may hold before the engine samples its
     * close marker ("</think>") in their place, token by token where the
     * vocabulary spells it in several (vLLM's thinking_token_budget); -1:
     * no limit. Submit refuses a budget whose marker the vocabulary cannot
     * spell in SEQ_CLOSE_MAX tokens (TPS_EINVAL). */
    think_state think;
    think_kind think_kind;
    int32_t think_budget;
    void *user; /* returned in every event of this request */
} engine_request;

typedef enum engine_finish {
    ENGINE_FINISH_STOP = 0,      /* end-of-generation token or stop string */
    ENGINE_FINISH_LENGTH = 1,    /* max_tokens or the context reached */
    ENGINE_FINISH_CANCELLED = 2, /* engine_cancel */
    ENGINE_FINISH_ERROR = 3,
} engine_finish;

/* "stop", "length", "cancelled", "error". Inline, so trace.c (which
 * engine_step.c calls) needs nothing back from the engine. */
static inline const char *engine_finish_name(engine_finish f) {
    switch (f) {
    case ENGINE_FINISH_STOP:
        return "stop";
    case ENGINE_FINISH_LENGTH:
        return "length";
    case ENGINE_FINISH_CANCELLED:
        return "cancelled";
    default:
        return "error";
    }
}

/* Monotonic nanoseconds (base/clock.h), taken at the end of the step. */
typedef struct engine_timings {
    uint64_t t_queued;          /* submit */
    uint64_t t_first_scheduled; /* first step that ran a prompt chunk */
    uint64_t t_first_token;     /* step that produced the first token (prefill done) */
    uint64_t t_finished;
    uint32_t prompt_tokens;
    uint32_t generated_tokens;
    uint32_t preemptions;   /* times its KV was taken back and recomputed */
    uint32_t cached_tokens; /* prompt tokens taken from the prefix cache, not computed */
    uint64_t seed;          /* the seed the choice sampled with (the request's + choice) */
} engine_timings;

#endif
