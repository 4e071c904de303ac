/* The thinking-block splitter (see think.h for the rules). Each byte moves
 * a small state machine; runs of bytes with the same part go to the sink in
 * one call. The held bytes are at most THINK_MAX_LEAD of whitespace plus a
 * marker's proper prefix: "<think>" and "</think>" have no border (no proper
 * prefix that is also a suffix), so a mismatch never needs more than the
 * byte that broke it re-examined (think.h asks the same of every row).
 * Not here: tokens (but think_prompt_open's walk), allocation. */
#include "engine/sample/think.h"

#include <string.h>

#include "base/text_run.h"

static const think_markers rows[THINK_N_KINDS] = {
    [THINK_TAGS] = {THINK_OPEN, THINK_CLOSE, false},
    [THINK_HARMONY] = {"<|channel|>analysis<|message|>", "<|end|>", true},
};
_Static_assert(sizeof "<|channel|>analysis<|message|>" - 1 <= THINK_MARKER_MAX, "a marker fits");

const think_markers *think_markers_of(think_kind kind) {
    return &rows[(unsigned)kind < THINK_N_KINDS ? kind : THINK_TAGS];
}

void think_init_kind(think_split *t, think_state state, think_kind kind) {
    memset(t, 0, sizeof *t);
    t->state = state;
    t->kind = (uint8_t)((unsigned)kind < THINK_N_KINDS ? kind : THINK_TAGS);
}

void think_init(think_split *t, think_state state) {
    think_init_kind(t, state, THINK_TAGS);
}

/* Runs of one part within the piece being fed go to the caller's sink. */
TEXT_RUN_TYPED(think_emit, think_sink, think_part)

/* Held bytes go out (before anything of the current run after them). */
static void held_out(think_split *t, text_run *r, think_part part) {
    text_run_held(r, part, t->held, t->n_held);
    t->n_held = 0;
}

static bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* START: whitespace, then the open marker ("<think>") or anything else. */
static void feed_start(think_split *t, text_run *r, const char *p) {
    const char *open = rows[t->kind].open;
    const size_t n_open = strlen(open);
    size_t lead = 0;
    while (lead < t->n_held && is_space(t->held[lead]))
        lead++;
    const size_t have = t->n_held - lead; /* bytes of the open marker matched */
    if (have == 0 && is_space(*p) && t->n_held < THINK_MAX_LEAD) {
        t->held[t->n_held++] = *p;
        return;
    }
    if (have < n_open && *p == open[have]) {
        t->held[t->n_held++] = *p;
        if (have + 1 == n_open) {
            held_out(t, r, THINK_PART_MARKER);
            t->state = THINK_IN;
        }
        return;
    }
    held_out(t, r, THINK_PART_CONTENT); /* the answer began without a block */
    t->state = THINK_DONE;
    text_run_add(r, THINK_PART_CONTENT, p);
}

/* IN: reasoning until the close marker ("</think>"). */
static void feed_in(think_split *t, text_run *r, const char *p) {
    const char *close = rows[t->kind].close;
    if (*p == close[t->n_held]) {
        text_run_flush(r); /* the reasoning before the marker's start goes first */
        t->held[t->n_held++] = *p;
        if (close[t->n_held] == 0) {
            held_out(t, r, THINK_PART_MARKER);
            t->state = THINK_DONE;
        }
        return;
    }
    if (t->n_held) { /* no border: only this byte may start a new marker */
        held_out(t, r, THINK_PART_REASONING);
        if (*p == close[0]) {
            t->held[t->n_held++] = *p;
            return;
        }
    }
    text_run_add(r, THINK_PART_REASONING, p);
}

void think_feed(think_split *t, const char *p, size_t n, think_sink sink, void *ctx) {
    think_emit_to to = {sink, ctx};
    text_run r = {.sink = think_emit, .ctx = &to};
    for (size_t i = 0; i < n; i++) {
        switch (t->state) {
        case THINK_START:
            feed_start(t, &r, p + i);
            break;
        case THINK_IN:
            feed_in(t, &r, p + i);
            break;
        default: /* OFF, DONE: the rest of the piece is answer */
            text_run_rest(&r, THINK_PART_CONTENT, p + i, n - i);
            i = n;
            break;
        }
    }
    text_run_flush(&r);
}

void think_flush(think_split *t, think_sink sink, void *ctx) {
    think_emit_to to = {sink, ctx};
    text_run r = {.sink = think_emit, .ctx = &to};
    held_out(t, &r, t->state == THINK_IN ? THINK_PART_REASONING : THINK_PART_CONTENT);
    if (t->state == THINK_START) t->state = THINK_DONE;
}

think_state think_prompt_state(const tokenizer *tok, const int32_t *ids, size_t n, int32_t open_id,
                               int32_t close_id) {
    if (open_id < 0 || close_id < 0) return THINK_START;
    for (size_t i = n; i-- > 0;) {
        int type = tokenizer_token_type(tok, ids[i]);
        if (ids[i] != open_id && ids[i] != close_id &&
            (type == TOKEN_TYPE_NORMAL || type == TOKEN_TYPE_BYTE))
            continue;
        return ids[i] == open_id ? THINK_IN : ids[i] == close_id ? THINK_OFF : THINK_START;
    }
    return THINK_START;
}

static bool ends_with(const char *text, size_t n, const char *m) {
    size_t k = strlen(m);
    return n >= k && !memcmp(text + n - k, m, k);
}

think_state think_text_state(const char *text, size_t n) {
    while (n && is_space(text[n - 1]))
        n--;
    if (ends_with(text, n, THINK_OPEN)) return THINK_IN;
    if (ends_with(text, n, THINK_CLOSE)) return THINK_OFF;
    return THINK_START;
}
