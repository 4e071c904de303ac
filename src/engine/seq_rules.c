/* A sequence's output rules, step by step (see seq_rules.h).
 * Not here: the engine's step, sampling, the grammar's recognizer. */
#include "engine/seq_rules.h"

#include <math.h>

#include "engine/constraint.h"

void seq_rules_init(seq *s, const engine_request *r) {
    s->min_tokens = r->min_tokens;
    stop_set_include(&s->stop, r->include_stop_str);
    stop_set_armed(&s->stop, r->min_tokens == 0);
    think_init(&s->think, r->think);
    s->think_budget = r->think_budget;
    s->n_think = 0;
}

/* Every logit -inf but keep's. */
static void force_token(float *logits, int32_t n_vocab, int32_t keep) {
    float k = logits[keep];
    for (int32_t i = 0; i < n_vocab; i++)
        logits[i] = -INFINITY;
    logits[keep] = k;
}

void seq_rules_mask(seq *s, float *logits, const seq_rules_vocab *v) {
    const bool thinking = s->think.state == THINK_IN;
    s->cons_dead = false;
    s->cons_takes = false;
    if (thinking && s->think_budget >= 0 && s->n_think >= (uint32_t)s->think_budget &&
        v->think_close >= 0) {
        force_token(logits, v->n_vocab, v->think_close); /* the budget is spent */
    } else if (s->cons && !thinking) {
        /* before any text a block may still open: "<think>" stays allowed */
        const bool may_open = s->think.state == THINK_START && v->think_open >= 0;
        const float open = may_open ? logits[v->think_open] : 0.0f;
        size_t allowed = constraint_apply(s->cons, logits);
        if (may_open && open > -INFINITY) {
            logits[v->think_open] = open;
            allowed++;
        }
        s->cons_dead = allowed == 0;
        s->cons_takes = true;
    }
    if (s->tm.generated_tokens < s->min_tokens) stop_mask_ids(&s->stop, v->eog, v->n_eog, logits);
}

int seq_rules_grammar_take(seq *s, int32_t tok, const seq_rules_vocab *v) {
    if (!s->cons_takes) return 0;
    if (s->think.state == THINK_START && tok == v->think_open) return 0; /* a block opens */
    return constraint_accept(s->cons, tok);
}

void seq_rules_before_stop(seq *s, uint32_t generated) {
    stop_set_armed(&s->stop, generated >= s->min_tokens);
}

static void no_sink(void *ctx, think_part part, const char *p, size_t n) {
    (void)ctx, (void)part, (void)p, (void)n;
}

void seq_rules_after_text(seq *s, const char *text, size_t n) {
    if (s->think.state == THINK_IN) s->n_think++;
    if (n && (s->think.state == THINK_START || s->think.state == THINK_IN))
        think_feed(&s->think, text, n, no_sink, NULL);
}

bool seq_rules_grammar_active(const seq *s) {
    return s->cons && s->think.state != THINK_IN;
}
