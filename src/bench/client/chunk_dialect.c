/* The typed-event dialects (chunk.h's bench_dialect) read by table with
 * jansson: OpenAI's Responses API (every event names its "type"), Anthropic's
 * Messages API (content_block_delta's delta names its type) and the
 * embeddings body. Each row says which event carries which part (answer,
 * thinking, tool arguments) in which field; an event that carries text and
 * has no row is named in chunk.unread. Not here: the OpenAI chat and
 * completions dialect (chunk.c, chunk_scan.c), SSE framing, counting. */
#include <stdio.h>
#include <string.h>

#include "bench/client/chunk.h"
#include "bench/client/chunk_table.h"

typedef struct text_row {
    const char *type;  /* the event's (Responses) or the delta's (Messages) type */
    const char *field; /* the member holding the text; NULL: no text */
    chunk_part part;
} text_row;

/* Responses: response.*.delta events; "delta" holds the text. */
static const text_row RESPONSES_ROWS[] = {
    {"response.output_text.delta", "delta", PART_ANSWER},
    {"response.refusal.delta", "delta", PART_ANSWER},
    {"response.function_call_arguments.delta", "delta", PART_TOOL},
    {"response.custom_tool_call_input.delta", "delta", PART_TOOL},
    {"response.reasoning_text.delta", "delta", PART_REASONING},
    {"response.reasoning_summary_text.delta", "delta", PART_REASONING},
    {"response.audio.transcript.delta", NULL, PART_NONE},
    {"response.output_text.annotation.added", NULL, PART_NONE},
};

/* Messages: content_block_delta's delta.type. */
static const text_row MESSAGES_ROWS[] = {
    {"text_delta", "text", PART_ANSWER},
    {"input_json_delta", "partial_json", PART_TOOL},
    {"thinking_delta", "thinking", PART_REASONING},
    {"signature_delta", NULL, PART_NONE}, /* the thinking's signature: not generated text */
    {"citations_delta", NULL, PART_NONE},
};

static const text_row *find_row(const text_row *rows, size_t n, const char *type) {
    for (size_t i = 0; type && i < n; i++)
        if (!strcmp(rows[i].type, type)) return &rows[i];
    return NULL;
}

/* One part's text by its row; an unknown type that carries a string in a
 * field other than "type" is named unread. */
static void take_by_row(bench_chunk *c, const text_row *row, json_t *o, const char *type,
                        const char *where) {
    if (row) {
        if (row->field)
            chunk_take_text_json(c, json_object_get(o, row->field), row->part == PART_REASONING);
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (strcmp(k, "type") && json_is_string(v) && json_string_length(v)) {
            snprintf(c->unread, sizeof c->unread, "%s %.30s", where, type ? type : "(untyped)");
            return;
        }
    }
}

static void read_error(bench_chunk *c, json_t *root) {
    json_t *err = json_object_get(root, "error");
    json_t *m =
        json_is_object(err) ? json_object_get(err, "message") : json_object_get(root, "message");
    c->error = true;
    snprintf(c->error_msg, sizeof c->error_msg, "%s",
             json_is_string(m) ? json_string_value(m) : "error event without a message");
}

/* Responses usage: input_tokens, output_tokens and their details. */
static void responses_usage(bench_chunk *c, json_t *u) {
    int64_t out = chunk_count_field(u, "output_tokens"), in = chunk_count_field(u, "input_tokens");
    int64_t rt = chunk_count_field(json_object_get(u, "output_tokens_details"), "reasoning_tokens");
    int64_t ca = chunk_count_field(json_object_get(u, "input_tokens_details"), "cached_tokens");
    chunk_take_usage(c, out, in, rt, ca);
}

/* A whole (non-streamed) response: output[] items' text, first answer. */
static void responses_body(bench_chunk *c, json_t *resp) {
    json_t *item;
    size_t i;
    json_array_foreach(json_object_get(resp, "output"), i, item) {
        const char *t = json_string_value(json_object_get(item, "type"));
        json_t *part;
        size_t j;
        if (t && !strcmp(t, "function_call"))
            chunk_take_text_json(c, json_object_get(item, "arguments"), false);
        json_array_foreach(json_object_get(item, "content"), j, part) {
            chunk_take_text_json(c, json_object_get(part, "text"), t && !strcmp(t, "reasoning"));
        }
    }
    responses_usage(c, json_object_get(resp, "usage"));
}

static void read_responses(bench_chunk *c, json_t *root) {
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!type && json_object_get(root, "output")) { /* a non-streamed response body */
        responses_body(c, root);
        c->finished = true;
        return;
    }
    if (!type) return;
    if (!strcmp(type, "error") || !strcmp(type, "response.failed")) {
        json_t *r = json_object_get(root, "response");
        read_error(c, json_is_object(r) ? r : root);
        return;
    }
    if (!strcmp(type, "response.completed") || !strcmp(type, "response.incomplete")) {
        responses_usage(c, json_object_get(json_object_get(root, "response"), "usage"));
        c->done = c->finished = true;
        return;
    }
    size_t tl = strlen(type);
    const text_row *row =
        find_row(RESPONSES_ROWS, sizeof RESPONSES_ROWS / sizeof RESPONSES_ROWS[0], type);
    if (row || (tl > 6 && !strcmp(type + tl - 6, ".delta")))
        take_by_row(c, row, root, type, "event");
}

/* Messages usage: input_tokens (message_start), output_tokens (message_delta:
 * the final count), cache_read_input_tokens. */
static void messages_usage(bench_chunk *c, json_t *u, bool final) {
    int64_t out = chunk_count_field(u, "output_tokens"), in = chunk_count_field(u, "input_tokens");
    int64_t ca = chunk_count_field(u, "cache_read_input_tokens");
    /* Anthropic's input_tokens leaves out what the cache served */
    chunk_take_usage(c, final ? out : -1, in >= 0 ? in + (ca > 0 ? ca : 0) : -1, -1, ca);
}

static void read_messages(bench_chunk *c, json_t *root) {
    const char *type = json_string_value(json_object_get(root, "type"));
    if (!type) return;
    if (!strcmp(type, "error")) {
        read_error(c, root);
    } else if (!strcmp(type, "message_start")) {
        messages_usage(c, json_object_get(json_object_get(root, "message"), "usage"), false);
    } else if (!strcmp(type, "content_block_delta")) {
        json_t *d = json_object_get(root, "delta");
        const char *dt = json_string_value(json_object_get(d, "type"));
        const text_row *row =
            find_row(MESSAGES_ROWS, sizeof MESSAGES_ROWS / sizeof MESSAGES_ROWS[0], dt);
        if (json_is_object(d)) take_by_row(c, row, d, dt, "content_block_delta");
    } else if (!strcmp(type, "message_delta")) {
        messages_usage(c, json_object_get(root, "usage"), true);
        json_t *sr = json_object_get(json_object_get(root, "delta"), "stop_reason");
        c->finished = sr && !json_is_null(sr);
    } else if (!strcmp(type, "message_stop")) {
        c->done = true;
    } else if (!strcmp(type, "message")) { /* a non-streamed response body */
        json_t *b;
        size_t i;
        json_array_foreach(json_object_get(root, "content"), i, b) {
            const char *bt = json_string_value(json_object_get(b, "type"));
            bool think = bt && !strcmp(bt, "thinking");
            chunk_take_text_json(c, json_object_get(b, think ? "thinking" : "text"), think);
        }
        messages_usage(c, json_object_get(root, "usage"), true);
        c->finished = true;
    }
}

/* Embeddings: {"data": [...], "usage": {"prompt_tokens", "total_tokens"}}. */
static void read_embeddings(bench_chunk *c, json_t *root) {
    json_t *u = json_object_get(root, "usage");
    int64_t pt = chunk_count_field(u, "prompt_tokens");
    if (pt < 0) pt = chunk_count_field(u, "input_tokens");
    if (pt >= 0) {
        c->has_usage = c->has_prompt = true;
        c->prompt_tokens = (uint64_t)pt;
    }
    c->finished = json_is_array(json_object_get(root, "data"));
}

int bench_chunk_parse_typed(bench_chunk *c, bench_dialect d, const char *data, size_t len,
                            const char *event, tps_err *e) {
    memset(c, 0, offsetof(bench_chunk, text_buf));
    if (len == 6 && !memcmp(data, "[DONE]", 6)) { /* some servers end these streams so too */
        c->done = true;
        return TPS_OK;
    }
    json_error_t je;
    c->root = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!c->root)
        return tps_fail(e, TPS_EINVAL, "malformed JSON in a %s event (line %d, column %d): %s",
                        event && *event ? event : "stream", je.line, je.column, je.text);
    if (!json_is_object(c->root)) {
        bench_chunk_release(c);
        return tps_fail(e, TPS_EINVAL, "a stream event is JSON but not an object");
    }
    json_t *err = json_object_get(c->root, "error");
    if (d == BENCH_DIALECT_RESPONSES)
        read_responses(c, c->root);
    else if (d == BENCH_DIALECT_MESSAGES)
        read_messages(c, c->root);
    else
        read_embeddings(c, c->root);
    if (!c->error && json_is_object(err)) read_error(c, c->root);
    if (c->text) c->tokens = 1;
    return TPS_OK;
}
