/* What a request's output options do to one sequence's tokens, step by
 * step: before sampling, the masks (its grammar, gated by the thinking
 * block; a thinking budget that is spent, which forces the block's close
 * marker token by token; min_tokens' ban on ending); after
 * sampling, whether the token goes through the grammar, and the thinking
 * state and stop matcher's arming as the text grows. Engine thread only;
 * each function touches one sequence, so the masks and tokens of a
 * sequence never depend on its batch neighbours.
 *
 * Not here: sampling (sampler.h), the grammar's own work (constraint.h),
 * scheduling and events (engine.c). */
#ifndef TPS_ENGINE_SEQ_RULES_H
#define TPS_ENGINE_SEQ_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/schedule/seq.h"

#define SEQ_CLOSE_MAX 16 /* tokens a close marker may take */

/* Vocabulary facts the rules need (the engine fills them once). */
typedef struct seq_rules_vocab {
    int32_t n_vocab;
    const int32_t *eog; /* end-of-generation ids (n_eog,) */
    size_t n_eog;
    int32_t think_open, think_close; /* "<think>", "</think>" as one token each; -1: none */
    /* Each think_kind's close marker as the tokenizer spells it (one token
     * where the vocabulary has it, else several: stories260K spells
     * "</think>" in 5), forced one by one once a budget is spent; 0 ids: it
     * cannot be spelled in SEQ_CLOSE_MAX. */
    int32_t close_ids[THINK_N_KINDS][SEQ_CLOSE_MAX];
    uint8_t n_close_ids[THINK_N_KINDS];
} seq_rules_vocab;

/* Fills v's close_ids from tok (at engine creation). */
void seq_rules_vocab_spell(seq_rules_vocab *v, const tokenizer *tok);

/* Sets up s's rules from its request (min_tokens, the stop options, the
 * thinking state and budget). */
void seq_rules_init(seq *s, const engine_request *r);

/* Before sampling: applies s's masks to its logits row (n_vocab,), after
 * the logprobs' copy and before the sampler. Sets s->cons_dead when the
 * grammar allows nothing and s->cons_takes when it masked this step. */
void seq_rules_mask(seq *s, float *logits, const seq_rules_vocab *v);

/* After sampling tok: 0, or TPS_EINVAL when the grammar masked this step
 * and refuses tok (every allowed token was banned elsewhere). */
int seq_rules_grammar_take(seq *s, int32_t tok, const seq_rules_vocab *v);

/* Before feeding the new token's text to the stop matcher: arms it once
 * min_tokens are out (generated counts the new token). */
void seq_rules_before_stop(seq *s, uint32_t generated);

/* After the token's text is known: the thinking state moves on it; a token
 * sampled inside the block counts against the budget. */
void seq_rules_after_text(seq *s, const char *text, size_t n);

/* The grammar may end the sequence (constraint_finished): it constrains
 * the output now (no grammar, or inside a thinking block: false). */
bool seq_rules_grammar_active(const seq *s);

#endif
