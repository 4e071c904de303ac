/* Multi-turn conversation state (convo.h): readiness, round robin, replies.
 * Not here: sending, bodies, clocks. */
#include "bench/workload/convo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int convo_set_init(convo_set *s, size_t n, uint32_t turns, double think_s, const char *tag,
                   tps_err *e) {
    memset(s, 0, sizeof *s);
    if (n == 0 || turns == 0)
        return tps_fail(e, TPS_EINVAL, "a multi-turn run needs conversations and turns (>= 1)");
    s->c = calloc(n, sizeof *s->c);
    s->reply_slots = calloc(n * turns, sizeof *s->reply_slots);
    s->len_slots = calloc(n * turns, sizeof *s->len_slots);
    if (!s->c || !s->reply_slots || !s->len_slots) {
        convo_set_free(s);
        return tps_fail(e, TPS_ENOMEM, "cannot allocate %zu conversations of %u turns", n, turns);
    }
    s->n = s->open = n;
    s->turns = turns;
    s->think_ns = think_s > 0 ? (uint64_t)(think_s * 1e9) : 0;
    snprintf(s->tag, sizeof s->tag, "%s", tag ? tag : "tps");
    for (size_t i = 0; i < n; i++) {
        s->c[i].replies = &s->reply_slots[i * turns];
        s->c[i].reply_lens = &s->len_slots[i * turns];
        s->c[i].turns = turns;
    }
    return TPS_OK;
}

void convo_set_free(convo_set *s) {
    if (s->reply_slots)
        for (size_t i = 0; i < s->n * s->turns; i++)
            free(s->reply_slots[i]);
    free(s->reply_slots);
    free(s->len_slots);
    free(s->c);
    memset(s, 0, sizeof *s);
}

void convo_set_turns(convo_set *s, size_t i, uint32_t turns) {
    convo *c = &s->c[i];
    const bool was_open = c->next < c->turns;
    c->turns = turns < s->turns ? turns : s->turns;
    if (was_open && c->next >= c->turns) s->open--;
}

static bool waiting(const convo *c) {
    return !c->in_flight && c->next < c->turns;
}

bool convo_next(convo_set *s, uint64_t now, size_t *conv) {
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (s->cursor + k) % s->n;
        const convo *c = &s->c[i];
        if (waiting(c) && c->ready_ns <= now) {
            *conv = i;
            s->cursor = (i + 1) % s->n;
            return true;
        }
    }
    return false;
}

uint64_t convo_next_ready_ns(const convo_set *s) {
    uint64_t t = UINT64_MAX;
    for (size_t i = 0; i < s->n; i++)
        if (waiting(&s->c[i]) && s->c[i].ready_ns < t) t = s->c[i].ready_ns;
    return t;
}

void convo_sent(convo_set *s, size_t i) {
    s->c[i].in_flight = true;
}

static void end(convo_set *s, convo *c) {
    if (c->next < c->turns) s->open--;
    c->next = c->turns;
}

void convo_settled(convo_set *s, size_t i, bool ok, const char *reply, size_t len,
                   uint64_t turn_tokens, uint64_t now) {
    convo *c = &s->c[i];
    c->in_flight = false;
    char *copy = ok ? malloc(len + 1) : NULL;
    if (!copy) {
        end(s, c);
        return;
    }
    if (len) memcpy(copy, reply, len);
    copy[len] = 0;
    c->replies[c->next] = copy;
    c->reply_lens[c->next] = len;
    c->history_tokens = turn_tokens && (c->history_tokens || c->next == 0)
                            ? c->history_tokens + turn_tokens
                            : 0; /* once unknown, stays unknown */
    c->ready_ns = now + s->think_ns;
    if (++c->next == c->turns) s->open--;
}

bool convo_all_ended(const convo_set *s) {
    return s->open == 0;
}

void convo_session_header(const convo_set *s, size_t i, char *out, size_t cap) {
    snprintf(out, cap, "X-Session-Id: %s-%zu", s->tag, i);
}
