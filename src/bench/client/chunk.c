/* Reading OpenAI-compatible response events (chunk.h) with jansson: the
 * reference reader, and the fallback for the events the in-place scanner
 * (chunk_scan.c) declines. Runs once per received event, after its arrival has
 * been time-stamped. Not here: SSE framing, counting policy across a request
 * (client.c). */
#include "bench/client/chunk.h"

#include <stddef.h>
#include <string.h>

#include "bench/client/chunk_table.h"

static double num_or(json_t *o, const char *k, double dflt) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static void read_timings(bench_chunk *c, json_t *t) {
    bench_timings *x = &c->timings;
    x->queue_ms = num_or(t, "queue_ms", -1);
    x->prefill_ms = num_or(t, "prefill_ms", num_or(t, "prompt_ms", -1));
    x->decode_ms = num_or(t, "decode_ms", num_or(t, "predicted_ms", -1));
    x->ttft_ms = num_or(t, "ttft_ms", -1);
    x->prompt_tokens = (int64_t)num_or(t, "prompt_tokens", num_or(t, "prompt_n", -1));
    x->completion_tokens = (int64_t)num_or(t, "completion_tokens", num_or(t, "predicted_n", -1));
    x->preemptions = (int64_t)num_or(t, "preemptions", -1);
    c->has_timings = true;
}

static void read_error(bench_chunk *c, json_t *err) {
    c->error = true;
    const char *msg = NULL;
    if (json_is_string(err))
        msg = json_string_value(err);
    else if (json_is_object(err))
        msg = json_string_value(json_object_get(err, "message"));
    snprintf(c->error_msg, sizeof c->error_msg, "%s", msg ? msg : "error event without a message");
}

/* llama.cpp's timings.cache_n: used only when usage did not say. */
static void read_timings_cached(bench_chunk *c, json_t *t) {
    int64_t n = chunk_count_field(t, "cache_n");
    if (n < 0 || c->cached_from_usage) return;
    c->has_cached = true;
    c->cached_tokens = (uint64_t)n;
}

static bool take_ids(bench_chunk *c, json_t *o) {
    json_t *ids = json_object_get(o, "token_ids");
    if (!json_is_array(ids)) ids = json_object_get(o, "tokens");
    if (!json_is_array(ids)) return false;
    c->tokens = (uint32_t)json_array_size(ids);
    c->from_ids = true;
    return true;
}

int bench_chunk_parse(bench_chunk *c, bench_dialect d, const char *data, size_t len,
                      const char *event, tps_err *e) {
    if (d != BENCH_DIALECT_OPENAI) return bench_chunk_parse_typed(c, d, data, len, event, e);
    if (bench_chunk_scan(c, data, len, event)) return TPS_OK;
    return bench_chunk_parse_json(c, data, len, event, e);
}

/* A delta's (or message's) text by the table, and the first unread field
 * by name order. */
static void read_message(bench_chunk *c, json_t *msg, const char *where) {
    for (size_t i = 0; i < chunk_openai_n_fields; i++) {
        chunk_part p = chunk_openai_fields[i].part;
        json_t *v = json_object_get(msg, chunk_openai_fields[i].key);
        if (p == PART_ANSWER || p == PART_REASONING)
            chunk_take_text_json(c, v, p == PART_REASONING);
        if (p != PART_TOOL) continue;
        if (!strcmp(chunk_openai_fields[i].key,
                    "tool_calls")) /* tool_calls[0].function.arguments */
            v = json_object_get(json_array_get(v, 0), "function");
        chunk_take_text_json(c, json_object_get(v, "arguments"), false); /* function_call's */
    }
    const char *k, *best = NULL;
    json_t *v;
    json_object_foreach(msg, k, v) {
        size_t kl = strlen(k);
        if (chunk_openai_field(k, kl) >= 0 || !json_is_string(v) || !json_string_length(v))
            continue;
        if (!best || chunk_unread_before(k, kl, best, strlen(best))) best = k;
    }
    if (best) snprintf(c->unread, sizeof c->unread, "%s.%s", where, best);
}

/* usage's counts: completion, prompt (taken only beside a completion
 * count), of the completion the thinking, and
 * prompt_tokens_details.cached_tokens. */
static void read_usage(bench_chunk *c, json_t *u) {
    int64_t ct = chunk_count_field(u, "completion_tokens"),
            pt = chunk_count_field(u, "prompt_tokens");
    int64_t rt =
        chunk_count_field(json_object_get(u, "completion_tokens_details"), "reasoning_tokens");
    int64_t ca = chunk_count_field(json_object_get(u, "prompt_tokens_details"), "cached_tokens");
    chunk_take_usage(c, ct, ct >= 0 ? pt : -1, rt, ca);
}

int bench_chunk_parse_json(bench_chunk *c, const char *data, size_t len, const char *event,
                           tps_err *e) {
    memset(c, 0, offsetof(bench_chunk, text_buf));
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        c->done = true;
        return TPS_OK;
    }
    json_error_t je;
    /* JSON_ALLOW_NUL: a model may emit a NUL byte (a byte-level vocabulary's
     * token 0x00; sampled from a fresh seed, any request can), and the
     * server sends it as \u0000 in the token's text */
    c->root = json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!c->root) {
        if (event && !strcmp(event, "error")) { /* a plain-text error event */
            c->error = true;
            snprintf(c->error_msg, sizeof c->error_msg, "%.*s", (int)(len < 190 ? len : 190), data);
            return TPS_OK;
        }
        return tps_fail(e, TPS_EINVAL, "malformed JSON in a stream event (line %d, column %d): %s",
                        je.line, je.column, je.text);
    }
    if (!json_is_object(c->root)) {
        bench_chunk_release(c);
        return tps_fail(e, TPS_EINVAL, "a stream event is JSON but not an object");
    }
    json_t *err = json_object_get(c->root, "error");
    if (err && !json_is_null(err))
        read_error(c, err);
    else if (event && !strcmp(event, "error"))
        read_error(c, c->root);

    bool ids = take_ids(c, c->root);
    json_t *choices = json_object_get(c->root, "choices");
    json_t *ch = json_is_array(choices) ? json_array_get(choices, 0) : NULL;
    if (json_is_object(ch)) {
        chunk_take_text_json(c, json_object_get(ch, "text"), false);
        json_t *msg = json_object_get(ch, "delta");
        if (!json_is_object(msg)) msg = json_object_get(ch, "message");
        if (json_is_object(msg)) {
            read_message(c, msg, json_object_get(ch, "delta") == msg ? "delta" : "message");
            if (!ids) ids = take_ids(c, msg);
        }
        if (!ids) ids = take_ids(c, ch);
        json_t *fr = json_object_get(ch, "finish_reason");
        c->finished = fr && !json_is_null(fr);
        json_t *t = json_object_get(ch, "text");
        bool empty = json_is_string(t) && json_string_length(t) == 0;
        if (json_is_object(msg) && !json_object_get(msg, "role")) {
            json_t *ct = json_object_get(msg, "content");
            empty |= json_is_string(ct) && json_string_length(ct) == 0;
        }
        c->empty_text = empty && !ids && !c->text && !c->finished;
    }
    if (!ids && c->text) c->tokens = 1;

    json_t *u = json_object_get(c->root, "usage");
    if (json_is_object(u)) read_usage(c, u);
    json_t *t = json_object_get(c->root, "timings");
    if (json_is_object(t)) {
        read_timings(c, t);
        read_timings_cached(c, t);
    }
    return TPS_OK;
}
