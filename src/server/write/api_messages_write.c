/* The Messages API's events and message object (api_write.h), as
 * Anthropic documents them: message_start (usage.input_tokens), ping;
 * per content block content_block_start, content_block_delta (text_delta,
 * thinking_delta, input_json_delta), content_block_stop; message_delta
 * (stop_reason end_turn | max_tokens | stop_sequence | tool_use, usage.output_tokens),
 * message_stop. A non-streamed answer is the message with the same blocks.
 *
 * Not here: which block is open (api_write.c), Responses. */
#include "server/write/api_write_internal.h"

#include <string.h>

#include "server/api/api_dialect.h"

static void ev(sbuf *b, const char *type) {
    sbuf_printf(b, "event: %s\ndata: {\"type\":\"%s\"", type, type);
}

static void ev_end(sbuf *b) {
    sbuf_adds(b, "}\n\n");
}

static const char *stop_reason(const api_final *f) {
    return f->n_calls                          ? "tool_use"
           : f->finish == ENGINE_FINISH_LENGTH ? "max_tokens"
           : f->stop_sequence                  ? "stop_sequence"
                                               : "end_turn";
}

/* ,"stop_sequence": the string, or null */
static void stop_sequence(sbuf *b, const api_final *f) {
    sbuf_adds(b, ",\"stop_sequence\":");
    if (f && f->stop_sequence && !f->n_calls)
        sbuf_json_str(b, f->stop_sequence, strlen(f->stop_sequence));
    else
        sbuf_adds(b, "null");
}

/* The message object; f NULL: as it starts (no content, no stop yet). */
static void message(const api_stream *st, sbuf *b, const api_final *f) {
    sbuf_adds(b, "{\"id\":");
    sbuf_json_str(b, st->id, strlen(st->id));
    sbuf_adds(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    sbuf_json_str(b, st->model, strlen(st->model));
    sbuf_adds(b, ",\"content\":[");
    if (f) sbuf_add(b, st->items.p ? st->items.p : "", st->items.len);
    sbuf_adds(b, "],\"stop_reason\":");
    if (f)
        sbuf_printf(b, "\"%s\"", stop_reason(f));
    else
        sbuf_adds(b, "null");
    /* Anthropic's input_tokens leaves out what the cache served */
    uint32_t cached = f ? f->usage.cached : 0, in = f ? f->usage.input : st->n_prompt;
    stop_sequence(b, f);
    sbuf_printf(b,
                ",\"usage\":{\"input_tokens\":%u,"
                "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":%u,"
                "\"output_tokens\":%u}}",
                in - cached, cached, f ? f->usage.output : 0);
}

static void start(api_stream *st, sbuf *b) {
    ev(b, "message_start");
    sbuf_adds(b, ",\"message\":");
    message(st, b, NULL);
    ev_end(b);
    ev(b, "ping");
    ev_end(b);
}

static void block_start(api_stream *st, sbuf *b, api_part kind) {
    ev(b, "content_block_start");
    sbuf_printf(b, ",\"index\":%u,\"content_block\":", st->n_out);
    if (kind == API_PART_CALL) {
        sbuf_adds(b, "{\"type\":\"tool_use\",\"id\":");
        sbuf_json_str(b, st->call_id, strlen(st->call_id));
        sbuf_adds(b, ",\"name\":");
        sbuf_json_str(b, st->call_name, strlen(st->call_name));
        sbuf_adds(b, ",\"input\":{}}");
    } else {
        sbuf_adds(b, kind == API_PART_REASONING ? "{\"type\":\"thinking\",\"thinking\":\"\","
                                                  "\"signature\":\"\"}"
                                                : "{\"type\":\"text\",\"text\":\"\"}");
    }
    ev_end(b);
}

static void delta(api_stream *st, sbuf *b, api_part kind, const char *p, size_t n) {
    ev(b, "content_block_delta");
    if (kind == API_PART_CALL) {
        sbuf_printf(b, ",\"index\":%u,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":",
                    st->n_out);
        sbuf_json_str(b, p, n);
        sbuf_adds(b, "}");
        ev_end(b);
        return;
    }
    sbuf_printf(b, ",\"index\":%u,\"delta\":{\"type\":\"%s\",\"%s\":", st->n_out,
                kind == API_PART_REASONING ? "thinking_delta" : "text_delta",
                kind == API_PART_REASONING ? "thinking" : "text");
    sbuf_json_str(b, p, n);
    sbuf_adds(b, "}");
    ev_end(b);
}

static void block_stop(api_stream *st, sbuf *b) {
    ev(b, "content_block_stop");
    sbuf_printf(b, ",\"index\":%u", st->n_out);
    ev_end(b);
}

static void close_block(api_stream *st, sbuf *b, api_part kind) {
    block_stop(st, b);
    sbuf item;
    sbuf_init(&item);
    const sbuf *t = &st->part;
    if (kind == API_PART_CALL) { /* a call the answer's end cut has no input */
        sbuf_adds(&item, "{\"type\":\"tool_use\",\"id\":");
        sbuf_json_str(&item, st->call_id, strlen(st->call_id));
        sbuf_adds(&item, ",\"name\":");
        sbuf_json_str(&item, st->call_name, strlen(st->call_name));
        sbuf_adds(&item, ",\"input\":");
        if (st->call_complete && t->len)
            sbuf_add(&item, t->p, t->len);
        else
            sbuf_adds(&item, "{}");
        sbuf_adds(&item, "}");
    } else if (kind == API_PART_REASONING) {
        sbuf_adds(&item, "{\"type\":\"thinking\",\"thinking\":");
        sbuf_json_str(&item, t->p ? t->p : "", t->len);
        sbuf_adds(&item, ",\"signature\":\"\"}");
    } else {
        sbuf_adds(&item, "{\"type\":\"text\",\"text\":");
        sbuf_json_str(&item, t->p ? t->p : "", t->len);
        sbuf_adds(&item, "}");
    }
    api_item_add(st, &item);
    sbuf_free(&item);
}

static void finish(api_stream *st, sbuf *b, const api_final *f) {
    (void)st;
    ev(b, "message_delta");
    sbuf_printf(b, ",\"delta\":{\"stop_reason\":\"%s\"", stop_reason(f));
    stop_sequence(b, f);
    sbuf_printf(b,
                "},\"usage\":{\"input_tokens\":%u,\"cache_read_input_tokens\":%u,"
                "\"output_tokens\":%u}",
                f->usage.input - f->usage.cached, f->usage.cached, f->usage.output);
    ev_end(b);
    ev(b, "message_stop");
    ev_end(b);
}

static void error(api_stream *st, sbuf *b, const oai_error *e) {
    (void)st;
    sbuf_adds(b, "event: error\ndata: ");
    api_error_anthropic_json(e, b);
    sbuf_adds(b, "\n\n");
}

static void body(const api_stream *st, sbuf *b, const api_final *f) {
    message(st, b, f);
}

const api_writer api_messages_writer = {
    .start = start,
    .open = block_start,
    .delta = delta,
    .close = close_block,
    .finish = finish,
    .error = error,
    .body = body,
};
