/* Stop conditions: stop token ids and a streaming stop-string matcher
 * (see stop.h for the contract). The text considered on each feed is
 * T = held bytes + new piece, read through an accessor so the piece is never
 * copied whole; only the held suffix (< STOP_MAX_LEN bytes) is stored.
 * Not here: detokenizing, max_tokens, anything that allocates. */
#include "engine/sample/stop.h"

#include <math.h>
#include <string.h>

int stop_init(stop_matcher *m, const char *const *strings, size_t n_strings,
              const int32_t *token_ids, size_t n_token_ids, int32_t n_vocab, const char **field,
              tps_err *err) {
    memset(m, 0, sizeof *m);
    if (field) *field = NULL;
    if (n_strings > STOP_MAX_STRINGS) {
        if (field) *field = "stop";
        return tps_fail(err, TPS_EINVAL, "stop has %zu strings; at most %d", n_strings,
                        STOP_MAX_STRINGS);
    }
    for (size_t i = 0; i < n_strings; i++) {
        size_t len = strings[i] ? strnlen(strings[i], STOP_MAX_LEN + 1) : 0;
        if (len == 0 || len > STOP_MAX_LEN) {
            if (field) *field = "stop";
            if (len == 0) return tps_fail(err, TPS_EINVAL, "stop[%zu] is empty", i);
            return tps_fail(err, TPS_EINVAL, "stop[%zu] is longer than %d bytes", i, STOP_MAX_LEN);
        }
        memcpy(m->str[i], strings[i], len);
        m->len[i] = (uint16_t)len;
    }
    m->n_strings = (int32_t)n_strings;
    if (n_token_ids > STOP_MAX_TOKENS) {
        if (field) *field = "stop_token_ids";
        return tps_fail(err, TPS_EINVAL, "stop_token_ids has %zu ids; at most %d", n_token_ids,
                        STOP_MAX_TOKENS);
    }
    for (size_t i = 0; i < n_token_ids; i++) {
        int32_t t = token_ids[i];
        if (t < 0 || (n_vocab > 0 && t >= n_vocab)) {
            if (field) *field = "stop_token_ids";
            return tps_fail(err, TPS_EINVAL, "stop_token_ids[%zu] = %d is outside [0, %d)", i, t,
                            n_vocab);
        }
        m->tokens[i] = t;
    }
    m->n_tokens = (int32_t)n_token_ids;
    return TPS_OK;
}

void stop_mask_ids(const stop_matcher *m, const int32_t *eog, size_t n_eog, float *logits) {
    for (int32_t i = 0; i < m->n_tokens; i++)
        logits[m->tokens[i]] = -INFINITY;
    for (size_t i = 0; i < n_eog; i++)
        logits[eog[i]] = -INFINITY;
}

bool stop_is_token(const stop_matcher *m, int32_t tok) {
    for (int32_t i = 0; i < m->n_tokens; i++)
        if (m->tokens[i] == tok) return true;
    return false;
}

/* T = held (hl bytes) followed by piece (len bytes). */
typedef struct text {
    const char *held;
    size_t hl;
    const char *piece;
    size_t len;
} text;

static inline char text_at(const text *t, size_t i) {
    return i < t->hl ? t->held[i] : t->piece[i - t->hl];
}

/* Length of the common prefix of T[pos..] and s (at most n). */
static size_t common_prefix(const text *t, size_t pos, const char *s, size_t n) {
    size_t total = t->hl + t->len, c = 0;
    while (c < n && pos + c < total && text_at(t, pos + c) == s[c])
        c++;
    return c;
}

static void emit_nothing(stop_emit *out, bool matched) {
    *out = (stop_emit){.head = "", .tail = "", .matched = matched, .which = -1};
}

void stop_feed(stop_matcher *m, const char *piece, size_t len, stop_emit *out) {
    if (m->matched) {
        emit_nothing(out, true);
        return;
    }
    const text t = {m->hold[m->hold_cur], m->hold_len, piece, len};
    const size_t total = t.hl + t.len;
    size_t emit = total; /* bytes released */
    size_t partial = total;
    int which = -1;
    for (size_t pos = 0; pos < total && which < 0; pos++) {
        for (int32_t k = 0; k < m->n_strings; k++) {
            size_t c = common_prefix(&t, pos, m->str[k], m->len[k]);
            if (c == m->len[k] && m->disarmed) continue; /* min_tokens: not yet a match */
            if (c == m->len[k]) {                        /* earliest full match */
                which = k;
                emit = m->include ? pos + c : pos;
                break;
            }
            if (pos + c == total && c > 0 && partial == total) partial = pos;
        }
    }
    if (which < 0) emit = partial;

    out->head = t.held;
    out->head_len = emit < t.hl ? emit : t.hl;
    out->tail = piece ? piece : "";
    out->tail_len = emit > t.hl ? emit - t.hl : 0;
    out->matched = which >= 0;
    out->which = which;

    if (which >= 0) {
        m->matched = true;
        m->which = (int16_t)which;
        m->hold_len = 0;
        return;
    }
    /* Keep T[emit..total) (< STOP_MAX_LEN bytes: a proper prefix of a stop
     * string) in the other buffer; head still points into this one. */
    char *dst = m->hold[m->hold_cur ^ 1];
    for (size_t i = emit; i < total; i++)
        dst[i - emit] = text_at(&t, i);
    m->hold_len = (uint16_t)(total - emit);
    m->hold_cur ^= 1;
}

void stop_flush(stop_matcher *m, stop_emit *out) {
    emit_nothing(out, m->matched);
    out->head = m->hold[m->hold_cur];
    out->head_len = m->hold_len;
    m->hold_len = 0;
}
