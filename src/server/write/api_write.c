/* The dialect writers' common part (api_write.h): the open item switches
 * between thinking and answer as the text does, everything said is kept,
 * and each dialect's row (api_responses_write.c, api_messages_write.c)
 * writes the events.
 *
 * Not here: any dialect's event shapes. */
#include "server/write/api_write_internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "server/api/api_dialect.h"

static const api_writer *writer_of(oai_dialect d) {
    return d == OAI_DIALECT_MESSAGES ? &api_messages_writer : &api_responses_writer;
}

int api_stream_init(api_stream *st, oai_dialect d, const char *id, const char *model,
                    int64_t created, const char *echo, uint32_t n_prompt) {
    memset(st, 0, sizeof *st);
    st->dialect = d;
    snprintf(st->id, sizeof st->id, "%s", id);
    st->model = model;
    st->created = created;
    st->n_prompt = n_prompt;
    sbuf_init(&st->part);
    sbuf_init(&st->text);
    sbuf_init(&st->reasoning);
    sbuf_init(&st->items);
    if (echo && !(st->echo = strdup(echo))) return TPS_ENOMEM;
    return 0;
}

int api_stream_set_stops(api_stream *st, const char *const *stops, size_t n) {
    if (!n) return 0;
    if (!(st->stops = calloc(n, sizeof *st->stops))) return TPS_ENOMEM;
    for (; st->n_stops < n; st->n_stops++)
        if (!(st->stops[st->n_stops] = strdup(stops[st->n_stops]))) return TPS_ENOMEM;
    return 0;
}

const char *api_stream_stop(const api_stream *st, int32_t i) {
    return i >= 0 && (size_t)i < st->n_stops ? st->stops[i] : NULL;
}

void api_stream_free(api_stream *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_stops; i++)
        free(st->stops[i]);
    free(st->stops);
    free(st->echo);
    sbuf_free(&st->part);
    sbuf_free(&st->text);
    sbuf_free(&st->reasoning);
    sbuf_free(&st->items);
}

void api_stream_start(api_stream *st, sbuf *b) {
    writer_of(st->dialect)->start(st, b);
}

static void close_open(api_stream *st, sbuf *b) {
    if (st->open == API_PART_NONE) return;
    writer_of(st->dialect)->close(st, b, st->open);
    st->open = API_PART_NONE;
    st->n_out++;
}

void api_stream_delta(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n) {
    if (!n || st->ended || (kind == API_PART_CALL && st->open != API_PART_CALL)) return;
    const api_writer *w = writer_of(st->dialect);
    if (st->open != kind) {
        close_open(st, b);
        sbuf_reset(&st->part);
        st->open = kind;
        w->open(st, b, kind);
    }
    sbuf_add(&st->part, p, n);
    if (kind != API_PART_CALL) sbuf_add(kind == API_PART_TEXT ? &st->text : &st->reasoning, p, n);
    w->delta(st, b, kind, p, n);
}

void api_stream_call(api_stream *st, sbuf *b, const char *id, const char *name, size_t name_len) {
    if (st->ended) return;
    close_open(st, b);
    snprintf(st->call_id, sizeof st->call_id, "%s", id);
    snprintf(st->call_name, sizeof st->call_name, "%.*s", (int)name_len, name);
    st->call_complete = false;
    sbuf_reset(&st->part);
    st->open = API_PART_CALL;
    writer_of(st->dialect)->open(st, b, API_PART_CALL);
}

void api_stream_call_done(api_stream *st, sbuf *b, bool complete) {
    if (st->open != API_PART_CALL) return;
    st->call_complete = complete;
    close_open(st, b);
}

void api_stream_end(api_stream *st, sbuf *b, const api_final *f) {
    if (st->ended) return;
    const api_writer *w = writer_of(st->dialect);
    close_open(st, b);
    w->finish(st, b, f);
    st->ended = true;
}

void api_stream_error(api_stream *st, sbuf *b, const oai_error *e) {
    writer_of(st->dialect)->error(st, b, e);
}

void api_body(const api_stream *st, sbuf *b, const api_final *f) {
    writer_of(st->dialect)->body(st, b, f);
}

/* The answer as one assistant message: its text, thinking and calls. */
static json_t *answer_message(const api_stream *st, const api_final *f) {
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content",
                          st->text.p ? st->text.p : "", st->text.len);
    if (m && st->reasoning.len)
        json_object_set_new(m, "reasoning_content",
                            json_stringn(st->reasoning.p, st->reasoning.len));
    json_t *calls = m && f->n_calls ? json_array() : NULL;
    char id[128];
    for (size_t k = 0; m && calls && k < f->n_calls; k++) {
        snprintf(id, sizeof id, "%s%zu", f->call_prefix, k);
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", id, "type",
                                               "function", "function", "name", f->calls[k].name,
                                               "arguments", f->calls[k].arguments));
    }
    if (m && calls) json_object_set_new(m, "tool_calls", calls);
    return m;
}

int api_conversation(const api_stream *st, const void *history, const api_final *f, char **out,
                     size_t *n) {
    json_t *all = json_copy((json_t *)history);
    json_t *m = answer_message(st, f);
    if (!all || !m || json_array_append_new(all, m)) {
        json_decref(all);
        return TPS_ENOMEM;
    }
    *out = json_dumps(all, JSON_COMPACT);
    json_decref(all);
    if (!*out) return TPS_ENOMEM;
    *n = strlen(*out);
    return 0;
}
