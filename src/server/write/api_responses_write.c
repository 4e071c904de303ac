/* The Responses API's events and response object (api_write.h), in the
 * order OpenAI documents them: response.created, response.in_progress;
 * per item response.output_item.added, response.content_part.added, the
 * deltas (response.output_text.delta, response.reasoning_text.delta),
 * their .done, response.content_part.done, response.output_item.done;
 * a function call as output_item.added, response.function_call_arguments
 * .delta and .done, output_item.done; then response.completed. Every event
 * has type and sequence_number.
 *
 * Not here: which item is open (api_write.c), Messages. */
#include "server/write/api_write_internal.h"

#include <string.h>

/* The suffix item ids share: the response id after "resp_". */
static const char *suffix(const api_stream *st) {
    return strncmp(st->id, "resp_", 5) ? st->id : st->id + 5;
}

static void item_id(const api_stream *st, sbuf *b, api_part kind, uint32_t index) {
    sbuf_printf(b, "\"%s_%s_%u\"", kind == API_PART_REASONING ? "rs" : "msg", suffix(st), index);
}

/* `event: TYPE` and the data object opened with type and sequence_number;
 * the caller adds members and ev_end closes it. */
static void ev(api_stream *st, sbuf *b, const char *type) {
    sbuf_printf(b, "event: %s\ndata: {\"type\":\"%s\",\"sequence_number\":%llu", type, type,
                (unsigned long long)st->seq++);
}

static void ev_end(sbuf *b) {
    sbuf_adds(b, "}\n\n");
}

static void usage_json(sbuf *b, const api_usage *u) {
    sbuf_printf(b,
                "{\"input_tokens\":%u,\"input_tokens_details\":{\"cached_tokens\":%u},"
                "\"output_tokens\":%u,\"output_tokens_details\":{\"reasoning_tokens\":%u},"
                "\"total_tokens\":%u}",
                u->input, u->cached, u->output, u->reasoning, u->input + u->output);
}

/* The response object; f NULL: in progress (no output, no usage yet). */
static void response_object(const api_stream *st, sbuf *b, const api_final *f) {
    bool cut = f && f->finish == ENGINE_FINISH_LENGTH;
    sbuf_adds(b, "{\"id\":");
    sbuf_json_str(b, st->id, strlen(st->id));
    sbuf_printf(b, ",\"object\":\"response\",\"created_at\":%lld,\"status\":\"%s\"",
                (long long)st->created,
                !f    ? "in_progress"
                : cut ? "incomplete"
                      : "completed");
    sbuf_adds(b, ",\"error\":null,\"incomplete_details\":");
    sbuf_adds(b, cut ? "{\"reason\":\"max_output_tokens\"}" : "null");
    sbuf_adds(b, ",\"model\":");
    sbuf_json_str(b, st->model, strlen(st->model));
    sbuf_adds(b, ",\"output\":[");
    if (f) sbuf_add(b, st->items.p ? st->items.p : "", st->items.len);
    sbuf_adds(b, "],\"usage\":");
    if (f)
        usage_json(b, &f->usage);
    else
        sbuf_adds(b, "null");
    if (st->echo && st->echo[0]) {
        sbuf_adds(b, ",");
        sbuf_adds(b, st->echo);
    }
    sbuf_adds(b, "}");
}

static void with_response(api_stream *st, sbuf *b, const char *type, const api_final *f) {
    ev(st, b, type);
    sbuf_adds(b, ",\"response\":");
    response_object(st, b, f);
    ev_end(b);
}

static void start(api_stream *st, sbuf *b) {
    with_response(st, b, "response.created", NULL);
    with_response(st, b, "response.in_progress", NULL);
}

/* The item of kind with text (NULL: as it opens, empty). */
static void item_json(const api_stream *st, sbuf *b, api_part kind, const sbuf *text) {
    bool done = text != NULL;
    const char *p = text && text->p ? text->p : "";
    size_t n = text ? text->len : 0;
    sbuf_adds(b, "{\"id\":");
    item_id(st, b, kind, st->n_out);
    if (kind == API_PART_REASONING) {
        sbuf_adds(b, ",\"type\":\"reasoning\",\"summary\":[");
        if (done && st->summary) { /* reasoning.summary asked: the thinking, whole */
            sbuf_adds(b, "{\"type\":\"summary_text\",\"text\":");
            sbuf_json_str(b, p, n);
            sbuf_adds(b, "}");
        }
        sbuf_adds(b, "],\"content\":[");
        if (done) {
            sbuf_adds(b, "{\"type\":\"reasoning_text\",\"text\":");
            sbuf_json_str(b, p, n);
            sbuf_adds(b, "}");
        }
        sbuf_adds(b, "]}");
        return;
    }
    sbuf_printf(b, ",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[",
                done ? "completed" : "in_progress");
    if (done) {
        sbuf_adds(b, "{\"type\":\"output_text\",\"text\":");
        sbuf_json_str(b, p, n);
        sbuf_adds(b, ",\"annotations\":[],\"logprobs\":[]}");
    }
    sbuf_adds(b, "]}");
}

static void part_json(sbuf *b, api_part kind, const sbuf *text) {
    const char *p = text && text->p ? text->p : "";
    size_t n = text ? text->len : 0;
    sbuf_printf(b, "{\"type\":\"%s\",\"text\":",
                kind == API_PART_REASONING ? "reasoning_text" : "output_text");
    sbuf_json_str(b, p, n);
    sbuf_adds(b, kind == API_PART_REASONING ? "}" : ",\"annotations\":[]}");
}

/* item_id, output_index and content_index of the open part. */
static void where(const api_stream *st, sbuf *b, api_part kind) {
    sbuf_adds(b, ",\"item_id\":");
    item_id(st, b, kind, st->n_out);
    sbuf_printf(b, ",\"output_index\":%u,\"content_index\":0", st->n_out);
}

/* response.content_part.added (text NULL) or .done. */
static void part_event(api_stream *st, sbuf *b, const char *type, api_part kind, const sbuf *text) {
    ev(st, b, type);
    where(st, b, kind);
    sbuf_adds(b, ",\"part\":");
    part_json(b, kind, text);
    ev_end(b);
}

/* response.output_item.done with the finished item (taken: the store
 * keeps it). */
static void item_done(api_stream *st, sbuf *b, sbuf *item) {
    ev(st, b, "response.output_item.done");
    sbuf_printf(b, ",\"output_index\":%u,\"item\":", st->n_out);
    sbuf_add(b, item->p ? item->p : "", item->len);
    ev_end(b);
    api_item_add(st, item);
    sbuf_free(item);
}

static void open_part(api_stream *st, sbuf *b, api_part kind) {
    ev(st, b, "response.output_item.added");
    sbuf_printf(b, ",\"output_index\":%u,\"item\":", st->n_out);
    item_json(st, b, kind, NULL);
    ev_end(b);
    part_event(st, b, "response.content_part.added", kind, NULL);
}

static void delta(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n) {
    ev(st, b,
       kind == API_PART_REASONING ? "response.reasoning_text.delta" : "response.output_text.delta");
    where(st, b, kind);
    sbuf_adds(b, ",\"delta\":");
    sbuf_json_str(b, p, n);
    if (kind == API_PART_TEXT) sbuf_adds(b, ",\"logprobs\":[]");
    ev_end(b);
}

static void close_part(api_stream *st, sbuf *b, api_part kind) {
    const sbuf *t = &st->part;
    ev(st, b,
       kind == API_PART_REASONING ? "response.reasoning_text.done" : "response.output_text.done");
    where(st, b, kind);
    sbuf_adds(b, ",\"text\":");
    sbuf_json_str(b, t->p ? t->p : "", t->len);
    if (kind == API_PART_TEXT) sbuf_adds(b, ",\"logprobs\":[]");
    ev_end(b);
    part_event(st, b, "response.content_part.done", kind, t);
    sbuf item;
    sbuf_init(&item);
    item_json(st, &item, kind, t);
    item_done(st, b, &item);
}

/* The open call's item; done: with its arguments (st->part). */
static void call_item(const api_stream *st, sbuf *b, bool done) {
    sbuf_printf(b, "{\"id\":\"fc_%s_%u\",\"type\":\"function_call\",\"status\":\"%s\"", suffix(st),
                st->n_out,
                !done               ? "in_progress"
                : st->call_complete ? "completed"
                                    : "incomplete");
    sbuf_adds(b, ",\"call_id\":");
    sbuf_json_str(b, st->call_id, strlen(st->call_id));
    sbuf_adds(b, ",\"name\":");
    sbuf_json_str(b, st->call_name, strlen(st->call_name));
    sbuf_adds(b, ",\"arguments\":");
    sbuf_json_str(b, done && st->part.p ? st->part.p : "", done ? st->part.len : 0);
    sbuf_adds(b, "}");
}

static void call_open(api_stream *st, sbuf *b) {
    ev(st, b, "response.output_item.added");
    sbuf_printf(b, ",\"output_index\":%u,\"item\":", st->n_out);
    call_item(st, b, false);
    ev_end(b);
}

static void call_where(const api_stream *st, sbuf *b) {
    sbuf_printf(b, ",\"item_id\":\"fc_%s_%u\",\"output_index\":%u", suffix(st), st->n_out,
                st->n_out);
}

static void call_delta(api_stream *st, sbuf *b, const char *p, size_t n) {
    ev(st, b, "response.function_call_arguments.delta");
    call_where(st, b);
    sbuf_adds(b, ",\"delta\":");
    sbuf_json_str(b, p, n);
    ev_end(b);
}

static void call_close(api_stream *st, sbuf *b) {
    ev(st, b, "response.function_call_arguments.done");
    call_where(st, b);
    sbuf_adds(b, ",\"name\":");
    sbuf_json_str(b, st->call_name, strlen(st->call_name));
    sbuf_adds(b, ",\"arguments\":");
    sbuf_json_str(b, st->part.p ? st->part.p : "", st->part.len);
    ev_end(b);
    sbuf item;
    sbuf_init(&item);
    call_item(st, &item, true);
    item_done(st, b, &item);
}

static void open_any(api_stream *st, sbuf *b, api_part kind) {
    if (kind == API_PART_CALL)
        call_open(st, b);
    else
        open_part(st, b, kind);
}

static void delta_any(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n) {
    if (kind == API_PART_CALL)
        call_delta(st, b, p, n);
    else
        delta(st, b, kind, p, n);
}

static void close_any(api_stream *st, sbuf *b, api_part kind) {
    if (kind == API_PART_CALL)
        call_close(st, b);
    else
        close_part(st, b, kind);
}

static void finish(api_stream *st, sbuf *b, const api_final *f) {
    with_response(st, b, "response.completed", f);
}

static void error(api_stream *st, sbuf *b, const oai_error *e) {
    ev(st, b, "error");
    sbuf_adds(b, ",\"code\":");
    sbuf_json_str_or_null(b, e->code);
    sbuf_adds(b, ",\"message\":");
    sbuf_json_str(b, e->message, strlen(e->message));
    sbuf_adds(b, ",\"param\":null");
    ev_end(b);
}

static void body(const api_stream *st, sbuf *b, const api_final *f) {
    response_object(st, b, f);
}

const api_writer api_responses_writer = {
    .start = start,
    .open = open_any,
    .delta = delta_any,
    .close = close_any,
    .finish = finish,
    .error = error,
    .body = body,
};
