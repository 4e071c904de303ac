/* A sequence's output rules, step by step (see seq_rules.h).
 * Not here: the engine's step, sampling, the grammar's recognizer. */
#include "engine/schedule/seq_rules.h"

#include <math.h>
#include <string.h>

#include "constrain/constraint.h"

void seq_rules_init(seq *s, const engine_request *r) {
    s->min_tokens = r->min_tokens;
    stop_set_include(&s->stop, r->include_stop_str);
    stop_set_armed(&s->stop, r->min_tokens == 0);
    think_init_kind(&s->think, r->think, r->think_kind);
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

void seq_rules_vocab_spell(seq_rules_vocab *v, const tokenizer *tok) {
    for (int k = 0; k < THINK_N_KINDS; k++) {
        const char *close = think_markers_of((think_kind)k)->close;
        size_t n = 0;
        tps_err err;
        /* a marker the vocabulary holds whole is that token (an added or
         * control token, which encoding might not match) */
        int32_t id = tokenizer_find(tok, close, strlen(close));
        if (id >= 0)
            v->close_ids[k][0] = id, n = 1;
        else if (tokenizer_encode(tok, close, strlen(close), TOK_ENCODE_PARSE_SPECIAL,
                                  v->close_ids[k], SEQ_CLOSE_MAX, &n, &err))
            n = 0;
        v->n_close_ids[k] = (uint8_t)n;
    }
}

/* A spent budget: the close marker's next token (they go out in turn,
 * counted by the tokens of the block past the budget; over again should
 * the text before them keep the block open). Inside a block a grammar
 * describes, only where the grammar allows it (else it waits a step). */
static void force_close(seq *s, float *logits, const seq_rules_vocab *v) {
    const int k = s->think.kind;
    if (!v->n_close_ids[k]) return;
    int32_t id = v->close_ids[k][(s->n_think - (uint32_t)s->think_budget) % v->n_close_ids[k]];
    if (!s->cons_takes || logits[id] > -INFINITY) force_token(logits, v->n_vocab, id);
}

void seq_rules_mask(seq *s, float *logits, const seq_rules_vocab *v) {
    const bool thinking = s->think.state == THINK_IN;
    const bool in_grammar = think_markers_of((think_kind)s->think.kind)->in_grammar;
    s->cons_dead = false;
    s->cons_takes = false;
    if (s->cons && (!thinking || in_grammar)) {
        /* before any text a block may still open: "<think>" stays allowed */
        const bool may_open =
            s->think.state == THINK_START && s->think.kind == THINK_TAGS && v->think_open >= 0;
        const float open = may_open ? logits[v->think_open] : 0.0f;
        size_t allowed = constraint_apply(s->cons, logits);
        if (may_open && open > -INFINITY) {
            logits[v->think_open] = open;
            allowed++;
        }
        s->cons_dead = allowed == 0;
        s->cons_takes = true;
    }
    if (thinking && s->think_budget >= 0 && s->n_think >= (uint32_t)s->think_budget)
        force_close(s, logits, v); /* the budget is spent */
    if (s->tm.generated_tokens < s->min_tokens) stop_mask_ids(&s->stop, v->eog, v->n_eog, logits);
}

int seq_rules_grammar_take(seq *s, int32_t tok, const seq_rules_vocab *v) {
    if (!s->cons_takes) return 0;
    if (s->think.state == THINK_START && s->think.kind == THINK_TAGS && tok == v->think_open)
        return 0; /* a block opens */
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
    return s->cons &&
           (s->think.state != THINK_IN || think_markers_of((think_kind)s->think.kind)->in_grammar);
}
