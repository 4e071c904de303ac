/* A connection's request, as its bytes are read (client_internal.h): the
 * streamed text kept, what the server said of the whole request, the first
 * reason it failed. Used by the receive and the finishing paths. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "bench/client/client_internal.h"

void client_append(char **b, size_t *len, size_t *cap, const char *p, size_t n) {
    if (tps_grow(b, cap, *len + n + 1, 1, 256) == 0) {
        memcpy(*b + *len, p, n);
        *len += n;
    }
}

/* A chunk's text: all of it for re-tokenizing the output count; the
 * reply's content (not its reasoning) for a conversation's next turn. */
void client_keep_text(conn *c, const bench_chunk *ch) {
    if (!ch->text) return;
    bench_record *rec = &c->run->recs[c->rec];
    if (c->run->cfg->keep_text && !rec->text_cut) {
        if (c->text_len + ch->text_len > BENCH_TEXT_KEEP_MAX)
            rec->text_cut = true; /* past this, only usage or ids can count it */
        else
            client_append(&c->text, &c->text_len, &c->text_cap, ch->text, ch->text_len);
    }
    if (c->run->multi_turn && !ch->reasoning && c->reply_len + ch->text_len <= BENCH_TEXT_KEEP_MAX)
        client_append(&c->reply, &c->reply_len, &c->reply_cap, ch->text, ch->text_len);
}

/* What the server said about the request as a whole: usage, the share of
 * the prompt its prefix cache served, its timings. */
void client_take_usage(conn *c, bench_record *rec, const bench_chunk *ch) {
    if (ch->has_usage) {
        rec->has_usage = true;
        rec->usage_completion = ch->completion_tokens;
    }
    if (ch->has_prompt) rec->usage_prompt = ch->prompt_tokens;
    if (ch->has_reasoning_count) {
        c->has_reasoning_usage = true;
        c->reasoning_usage = ch->reasoning_tokens;
    }
    if (ch->unread[0]) {
        if (!rec->unread[0]) memcpy(rec->unread, ch->unread, sizeof rec->unread);
        rec->unread_events++;
    }
    if (ch->has_cached && (ch->cached_from_usage || !rec->cached_from_usage)) {
        rec->has_cached = true;
        rec->cached_from_usage = ch->cached_from_usage;
        rec->cached_tokens = ch->cached_tokens;
    }
    if (ch->has_timings) {
        rec->has_timings = true;
        rec->timings = ch->timings;
    }
}

/* Records why the request failed (the first reason wins): prefix + detail,
 * truncated to fit. */
void client_set_err(conn *c, bench_errkind k, const char *prefix, const char *detail) {
    if (c->err != BENCH_OK) return;
    c->err = k;
    size_t a = strlen(prefix), b = strlen(detail), cap = sizeof c->msg - 1;
    if (a > cap) a = cap;
    if (b > cap - a) b = cap - a;
    memcpy(c->msg, prefix, a);
    memcpy(c->msg + a, detail, b);
    c->msg[a + b] = 0;
}
